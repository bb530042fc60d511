"""The SQL store: :class:`BaseStore` answered by SQLite (a file, or in memory) or PostgreSQL.

Every query is one or two SQL statements over an index (``schema.py`` lists them) or over ``run_counts``,
the per-run, per-status counts that triggers keep, and returns only what was asked: a top-k reads k rows,
a count reads a few counter rows, a page reads one page, a stream reads one chunk at a time.

Several processes and hosts may write one PostgreSQL database at once (docs/distributed.md): a measurement
is keyed by (device, problem, input, configuration) with a UNIQUE constraint and written by an upsert, so a
retried or repeated write replaces instead of duplicating. Every ``put`` is its own short transaction and a
stream commits once per chunk, so a process killed mid-run loses at most the chunk in flight.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, closing, contextmanager, suppress
from functools import partial
from itertools import chain, islice, pairwise, repeat
from operator import itemgetter
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from adaptune.records import DeviceInfo, Result, Status
from adaptune.store import csvsql
from adaptune.store import schema as S
from adaptune.store.base import (
    DEFAULT_CHUNK,
    PAGE_COLUMNS,
    BaseStore,
    DeviceRow,
    GroupSummary,
    HistogramBin,
    InputRow,
    Page,
    ProblemInfo,
    ProblemRow,
    Record,
    RecordColumns,
    RunKey,
    RunSummary,
    StoredResult,
    Trajectory,
    TrajectoryPoint,
    finite_or_inf,
)
from adaptune.store.bulk import BulkLoad, binary_copy_types, copy_binary, worth_bulk
from adaptune.store.codec import BINS_PER_OCTAVE, config_hash, jsonable, time_bin
from adaptune.store.errors import StoreError
from adaptune.store.pipeline import Forked, chunked_collection, taken
from adaptune.store.rows import (
    BIN,
    COLUMNS,
    CONFIG,
    HASH,
    JSON_COLUMNS,
    KEY,
    STATUS,
    decode,
    decode_stored,
    encode,
    encode_block,
    encode_columns,
    encode_fields,
    fast_config_key,
)
from adaptune.store.sql import MEMORY, Database, engine_url, is_sqlite_file

M = S.measurements
C = S.run_counts
LOOKUP_BATCH = 500
"""Config keys per ``IN (...)`` lookup: well under every driver's limit on bound parameters."""
ANALYZE_MIN_ROWS = 10_000
ANALYZE_GROWTH = 0.1
"""``Store._grown``: PostgreSQL's statistics renewed after a tenth of the table's rows (autovacuum's own default
share), and not before ``ANALYZE_MIN_ROWS`` rows (an ANALYZE samples 30,000 rows: tens of milliseconds)."""
CSV_FORK_PAGES = 4
"""Pages from which a SQLite CSV export has every second page built by a forked process: SQLite's JSON reads
and Python's formatting of a page take one core (about 9 of the 12 µs a row at 10^6 rows of 10 parameters,
threads cannot share them: the driver gives up the GIL once a row), and the pages come back in order through
a pipe. Below it, the fork costs more than it saves."""
STREAMING_CACHE_KIB = 2048
"""SQLite's page cache while an export reads a run once, in order (``_streaming``): a page is read once, so the
64 MiB of ``Database``'s cache would only hold what is not read again, and at 10^7 rows both exporting processes
filled theirs (peak 199 MB, against 90 MB at 10^5)."""
T = TypeVar("T")
_OK = str(Status.OK)
_INSERT = f"INSERT INTO measurements ({', '.join(COLUMNS)}) "
_IDENTITY = ("device_id", "problem_id", "input_id", "config_key", "config_hash")
_UPDATE_SET = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c not in _IDENTITY)
_BY_HASH = "ON CONFLICT (device_id, problem_id, input_id, config_hash) "
_BY_KEY = "ON CONFLICT (device_id, problem_id, input_id, config_key) WHERE config_hash IS NULL "


def _upsert(conflict: str, replace: bool) -> str:
    """The conflict clause of a chunk's insert; a hash's row is replaced only by its own key (a concurrent
    writer's colliding key, which the check in ``_resolve`` cannot see, leaves the stored row alone)."""
    if not replace:
        return conflict + "DO NOTHING"
    return f"{conflict}DO UPDATE SET {_UPDATE_SET} WHERE measurements.config_key = excluded.config_key"


def _spill(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """``row`` stored by its key, with a NULL hash (its hash is another configuration's in the run)."""
    return (*row[:HASH], None, *row[HASH + 1:])


class Encoded(NamedTuple):
    """A chunk of database rows and what their parameters add to ``run_param_counts`` were every row new:
    counted where the rows were encoded (a bulk import's reader process), from the configurations at hand."""

    rows: list[tuple[Any, ...]]
    params: Counter


def encode_rows(run: RunKey, records: Iterable[Record] | RecordColumns) -> Encoded:
    """The database rows of ``records`` in ``run`` (plain tuples: they pickle, for a reader in another process)."""
    run = RunKey(*(int(x) for x in run))
    if isinstance(records, RecordColumns):
        rows = encode_block(run, records)
        if rows is not None:
            statuses = list(map(str, records.statuses))
            columns = zip(*records.values, strict=True)
            return Encoded(rows, _count_texts(run, _column_counts(records.names, columns, statuses)))
        records = records.records()
    records = list(records)
    rows = encode_columns(run, records)
    if rows is None:
        rows = [encode_fields(run, *r) for r in records]
    return Encoded(rows, _param_counts(run, [(r[0], str(r[1])) for r in records]))


def chunk_items(items: Iterable[Record | RecordColumns], size: int) -> Iterator[list[Record | RecordColumns]]:
    """A stream of records and blocks of them in chunks of ``size`` rows (the last one shorter), as ``chunks``
    would cut the records: a block is cut where a chunk ends."""
    chunk: list[Record | RecordColumns] = []
    count = 0
    for item in items:
        pieces: list[Any] = [item]
        if isinstance(item, RecordColumns):  # cut where this chunk ends, then every ``size``
            starts = [0, *range(size - count, len(item.values), size)]
            pieces = [item.cut(a, b) for a, b in zip(starts, [*starts[1:], len(item.values)], strict=True)]
        for piece in pieces:
            chunk.append(piece)
            count += len(piece.values) if isinstance(piece, RecordColumns) else 1
            if count >= size:
                yield taken(chunk)
                count = 0
    if chunk:
        yield chunk


def encode_chunk(run: RunKey, chunk: Iterable[Record | RecordColumns]) -> Encoded:
    """:func:`encode_rows` of one chunk of :func:`chunk_items`: each block at once, each run of records at once."""
    parts: list[Encoded] = []
    records: list[Record] = []
    for piece in chunk:
        if isinstance(piece, RecordColumns):
            if records:
                parts.append(encode_rows(run, records))
                records = []
            parts.append(encode_rows(run, piece))
        else:
            records.append(piece)
    if records or not parts:
        parts.append(encode_rows(run, records))
    return _joined(parts)


def encode_stream(run: RunKey, items: Iterable[Record | RecordColumns], size: int) -> Iterator[Encoded]:
    """:func:`encode_rows` of a stream of records and blocks of them, ``size`` rows a chunk (``chunk_items``)."""
    return map(partial(encode_chunk, run), chunk_items(items, size))


def _joined(parts: list[Encoded]) -> Encoded:
    if len(parts) == 1:
        return parts[0]
    counts: Counter = Counter()
    for part in parts:
        counts.update(part.params)
    return Encoded(list(chain.from_iterable(p.rows for p in parts)), counts)


def _param_counts(run: tuple[Any, ...], configs: list[tuple[Mapping[str, Any], str]]) -> Counter:
    """``{(device, problem, input, name, value as JSON text, status): n}`` of (configuration, status) pairs:
    a column at a time through ``Counter``'s C loop where the configurations share their parameters."""
    by_status: dict[str, list[Mapping[str, Any]]] = {}
    for config, status in configs:
        by_status.setdefault(status, []).append(config)
    counted: Counter = Counter()
    try:
        for status, group in by_status.items():
            names = tuple(group[0])
            if all(tuple(c) == names for c in group):
                columns = (list(map(itemgetter(name), group)) for name in names)
                counted.update(_column_counts(names, columns, [status] * len(group)))
            else:
                counted.update((name, type(v), v, status) for c in group for name, v in c.items())
    except TypeError:  # unhashable values (lists, objects): counted by their text
        return Counter((*run, name, orjson.dumps(v).decode(), status) for config, status in configs
                       for name, v in config.items())
    return _count_texts(run, counted)


def _column_counts(names: Sequence[str], columns: Iterable[Sequence[Any]], statuses: list[str]) -> Counter:
    """``{(name, type, value, status): n}`` of each parameter's column of values (``statuses``: each row's): a
    value with its type, as 1, 1.0 and True are equal keys. A column of one type is counted at once in C, as if
    every row had the first row's status, then the rows of other statuses (a few) are moved."""
    counted: Counter = Counter()
    first = statuses[0] if statuses else ""
    others: dict[str, list[int]] = {}
    for i, s in enumerate(statuses):
        if s != first:
            others.setdefault(s, []).append(i)
    for name, column in zip(names, columns, strict=True):
        kinds = set(map(type, column))
        if len(kinds) != 1:
            counted.update(zip(repeat(name), map(type, column), column, statuses, strict=True))
            continue
        kind = kinds.pop()
        values = Counter(column)
        for status, rows in others.items():  # each other status's values counted in C too, then moved
            moved = Counter(map(column.__getitem__, rows))
            values.subtract(moved)
            for v, n in moved.items():
                counted[(name, kind, v, status)] += n
        for v, n in values.items():
            if n:
                counted[(name, kind, v, first)] += n
    return counted


def _count_texts(run: tuple[Any, ...], counted: Counter) -> Counter:
    """``{(device, problem, input, name, value as JSON text, status): n}`` of ``_column_counts``' counts."""
    texts: Counter = Counter()
    for (name, _, v, status), n in counted.items():
        texts[(*run, name, orjson.dumps(v).decode(), status)] += n
    return texts


class Loader:
    """Where an import puts its encoded chunks (``Store.loading``); ``written``: the rows they made."""

    def __init__(self, put: Callable[[Encoded], int]) -> None:
        self.put, self.written = put, 0

    def add(self, chunk: Encoded) -> None:
        self.written += self.put(chunk)


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` as lists of ``size`` (the last one shorter)."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


class Store(BaseStore):
    """Where every measurement goes: ``Store("runs.db")``, ``Store("postgresql://host/db")`` or
    ``Store(":memory:")`` (private to this process). Usable as a context manager."""

    def __init__(self, url_or_path: str | Path = "adaptune.db", *, echo: bool = False) -> None:
        self.db = Database(url_or_path, echo=echo)
        self.label, self.path, self.dialect = self.db.label, self.db.path, self.db.dialect
        self._unanalyzed = 0  # rows this store has written since its last ANALYZE (PostgreSQL)
        self._analyzed_rows = 0
        self._copy_types: list[int] | None = None  # PostgreSQL: the binary COPY's column types, found once

    @property
    def retries(self) -> int:
        """Transactions run again after a transient failure (a dropped link, a serialisation failure)."""
        return self.db.retries

    @property
    def reconnects(self) -> int:
        """Dropped server connections replaced: a link killed while idle in the pool is replaced by the
        pre-ping without any retry, so a failover shows here even where ``retries`` stays 0."""
        return self.db.reconnects

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __repr__(self) -> str:
        return f"Store({self.label!r})"

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` ("ok" when sound); "ok" for server databases."""
        if self.dialect != "sqlite":
            return "ok"
        with self.db.read() as conn:
            return "\n".join(str(r[0]) for r in conn.exec_driver_sql("PRAGMA integrity_check"))

    # ------------------------------------------------------------------ registration (get-or-create)
    def _get_or_create(self, table: sa.Table, key: Mapping[str, Any], extra: Mapping[str, Any],
                       update_extra: bool) -> int:
        where = sa.and_(*(table.c[k] == v for k, v in key.items()))

        def once() -> int:
            with self.db.write() as conn:
                row = conn.execute(sa.select(table.c.id).where(where)).first()
                if row is not None:
                    if update_extra and extra:
                        conn.execute(table.update().where(table.c.id == row[0]).values(**extra))
                    return int(row[0])
                return int(conn.execute(table.insert().values(**key, **extra)).inserted_primary_key[0])

        for attempt in range(2):  # a server database may race another process: the loser finds the winner's row
            try:
                return self.db.transact(once)
            except StoreError as exc:
                if attempt or not isinstance(exc.__cause__, sa.exc.IntegrityError):
                    raise
        raise AssertionError("unreachable")

    def device(self, info: DeviceInfo) -> int:
        return self._get_or_create(S.devices, {"name": info.name, "platform": info.platform,
                                               "driver": info.driver or ""},
                                   {"properties": jsonable(info.properties)}, update_extra=True)

    def problem(self, name: str, source_hash: str, space_desc: Mapping[str, Any] | None = None) -> int:
        return self._get_or_create(S.problems, {"name": name, "source_hash": source_hash},
                                   {"space": jsonable(dict(space_desc or {}))}, update_extra=space_desc is not None)

    def input(self, problem_id: int, name: str, features: Mapping[str, Any] | None = None) -> int:
        return self._get_or_create(S.inputs, {"problem_id": int(problem_id), "name": name},
                                   {"features": jsonable(dict(features or {}))}, update_extra=features is not None)

    # ------------------------------------------------------------------ writes
    def _write_rows(self, conn: Connection, rows: list[tuple[Any, ...]], replace: bool,
                    params: Counter | None) -> None:
        """One chunk of encoded rows (distinct keys) in the open transaction: hash collisions resolved against
        the stored keys, then COPY on psycopg, else executemany; on SQLite the summary tables follow here."""
        rows, spilled, before = self._resolve(conn, rows)
        if self.dialect == "postgresql":  # run_counts and run_time_bins follow by statement trigger
            for part, conflict in ((rows, _BY_HASH), (spilled, _BY_KEY)):
                if part and not self._copy_rows(conn, part, _upsert(conflict, replace)):
                    conn.exec_driver_sql(f"{_INSERT}VALUES ({', '.join(['%s'] * len(COLUMNS))}) "
                                         f"{_upsert(conflict, replace)}", part)
            return
        deltas = _deltas(rows + spilled, before, replace, params)
        for part, conflict in ((rows, _BY_HASH), (spilled, _BY_KEY)):
            if part:
                conn.exec_driver_sql(f"{_INSERT}VALUES ({', '.join(['?'] * len(COLUMNS))}) "
                                     f"{_upsert(conflict, replace)}", part)
        _add_counts(conn, deltas)

    def _copy_rows(self, conn: Connection, rows: list[tuple[Any, ...]], conflict: str) -> bool:
        """PostgreSQL bulk write: COPY the chunk (binary) into a session-private staging table, then one upsert
        from it. Returns False when the driver is not psycopg 3 (then the caller uses executemany)."""
        raw = conn.connection.dbapi_connection
        cursor = raw.cursor() if raw is not None else None
        if cursor is None or not hasattr(cursor, "copy"):
            return False
        columns = ", ".join(COLUMNS)
        cursor.execute("CREATE TEMP TABLE IF NOT EXISTS adaptune_stage AS SELECT " + columns
                       + " FROM measurements WITH NO DATA")
        cursor.execute("TRUNCATE adaptune_stage")
        if self._copy_types is None:
            self._copy_types = binary_copy_types(conn)
        copy_binary(cursor, "adaptune_stage", rows, self._copy_types)
        cursor.execute(f"{_INSERT}SELECT {columns} FROM adaptune_stage {conflict}")
        return True

    def _resolve(self, conn: Connection, rows: list[tuple[Any, ...]]
                 ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], dict[tuple[Any, ...], tuple[str, Any]]]:
        """Split a chunk into rows keyed by hash and rows whose hash another stored key holds (stored with a
        NULL hash, found by key); with the status and time bin each (run, key) had before, for the counts.

        One indexed probe per batch of hashes; the keys stored with a NULL hash (normally none) only when the
        store holds any. Exact on SQLite, whose writer holds the write lock from here to the commit."""
        mark = "?" if self.dialect == "sqlite" else "%s"
        run_where = f"device_id = {mark} AND problem_id = {mark} AND input_id = {mark}"
        by_run: dict[tuple[int, int, int], list[tuple[Any, ...]]] = {}
        for row in rows:
            by_run.setdefault(row[:3], []).append(row)
        spills = conn.exec_driver_sql("SELECT 1 FROM measurements WHERE config_hash IS NULL LIMIT 1").first()
        keep: list[tuple[Any, ...]] = []
        spilled: list[tuple[Any, ...]] = []
        before: dict[tuple[Any, ...], tuple[str, Any]] = {}
        for run, run_rows in by_run.items():
            stored: dict[int, tuple[str, str, Any]] = {}
            for batch in chunks([r[HASH] for r in run_rows if r[HASH] is not None], LOOKUP_BATCH):
                found = conn.exec_driver_sql(
                    f"SELECT config_hash, config_key, status, time_bin FROM measurements WHERE {run_where} "
                    f"AND config_hash IN ({', '.join([mark] * len(batch))})", (*run, *batch))
                stored.update((h, (k, st, b)) for h, k, st, b in found)
            by_key: dict[str, tuple[str, Any]] = {}
            if spills is not None or any(r[HASH] is None for r in run_rows):
                for batch in chunks([r[KEY] for r in run_rows], LOOKUP_BATCH):
                    found = conn.exec_driver_sql(
                        f"SELECT config_key, status, time_bin FROM measurements WHERE {run_where} AND "
                        f"config_hash IS NULL AND config_key IN ({', '.join([mark] * len(batch))})", (*run, *batch))
                    by_key.update((k, (st, b)) for k, st, b in found)
            for row in run_rows:
                key, old = row[KEY], stored.get(row[HASH])
                if row[HASH] is not None and key not in by_key and (old is None or old[0] == key):
                    keep.append(row)
                    if old is not None:
                        before[(run, key)] = old[1:]
                else:  # its hash is another configuration's (or it was stored by key before): by key
                    spilled.append(_spill(row))
                    if key in by_key:
                        before[(run, key)] = by_key[key]
        return keep, spilled, before

    def _commit_chunk(self, rows: list[tuple[Any, ...]], replace: bool, params: Counter | None = None) -> int:
        """``params``: the rows' parameter counts from ``encode_rows`` (else counted here, where needed)."""
        by_key = {(row[:3], row[KEY]): row for row in rows}  # the last wins: PostgreSQL refuses a key
        distinct: list[tuple[Any, ...]] = []                    # twice in one statement
        hashes: dict[tuple[Any, ...], str] = {}
        for (run, key), row in by_key.items():  # two keys of one hash in the chunk: the second by key
            taken = hashes.setdefault((run, row[HASH]), key)
            distinct.append(row if taken == key else _spill(row))
        if len(distinct) < len(rows):  # a key twice in the chunk: counted again from the rows kept
            params = None

        def once() -> None:
            with self.db.write() as conn:
                self._write_rows(conn, distinct, replace, params)

        if distinct:
            self.db.transact(once)
            self._grown(len(distinct))
        return len(distinct)

    def _grown(self, rows: int) -> None:
        """PostgreSQL: ``ANALYZE measurements`` once this store has written ``ANALYZE_GROWTH`` of the table's rows
        since it last did (at least ``ANALYZE_MIN_ROWS``). A table that grew from nothing keeps the planner's
        empty-table estimates until autovacuum comes (a minute or more): meanwhile each chunk's probe of stored
        hashes scanned the run (3.5 ms at the first chunk of a 10^5-row import, 29-34 ms at the eighth; 4-6 ms
        with the statistics renewed)."""
        if self.dialect != "postgresql":
            return
        self._unanalyzed += rows
        if self._unanalyzed < max(ANALYZE_MIN_ROWS, ANALYZE_GROWTH * self._analyzed_rows):
            return
        with suppress(StoreError), self.db.guard("analyze"), self.db.engine.connect() as conn:  # (statistics only:
            # a failure here costs no data; SKIP_LOCKED: no wait behind another process's bulk load or VACUUM)
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE (SKIP_LOCKED) measurements")
            self._unanalyzed, self._analyzed_rows = 0, self.count()

    def put_many(self, device_id: int, problem_id: int, input_id: int, results: Iterable[Result]) -> int:
        run = RunKey(int(device_id), int(problem_id), int(input_id))
        return self._commit_chunk([encode(run, r) for r in results], replace=True)

    def put_stream(self, run: RunKey, results: Iterable[Result], *, chunk_size: int = DEFAULT_CHUNK,
                   replace: bool = True) -> int:
        run = RunKey(*(int(x) for x in run))
        return sum(self._commit_chunk([encode(run, r) for r in chunk], replace)
                   for chunk in chunks(results, chunk_size))

    def put_records(self, run: RunKey, records: Iterable[Record], *, chunk_size: int = DEFAULT_CHUNK,
                    replace: bool = True) -> int:
        """Rows encoded straight from the fields (``encode_rows``), one transaction a chunk."""
        return sum(self.put_encoded(encode_rows(run, chunk), replace=replace)
                   for chunk in chunks(records, chunk_size))

    def put_encoded(self, chunk: Encoded, *, replace: bool = True) -> int:
        """One chunk from :func:`encode_rows` (made in this process or another) in one transaction."""
        return self._commit_chunk(chunk.rows, replace, chunk.params)

    @contextmanager
    def loading(self, run: RunKey, expected_rows: int) -> Iterator[Loader]:
        """A loader of encoded chunks into ``run`` (``Loader.add``): a bulk load in one transaction
        (``bulk.py``) when about ``expected_rows`` go into an empty run of a store smaller than that, else
        one upsert transaction a chunk. ``Loader.written`` is final when the block ends."""
        run = RunKey(*(int(x) for x in run))
        if not worth_bulk(expected_rows, self.count(run.problem_id, run.device_id, run.input_id), self.count()):
            yield Loader(self.put_encoded)
            return
        with self.db.guard("bulk-load"), self.db.bulk_write() as conn:
            bulk = BulkLoad(conn, self.dialect, run, _param_counts, _add_counts)
            loader = Loader(lambda chunk: bulk.add(chunk.rows, chunk.params))
            yield loader  # an error (a bad file, a lost connection) rolls it all back: indexes, triggers, rows
            loader.written = bulk.finish()
        if self.dialect == "postgresql":  # after the commit: the grown table's statistics (plans made for an
            # empty table took 13 s for `show` at 10^7) and visibility map (index-only counts and pages)
            with self.db.guard("vacuum"), self.db.engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM (ANALYZE) measurements")

    def delete(self, problem_id: int | None = None, device_id: int | None = None, input_id: int | None = None,
               status: Status | str | None = None) -> int:
        where = _where(problem_id, device_id, input_id, status)

        def once() -> int:
            with self.db.write() as conn:
                deleted = int(conn.execute(M.delete().where(*where)).rowcount)
                if self.dialect == "sqlite":  # the summaries of what matched the filter go with it
                    runs = _count_where(problem_id, device_id, input_id)
                    if status is not None:
                        conn.execute(C.delete().where(*runs, C.c.status == str(Status(status))))
                        conn.execute(S.run_param_counts.delete().where(
                            *_count_where(problem_id, device_id, input_id, S.run_param_counts),
                            S.run_param_counts.c.status == str(Status(status))))
                    else:
                        conn.execute(C.delete().where(*runs))
                        conn.execute(S.run_param_counts.delete().where(
                            *_count_where(problem_id, device_id, input_id, S.run_param_counts)))
                    if status is None or str(Status(status)) == _OK:
                        conn.execute(S.run_time_bins.delete().where(
                            *_count_where(problem_id, device_id, input_id, S.run_time_bins)))
                return deleted

        return self.db.transact(once)

    # ------------------------------------------------------------------ point reads
    def _by_keys(self, run: RunKey, keys: list[str], columns: Sequence[Any]) -> list[Any]:
        """Rows of these config keys in ``run``: one probe of the hash index (and of the, normally empty, index
        of keys stored without their hash) per batch of keys; a row counts only if its stored key is the key."""
        found: list[Any] = []
        for batch in chunks(dict.fromkeys(keys), LOOKUP_BATCH):
            run_where = _where(run.problem_id, run.device_id, run.input_id)
            query = sa.union_all(*(sa.select(*columns, M.c.config_key.label("stored_key")).where(*run_where, match)
                                   for match in (M.c.config_hash.in_([config_hash(k) for k in batch]),
                                                 sa.and_(M.c.config_hash.is_(None), M.c.config_key.in_(batch)))))
            wanted = set(batch)
            found.extend(row for row in self.db.rows(query) if row.stored_key in wanted)
        return found

    def get_many(self, device_id: int, problem_id: int, input_id: int,
                 configs: Iterable[Mapping[str, Any]]) -> dict[str, Result]:
        keys = [fast_config_key(c) for c in configs]
        return {row.config_key: decode(row) for row in self._by_keys(RunKey(device_id, problem_id, input_id),
                                                                      keys, [M])}

    def stored_keys(self, run: RunKey, configs: Iterable[Mapping[str, Any]]) -> set[str]:
        keys = [fast_config_key(c) for c in configs]
        return {row[0] for row in self._by_keys(RunKey(*run), keys, [M.c.config_key])}

    # ------------------------------------------------------------------ streaming reads
    def _runs_matching(self, problem_id: int | None, device_id: int | None, input_id: int | None) -> list[RunKey]:
        query = (sa.select(C.c.device_id, C.c.problem_id, C.c.input_id)
                 .where(*_count_where(problem_id, device_id, input_id))
                 .group_by(C.c.device_id, C.c.problem_id, C.c.input_id).having(sa.func.sum(C.c.n) > 0)
                 .order_by(C.c.problem_id, C.c.device_id, C.c.input_id))
        return [RunKey(*map(int, row)) for row in self.db.rows(query)]

    def iter_results(self, problem_id: int | None = None, device_id: int | None = None,
                     input_id: int | None = None, status: Status | str | None = None, *,
                     chunk_size: int = DEFAULT_CHUNK) -> Iterator[StoredResult]:
        """Matching results, run by run (runs by problem, device, input id), each run in order of arrival.

        Keyset pagination over the (problem, device, input, id) index: every chunk is one range scan."""
        if problem_id is None and device_id is None and input_id is None:
            yield from self._keyset([], status, chunk_size)
            return
        for run in self._runs_matching(problem_id, device_id, input_id):
            yield from self._keyset(_where(run.problem_id, run.device_id, run.input_id), status, chunk_size)

    def iter_records(self, run: RunKey, *, chunk_size: int = DEFAULT_CHUNK) -> Iterator[Record]:
        """Keyset pages of the run's index (one range scan each) read as plain tuples: JSON columns as text,
        decoded by orjson; no Result, no row objects. Failures' NULL time reads as inf, JSON nulls as NaN."""
        mark = "?" if self.dialect == "sqlite" else "%s"
        text = "" if self.dialect == "sqlite" else "::text"
        query = (f"SELECT id, config{text}, status, time_ms, samples{text}, compile_ms, verify_ms, benchmark_ms, "
                 f"observers{text}, error, timestamp FROM measurements WHERE problem_id = {mark} AND "
                 f"device_id = {mark} AND input_id = {mark} AND id > {mark} ORDER BY id LIMIT {int(chunk_size)}")
        last, loads, inf, nan = 0, orjson.loads, math.inf, math.nan
        while True:
            with self.db.read() as conn:
                rows = conn.exec_driver_sql(query, (int(run.problem_id), int(run.device_id), int(run.input_id),
                                                    last)).all()
            for _, config, status, t, samples, c, v, b, observers, error, ts in rows:
                samples, observers = loads(samples), loads(observers)
                if None in samples:
                    samples = [nan if x is None else x for x in samples]
                if None in observers.values():
                    observers = {k: (nan if x is None else x) for k, x in observers.items()}
                yield (loads(config), status, inf if t is None else t, samples, c, v, b, observers, error or "", ts)
            if len(rows) < chunk_size:
                return
            last = rows[-1][0]

    def write_csv(self, run: RunKey, names: list[str], out: IO[str], *, page_rows: int = DEFAULT_CHUNK) -> int | None:
        """The run as CSV (a header, then a row per configuration: ``names``' values, then ``CSV_COLUMNS``) with
        the text built by the database (``csvsql.py``); the rows written, or None (nothing written) where a
        parameter's values are not of one kind SQL spells as Python does."""
        run = RunKey(*(int(x) for x in run))
        T = S.run_param_counts
        values = self.db.rows(sa.select(T.c.name, T.c.value, sa.func.sum(T.c.n))
                              .where(*_count_where(run.problem_id, run.device_id, run.input_id, T))
                              .group_by(T.c.name, T.c.value).having(sa.func.sum(T.c.n) > 0))
        kinds = csvsql.plan(names, values, self.count(run.problem_id, run.device_id, run.input_id), self.dialect)
        if kinds is None:
            return None
        if self.dialect == "postgresql":
            return self._copy_csv(csvsql.postgres_copy(names, kinds, run), out)
        csv.writer(out).writerow([*names, *csvsql.CSV_COLUMNS])
        pages = self._csv_pages(run, page_rows)
        text_of = partial(self._csv_text, run, csvsql.sqlite_select(names, kinds), csvsql.sqlite_array(names, kinds),
                          names)
        n = 0
        with ExitStack() as stack:
            texts: Iterator[tuple[int, str]] = map(text_of, pages)
            if len(pages) >= CSV_FORK_PAGES:  # every second page from a forked process (``CSV_FORK_PAGES``)
                others = stack.enter_context(closing(iter(Forked(partial(_after_fork, self.db,
                                                                         map(text_of, pages[1::2]))))))
                texts = _alternating(map(text_of, pages[0::2]), others)
            collect = stack.enter_context(chunked_collection())
            for rows, text in texts:
                out.write(text)
                n += rows
                del text
                collect()
        return n

    def _csv_pages(self, run: RunKey, rows: int) -> list[tuple[int, int]]:
        """A run's ids cut into pages of ``rows`` (low, high]: one walk of its index, page end to page end."""
        key = (run.problem_id, run.device_id, run.input_id)
        with self.db.read() as conn, _streaming(conn) as cursor:
            top = cursor.execute("SELECT max(id) FROM measurements WHERE problem_id = ? AND device_id = ? AND "
                                 "input_id = ?", key).fetchone()[0]
            if top is None:
                return []
            ends = [0]
            while True:
                found = cursor.execute(csvsql.SQLITE_PAGE_END, (*key, ends[-1], max(1, rows) - 1)).fetchone()
                if found is None or found[0] >= top:
                    ends.append(top)
                    return list(pairwise(ends))
                ends.append(found[0])

    def _csv_text(self, run: RunKey, query: str, array: bool, names: list[str], page: tuple[int, int]
                  ) -> tuple[int, str]:
        """One page's CSV lines (``csvsql.sqlite_select``, formatted by one template: no Row objects), its rows."""
        with self.db.read() as conn, _streaming(conn) as cursor:
            rows = cursor.execute(query, (run.problem_id, run.device_id, run.input_id, *page)).fetchall()
        text = "".join(map(csvsql.SQLITE_LINE.__mod__, rows))
        cells = itemgetter(0)
        if None in map(cells, rows) or (array and "null" in text and any("null" in c for c in map(cells, rows))):
            # a parameter gone since the plan (a concurrent writer)
            raise ValueError(f"a row of run {tuple(run)} lacks one of the parameters {names}")
        return len(rows), text

    def _copy_csv(self, statement: str, out: IO[str]) -> int | None:
        """PostgreSQL's COPY ... TO STDOUT written through to ``out``'s bytes; None without psycopg 3."""
        with self.db.read() as conn:
            raw = conn.connection.dbapi_connection
            cursor = raw.cursor() if raw is not None else None
            if cursor is None or not hasattr(cursor, "copy"):
                return None
            out.flush()
            with cursor.copy(statement) as copy:
                for data in copy:
                    out.buffer.write(data)
            return int(cursor.rowcount)

    def _keyset(self, where: list[Any], status: Status | str | None, chunk_size: int) -> Iterator[StoredResult]:
        if status is not None:
            where = [*where, M.c.status == str(Status(status))]
        # JSON columns as text: orjson decodes them faster than the driver's or SQLAlchemy's json
        columns = [sa.cast(c, sa.Text).label(c.name) if c.name in JSON_COLUMNS else c for c in M.c]
        last = 0
        while True:
            rows = self.db.rows(sa.select(*columns).where(*where, M.c.id > last).order_by(M.c.id).limit(chunk_size))
            for row in rows:
                yield decode_stored(row)
            if len(rows) < chunk_size:
                return
            last = rows[-1].id

    # ------------------------------------------------------------------ aggregates
    def count(self, problem_id: int | None = None, device_id: int | None = None, input_id: int | None = None,
              status: Status | str | None = None) -> int:
        where = _count_where(problem_id, device_id, input_id)
        if status is not None:
            where.append(C.c.status == str(Status(status)))
        return int(self.db.rows(sa.select(sa.func.coalesce(sa.func.sum(C.c.n), 0)).where(*where))[0][0])

    def status_counts(self, problem_id: int | None = None, device_id: int | None = None,
                      input_id: int | None = None) -> dict[str, int]:
        total = sa.func.sum(C.c.n)
        query = (sa.select(C.c.status, total).where(*_count_where(problem_id, device_id, input_id))
                 .group_by(C.c.status).having(total > 0).order_by(C.c.status))
        return {str(s): int(n) for s, n in self.db.rows(query)}

    def top(self, problem_id: int, k: int = 10, *, device_id: int | None = None,
            input_id: int | None = None) -> list[StoredResult]:
        """Each run's fastest ``k`` from its index, merged: k rows per run read, never a sort of the problem."""
        k = max(0, int(k))
        runs = self._runs_matching(problem_id, device_id, input_id)
        if not k or not runs:
            return []
        best: list[tuple[float, int]] = []
        for batch in chunks(runs, 100):
            scans = [sa.select(M.c.time_ms, M.c.id).where(*_run_where(run), M.c.time_ms.is_not(None))
                     .order_by(M.c.time_ms, M.c.id).limit(k).subquery() for run in batch]
            merged = sa.union_all(*(sa.select(scan) for scan in scans)) if len(scans) > 1 else sa.select(scans[0])
            best = sorted(best + [(float(t), int(i)) for t, i in self.db.rows(merged)])[:k]
        rows = {r.id: r for r in self.db.rows(sa.select(M).where(M.c.id.in_([i for _, i in best])))} if best else {}
        return [decode_stored(rows[i]) for _, i in best]

    def trajectory(self, run: RunKey) -> Trajectory:
        """Step from improvement to improvement: the next one is the earliest row after the current best that is
        faster than it (every earlier row is slower, by definition). Of the run's N successes, F are faster than
        the best (at most: the summary's time bins up to the best's); the step reads the cheaper of two index
        ranges: those F rows of the successes' index (their smallest id), or the rows after the best in order of
        arrival up to the first faster one (about N/F of them). The planner is told which (``id + 0`` hides the
        order of arrival), as its estimate of F can be far off: PostgreSQL walked all 10^7 rows of a run whose
        first row was its fastest (2.6 s)."""
        where = [*_run_where(run), M.c.time_ms.is_not(None)]
        first = self.db.rows(sa.select(M.c.id, M.c.time_ms).where(*where).order_by(M.c.id).limit(1))
        steps = [(int(first[0].id), float(first[0].time_ms))] if first else []
        T = S.run_time_bins
        bins = sorted((int(b), int(n)) for b, n in self.db.rows(sa.select(T.c.bin, T.c.n).where(
            *_count_where(run.problem_id, run.device_id, run.input_id, T), T.c.n > 0))) if steps else []
        successes = sum(n for _, n in bins)
        while steps:
            at, best = steps[-1]
            top = time_bin(best)
            few = top is not None and sum(n for b, n in bins if b <= top) ** 2 <= successes
            faster = sa.select(sa.func.min(M.c.id + 0 if few else M.c.id)).where(
                *where, M.c.time_ms < best, M.c.id > at).scalar_subquery()
            found = self.db.rows(sa.select(M.c.id, M.c.time_ms).where(M.c.id == faster))
            if not found:
                break
            steps.append((int(found[0].id), float(found[0].time_ms)))
        if not steps:
            return Trajectory(self.count(run.problem_id, run.device_id, run.input_id), [])
        numbers = self.db.rows(sa.select(*(sa.func.sum(sa.case((M.c.id <= i, 1), else_=0)) for i, _ in steps))
                               .where(*_run_where(run), M.c.id <= steps[-1][0]))[0]
        rows = {r.id: r for r in self.db.rows(sa.select(M.c.id, M.c.timestamp, M.c.config)
                                              .where(M.c.id.in_([i for i, _ in steps])))}
        points = [TrajectoryPoint(int(n), i, t, float(rows[i].timestamp), dict(_json_value(rows[i].config)))
                  for (i, t), n in zip(steps, numbers, strict=True)]
        return Trajectory(self.count(run.problem_id, run.device_id, run.input_id), points)

    def page(self, run: RunKey, *, offset: int = 0, limit: int = 50, order_by: str = "time_ms",
             descending: bool = False, status: Status | str | None = None,
             where: Mapping[str, Any] | None = None) -> Page:
        """Pages by time, by time filtered by one parameter value and by a numeric parameter read an index
        range plus the run's summary counts; other sorts and filters read the whole run."""
        offset, limit = max(0, int(offset)), max(0, int(limit))
        status = None if status is None else str(Status(status))
        base = _where(run.problem_id, run.device_id, run.input_id, status)
        if order_by == "time_ms" and not where:
            counts = self.status_counts(run.problem_id, run.device_id, run.input_id)
            return self._time_page(base, counts, status, offset, limit, descending)
        if order_by == "time_ms" and where and len(where) == 1:
            (name, value), = where.items()
            counts = self._value_counts(run, name, value)
            if counts is not None:
                return self._time_page([*base, self._param_text(name) == _json_text(value)], counts, status,
                                       offset, limit, descending)
        if not where and order_by not in PAGE_COLUMNS:
            page = self._parameter_page(run, order_by, base, status, offset, limit, descending)
            if page is not None:
                return page
        if where:
            base += [self._param_text(name) == _json_text(value) for name, value in where.items()]
            total = int(self.db.rows(sa.select(sa.func.count()).select_from(M).where(*base))[0][0])
        else:
            total = self.count(run.problem_id, run.device_id, run.input_id, status)
        keys = self._sort_keys(order_by)
        keys = [k.desc() if descending else k for k in keys]
        if order_by == "time_ms":
            keys.insert(0, M.c.time_ms.is_(None))
        query = sa.select(M).where(*base).order_by(*keys, M.c.id).offset(offset).limit(limit)
        return Page([decode_stored(r) for r in self.db.rows(query)], total, offset, limit)

    def _rows_by_id(self, ids_query: Any) -> list[Any]:
        """The rows whose ids ``ids_query`` lists, in its order: the offset is walked in the index alone, and
        only the page's rows are read from the table."""
        ids = [int(r[0]) for r in self.db.rows(ids_query)]
        if not ids:
            return []
        found = {r.id: r for r in self.db.rows(sa.select(M).where(M.c.id.in_(ids)))}
        return [found[i] for i in ids]

    def _time_page(self, base: list[Any], counts: Mapping[str, int], status: str | None, offset: int,
                   limit: int, descending: bool) -> Page:
        """Fastest (or slowest) first from the successes' index, then failures in order of arrival; ``counts``
        (by status) of what ``base`` matches says where the failures begin."""
        n_ok = counts.get(_OK, 0) if status in (None, _OK) else 0
        n_failed = sum(n for s, n in counts.items() if s != _OK and status in (None, s))
        rows: list[Any] = []
        if offset < n_ok and limit:
            key = M.c.time_ms.desc() if descending else M.c.time_ms
            rows += self._rows_by_id(sa.select(M.c.id).where(*base, M.c.time_ms.is_not(None))
                                     .order_by(key, M.c.id).offset(offset).limit(limit))
        if offset + limit > n_ok and n_failed:
            failures = (sa.select(M.c.id).where(*base, M.c.time_ms.is_(None)).order_by(M.c.id)
                        .offset(max(0, offset - n_ok)).limit(limit - len(rows)))
            rows += self._rows_by_id(failures)  # from ix_m_failed_run alone (covering): the offset walks failures
        return Page([decode_stored(r) for r in rows], n_ok + n_failed, offset, limit)

    def _value_counts(self, run: RunKey, name: str, value: Any) -> dict[str, int] | None:
        """Rows of the run by status whose parameter ``name`` is ``value`` (``run_param_counts``); None for a
        value whose JSON text the database may spell otherwise (floats, non-ASCII text): then a scan counts."""
        self._param_path(name)  # refuses the names every store refuses
        if not (type(value) in (int, bool) or (type(value) is str and value.isascii())):
            return None
        P = S.run_param_counts
        query = (sa.select(P.c.status, P.c.n).where(*_count_where(run.problem_id, run.device_id, run.input_id, P),
                                                    P.c.name == name, P.c.value == _json_text(value), P.c.n > 0))
        return {str(st): int(n) for st, n in self.db.rows(query)}

    def _parameter_page(self, run: RunKey, name: str, base: list[Any], status: str | None, offset: int,
                        limit: int, descending: bool) -> Page | None:
        """A page sorted by a numeric parameter: its values and their counts from ``run_param_counts``, then
        the rows of the values the page covers, each value's in order of arrival. None (a scan sorts) when a
        value is not a number, or two values are equal numbers (``1`` and ``1.0``)."""
        self._param_path(name)  # refuses the names every store refuses
        P = S.run_param_counts
        where = [*_count_where(run.problem_id, run.device_id, run.input_id, P), P.c.name == name]
        if status is not None:
            where.append(P.c.status == status)
        total_n = sa.func.sum(P.c.n)
        values = []
        for text, n in self.db.rows(sa.select(P.c.value, total_n).where(*where).group_by(P.c.value)
                                    .having(total_n > 0)):
            number = orjson.loads(text)
            if type(number) not in (int, float) or not math.isfinite(number):
                return None
            values.append((number, str(text), int(n)))
        if len({v for v, _, _ in values}) != len(values):
            return None
        values.sort(reverse=descending)
        rows: list[Any] = []
        skip = offset
        for _, text, n in values:
            if len(rows) >= limit:
                break
            if skip >= n:
                skip -= n
                continue
            rows += self._rows_by_id(sa.select(M.c.id).where(*base, self._param_text(name) == text)
                                     .order_by(M.c.id).offset(skip).limit(limit - len(rows)))
            skip = 0
        return Page([decode_stored(r) for r in rows], sum(n for _, _, n in values), offset, limit)

    def _sort_keys(self, order_by: str) -> list[Any]:
        if order_by in PAGE_COLUMNS:
            return [M.c[order_by]]
        number, text = self._param_sort(order_by)
        return [number.is_(None), number, text]

    @staticmethod
    def _param_path(name: str) -> str:
        """SQLite's JSON path of a parameter (bound as a value, never spliced into SQL)."""
        if not name or any(ch in name for ch in '"\\'):
            raise ValueError(f"cannot sort or filter by parameter {name!r}: parameter names with quotes "
                             "or backslashes are not supported here")
        return f'$."{name}"'

    def _param_text(self, name: str) -> Any:
        """The JSON text of a configuration parameter (``1``, ``"a"``, ``true``), for equality filters."""
        path = self._param_path(name)  # the same names on every store
        if self.dialect == "sqlite":
            return M.c.config.op("->", return_type=sa.Text)(sa.literal(path, sa.Text))
        return sa.cast(M.c.config.op("->")(sa.literal(name, sa.Text)), sa.Text)

    def _param_sort(self, name: str) -> tuple[Any, Any]:
        """(number or NULL, value as text) of a parameter: numbers sort numerically, then other values."""
        path = self._param_path(name)
        if self.dialect == "sqlite":
            number = sa.case((sa.func.json_type(M.c.config, path).in_(("integer", "real")),
                              sa.func.json_extract(M.c.config, path)))
            return number, sa.func.json_extract(M.c.config, path)
        element = M.c.config.op("->")(sa.literal(name, sa.Text))
        text = M.c.config.op("->>", return_type=sa.Text)(sa.literal(name, sa.Text))
        number = sa.case((sa.func.json_typeof(element) == "number", sa.cast(text, sa.Float)))
        return number, text

    def time_histogram(self, run: RunKey, bins: int = 40, *, log: bool = True) -> list[HistogramBin]:
        """Log-spaced bins add up the run's fine time bins (``run_time_bins``: a few hundred rows, however
        long the run), their inner edges on the fine grid (1/64 octave) nearest the even split; linear bins,
        or times not all positive, count the run's successes in one grouped pass."""
        bins = max(1, int(bins))
        where = [*_where(run.problem_id, run.device_id, run.input_id), M.c.time_ms.is_not(None)]
        ends = [self.db.rows(sa.select(M.c.time_ms).where(*where).order_by(key).limit(1))
                for key in (M.c.time_ms, M.c.time_ms.desc())]
        if not ends[0]:
            return []
        low, high = float(ends[0][0][0]), float(ends[1][0][0])
        if log and low > 0:
            return self._binned_histogram(run, low, high, bins)
        log = log and low > 0
        lo, hi = (math.log(low), math.log(high)) if log else (float(low), float(high))
        width = (hi - lo) / bins or 1.0
        value = sa.func.ln(M.c.time_ms) if log else M.c.time_ms
        index = sa.cast(sa.func.floor((value - lo) / width), sa.Integer)
        edge = (lambda j: math.exp(lo + j * width)) if log else (lambda j: lo + j * width)
        counts = [0] * bins
        for j, n in self.db.rows(sa.select(index, sa.func.count()).where(*where).group_by(index)):
            counts[min(bins - 1, max(0, int(j)))] += int(n)
        edges = [low, *(edge(j) for j in range(1, bins)), high]
        return [HistogramBin(float(edges[j]), float(edges[j + 1]), counts[j]) for j in range(bins)]

    def _binned_histogram(self, run: RunKey, low: float, high: float, bins: int) -> list[HistogramBin]:
        T = S.run_time_bins
        fine = BINS_PER_OCTAVE
        lo, hi = math.log2(low), math.log2(high)
        width = (hi - lo) / bins or 1.0
        counts = [0] * bins
        for g, n in self.db.rows(sa.select(T.c.bin, T.c.n).where(
                *_count_where(run.problem_id, run.device_id, run.input_id, T), T.c.n > 0)):
            counts[min(bins - 1, max(0, math.floor((int(g) / fine - lo) / width)))] += int(n)
        inner = [min(high, max(low, 2.0 ** (math.ceil((lo + j * width) * fine) / fine))) for j in range(1, bins)]
        edges = [low, *inner, high]
        return [HistogramBin(float(edges[j]), float(edges[j + 1]), counts[j]) for j in range(bins)]

    # ------------------------------------------------------------------ summaries
    def _run_best(self, runs: list[RunKey]) -> dict[RunKey, Any]:
        """The fastest success of each run (a row, or None): one index probe per run, 200 runs a query."""
        found: dict[RunKey, Any] = {}
        for batch in chunks(runs, 200):
            probes = [sa.select(M.c.id).where(*_run_where(run), M.c.time_ms.is_not(None))
                      .order_by(M.c.time_ms, M.c.id).limit(1).scalar_subquery().label(f"b{j}")
                      for j, run in enumerate(batch)]
            ids = [i for i in self.db.rows(sa.select(*probes))[0] if i is not None]
            for row in self.db.rows(sa.select(M).where(M.c.id.in_(ids))) if ids else []:
                found[RunKey(row.device_id, row.problem_id, row.input_id)] = row
        return {run: found.get(run) for run in runs}

    def _best_by(self, field: str, runs: list[RunKey]) -> dict[int, Any]:
        """The fastest success among the runs of each device (or input): the best of their runs' bests."""
        best: dict[int, Any] = {}
        for run, row in self._run_best(runs).items():
            key = getattr(run, field)
            if row is not None and (best.get(key) is None or (row.time_ms, row.id) < (best[key].time_ms,
                                                                                         best[key].id)):
                best[key] = row
        return best

    def _grouped_counts(self, column: str, where: list[Any]) -> dict[int, dict[str, int]]:
        total = sa.func.sum(C.c.n)
        query = (sa.select(C.c[column], C.c.status, total).where(*where)
                 .group_by(C.c[column], C.c.status).having(total > 0))
        counts: dict[int, dict[str, int]] = {}
        for key, status, n in self.db.rows(query):
            counts.setdefault(int(key), {})[str(status)] = int(n)
        return counts

    @staticmethod
    def _summaries(names: dict[int, str], counts: dict[int, dict[str, int]],
                   best: dict[int, Any]) -> list[GroupSummary]:
        out = []
        for key in sorted(counts):
            row = best.get(key)
            out.append(GroupSummary(key, names.get(key, ""), sum(counts[key].values()), counts[key],
                                    finite_or_inf(row.time_ms if row is not None else None),
                                    dict(_json_value(row.config)) if row is not None else None))
        return out

    def device_summaries(self, problem_id: int) -> list[GroupSummary]:
        counts = self._grouped_counts("device_id", [C.c.problem_id == int(problem_id)])
        best = self._best_by("device_id", self._runs_matching(problem_id, None, None))
        names = {int(r.id): r.name for r in self.db.rows(sa.select(S.devices.c.id, S.devices.c.name)
                                                         .where(S.devices.c.id.in_(list(counts))))}
        return self._summaries(names, counts, best)

    def input_summaries(self, problem_id: int, device_id: int | None = None) -> list[GroupSummary]:
        counts = self._grouped_counts("input_id", _count_where(problem_id, device_id, None))
        best = self._best_by("input_id", self._runs_matching(problem_id, device_id, None))
        names = {int(r.id): r.name for r in self.db.rows(sa.select(S.inputs.c.id, S.inputs.c.name)
                                                         .where(S.inputs.c.problem_id == int(problem_id)))}
        return self._summaries(names, counts, best)

    # ------------------------------------------------------------------ listings
    def devices(self) -> list[DeviceRow]:
        n = sa.select(C.c.device_id, sa.func.sum(C.c.n).label("n")).group_by(C.c.device_id).subquery()
        query = (sa.select(S.devices, sa.func.coalesce(n.c.n, 0).label("measurements"))
                 .outerjoin(n, n.c.device_id == S.devices.c.id).order_by(S.devices.c.id))
        return [DeviceRow(int(r.id), r.name, r.platform, r.driver, dict(r.properties or {}), int(r.measurements))
                for r in self.db.rows(query)]

    def problems(self, name: str | None = None) -> list[ProblemRow]:
        live = C.c.n > 0
        stats = (sa.select(C.c.problem_id, sa.func.sum(C.c.n).label("n"),
                           sa.func.sum(sa.case((C.c.status != _OK, C.c.n), else_=0)).label("failed"),
                           sa.func.count(sa.distinct(sa.case((live, C.c.device_id)))).label("devices"),
                           sa.func.count(sa.distinct(sa.case((live, C.c.input_id)))).label("inputs"))
                 .group_by(C.c.problem_id).subquery())
        p = S.problems
        query = (sa.select(p.c.id, p.c.name, p.c.source_hash, sa.func.coalesce(stats.c.n, 0).label("n"),
                           sa.func.coalesce(stats.c.failed, 0).label("failed"),
                           sa.func.coalesce(stats.c.devices, 0).label("devices"),
                           sa.func.coalesce(stats.c.inputs, 0).label("inputs"))
                 .outerjoin(stats, stats.c.problem_id == p.c.id).order_by(p.c.id))
        if name is not None:
            query = query.where(p.c.name == name)
        rows = self.db.rows(query)
        runs = [run for r in rows for run in self._runs_matching(r.id, None, None)] if rows else []
        best = self._best_by("problem_id", runs)
        return [ProblemRow(int(r.id), r.name, r.source_hash, int(r.n), int(r.failed), int(r.devices),
                           int(r.inputs), finite_or_inf(best[r.id].time_ms if r.id in best else None))
                for r in rows]

    def problem_info(self, problem_id: int) -> ProblemInfo:
        rows = self.db.rows(sa.select(S.problems).where(S.problems.c.id == int(problem_id)))
        if not rows:
            raise KeyError(f"no problem with id {problem_id} in {self.label}")
        r = rows[0]
        return ProblemInfo(int(r.id), r.name, r.source_hash, dict(r.space or {}))

    def inputs(self, problem_id: int | None = None) -> list[InputRow]:
        n = sa.select(C.c.input_id, sa.func.sum(C.c.n).label("n")).group_by(C.c.input_id).subquery()
        query = (sa.select(S.inputs, sa.func.coalesce(n.c.n, 0).label("measurements"))
                 .outerjoin(n, n.c.input_id == S.inputs.c.id).order_by(S.inputs.c.id))
        if problem_id is not None:
            query = query.where(S.inputs.c.problem_id == int(problem_id))
        return [InputRow(int(r.id), int(r.problem_id), r.name, dict(r.features or {}), int(r.measurements))
                for r in self.db.rows(query)]

    def runs(self, problem_id: int | None = None, device_id: int | None = None) -> list[RunSummary]:
        counts: dict[RunKey, dict[str, int]] = {}
        query = (sa.select(C.c.device_id, C.c.problem_id, C.c.input_id, C.c.status, C.c.n)
                 .where(*_count_where(problem_id, device_id, None), C.c.n > 0))
        for d, p, i, status, n in self.db.rows(query):
            counts.setdefault(RunKey(int(d), int(p), int(i)), {})[str(status)] = int(n)
        if not counts:
            return []
        best = self._run_best(sorted(counts))
        names = {}
        for table, column in ((S.devices, 0), (S.problems, 1), (S.inputs, 2)):
            ids = sorted({r[column] for r in counts})
            names[column] = {int(r.id): r.name for r in self.db.rows(sa.select(table.c.id, table.c.name)
                                                                     .where(table.c.id.in_(ids)))}
        return [RunSummary(run, names[0].get(run.device_id, ""), names[1].get(run.problem_id, ""),
                           names[2].get(run.input_id, ""), sum(c.values()), c,
                           finite_or_inf(best[run].time_ms if best[run] is not None else None))
                for run, c in sorted(counts.items(), key=lambda kv: (kv[0].problem_id, kv[0].device_id,
                                                                     kv[0].input_id))]

    def device_info(self, device_id: int) -> DeviceInfo:
        found = self.db.rows(sa.select(S.devices).where(S.devices.c.id == int(device_id)))
        if not found:
            raise KeyError(f"no device with id {device_id} in {self.label}")
        r = found[0]
        return DeviceInfo(name=r.name, platform=r.platform, driver=r.driver, properties=dict(r.properties or {}))

    # ------------------------------------------------------------------ live updates
    def latest_id(self) -> int:
        return int(self.db.rows(sa.select(sa.func.coalesce(sa.func.max(M.c.id), 0)))[0][0])

    def rows_since(self, after_id: int, *, limit: int = 1000, problem_id: int | None = None,
                   since_timestamp: float | None = None) -> list[StoredResult]:
        where = [M.c.id > int(after_id), *_where(problem_id, None, None)]
        if since_timestamp is not None:
            where.append(M.c.timestamp >= float(since_timestamp))
        query = sa.select(M).where(*where).order_by(M.c.id).limit(max(0, int(limit)))
        return [decode_stored(r) for r in self.db.rows(query)]


# ---------------------------------------------------------------------------------------------- helpers
def _where(problem_id: int | None, device_id: int | None, input_id: int | None,
           status: Status | str | None = None) -> list[Any]:
    clauses = [column == int(value) for column, value in
               ((M.c.problem_id, problem_id), (M.c.device_id, device_id), (M.c.input_id, input_id))
               if value is not None]
    if status is not None:
        clauses.append(M.c.status == str(Status(status)))
    return clauses


def _run_where(run: RunKey) -> list[Any]:
    return [M.c.problem_id == run.problem_id, M.c.device_id == run.device_id, M.c.input_id == run.input_id]


def _deltas(rows: list[tuple[Any, ...]], before: Mapping[tuple[Any, ...], tuple[str, Any]], replace: bool,
            params: Counter | None) -> tuple[Counter, Counter, Counter]:
    """How a chunk changes ``run_counts``, ``run_time_bins`` and ``run_param_counts`` (SQLite): new keys count
    once, replaced ones move from their old status and time bin to the new ones (a key names its configuration,
    so a replaced row's parameters stay what they were). ``params`` (the chunk's parameter counts were every
    row new) is corrected by the rows that were stored; without it the new rows are counted here."""
    counts: Counter = Counter()
    bins: Counter = Counter()
    added: list[tuple[Any, ...]] = []  # (run, configuration text, status, sign) to count here
    for row in rows:
        run = row[:3]
        old = before.get((run, row[KEY]))
        status = row[STATUS]
        if old is None:
            counts[(*run, status)] += 1
            if row[BIN] is not None:
                bins[(*run, row[BIN])] += 1
            if params is None:
                added.append((run, row[CONFIG], status, 1))
            continue
        if params is not None:  # counted as new where encoded: it was not
            added.append((run, row[CONFIG], status, -1))
        if replace and old[0] != status:
            counts[(*run, old[0])] -= 1
            counts[(*run, status)] += 1
            added += [(run, row[CONFIG], old[0], -1), (run, row[CONFIG], status, 1)]
        if replace and old[1] != row[BIN]:
            if old[1] is not None:
                bins[(*run, old[1])] -= 1
            if row[BIN] is not None:
                bins[(*run, row[BIN])] += 1
    texts: Counter = Counter(params or {})
    for sign in (1, -1):
        by_run: dict[tuple[Any, ...], list[tuple[Mapping[str, Any], str]]] = {}
        for run, config, status, s in added:
            if s == sign:
                by_run.setdefault(run, []).append((orjson.loads(config), status))
        for run, configs in by_run.items():
            for key, n in _param_counts(run, configs).items():
                texts[key] += sign * n
    return counts, bins, texts


_SUMMARIES = (("run_counts", "status"), ("run_time_bins", "bin"), ("run_param_counts", "name, value, status"))


def _add_counts(conn: Connection, deltas: tuple[Counter, ...]) -> None:
    """Add the deltas of :func:`_deltas` to the summary tables (SQLite's writer; a bulk load's, either store)."""
    mark = "?" if conn.dialect.name == "sqlite" else "%s"
    for (table, columns), changes in zip(_SUMMARIES, deltas, strict=True):
        rows = [(*key, n) for key, n in sorted(changes.items()) if n]
        if rows:
            marks = ", ".join([mark] * len(rows[0]))
            conn.exec_driver_sql(f"INSERT INTO {table} (device_id, problem_id, input_id, {columns}, n) "
                                 f"VALUES ({marks}) ON CONFLICT (device_id, problem_id, input_id, {columns}) "
                                 f"DO UPDATE SET n = {table}.n + excluded.n", rows)


def _count_where(problem_id: int | None, device_id: int | None, input_id: int | None,
                 table: sa.Table = C) -> list[Any]:
    return [column == int(value) for column, value in
            ((table.c.problem_id, problem_id), (table.c.device_id, device_id), (table.c.input_id, input_id))
            if value is not None]


def _json_value(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str) else value


def _json_text(value: Any) -> str:
    return json.dumps(jsonable(value), separators=(",", ":"))


@contextmanager
def _streaming(conn: Connection) -> Iterator[Any]:
    """A cursor of ``conn``'s SQLite connection with its page cache cut to ``STREAMING_CACHE_KIB``, restored after."""
    raw = conn.connection.dbapi_connection
    before = raw.execute("PRAGMA cache_size").fetchone()[0]
    raw.execute(f"PRAGMA cache_size=-{STREAMING_CACHE_KIB}")
    try:
        yield raw.cursor()
    finally:
        raw.execute(f"PRAGMA cache_size={int(before)}")


def _after_fork(db: Database, texts: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """The forked exporter's pages, on connections of its own (the parent's pooled ones are left alone)."""
    db.engine.dispose(close=False)
    yield from texts


def _alternating(first: Iterator[T], second: Iterator[T]) -> Iterator[T]:
    """One item of ``first``, one of ``second``, ... (``first`` is as long as ``second`` or one longer)."""
    for item in first:
        yield item
        other = next(second, None)
        if other is not None:
            yield other


def open_store(target: str | Path | BaseStore) -> BaseStore:
    """A Store from a path/URL, or the store itself (so APIs can take either)."""
    return target if isinstance(target, BaseStore) else Store(target)


__all__: Sequence[str] = ("MEMORY", "Store", "engine_url", "is_sqlite_file", "open_store")

