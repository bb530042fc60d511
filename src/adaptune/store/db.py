"""The results database: devices, problems, inputs and one measurement per configuration.

SQLite (one file, WAL journal, busy timeout) by default so that a tuning process can write while another
reads; any SQLAlchemy URL (PostgreSQL for a team or cluster store) otherwise. Every ``put`` is its own short
transaction, so a process killed mid-run loses at most the measurement in flight.

Several processes and hosts may write one PostgreSQL database at once (docs/distributed.md): a measurement
is keyed by (device, problem, input, configuration) with a UNIQUE constraint and written by an upsert, so a
retried or repeated write replaces instead of duplicating; every transaction is retried (with jittered
back-off) on serialisation failures, deadlocks and dropped connections, and pooled connections are pinged
before use, so a server restart or a killed backend costs a reconnect, not a measurement.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from adaptune.records import DeviceInfo, Result, Status
from adaptune.store import schema as S
from adaptune.store.base import (
    DEFAULT_CHUNK,
    BaseStore,
    GroupSummary,
    HistogramBin,
    Page,
    ProblemInfo,
    RunKey,
    RunSummary,
    StoredResult,
    Trajectory,
)
from adaptune.store.codec import config_key, dumps, jsonable
from adaptune.store.errors import StoreError

SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 60_000
_KEY_COLUMNS = ("device_id", "problem_id", "input_id", "config_key")
RETRIES = 8
"""Attempts of one transaction before a transient failure (lost connection, serialisation, deadlock) is raised."""
_RETRY_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "08000", "08003", "08006"})
_SCHEMA_LOCK = 0x61647470  # PostgreSQL advisory lock id held while the schema is created ("adtp")
T = TypeVar("T")


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


class Store(BaseStore):
    """Where every measurement goes: ``Store("runs.db")`` or ``Store("postgresql://host/db")``.

    Usable as a context manager; ``close()`` releases the connection pool.
    """

    def __init__(self, url_or_path: str | Path = "adaptune.db", *, echo: bool = False) -> None:
        if _is_url(url_or_path):
            url = str(url_or_path)
            self.label = sa.engine.make_url(url).render_as_string(hide_password=True)
            self.path: Path | None = None
        else:
            self.path = Path(url_or_path).expanduser()
            self.label = str(self.path)
            _check_sqlite_file(self.path)
            if not self.path.parent.exists():
                raise StoreError(f"cannot create database {self.path}: folder {self.path.parent} does not exist")
            url = f"sqlite:///{self.path.resolve()}"
        options: dict[str, Any] = {}
        if not url.startswith("sqlite"):
            url = engine_url(url)
            options = {"pool_pre_ping": True, "pool_size": 2, "max_overflow": 4}  # a dropped link is replaced
        try:
            self._engine: Engine = sa.create_engine(url, echo=echo, json_serializer=dumps,
                                                    json_deserializer=json.loads, **options)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
            raise StoreError(f"cannot open database {self.label}: {exc}") from exc
        self.dialect = self._engine.dialect.name
        self.retries = 0  # transient failures survived (reconnects, serialisation failures): for tests/logs
        if self.dialect == "sqlite":
            self._install_sqlite_pragmas()
        self._transact(self._init_schema, "open")

    # ------------------------------------------------------------------ connection management
    def _install_sqlite_pragmas(self) -> None:
        """WAL + busy timeout for concurrent readers; BEGIN IMMEDIATE for writers (no lock-upgrade deadlock)."""

        @sa.event.listens_for(self._engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # the driver must not BEGIN on its own; we do it below
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a killed process loses no commit
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @sa.event.listens_for(self._engine, "begin")
        def _on_begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("adaptune_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One short write transaction (committed on exit, rolled back on error)."""
        with self._guard("write"), self._engine.connect() as conn:
            conn = conn.execution_options(adaptune_write=True)
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._guard("read"), self._engine.connect() as conn:
            yield conn

    def _rows(self, query: Any) -> list[Any]:
        """All rows of a read query, run again if the connection drops (a read has no side effects)."""

        def once() -> list[Any]:
            with self._read() as conn:
                return list(conn.execute(query))

        return self._transact(once, "read")

    def _transact(self, fn: Callable[[], T], what: str) -> T:
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
    def _guard(self, what: str) -> Iterator[None]:
        """Turn driver errors (corrupt file, locked too long, server gone) into one StoreError naming the DB."""
        try:
            yield
        except StoreError:
            raise
        except sa.exc.DBAPIError as exc:
            cause = str(exc.orig) if exc.orig is not None else str(exc)
            raise StoreError(f"database {self.label}: cannot {what}: {cause}") from exc

    def _init_schema(self) -> None:
        with self._guard("open"):
            self._init_schema_once()

    def _init_schema_once(self) -> None:
        existing = set(sa.inspect(self._engine).get_table_names())
        if existing and S.schema_info.name not in existing:
            shown = ", ".join(sorted(existing)[:5])
            raise StoreError(f"{self.label} is not an adaptune database (it holds other tables: {shown})")
        if S.schema_info.name in existing:
            with self._read() as conn:
                row = conn.execute(sa.select(S.schema_info.c.value)
                                   .where(S.schema_info.c.key == "schema_version")).first()
            version = int(row[0]) if row is not None and str(row[0]).isdigit() else None
            if version is None:
                raise StoreError(f"{self.label} is not an adaptune database (no schema version)")
            if version > S.SCHEMA_VERSION:
                raise StoreError(f"{self.label} was written by a newer adaptune (schema {version}, "
                                 f"this one reads up to {S.SCHEMA_VERSION})")
            if existing >= S.TABLE_NAMES:
                return
        with self._write() as conn:
            if self.dialect == "postgresql":  # processes opening a fresh database at once: one creates it
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
            S.metadata.create_all(conn, checkfirst=True)
            have = conn.execute(sa.select(S.schema_info.c.key)
                                .where(S.schema_info.c.key == "schema_version")).first()
            if have is None:
                conn.execute(S.schema_info.insert().values(key="schema_version", value=str(S.SCHEMA_VERSION)))

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.label!r})"

    # ------------------------------------------------------------------ registration (get-or-create)
    def _get_or_create(self, table: sa.Table, key: Mapping[str, Any], extra: Mapping[str, Any],
                       update_extra: bool) -> int:
        where = sa.and_(*(table.c[k] == v for k, v in key.items()))

        def once() -> int:
            with self._write() as conn:
                row = conn.execute(sa.select(table.c.id).where(where)).first()
                if row is not None:
                    if update_extra and extra:
                        conn.execute(table.update().where(table.c.id == row[0]).values(**extra))
                    return int(row[0])
                return int(conn.execute(table.insert().values(**key, **extra)).inserted_primary_key[0])

        for attempt in range(2):  # a server database may race another process: the loser finds the winner's row
            try:
                return self._transact(once, "write")
            except StoreError as exc:
                if attempt or not isinstance(exc.__cause__, sa.exc.IntegrityError):
                    raise
        raise AssertionError("unreachable")

    def device(self, info: DeviceInfo) -> int:
        """Id of the device (name, platform, driver), registering it on first use."""
        return self._get_or_create(S.devices, {"name": info.name, "platform": info.platform,
                                               "driver": info.driver or ""},
                                   {"properties": jsonable(info.properties)}, update_extra=True)

    def problem(self, name: str, source_hash: str, space_desc: Mapping[str, Any] | None = None) -> int:
        """Id of the problem (name, source hash); the space description is kept up to date."""
        return self._get_or_create(S.problems, {"name": name, "source_hash": source_hash},
                                   {"space": jsonable(dict(space_desc or {}))}, update_extra=space_desc is not None)

    def input(self, problem_id: int, name: str, features: Mapping[str, Any] | None = None) -> int:
        """Id of the named input of a problem; features are stored (or updated) when given."""
        return self._get_or_create(S.inputs, {"problem_id": int(problem_id), "name": name},
                                   {"features": jsonable(dict(features or {}))}, update_extra=features is not None)

    # ------------------------------------------------------------------ measurements
    @staticmethod
    def _row(device_id: int, problem_id: int, input_id: int, result: Result) -> dict[str, Any]:
        time_ms = float(result.time_ms)
        return {
            "device_id": int(device_id), "problem_id": int(problem_id), "input_id": int(input_id),
            "config_key": config_key(result.config), "config": jsonable(dict(result.config)),
            "status": str(Status(result.status)),
            "time_ms": time_ms if math.isfinite(time_ms) else None,
            "samples": [float(s) for s in result.samples],
            "compile_ms": float(result.compile_ms), "verify_ms": float(result.verify_ms),
            "benchmark_ms": float(result.benchmark_ms),
            "observers": jsonable(dict(result.observers)), "error": str(result.error or ""),
            "timestamp": float(result.timestamp),
        }

    def _upsert(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        table = S.measurements
        if self.dialect in ("sqlite", "postgresql"):
            if self.dialect == "sqlite":
                from sqlalchemy.dialects.sqlite import insert
            else:
                from sqlalchemy.dialects.postgresql import insert
            stmt = insert(table)
            updates = {c.name: stmt.excluded[c.name] for c in table.c if c.name not in ("id", *_KEY_COLUMNS)}
            conn.execute(stmt.on_conflict_do_update(index_elements=list(_KEY_COLUMNS), set_=updates), rows)
            return
        for row in rows:  # portable fallback: update, insert when nothing was there
            where = sa.and_(*(table.c[k] == row[k] for k in _KEY_COLUMNS))
            if conn.execute(table.update().where(where).values(**row)).rowcount == 0:
                conn.execute(table.insert().values(**row))

    def put(self, device_id: int, problem_id: int, input_id: int, result: Result) -> None:
        """Store one result in its own transaction; replaces an earlier result for the same config."""
        self.put_many(device_id, problem_id, input_id, [result])

    def put_many(self, device_id: int, problem_id: int, input_id: int, results: Iterable[Result]) -> int:
        """Store many results in one transaction (all or nothing); returns how many were written."""
        # one row per key (the last wins, in first-seen order): PostgreSQL refuses to upsert a row twice in
        # one statement; writers that deadlock on overlapping batches are retried (_transact)
        by_key: dict[str, dict[str, Any]] = {}
        for r in results:
            row = self._row(device_id, problem_id, input_id, r)
            by_key[row["config_key"]] = row
        rows = list(by_key.values())
        if rows:
            def once() -> None:
                with self._write() as conn:
                    self._upsert(conn, rows)

            self._transact(once, "write")
        return len(rows)

    @staticmethod
    def _result(row: Any) -> Result:
        observers = {k: (math.nan if v is None else v) for k, v in (row.observers or {}).items()}
        return Result(config=dict(row.config), status=Status(row.status),
                      time_ms=math.inf if row.time_ms is None else float(row.time_ms),
                      samples=[math.nan if s is None else float(s) for s in row.samples or []],
                      compile_ms=row.compile_ms, verify_ms=row.verify_ms, benchmark_ms=row.benchmark_ms,
                      observers=observers, error=row.error or "", timestamp=row.timestamp)

    def _where(self, problem_id: int | None, device_id: int | None, input_id: int | None,
               status: Status | str | None = None) -> list[Any]:
        m = S.measurements.c
        clauses = []
        for column, value in ((m.problem_id, problem_id), (m.device_id, device_id), (m.input_id, input_id)):
            if value is not None:
                clauses.append(column == int(value))
        if status is not None:
            clauses.append(m.status == str(Status(status)))
        return clauses

    def get(self, device_id: int, problem_id: int, input_id: int, config: Mapping[str, Any]) -> Result | None:
        """The stored result of one configuration, or None."""
        m = S.measurements.c
        query = sa.select(S.measurements).where(*self._where(problem_id, device_id, input_id),
                                                m.config_key == config_key(config))
        rows = self._rows(query)
        return self._result(rows[0]) if rows else None

    def get_many(self, device_id: int, problem_id: int, input_id: int,
                 configs: Iterable[Mapping[str, Any]] | None = None) -> dict[str, Result]:
        """Stored results by config key (``config_key(config)``): all of them, or those of ``configs``."""
        query = sa.select(S.measurements).where(*self._where(problem_id, device_id, input_id))
        found = {row.config_key: self._result(row) for row in self._rows(query)}
        if configs is None:
            return found
        wanted = {config_key(c) for c in configs}
        return {k: r for k, r in found.items() if k in wanted}

    def results(self, problem_id: int | None = None, device_id: int | None = None, input_id: int | None = None,
                status: Status | str | None = None) -> list[Result]:
        """Stored results matching the filters, in the order they were first stored."""
        query = (sa.select(S.measurements).where(*self._where(problem_id, device_id, input_id, status))
                 .order_by(S.measurements.c.id))
        return [self._result(row) for row in self._rows(query)]

    def best(self, device_id: int, problem_id: int, input_id: int) -> Result | None:
        """The fastest successful result, or None."""
        m = S.measurements.c
        query = (sa.select(S.measurements)
                 .where(*self._where(problem_id, device_id, input_id, Status.OK), m.time_ms.is_not(None))
                 .order_by(m.time_ms, m.id).limit(1))
        rows = self._rows(query)
        return self._result(rows[0]) if rows else None

    def count(self, problem_id: int | None = None, device_id: int | None = None, input_id: int | None = None,
              status: Status | str | None = None) -> int:
        query = (sa.select(sa.func.count()).select_from(S.measurements)
                 .where(*self._where(problem_id, device_id, input_id, status)))
        return int(self._rows(query)[0][0])

    def delete(self, problem_id: int | None = None, device_id: int | None = None, input_id: int | None = None,
               status: Status | str | None = None) -> int:
        """Delete matching measurements (e.g. all timeouts, to measure them again); returns how many."""
        def once() -> int:
            with self._write() as conn:
                return int(conn.execute(S.measurements.delete()
                                        .where(*self._where(problem_id, device_id, input_id, status))).rowcount)

        return self._transact(once, "write")

    # ------------------------------------------------------------------ listings (for `adaptune show`)
    def _counts(self, column: sa.Column) -> dict[int, int]:
        query = sa.select(column, sa.func.count()).group_by(column)
        return {int(k): int(n) for k, n in self._rows(query)}

    def devices(self) -> list[dict[str, Any]]:
        """Registered devices: id, name, platform, driver, properties, measurements (count)."""
        counts = self._counts(S.measurements.c.device_id)
        rows = self._rows(sa.select(S.devices).order_by(S.devices.c.id))
        return [{"id": r.id, "name": r.name, "platform": r.platform, "driver": r.driver,
                 "properties": dict(r.properties or {}), "measurements": counts.get(r.id, 0)} for r in rows]

    def problems(self) -> list[dict[str, Any]]:
        """Registered problems: id, name, source_hash, space (description), measurements (count)."""
        counts = self._counts(S.measurements.c.problem_id)
        rows = self._rows(sa.select(S.problems).order_by(S.problems.c.id))
        return [{"id": r.id, "name": r.name, "source_hash": r.source_hash, "space": dict(r.space or {}),
                 "measurements": counts.get(r.id, 0)} for r in rows]

    def inputs(self, problem_id: int | None = None) -> list[dict[str, Any]]:
        """Registered inputs (of one problem, or all): id, problem_id, name, features, measurements (count)."""
        counts = self._counts(S.measurements.c.input_id)
        query = sa.select(S.inputs).order_by(S.inputs.c.id)
        if problem_id is not None:
            query = query.where(S.inputs.c.problem_id == int(problem_id))
        rows = self._rows(query)
        return [{"id": r.id, "problem_id": r.problem_id, "name": r.name, "features": dict(r.features or {}),
                 "measurements": counts.get(r.id, 0)} for r in rows]

    def device_info(self, device_id: int) -> DeviceInfo:
        found = self._rows(sa.select(S.devices).where(S.devices.c.id == int(device_id)))
        r = found[0] if found else None
        if r is None:
            raise KeyError(f"no device with id {device_id} in {self.label}")
        return DeviceInfo(name=r.name, platform=r.platform, driver=r.driver, properties=dict(r.properties or {}))

    def measured_pairs(self, problem_id: int) -> list[tuple[int, int]]:
        """The (device_id, input_id) pairs that hold measurements of a problem."""
        m = S.measurements.c
        query = (sa.select(m.device_id, m.input_id).where(m.problem_id == int(problem_id))
                 .group_by(m.device_id, m.input_id).order_by(m.device_id, m.input_id))
        return [(int(d), int(i)) for d, i in self._rows(query)]

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` ("ok" when sound); "ok" for server databases."""
        if self.dialect != "sqlite":
            return "ok"
        with self._read() as conn:
            return "\n".join(str(r[0]) for r in conn.exec_driver_sql("PRAGMA integrity_check"))

    # ------------------------------------------------------------------ queries of the interface (being written)
    def put_stream(self, run: RunKey, results: Iterable[Result], *, chunk_size: int = DEFAULT_CHUNK,
                   replace: bool = True) -> int:
        raise NotImplementedError

    def stored_keys(self, run: RunKey, configs: Iterable[Mapping[str, Any]]) -> set[str]:
        raise NotImplementedError

    def iter_results(self, problem_id: int | None = None, device_id: int | None = None,
                     input_id: int | None = None, status: Status | str | None = None, *,
                     chunk_size: int = DEFAULT_CHUNK) -> Iterator[StoredResult]:
        raise NotImplementedError

    def status_counts(self, problem_id: int | None = None, device_id: int | None = None,
                      input_id: int | None = None) -> dict[str, int]:
        raise NotImplementedError

    def top(self, problem_id: int, k: int = 10, *, device_id: int | None = None,
            input_id: int | None = None) -> list[StoredResult]:
        raise NotImplementedError

    def trajectory(self, run: RunKey) -> Trajectory:
        raise NotImplementedError

    def page(self, run: RunKey, *, offset: int = 0, limit: int = 50, order_by: str = "time_ms",
             descending: bool = False, status: Status | str | None = None,
             where: Mapping[str, Any] | None = None) -> Page:
        raise NotImplementedError

    def time_histogram(self, run: RunKey, bins: int = 40, *, log: bool = True) -> list[HistogramBin]:
        raise NotImplementedError

    def device_summaries(self, problem_id: int) -> list[GroupSummary]:
        raise NotImplementedError

    def input_summaries(self, problem_id: int, device_id: int | None = None) -> list[GroupSummary]:
        raise NotImplementedError

    def problem_info(self, problem_id: int) -> ProblemInfo:
        raise NotImplementedError

    def runs(self, problem_id: int | None = None, device_id: int | None = None) -> list[RunSummary]:
        raise NotImplementedError

    def latest_id(self) -> int:
        raise NotImplementedError

    def rows_since(self, after_id: int, *, limit: int = 1000, problem_id: int | None = None,
                   since_timestamp: float | None = None) -> list[StoredResult]:
        raise NotImplementedError


def open_store(target: str | Path | Store) -> Store:
    """A Store from a path/URL, or the Store itself (so APIs can take either)."""
    return target if isinstance(target, Store) else Store(target)


__all__: Sequence[str] = ("Store", "is_sqlite_file", "open_store")
