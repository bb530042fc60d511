"""The tables of an adaptune results database (SQLAlchemy Core, portable across SQLite and PostgreSQL).

One measurement row per (device, problem, input, configuration): the UNIQUE constraint is what makes
writes idempotent and lets an interrupted tuning run resume from what it already measured.
"""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 2
"""Bumped whenever a table changes shape; a database with a newer version is refused, not guessed at.
Version 2 (from 1 by ``migrate``): the ``run_counts`` table and the indexes of the query interface."""

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
    sa.UniqueConstraint("device_id", "problem_id", "input_id", "config_key", name="uq_measurement"),
)
# a run's rows in order of arrival: keyset pagination (streaming export), trajectories, pages by id
sa.Index("ix_m_run", measurements.c.problem_id, measurements.c.device_id, measurements.c.input_id,
         measurements.c.id)
_SUCCEEDED = measurements.c.time_ms.is_not(None)  # a time is stored for successes only (rows.encode)
# the fastest-first scan of a run, over successes only: top-k and best of a run are a short range scan;
# of a problem (or a problem on a device), a merge of its runs' scans
sa.Index("ix_m_ok_run", measurements.c.problem_id, measurements.c.device_id, measurements.c.input_id,
         measurements.c.time_ms, sqlite_where=_SUCCEEDED, postgresql_where=_SUCCEEDED)
_FAILED = measurements.c.time_ms.is_(None)
# a run's failures in order of arrival (the pages after its successes): small, as failures are few
sa.Index("ix_m_failed_run", measurements.c.problem_id, measurements.c.device_id, measurements.c.input_id,
         measurements.c.id, sqlite_where=_FAILED, postgresql_where=_FAILED)

run_counts = sa.Table(
    "run_counts",
    metadata,
    sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("problem_id", sa.Integer, sa.ForeignKey("problems.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("input_id", sa.Integer, sa.ForeignKey("inputs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("status", sa.String(32), primary_key=True),
    sa.Column("n", sa.BigInteger, nullable=False),
)
"""Measurements per (run, status): counts, run listings and summaries read a few rows here instead of
counting millions. PostgreSQL keeps it with statement triggers (``POSTGRES_TRIGGERS``: exact under
concurrent writers); on SQLite, whose writers hold the one write lock, the store's writer adjusts it in the
same transaction (a row trigger there halves the import rate)."""

TABLE_NAMES = frozenset(metadata.tables)

_RUN = ("device_id", "problem_id", "input_id", "status")
_COLS = ", ".join(_RUN)


def _pg_side(rows: str, sign: str) -> str:
    return (f"INSERT INTO run_counts AS c ({_COLS}, n) SELECT {_COLS}, {sign}count(*) FROM {rows} "
            f"GROUP BY {_COLS} ORDER BY {_COLS} "  # one lock order for every writer: no deadlock between them
            f"ON CONFLICT ({_COLS}) DO UPDATE SET n = c.n + EXCLUDED.n;")


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

MIGRATE_FROM_1 = (
    "DROP INDEX IF EXISTS ix_measurements_problem",
    "UPDATE measurements SET time_ms = NULL WHERE status <> 'ok'",  # only successes carry a time now
    f"INSERT INTO run_counts ({_COLS}, n) SELECT {_COLS}, count(*) FROM measurements GROUP BY {_COLS}",
)
"""Bring a version-1 database to version 2 (after the new tables and indexes are created, before triggers)."""


def triggers(dialect: str) -> tuple[str, ...]:
    """The trigger DDL that keeps ``run_counts`` for this SQL dialect (none on SQLite: see ``run_counts``)."""
    if dialect == "sqlite":
        return ()
    if dialect == "postgresql":
        return POSTGRES_TRIGGERS
    raise ValueError(f"no run-count triggers for {dialect}: adaptune stores use SQLite or PostgreSQL")
