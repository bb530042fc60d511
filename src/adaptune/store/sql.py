"""The connection under a SQL store: engine, transactions with retries, schema creation and migration.

SQLite (one file, WAL journal, busy timeout) by default so that a tuning process can write while another
reads; any SQLAlchemy URL (PostgreSQL for a team or cluster store) otherwise. Transient failures (dropped
connections, serialisation failures, deadlocks) are retried with jittered back-off, and pooled connections
are pinged before use, so a server restart or a killed backend costs a reconnect, not a measurement.
Driver errors become one :class:`StoreError` naming the database.
"""

from __future__ import annotations

import math
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from adaptune.store import schema as S
from adaptune.store.codec import config_hash, dumps, time_bin
from adaptune.store.errors import StoreError

SQLITE_MAGIC = b"SQLite format 3\x00"
MEMORY = ":memory:"
"""The target naming a private in-memory SQLite store (one process, gone on close)."""
BUSY_TIMEOUT_MS = 60_000
RETRIES = 8
"""Attempts of one transaction before a transient failure (lost connection, serialisation, deadlock) is raised."""
_RETRY_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "08000", "08003", "08006"})
_SCHEMA_LOCK = 0x61647470  # PostgreSQL advisory lock id held while the schema is created ("adtp")
T = TypeVar("T")


def _leave_wal(raw: Any) -> bool:
    """Switch this SQLite connection to the rollback journal if no other connection holds the file (no wait);
    whether it did."""
    raw.execute("PRAGMA busy_timeout=0")
    try:
        return str(raw.execute("PRAGMA journal_mode=DELETE").fetchone()[0]).lower() == "delete"
    except sqlite3.OperationalError:  # locked by another connection: stay in WAL
        return False
    finally:
        raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def _enter_wal(raw: Any) -> None:
    """``PRAGMA journal_mode=WAL``, tried again while another connection switches the file at the same moment.

    The switch reads the header and then upgrades to a write; SQLite answers "database is locked" at once,
    without the busy handler, to the second of two connections doing that together (either would deadlock
    waiting). The first one's switch is done within milliseconds, and then there is nothing left to write."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            raw.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005 * (0.5 + random.random()))


def _back_to_wal(raw: Any) -> None:
    """The WAL again after a bulk load; where a reader that came during it holds the file too long, the next
    connection's opening switches it (``_on_connect``)."""
    with suppress(sqlite3.OperationalError):
        raw.execute("PRAGMA journal_mode=WAL")


def _transient(exc: BaseException) -> bool:
    """Whether a failed transaction may simply be run again: dropped connection, serialisation, deadlock, lock."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in _RETRY_SQLSTATES:
        return True
    text = str(orig if orig is not None else exc).lower()
    return isinstance(exc, sa.exc.OperationalError) and any(
        s in text for s in ("server closed the connection", "connection is closed",
                            "terminating connection", "consuming input failed", "connection refused"))


def _sqlite_functions(dbapi_conn: Any) -> None:
    """The Python functions an upgrade of an older SQLite database computes its new columns with."""
    dbapi_conn.create_function("adaptune_config_hash", 1, config_hash, deterministic=True)
    dbapi_conn.create_function("adaptune_time_bin", 1, time_bin, deterministic=True)


def engine_url(url: str) -> str:
    """A SQLAlchemy URL with a driver that is installed: ``postgresql://`` uses psycopg 3 when psycopg2 is absent."""
    parsed = sa.engine.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            parsed = parsed.set(drivername="postgresql+psycopg")
        else:
            parsed = parsed.set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def _is_url(target: str | Path) -> bool:
    return isinstance(target, str) and "://" in target


def is_sqlite_file(path: str | Path) -> bool:
    """Whether ``path`` is an SQLite database file (by its magic header)."""
    path = Path(path)
    if not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def _check_sqlite_file(path: Path) -> None:
    """Refuse, before SQLite touches it, a path that is a directory or a file of another kind."""
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not an adaptune database")
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
        if head != SQLITE_MAGIC:
            raise StoreError(f"{path} is not an adaptune database (not an SQLite file)")


class Database:
    """An engine on one adaptune database, its schema checked (created or migrated) on opening."""

    def __init__(self, url_or_path: str | Path, *, echo: bool = False) -> None:
        options: dict[str, Any] = {}
        self.path: Path | None = None
        if url_or_path == MEMORY:
            url, self.label = "sqlite://", "in-memory store"
            options = {"poolclass": sa.pool.StaticPool, "connect_args": {"check_same_thread": False}}
        elif _is_url(url_or_path):
            url = str(url_or_path)
            self.label = sa.engine.make_url(url).render_as_string(hide_password=True)
        else:
            self.path = Path(url_or_path).expanduser()
            self.label = str(self.path)
            _check_sqlite_file(self.path)
            if not self.path.parent.exists():
                raise StoreError(f"cannot create database {self.path}: folder {self.path.parent} does not exist")
            url = f"sqlite:///{self.path.resolve()}"
        if not url.startswith("sqlite"):
            url = engine_url(url)
            options = {"pool_pre_ping": True, "pool_size": 2, "max_overflow": 4}  # a dropped link is replaced
            if "+psycopg" in url:  # a plan per statement: a plan psycopg prepared while a bulk import's table
                options["connect_args"] = {"prepare_threshold": None}  # was empty would scan it ever after
        try:
            self.engine: Engine = sa.create_engine(url, echo=echo, json_serializer=dumps,
                                                   json_deserializer=orjson.loads, **options)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
            raise StoreError(f"cannot open database {self.label}: {exc}") from exc
        self.dialect = self.engine.dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            self.engine.dispose()
            raise StoreError(f"cannot open database {self.label}: adaptune stores are SQLite or PostgreSQL, "
                             f"not {self.dialect}")
        self.retries = 0  # transactions run again after a transient failure: for tests/logs
        self.reconnects = 0  # dropped links replaced, whether found by the pre-ping or mid-transaction
        sa.event.listen(self.engine, "invalidate", self._count_reconnect)
        if self.dialect == "sqlite":
            self._install_sqlite_pragmas()
        self.transact(self._init_schema)

    # ------------------------------------------------------------------ transactions
    def _install_sqlite_pragmas(self) -> None:
        """WAL + busy timeout for concurrent readers; BEGIN IMMEDIATE for writers (no lock-upgrade deadlock)."""

        @sa.event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # the driver must not BEGIN on its own; we do it below
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            _enter_wal(cur)
            cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a killed process loses no commit
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA cache_size=-65536")  # 64 MiB of pages: index maintenance of big imports
            try:
                cur.execute("SELECT ln(1), floor(1.5)")
            except sqlite3.OperationalError:  # SQLite built without its math functions: the two we use
                dbapi_conn.create_function("ln", 1, math.log, deterministic=True)
                dbapi_conn.create_function("floor", 1, math.floor, deterministic=True)
            cur.close()

        @sa.event.listens_for(self.engine, "begin")
        def _on_begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("adaptune_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    def _count_reconnect(self, _dbapi_conn: Any, _record: Any, _exc: BaseException | None) -> None:
        self.reconnects += 1

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One short write transaction (committed on exit, rolled back on error)."""
        with self.guard("write"), self.engine.connect() as conn:
            conn = conn.execution_options(adaptune_write=True)
            with conn.begin():
                yield conn

    @contextmanager
    def bulk_write(self) -> Iterator[Connection]:
        """One long write transaction for a bulk load. On a SQLite file no other connection uses, the rollback
        journal instead of the WAL while it runs: pages appended past the file's end go to the file once (the
        WAL writes each one twice, to the log and at the checkpoint) and a killed load's journal is rolled back
        by the next opening. With another connection open (the WAL cannot be left then), the WAL as usual.
        SQLite's foreign keys are not checked row by row during it (1 of the insert's 4-5 µs a row)."""
        sqlite_file = self.dialect == "sqlite" and self.path is not None
        if sqlite_file:  # this process's idle pooled connections would keep the file in WAL mode
            self.engine.dispose()
        with self.guard("write"), self.engine.connect() as conn:
            raw = conn.connection.dbapi_connection if self.dialect == "sqlite" else None
            journal = _leave_wal(raw) if sqlite_file else False
            if raw is not None:  # no check of three parent rows a row: the load checks its run's once (BulkLoad)
                raw.execute("PRAGMA foreign_keys=OFF")  # (outside a transaction: SQLite ignores it inside one)
            try:
                conn = conn.execution_options(adaptune_write=True)
                with conn.begin():
                    yield conn
            finally:
                if raw is not None:
                    raw.execute("PRAGMA foreign_keys=ON")
                if journal:
                    _back_to_wal(raw)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.guard("read"), self.engine.connect() as conn:
            yield conn

    def rows(self, query: Any, params: Any = None) -> list[Any]:
        """All rows of a read query, run again if the connection drops (a read has no side effects)."""

        def once() -> list[Any]:
            with self.read() as conn:
                return (conn.execute(query, params) if params is not None else conn.execute(query)).all()

        return self.transact(once)

    def transact(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (which opens its own transaction) again on transient failures, with jittered back-off.

        Safe because every write is idempotent (upserts and get-or-create): a commit that reached the server
        before the connection dropped is simply written once more with the same key.
        """
        for attempt in range(RETRIES):
            try:
                return fn()
            except StoreError as exc:
                cause = exc.__cause__
                if attempt + 1 >= RETRIES or cause is None or not _transient(cause):
                    raise
                self.retries += 1
                time.sleep(min(2.0, 0.02 * 2 ** attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    @contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Turn driver errors (corrupt file, locked too long, server gone) into one StoreError naming the DB."""
        try:
            yield
        except StoreError:
            raise
        except sa.exc.DBAPIError as exc:
            cause = str(exc.orig) if exc.orig is not None else str(exc)
            cause = cause.strip().splitlines()[0] if cause.strip() else type(exc).__name__
            raise StoreError(f"database {self.label}: cannot {what}: {cause}") from exc

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ schema
    def _init_schema(self) -> None:
        with self.guard("open"):
            self._init_schema_once()

    def _schema_version(self, existing: set[str]) -> int | None:
        """The stored schema version; StoreError for a database of another program."""
        if existing and S.schema_info.name not in existing:
            shown = ", ".join(sorted(existing)[:5])
            raise StoreError(f"{self.label} is not an adaptune database (it holds other tables: {shown})")
        if S.schema_info.name not in existing:
            return None
        with self.read() as conn:
            row = conn.execute(sa.select(S.schema_info.c.value)
                               .where(S.schema_info.c.key == "schema_version")).first()
        version = int(row[0]) if row is not None and str(row[0]).isdigit() else None
        if version is None:
            raise StoreError(f"{self.label} is not an adaptune database (no schema version)")
        if version > S.SCHEMA_VERSION:
            raise StoreError(f"{self.label} was written by a newer adaptune (schema {version}, "
                             f"this one reads up to {S.SCHEMA_VERSION})")
        return version

    def _init_schema_once(self) -> None:
        version = self._schema_version(set(sa.inspect(self.engine).get_table_names()))
        if version == S.SCHEMA_VERSION:
            return
        with self.write() as conn:
            if self.dialect == "postgresql":  # processes opening a fresh database at once: one creates it
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
            have = None
            if sa.inspect(conn).has_table(S.schema_info.name):
                row = conn.execute(sa.select(S.schema_info.c.value)
                                   .where(S.schema_info.c.key == "schema_version")).first()
                have = int(row[0]) if row is not None else None
            if have == S.SCHEMA_VERSION:
                return  # another process finished it while we waited for the lock
            if have is not None and self.dialect == "sqlite":
                for statement in S.SQLITE_REBUILD:
                    conn.exec_driver_sql(statement)
            elif have is not None:
                for statement in S.POSTGRES_UPGRADE:
                    conn.exec_driver_sql(statement)
            S.metadata.create_all(conn, checkfirst=True)
            if have is not None:  # an older database: its rows in the new shape, its summaries counted
                if self.dialect == "sqlite":
                    _sqlite_functions(conn.connection.dbapi_connection)
                    for statement in S.SQLITE_COPY:
                        conn.exec_driver_sql(statement)
                else:  # create_all leaves an existing table's new indexes to us
                    for index in S.measurements.indexes:
                        index.create(conn, checkfirst=True)
                for statement in S.recount(self.dialect):
                    conn.exec_driver_sql(statement)
            for statement in S.triggers(self.dialect):
                conn.exec_driver_sql(statement)
            values = {"key": "schema_version", "value": str(S.SCHEMA_VERSION)}
            if have is None:
                conn.execute(S.schema_info.insert().values(**values))
            else:
                conn.execute(S.schema_info.update().where(S.schema_info.c.key == "schema_version")
                             .values(value=values["value"]))
