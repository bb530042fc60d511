"""Bulk loading a large import into an empty run: rows appended without the random indexes, which are
rebuilt once, sorted, at the end; the summary tables added once.

Per-chunk upserts keep two randomly ordered B-trees up to date row by row (the configuration-hash index and
the successes' time index): once they outgrow the page cache every row costs a few random page reads and
writes, and a 10^7-row import into SQLite slows to a few thousand rows a second. A load into a run that holds
nothing yet has nothing to look up or replace, so it can instead append the rows (the indexes kept are
ordered by arrival within the run), and build the two indexes by one sort each. Rebuilding costs the whole
table, so it is only worth it where the store is small next to the load (``worth_bulk``).

On PostgreSQL the foreign keys go too (each row's three checks took most of the server's COPY time) and are
added back at the end, checked by one join over the table; SQLite's are not checked during the load
(``Database.bulk_write``), the run's three parent rows once at its start. The price is the lock: the load holds
the store's write lock to its end (SQLite: other writers wait, up to their busy timeout; readers go on where another
connection was open when the load began, which keeps it on the WAL, else the load runs on the rollback journal,
``Database.bulk_write``, writing its pages once instead of twice, and readers that come during it wait too once
its pages spill into the file; PostgreSQL: dropping an index locks the table, so readers wait too), which is
why it is only taken for a run that holds nothing yet in a store smaller than the load. Everything
happens in one transaction: a killed load leaves the store as it was (indexes included) and the
re-run starts again; a completed load makes the run non-empty, so importing the same file again takes the
upsert path and adds nothing. Configurations met twice in the file (same key: the last one wins, as with
upserts) and keys whose 64-bit hashes collide (the later key is stored by its key, ``schema.py``) make the
unique index's build fail; they are then found by one grouping of the run's hashes and resolved, and the
index is built again.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import chain
from operator import itemgetter
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from adaptune.store import schema as S
from adaptune.store.errors import StoreError
from adaptune.store.rows import BIN, COLUMNS, JSON_COLUMNS, STATUS

BULK_MIN_ROWS = 200_000
"""Smallest load (estimated rows) that takes the bulk path: below it an import keeps its per-chunk commits
(a killed one keeps its whole chunks), and its random index inserts still fit the page cache."""
SORT_THREADS = 3
"""Threads of SQLite's sorter for the index builds (``BulkLoad._sorting``): at 10^6 rows with the sorts spilling,
3.5 s against 3.9-5.2 s for one thread, and 38 against 64 MB."""
INSERT_ROWS = 500
"""Rows a SQLite insert statement of a bulk load carries (``INSERT ... VALUES (...), (...), ...``): the
statement's per-execution work is paid once for them, not once a row as with ``executemany``: 4.6-6.5 against
7.2-9.7 µs a row (2x10^5 rows, alternating, under load). Capped by the build's limit on bound parameters."""
TEXT_OID = 25
"""PostgreSQL's ``text`` type."""
REBUILT = ("uq_m_hash", "ix_m_ok_run")
"""The indexes in random order of arrival, dropped during a bulk load and built once at its end."""


def worth_bulk(expected_rows: int, run_rows: int, store_rows: int) -> bool:
    """Whether a load of about ``expected_rows`` into a run of ``run_rows`` (of ``store_rows`` in the store)
    takes the bulk path: a big load, an empty run, and a store smaller than the load (whose indexes are
    rebuilt)."""
    return expected_rows >= BULK_MIN_ROWS and run_rows == 0 and store_rows < expected_rows


ParamCounter = Callable[[tuple[int, int, int], list[tuple[Any, str]]], Counter]


class BulkLoad:
    """One bulk load into the (empty) run ``run`` on ``conn``, an open write transaction: :meth:`add` each
    chunk of encoded rows, then :meth:`finish` (indexes built, summaries added; the caller commits)."""

    def __init__(self, conn: Connection, dialect: str, run: tuple[int, int, int], param_counts: ParamCounter,
                 add_counts: Callable[[Connection, tuple[Counter, ...]], None]) -> None:
        self.conn, self.dialect, self.run = conn, dialect, run
        self.param_counts, self.add_counts = param_counts, add_counts
        self.counts: Counter = Counter()
        self.bins: Counter = Counter()
        self.params: Counter = Counter()
        self.written = 0
        self.foreign_keys: list[tuple[str, str]] = []
        self.types: list[int] = []  # PostgreSQL: each column's type, for a binary COPY
        if dialect == "postgresql":  # the statement triggers' counting is done here, once (the table lock is
            conn.exec_driver_sql("ALTER TABLE measurements DISABLE TRIGGER USER")  # held to the commit)
            self.types = binary_copy_types(conn)
            self.foreign_keys = [(name, definition) for name, definition in conn.exec_driver_sql(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'f' AND "
                "conrelid = 'measurements'::regclass")]
            if self.foreign_keys:  # checked row by row, COPY took 2.7x as long: added back (one join) at the end
                conn.exec_driver_sql("ALTER TABLE measurements " + ", ".join(
                    f"DROP CONSTRAINT {_quoted(name)}" for name, _ in self.foreign_keys))
        else:  # foreign keys unchecked during the load (``Database.bulk_write``): every row is of this run, and
            # the write lock, held to the commit, keeps its three parent rows as they are checked here
            parents = conn.exec_driver_sql("SELECT (SELECT count(*) FROM devices WHERE id = ?) + (SELECT count(*) "
                                           "FROM problems WHERE id = ?) + (SELECT count(*) FROM inputs WHERE id = ?)",
                                           tuple(run)).scalar()
            if parents != 3:
                raise StoreError(f"cannot load into run {tuple(run)} (device, problem, input): the store does not "
                                 "hold all three")
        for index in S.measurements.indexes:
            if index.name in REBUILT:
                index.drop(conn)

    def add(self, rows: list[tuple[Any, ...]], params: Counter) -> int:
        """Append one chunk (rows of ``encode_rows`` in this run, with its parameter counts); its rows."""
        if not rows:
            return 0
        if self.dialect == "sqlite":
            self._insert(rows)
        else:
            copy_binary(self.conn.connection.dbapi_connection.cursor(), "measurements", rows, self.types)
        self.counts.update(map(itemgetter(STATUS), rows))
        self.bins.update(map(itemgetter(BIN), rows))
        self.bins.pop(None, None)  # failures: no bin
        self.params.update(params)
        self.written += len(rows)
        return len(rows)

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        """SQLite: the rows by statements of ``INSERT_ROWS`` rows each (their values flattened into one parameter
        tuple), the rest by ``executemany``; the same rows in the same order as one ``executemany``."""
        raw = self.conn.connection.dbapi_connection
        cursor = raw.cursor()
        one = f"({', '.join(['?'] * len(COLUMNS))})"
        head = f"INSERT INTO measurements ({', '.join(COLUMNS)}) VALUES "
        per = max(1, min(INSERT_ROWS, raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(COLUMNS)))
        whole = len(rows) - len(rows) % per if per > 1 else 0
        if whole:
            statement = head + ", ".join([one] * per)
            for start in range(0, whole, per):
                cursor.execute(statement, tuple(chain.from_iterable(rows[start:start + per])))
        if whole < len(rows):
            cursor.executemany(head + one, rows[whole:])

    def finish(self) -> int:
        """Build the indexes (resolving repeated hashes first if the unique one finds any), add the summaries;
        the rows the run now holds."""
        unique, ordered = (next(i for i in S.measurements.indexes if i.name == name) for name in REBUILT)
        with self._sorting():
            self._build(unique, ordered)
        run = self.run
        self.add_counts(self.conn, (Counter({(*run, s): n for s, n in self.counts.items()}),
                                    Counter({(*run, b): n for b, n in self.bins.items()}), self.params))
        if self.dialect == "postgresql":  # statistics: Store.loading's VACUUM (ANALYZE) once this commits
            self.conn.exec_driver_sql("ALTER TABLE measurements ENABLE TRIGGER USER")
            if self.foreign_keys:
                self.conn.exec_driver_sql("ALTER TABLE measurements " + ", ".join(
                    f"ADD CONSTRAINT {_quoted(name)} {definition}" for name, definition in self.foreign_keys))
        return self.written

    @contextmanager
    def _sorting(self) -> Iterator[None]:
        """SQLite's index builds sorted by two worker threads as well (``PRAGMA threads``: the reader has
        finished, its core is free) in a third of the page cache, which the sorter sizes its runs by: each of
        its three threads then holds what the one did, and the builds spill into merged runs as before."""
        if self.dialect != "sqlite":
            yield
            return
        raw = self.conn.connection.dbapi_connection
        cache = raw.execute("PRAGMA cache_size").fetchone()[0]
        raw.execute(f"PRAGMA cache_size={int(cache) // SORT_THREADS}")
        raw.execute(f"PRAGMA threads={SORT_THREADS - 1}")
        try:
            yield
        finally:
            raw.execute("PRAGMA threads=0")
            raw.execute(f"PRAGMA cache_size={int(cache)}")

    def _build(self, unique: sa.Index, ordered: sa.Index) -> None:
        try:
            with self.conn.begin_nested():  # a savepoint: a failed build leaves the transaction usable
                unique.create(self.conn)
        except sa.exc.IntegrityError:  # a key twice in the file, or two keys of one hash: rare
            mark = "?" if self.dialect == "sqlite" else "%s"
            repeated = [h for (h,) in self.conn.exec_driver_sql(
                f"SELECT config_hash FROM measurements WHERE device_id = {mark} AND problem_id = {mark} AND "
                f"input_id = {mark} AND config_hash IS NOT NULL GROUP BY config_hash HAVING count(*) > 1", self.run)]
            self._resolve(repeated)
            unique.create(self.conn)
        ordered.create(self.conn)

    def _resolve(self, repeated: list[int]) -> None:
        """Rows sharing a hash: of one key the last stays (as an upsert would leave it), later keys of a
        hash taken by another are stored by key (NULL hash); the counts lose the rows removed."""
        mark = "?" if self.dialect == "sqlite" else "%s"
        found: list[tuple[Any, ...]] = []
        for start in range(0, len(repeated), 500):
            batch = repeated[start:start + 500]
            found += self.conn.exec_driver_sql(
                f"SELECT id, config_key, config_hash, status, time_bin, config FROM measurements WHERE "
                f"device_id = {mark} AND problem_id = {mark} AND input_id = {mark} AND config_hash IN "
                f"({', '.join([mark] * len(batch))})", (*self.run, *batch)).all()
        last: dict[str, tuple[Any, ...]] = {}
        for row in sorted(found):  # by id: the last of a key wins
            last[row[1]] = row
        kept = {row[0] for row in last.values()}
        removed = [row for row in found if row[0] not in kept]
        owner: dict[int, str] = {}
        spilled = [row[0] for row in sorted(last.values()) if owner.setdefault(row[2], row[1]) != row[1]]
        for start in range(0, len(removed), 500):
            ids = [row[0] for row in removed[start:start + 500]]
            self.conn.exec_driver_sql(f"DELETE FROM measurements WHERE id IN ({', '.join([mark] * len(ids))})",
                                      tuple(ids))
        for start in range(0, len(spilled), 500):
            ids = spilled[start:start + 500]
            self.conn.exec_driver_sql(f"UPDATE measurements SET config_hash = NULL WHERE id IN "
                                      f"({', '.join([mark] * len(ids))})", tuple(ids))
        self.counts.subtract(row[3] for row in removed)
        self.bins.subtract(row[4] for row in removed if row[4] is not None)
        self.params.subtract(self.param_counts(self.run, [(orjson.loads(row[5]) if isinstance(row[5], str)
                                                           else row[5], row[3]) for row in removed]))
        self.written -= len(removed)


def binary_copy_types(conn: Connection) -> list[int]:
    """The type of each of ``COLUMNS`` for a binary COPY of encoded rows into ``measurements`` (PostgreSQL): the
    table's own, but ``text`` for the JSON columns, whose encoded text goes as it is (json's binary form is its
    text; psycopg's ``json`` dumper would encode the string once more)."""
    oids = dict(conn.exec_driver_sql("SELECT attname, atttypid FROM pg_attribute WHERE attrelid = "
                                     "'measurements'::regclass AND attnum > 0 AND NOT attisdropped").all())
    return [TEXT_OID if c in JSON_COLUMNS else int(oids[c]) for c in COLUMNS]


def copy_binary(cursor: Any, table: str, rows: list[tuple[Any, ...]], types: list[int]) -> None:
    """Encoded rows into ``table`` by one binary COPY (psycopg 3): for 3x10^5 rows the server's COPY took 1.3
    against 1.9 CPU-s in text (numbers need no parsing) and the client's 0.2 against 1.3 (no text escaping)."""
    with cursor.copy(f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
