"""Importing result files into a store in bounded memory: Kernel Tuner caches (plain, gzip, the unterminated
"open" form), T4 files, CSV and other adaptune databases, read entry by entry and written a chunk at a time.

Each chunk is one transaction (``BaseStore.put_stream``), so an import killed half-way leaves every
committed chunk and nothing half-written; writes are upserts keyed by configuration, so running the same
import again completes it without duplicates. A large file going into an empty run of a smaller SQL store is
one bulk load instead (``store/bulk.py``): a killed one leaves nothing, and the re-run does it again. An entry that does not read (a bad value, a cut-off last
entry) is skipped and counted; a file that is not one of these formats at all is one FormatError.
"""

from __future__ import annotations

import csv
import itertools
import math
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, closing, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptune.records import Result, Status
from adaptune.store.base import DEFAULT_CHUNK, BaseStore, Record, RecordColumns, RunKey, record_of
from adaptune.store.db import Encoded, Loader, Store, chunk_items, chunks, encode_chunk
from adaptune.store.errors import FormatError
from adaptune.store.jsonstream import JsonStream, Truncated, compression_cut, open_text
from adaptune.store.kt_cache import EntryReader, kt_header
from adaptune.store.pipeline import Forked
from adaptune.store.recorded import RecordedSpace
from adaptune.store.sql import is_sqlite_file
from adaptune.store.t4 import t4_header, t4_result

CSV_RESULT_COLUMNS = ("status", "time_ms", "compile_ms", "verify_ms", "benchmark_ms", "samples", "timestamp",
                      "error")
"""Columns of an adaptune CSV that are not configuration parameters (``export`` writes them)."""
SHOWN_REASONS = 3


@dataclass
class ImportReport:
    """What one import did: rows written, entries skipped (and why, the first few), into which runs."""

    source: str
    format: str
    runs: list[RunKey] = field(default_factory=list)
    written: int = 0
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)
    kernel_name: str = ""
    device_name: str = ""

    def skip(self, reason: str) -> None:
        self.skipped += 1
        if len(self.reasons) < SHOWN_REASONS:
            self.reasons.append(reason)

    def summary(self) -> str:
        """One line for the user: what was imported and what was skipped."""
        what = f"{self.kernel_name} ({self.device_name})" if self.kernel_name else self.source
        text = f"imported {self.written} measurements of {what} from {self.format} file {self.source}"
        if self.skipped:
            text += f"; skipped {self.skipped} entr{'y' if self.skipped == 1 else 'ies'}: {'; '.join(self.reasons)}"
        return text


Progress = Callable[[int], None]
"""Called now and then with the number of characters (or rows) read so far."""


def import_file(store: BaseStore, path: str | Path, *, name: str | None = None, chunk_size: int = DEFAULT_CHUNK,
                progress: Progress | None = None) -> ImportReport:
    """Import the Kernel Tuner cache, T4 file, CSV file or adaptune database at ``path`` into ``store``.

    ``name`` names the problem (default: the kernel name the file gives, else the file's stem)."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise FormatError(f"{source}: no such file")
    if is_sqlite_file(path):
        return _import_store(store, path, chunk_size)
    with open_text(path) as text:
        try:
            first = text.read(1).lstrip() or text.read(64).lstrip()[:1]
        except (UnicodeDecodeError, EOFError, OSError) as exc:
            raise FormatError(f"{source}: cannot read as text ({exc})") from exc
    if first != "{":
        return _import_csv(store, path, name, chunk_size, progress)
    return _import_json(store, path, name, chunk_size, progress)


# ---------------------------------------------------------------------------------------------- JSON
def _members(js: JsonStream, stop: frozenset[str]) -> tuple[dict[str, Any], str | None]:
    """Top-level members up to the first one named in ``stop`` (left unread); (members, that name or None)."""
    header: dict[str, Any] = {}
    js.expect("{")
    if js.skip("}"):
        return header, None
    while True:
        key = js.key()
        if key in stop:
            return header, key
        header[key] = js.value()
        if not js.skip(","):
            js.expect("}")
            return header, None


def _skip_member(js: JsonStream, opening: str, closing: str) -> None:
    """Read past one big member item by item (a first pass that only wants the members after it)."""
    js.expect(opening)
    if js.skip(closing):
        return
    while True:
        if opening == "{":
            js.key()
        js.value()
        if not js.skip(","):
            js.expect(closing)
            return


def _header(path: Path, source: str) -> tuple[dict[str, Any], str]:
    """The members around the big one; a second pass reads those after it when what the header must hold
    (``_NEEDS``) is not before it."""
    with open_text(path) as text:
        js = JsonStream(text, source)
        try:
            header, big = _members(js, frozenset(_NEEDS))
        except Truncated as exc:
            raise FormatError(f"{source}: the file ends inside its header ({exc})") from exc
        try:
            if big is None:
                raise FormatError(f"{source}: not a Kernel Tuner cache or T4 file (no 'cache' or 'results')")
            if _NEEDS[big] in header:
                return header, big
            _skip_member(js, *("{}" if big == "cache" else "[]"))
            while js.skip(","):
                key = js.key()
                header[key] = js.value()
        except Truncated:
            pass  # an open cache: the header holds what it holds
    return header, big


_NEEDS = {"cache": "tune_params_keys", "results": "metadata"}
"""The big member of each format, and the header member its items cannot be read without."""


def _import_json(store: BaseStore, path: Path, name: str | None, chunk_size: int,
                 progress: Progress | None) -> ImportReport:
    source = str(path)
    header, big = _header(path, source)
    if big == "cache":
        space, names = kt_header(header, source, {"format": "kernel_tuner", "source": source})
        report = ImportReport(source, "Kernel Tuner cache")
        scale = 1.0
    else:
        space, scale = t4_header(header, source)
        space.objective = space.objective or "time"
        names = space.names
        report = ImportReport(source, "T4")
    report.kernel_name, report.device_name = space.kernel_name, space.device_name
    name = name or space.kernel_name or path.stem
    seen: dict[str, dict[Any, None]] = {}  # parameter values met, for a header that lists none
    run = space.register(store, name)
    report.runs.append(run)

    sql = isinstance(store, Store)

    def read() -> Generator[tuple[Any, int], None, tuple[int, list[str], dict[str, dict[Any, None]]]]:
        """Decode and validate the entries (for a SQL store encode a share of the chunks, ``ReaderShare``): (chunk,
        characters read) at a time."""
        with open_text(path) as text:
            js = JsonStream(text, source)
            _members(js, frozenset({big}))
            items: Iterator[Any] = (_kt_items(js, space, names, report, blocks=sql and bool(space.params))
                                    if big == "cache" else _t4_items(js, names, scale, report))
            if not space.params:
                items = _noting_values(items, seen)
            pieces: Iterator[Any] = (map(ReaderShare(run, lambda: reader.blocked), chunk_items(items, chunk_size))
                                     if sql else chunks(items, chunk_size))
            yield from map(lambda chunk: (chunk, js.offset), pieces)  # no name here holds a chunk handed on
            cut = compression_cut(text)
            if cut and not report.skipped:  # cut between two entries: what followed is lost, unseen
                report.skip(f"{cut}; the entries after it are missing")
        return report.skipped, report.reasons, seen

    reader = Forked(read)  # a SQL store writes while a second process reads the next chunk
    with closing(iter(reader)) as pieces:  # closed on an error too: the reader ends, the collector resumes
        first = next(pieces, None)
        with _loader(store, run, path, first) as loader:
            for chunk, offset in itertools.chain([first] if first is not None else [], pieces):
                loader.add(encode_chunk(run, chunk) if sql and not isinstance(chunk, Encoded) else chunk)
                del chunk  # written: freed now, not scanned by the next collection (``chunked_collection``)
                if progress is not None:
                    progress(offset)
    report.written = loader.written
    report.skipped, report.reasons, seen = reader.result
    if not space.params and seen:  # the space description gets the values the entries hold
        space.params = {n: sorted(v, key=lambda x: (str(type(x)), x)) for n, v in seen.items()}
        space.register(store, name)
    return report


class ReaderShare:
    """Which chunks the reader process encodes (``encode_chunk``) before handing them on; the writer encodes
    the others. Decoding and checking a row take the reader ~10 µs, encoding it ~5 µs and SQLite's insert ~5.5,
    PostgreSQL's COPY less on the client, and each side's share of the CPU moves with the store's size and the
    host: a fixed share left one side waiting (one chunk in three, SQLite at 10^6: the writer waited 5.3-5.8 s
    for the reader, which waited 1.8-1.9 s). So the reader encodes a chunk when it has waited for the writer,
    since it last did, at least as long as encoding one took it (its credit, ``Forked.blocked``): the first chunk
    (which measures the cost), then only while the writer is the slower side."""

    def __init__(self, run: RunKey, waited: Callable[[], float]) -> None:
        self.run, self.waited = run, waited
        self.cost: float | None = None
        self.credit = 0.0
        self._seen = 0.0

    def __call__(self, chunk: list[Record | RecordColumns]) -> Encoded | list[Any]:
        waited = self.waited()
        self.credit += waited - self._seen
        self._seen = waited
        if self.cost is None or self.credit >= self.cost:
            start = time.process_time()
            encoded = encode_chunk(self.run, chunk)
            self.cost = time.process_time() - start
            self.credit = max(0.0, self.credit - self.cost)
            return encoded
        return _as_handed(chunk)


def _as_handed(chunk: list[Record | RecordColumns]) -> list[Any]:
    """A chunk handed on as it is: blocks with their statuses as text (what encoding reads; an enum member
    pickles at a few µs a row)."""
    return [piece._replace(statuses=list(map(str, piece.statuses))) if isinstance(piece, RecordColumns) else piece
            for piece in chunk]


def _rows_in(chunk: Encoded | list[Any]) -> int:
    if isinstance(chunk, Encoded):
        return len(chunk.rows)
    return sum(len(piece.values) if isinstance(piece, RecordColumns) else 1 for piece in chunk)


def _loader(store: BaseStore, run: RunKey, path: Path, first: tuple[Any, int] | None
            ) -> AbstractContextManager[Loader]:
    """Where the chunks go: a SQL store's loader (a bulk load when the file, estimated from its size and the
    characters its first chunk took, is large next to the store), else ``put_records`` a chunk at a time."""
    if isinstance(store, Store):
        expected = 0
        if first is not None and first[1] > 0:
            expected = int(_rows_in(first[0]) * path.stat().st_size / first[1])
        return store.loading(run, expected)
    return nullcontext(Loader(lambda records: store.put_records(run, records)))


def _kt_items(js: JsonStream, space: RecordedSpace, names: list[str], report: ImportReport, *,
              blocks: bool = False) -> Iterator[Record | RecordColumns]:
    """The cache's entries as Records; with ``blocks``, a block of entries that the column checks vouch for
    as one :class:`RecordColumns` (for ``encode_chunk``: no record per entry)."""
    reader = EntryReader(names, space.params or None)
    dropped: set[str] = set()
    js.expect("{")
    try:
        while js.peek() not in ("}", ""):  # "": an open cache that ends after a complete entry
            block = js.line_members()
            if block is not None:  # the common layout, one entry a line: many entries a decode, checked a column
                checked = reader.block(block, dropped) if blocks else reader.many(block, dropped)  # at a time
                if isinstance(checked, RecordColumns):
                    yield checked
                    continue
                for record in checked:
                    if isinstance(record, FormatError):
                        report.skip(str(record))
                    else:
                        yield record
                continue
            key = js.key()
            entry = js.value()
            try:
                yield reader.fields(key, entry, f"entry {key!r}", dropped)
            except FormatError as exc:
                report.skip(str(exc))
            if not js.skip(",") and js.peek() not in ("}", ""):
                raise FormatError(f"{report.source}: expected ',' or '}}' after entry {key!r} at character "
                                  f"{js.offset}")
    except Truncated as exc:
        report.skip(f"the file ends inside an entry: an unterminated cache ({exc})")


def _t4_items(js: JsonStream, names: list[str], scale: float, report: ImportReport) -> Iterator[Record]:
    dropped: set[str] = set()
    js.expect("[")
    i = 0
    try:
        while js.peek() not in ("]", ""):
            item = js.value()
            try:
                result = t4_result(item, scale, f"results[{i}]", dropped)
                if names and set(result.config) != set(names):
                    raise FormatError(f"results[{i}] configuration has parameters {list(result.config)}, "
                                      f"expected {names}")
                if names:
                    result.config = {n: result.config[n] for n in names}
                yield record_of(result)
            except FormatError as exc:
                report.skip(str(exc))
            i += 1
            if not js.skip(",") and js.peek() not in ("]", ""):
                raise FormatError(f"{report.source}: expected ',' or ']' after results[{i - 1}]")
    except Truncated as exc:
        report.skip(f"the file ends inside a result ({exc})")


def _noting_values(items: Iterator[Record], seen: dict[str, dict[Any, None]]) -> Iterator[Record]:
    for record in items:
        for n, v in record[0].items():
            if isinstance(v, int | float | str | bool) or v is None:
                seen.setdefault(n, {})[v] = None
        yield record


# ---------------------------------------------------------------------------------------------- CSV
def _cell(text: str) -> Any:
    """A CSV cell as the value it spells: int, float, bool, else the text."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return {"True": True, "False": False}.get(text, text)


def _csv_result(row: dict[str, str], names: list[str], where: str) -> Result:
    try:
        status = Status(row.get("status") or "ok")
    except ValueError:
        raise FormatError(f"{where}: status {row.get('status')!r} is not one of {[str(s) for s in Status]}") from None
    try:
        time_ms = float(row["time_ms"]) if row.get("time_ms") else math.inf
        samples = [float(s) for s in (row.get("samples") or "").split()]
        extra = {c: float(row[c]) for c in ("compile_ms", "verify_ms", "benchmark_ms", "timestamp") if row.get(c)}
    except ValueError as exc:
        raise FormatError(f"{where}: {exc}") from None
    if status == Status.OK and not math.isfinite(time_ms):
        raise FormatError(f"{where}: status ok without a time")
    return Result(config={n: _cell(row[n]) for n in names}, status=status,
                  time_ms=time_ms if status == Status.OK else math.inf, samples=samples,
                  error=row.get("error") or "", **extra)


def _import_csv(store: BaseStore, path: Path, name: str | None, chunk_size: int,
                progress: Progress | None) -> ImportReport:
    source = str(path)
    report = ImportReport(source, "CSV", kernel_name=name or path.stem, device_name="unknown")
    with open_text(path) as text:
        reader = csv.DictReader(text)
        columns = list(reader.fieldnames or [])
        names = [c for c in columns if c not in CSV_RESULT_COLUMNS]
        if "time_ms" not in columns or not names:
            raise FormatError(f"{source}: not a results file (a CSV needs a 'time_ms' column and parameter "
                              "columns; a JSON file starts with '{')")
        space = RecordedSpace(device_name="unknown", kernel_name=report.kernel_name, problem_size=None,
                              params={}, results=[], meta={"format": "csv", "source": source})
        seen: dict[str, dict[Any, None]] = {}
        run = space.register(store, report.kernel_name)
        report.runs.append(run)

        def results() -> Iterator[Record]:
            for line, row in enumerate(reader, 2):
                if None in row or any(v is None for v in row.values()):
                    report.skip(f"line {line}: {len(columns)} columns expected")
                    continue
                try:
                    yield record_of(_csv_result(row, names, f"line {line}"))
                except FormatError as exc:
                    report.skip(str(exc))
                if progress is not None and line % 10_000 == 0:
                    progress(line)

        try:
            report.written = store.put_records(run, _noting_values(results(), seen), chunk_size=chunk_size)
        except csv.Error as exc:
            raise FormatError(f"{source}: malformed CSV at line {reader.line_num}: {exc}") from exc
    space.params = {n: sorted(seen.get(n, {}), key=lambda x: (str(type(x)), x)) for n in names}
    space.register(store, report.kernel_name)
    return report


# ---------------------------------------------------------------------------------------------- database
def _import_store(store: BaseStore, path: Path, chunk_size: int) -> ImportReport:
    """Every run of another adaptune database, streamed run by run."""
    report = ImportReport(str(path), "adaptune database")
    with Store(path) as other:
        devices = {d.id: d.info for d in other.devices()}
        for summary in other.runs():
            d, p, i = summary.run
            problem = other.problem_info(p)
            inp = next(x for x in other.inputs(p) if x.id == i)
            run = store.run(devices[d], problem.name, problem.source_hash, inp.name, space_desc=problem.space,
                            features=inp.features)
            report.runs.append(run)
            report.written += store.put_stream(run, (s.result for s in other.iter_results(p, d, i)),
                                               chunk_size=chunk_size)
    return report
