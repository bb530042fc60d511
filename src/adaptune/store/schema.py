"""The tables of an adaptune results database (SQLAlchemy Core, portable across SQLite and PostgreSQL).

One measurement row per (device, problem, input, configuration): the UNIQUE constraint is what makes
writes idempotent and lets an interrupted tuning run resume from what it already measured.
"""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 3
"""Bumped whenever a table changes shape; a database with a newer version is refused, not guessed at.
Version 2: the ``run_counts`` table and the indexes of the query interface. Version 3: a configuration is
found by a 64-bit hash of its key (``config_hash``), and ``run_time_bins`` answers histograms. Older
databases are brought up to date on opening (``sql.Database``)."""

metadata = sa.MetaData()

schema_info = sa.Table(
    "adaptune_schema",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

devices = sa.Table(
    "devices",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("platform", sa.String(256), nullable=False),
    sa.Column("driver", sa.String(256), nullable=False, default=""),
    sa.Column("properties", sa.JSON, nullable=False),
    sa.UniqueConstraint("name", "platform", "driver", name="uq_device"),
)

problems = sa.Table(
    "problems",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("source_hash", sa.String(128), nullable=False),
    sa.Column("space", sa.JSON, nullable=False),
    sa.UniqueConstraint("name", "source_hash", name="uq_problem"),
)

inputs = sa.Table(
    "inputs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id", ondelete="CASCADE"), nullable=False),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("features", sa.JSON, nullable=False),
    sa.UniqueConstraint("problem_id", "name", name="uq_input"),
)

measurements = sa.Table(
    "measurements",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id", ondelete="CASCADE"), nullable=False),
    sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id", ondelete="CASCADE"), nullable=False),
    sa.Column("input_id", sa.Integer, sa.ForeignKey("inputs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("config_key", sa.Text, nullable=False),  # canonical JSON of the config, sorted keys
    sa.Column("config_hash", sa.BigInteger, nullable=True),  # rows.config_hash(config_key); NULL: a collision
    sa.Column("config", sa.JSON, nullable=False),  # the config in parameter order, as given
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("time_ms", sa.Float, nullable=True),  # NULL stands for inf (every failure)
    sa.Column("samples", sa.JSON, nullable=False),
    sa.Column("compile_ms", sa.Float, nullable=False, default=0.0),
    sa.Column("verify_ms", sa.Float, nullable=False, default=0.0),
    sa.Column("benchmark_ms", sa.Float, nullable=False, default=0.0),
    sa.Column("observers", sa.JSON, nullable=False),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Column("timestamp", sa.Float, nullable=False),
    sa.Column("time_bin", sa.Integer, nullable=True),  # rows.time_bin(time_ms): successes with a time > 0
)
# The identity of a row: (run, 64-bit hash of the configuration key), an 8-byte index entry instead of the key's
# ~100 characters, so bulk imports of millions of rows keep the index in memory. A configuration whose hash is
# taken by another one in its run (about one pair in 10^12 at 10^7 rows a run) is stored with a NULL hash and
# kept unique by its key in the second, normally empty, index; writers and lookups check the stored key.
sa.Index("uq_m_hash", measurements.c.device_id, measurements.c.problem_id, measurements.c.input_id,
         measurements.c.config_hash, unique=True)
_SPILLED = measurements.c.config_hash.is_(None)
sa.Index("uq_m_spilled", measurements.c.device_id, measurements.c.problem_id, measurements.c.input_id,
         measurements.c.config_key, unique=True, sqlite_where=_SPILLED, postgresql_where=_SPILLED)
# a run's rows in order of arrival: keyset pagination (streaming export), trajectories, pages by id
sa.Index("ix_m_run", measurements.c.problem_id, measurements.c.device_id, measurements.c.input_id,
         measurements.c.id)
_SUCCEEDED = measurements.c.time_ms.is_not(None)  # a time is stored for successes only (rows.encode)
# the fastest-first scan of a run, over successes only: top-k and best of a run are a short range scan;
# of a problem (or a problem on a device), a merge of its runs' scans
sa.Index("ix_m_ok_run", measurements.c.problem_id, measurements.c.device_id, measurements.c.input_id,
         measurements.c.time_ms, sqlite_where=_SUCCEEDED, postgresql_where=_SUCCEEDED)
_FAILED = measurements.c.time_ms.is_(None)
# a run's failures in order of arrival (the pages after its successes): small, as failures are few; covering
# for the ids of a page (with the always-NULL time), which SQLite's planner then takes over ix_m_run
sa.Index("ix_m_failed_run", measurements.c.problem_id, measurements.c.device_id, measurements.c.input_id,
         measurements.c.id, measurements.c.time_ms, sqlite_where=_FAILED, postgresql_where=_FAILED)

def _per_run(name: str, *key: sa.Column) -> sa.Table:
    """A summary table: a count ``n`` per run and ``key``, kept by the writers (triggers on PostgreSQL)."""
    return sa.Table(
        name,
        metadata,
        sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("input_id", sa.Integer, sa.ForeignKey("inputs.id", ondelete="CASCADE"), primary_key=True),
        *key,
        sa.Column("n", sa.BigInteger, nullable=False),
    )


run_counts = _per_run("run_counts", sa.Column("status", sa.String(32), primary_key=True))
"""Measurements per (run, status): counts, run listings and summaries read a few rows here instead of
counting millions. PostgreSQL keeps it with statement triggers (``POSTGRES_TRIGGERS``: exact under
concurrent writers); on SQLite, whose writers hold the one write lock, the store's writer adjusts it in the
same transaction (a row trigger there halves the import rate)."""

run_time_bins = _per_run("run_time_bins", sa.Column("bin", sa.Integer, primary_key=True))
"""Successes per (run, fine time bin of 1/64 octave, ``rows.time_bin``): a run's histogram reads a few hundred
rows here instead of binning millions. Kept like ``run_counts``."""

run_param_counts = _per_run("run_param_counts", sa.Column("name", sa.Text, primary_key=True),
                            sa.Column("value", sa.Text, primary_key=True),  # JSON text, as in config
                            sa.Column("status", sa.String(32), primary_key=True))
"""Measurements per (run, parameter, value, status): a page filtered by or sorted by a parameter knows its
total and where each value's rows begin without reading the run. Kept like ``run_counts``."""

TABLE_NAMES = frozenset(metadata.tables)

_RUN = ("device_id", "problem_id", "input_id", "status")
_COLS = ", ".join(_RUN)


_BIN_COLS = "device_id, problem_id, input_id, time_bin"
_BIN_KEY = "device_id, problem_id, input_id, bin"
_PARAM_KEY = "device_id, problem_id, input_id, name, value, status"
_PARAM_COLS = "r.device_id, r.problem_id, r.input_id, e.key, e.value::text, r.status"
_SQLITE_VALUE = ("CASE e.type WHEN 'text' THEN json_quote(e.value) WHEN 'true' THEN 'true' WHEN 'false' THEN "
                 "'false' WHEN 'null' THEN 'null' ELSE CAST(e.value AS TEXT) END")


def _pg_side(rows: str, sign: str) -> str:
    return (f"INSERT INTO run_counts AS c ({_COLS}, n) SELECT {_COLS}, {sign}count(*) FROM {rows} "
            f"GROUP BY {_COLS} ORDER BY {_COLS} "  # one lock order for every writer: no deadlock between them
            f"ON CONFLICT ({_COLS}) DO UPDATE SET n = c.n + EXCLUDED.n; "
            f"INSERT INTO run_time_bins AS b ({_BIN_KEY}, n) SELECT {_BIN_COLS}, {sign}count(*) FROM {rows} "
            f"WHERE time_bin IS NOT NULL GROUP BY {_BIN_COLS} ORDER BY {_BIN_COLS} "
            f"ON CONFLICT ({_BIN_KEY}) DO UPDATE SET n = b.n + EXCLUDED.n; "
            f"INSERT INTO run_param_counts AS q ({_PARAM_KEY}, n) SELECT {_PARAM_COLS}, {sign}count(*) "
            f"FROM {rows} r, json_each(r.config) e GROUP BY {_PARAM_COLS} ORDER BY {_PARAM_COLS} "
            f"ON CONFLICT ({_PARAM_KEY}) DO UPDATE SET n = q.n + EXCLUDED.n;")


def _pg_function(name: str, body: str) -> str:
    return (f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} "
            "RETURN NULL; END $$")


POSTGRES_TRIGGERS = (
    _pg_function("adaptune_counts_insert", _pg_side("new_rows", "")),
    _pg_function("adaptune_counts_delete", _pg_side("old_rows", "-")),
    _pg_function("adaptune_counts_update", _pg_side("old_rows", "-") + " " + _pg_side("new_rows", "")),
    "DROP TRIGGER IF EXISTS trg_counts_insert ON measurements",
    "DROP TRIGGER IF EXISTS trg_counts_delete ON measurements",
    "DROP TRIGGER IF EXISTS trg_counts_update ON measurements",
    "CREATE TRIGGER trg_counts_insert AFTER INSERT ON measurements REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION adaptune_counts_insert()",
    "CREATE TRIGGER trg_counts_delete AFTER DELETE ON measurements REFERENCING OLD TABLE AS old_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION adaptune_counts_delete()",
    "CREATE TRIGGER trg_counts_update AFTER UPDATE ON measurements REFERENCING OLD TABLE AS old_rows "
    "NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION adaptune_counts_update()",
)
"""Statement triggers with transition tables: one grouped update of ``run_counts`` per statement, so a
bulk insert of a chunk (or a COPY) pays once, not once per row."""

MEASUREMENT_COLUMNS = tuple(c.name for c in measurements.c)
_OLD_COLUMNS = tuple(c for c in MEASUREMENT_COLUMNS if c not in ("config_hash", "time_bin"))
SQLITE_REBUILD = (
    "DROP INDEX IF EXISTS ix_measurements_problem", "DROP INDEX IF EXISTS ix_m_run",
    "DROP INDEX IF EXISTS ix_m_ok_run", "DROP INDEX IF EXISTS ix_m_failed_run",
    "ALTER TABLE measurements RENAME TO measurements_old",
)
"""Before the new tables are created: an SQLite table cannot drop its old UNIQUE (key) constraint, so an older
database's measurements are copied into a new table (``SQLITE_COPY``) with the functions of ``sql.py``."""
SQLITE_COPY = (
    f"INSERT INTO measurements ({', '.join(_OLD_COLUMNS)}, config_hash, time_bin) SELECT {', '.join(_OLD_COLUMNS)}, "
    "adaptune_config_hash(config_key), adaptune_time_bin(CASE WHEN status = 'ok' THEN time_ms END) "
    "FROM measurements_old",
    "DROP TABLE measurements_old",
)
POSTGRES_UPGRADE = (
    "DROP INDEX IF EXISTS ix_measurements_problem",
    "ALTER TABLE measurements DROP CONSTRAINT IF EXISTS uq_measurement",
    "ALTER TABLE measurements ADD COLUMN IF NOT EXISTS config_hash BIGINT",
    "ALTER TABLE measurements ADD COLUMN IF NOT EXISTS time_bin INTEGER",
    "UPDATE measurements SET config_hash = ('x' || left(md5(config_key), 16))::bit(64)::bigint, "
    "time_bin = CASE WHEN status = 'ok' AND time_ms > 0 THEN floor(log(2.0, time_ms::numeric) * 64)::int END",
)
"""An older PostgreSQL database's measurements, brought to this version in place (the same hash as
``rows.config_hash``: the first 8 bytes of the key's MD5, signed)."""
RECOUNT = (
    "UPDATE measurements SET time_ms = NULL WHERE status <> 'ok'",  # only successes carry a time (version 2)
    "DELETE FROM run_counts", "DELETE FROM run_time_bins",
    f"INSERT INTO run_counts ({_COLS}, n) SELECT {_COLS}, count(*) FROM measurements GROUP BY {_COLS}",
    f"INSERT INTO run_time_bins ({_BIN_KEY}, n) SELECT {_BIN_COLS}, count(*) FROM measurements "
    f"WHERE time_bin IS NOT NULL GROUP BY {_BIN_COLS}",
)
"""The summary tables of an upgraded database, counted once from its rows (before the triggers exist)."""


def recount(dialect: str) -> tuple[str, ...]:
    """``RECOUNT`` and the parameter counts, for this dialect."""
    cols = _PARAM_COLS.replace("e.value::text", _SQLITE_VALUE) if dialect == "sqlite" else _PARAM_COLS
    return (*RECOUNT, "DELETE FROM run_param_counts",
            f"INSERT INTO run_param_counts ({_PARAM_KEY}, n) SELECT {cols}, count(*) FROM measurements r, "
            f"json_each(r.config) e GROUP BY {cols}")


def triggers(dialect: str) -> tuple[str, ...]:
    """The trigger DDL that keeps ``run_counts`` for this SQL dialect (none on SQLite: see ``run_counts``)."""
    if dialect == "sqlite":
        return ()
    if dialect == "postgresql":
        return POSTGRES_TRIGGERS
    raise ValueError(f"no run-count triggers for {dialect}: adaptune stores use SQLite or PostgreSQL")
