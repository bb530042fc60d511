"""The store interface: every question tuning, resume, labelling, the CLI, the drop-ins and the dashboard ask.

One abstract base class, like Optuna's ``BaseStorage``: an implementation answers each query in its own
query language with the indexes it needs and returns only what was asked (a top-k returns k rows, a
count returns a number, a page returns one page), so that no caller ever loads a whole store into
memory. ``adaptune.store.Store`` implements it over SQLAlchemy for SQLite and PostgreSQL; the
conformance suite in ``tests/store/`` runs every query over both.

Vocabulary:

* a **run** is one (device, problem, input): everything measured of one kernel on one device for one
  input. :class:`RunKey` names it; its fields are in the order ``put(device_id, problem_id, input_id, ...)``
  takes them, so ``store.put(*run, result)`` works.
* a **configuration** is identified by its canonical key (``adaptune.store.config_key``): JSON with
  sorted keys, so dicts in any key order, with Python or NumPy values, name one row.
* stored rows carry an ``id`` that grows with insertion: the order of arrival (a run's evaluations), and
  the cursor of :meth:`BaseStore.rows_since`. Replacing a configuration's result keeps its id.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from adaptune.records import DeviceInfo, Result, Status

DEFAULT_CHUNK = 10_000
"""Rows per transaction (writes) and per round trip (streaming reads): bounded memory, few commits."""


Record = tuple[Any, ...]
"""A result given by its fields in :class:`Result`'s order (config, status, time_ms, samples, compile_ms,
verify_ms, benchmark_ms, observers, error, timestamp): what bulk imports hand to ``put_records``."""


def record_of(r: Result) -> Record:
    """The fields of ``r`` as a ``Record`` (``Result(*record)`` gives it back)."""
    return (r.config, r.status, r.time_ms, r.samples, r.compile_ms, r.verify_ms, r.benchmark_ms, r.observers,
            r.error, r.timestamp)


class RecordColumns(NamedTuple):
    """Many records of one configuration layout as columns: what a bulk import's column checks produce, encoded
    to rows without a configuration dict or a record tuple per entry (``rows.encode_block``). ``values`` holds
    each configuration's values in the order of ``names``; every other field is a column of ``Record``'s."""

    names: tuple[str, ...]
    values: list[tuple[Any, ...]]
    statuses: list[Status]
    times: list[float]
    samples: list[list[float]]
    compile_ms: list[float]
    verify_ms: list[float]
    benchmark_ms: list[float]
    observers: list[dict[str, float]]
    errors: list[str]
    stamps: list[float]

    def cut(self, start: int, stop: int) -> RecordColumns:
        """The entries ``start:stop`` of the block."""
        return RecordColumns(self.names, *(column[start:stop] for column in self[1:]))

    def records(self) -> list[Record]:
        """The same entries as ``Record`` tuples (a configuration dict each)."""
        configs = map(dict, map(zip, [self.names] * len(self.values), self.values))
        return list(zip(configs, *self[2:], strict=True))


# ------------------------------------------------------------------------------------------ records
class RunKey(NamedTuple):
    """One run: (device, problem, input) ids, in the order the write methods take them."""

    device_id: int
    problem_id: int
    input_id: int


@dataclass(frozen=True)
class StoredResult:
    """A result as stored: its row id (order of arrival) and its run, with the result itself."""

    id: int
    run: RunKey
    result: Result


@dataclass(frozen=True)
class DeviceRow:
    """A registered device and how many measurements it holds."""

    id: int
    name: str
    platform: str
    driver: str
    properties: dict[str, Any]
    measurements: int

    @property
    def info(self) -> DeviceInfo:
        return DeviceInfo(name=self.name, platform=self.platform, driver=self.driver,
                          properties=dict(self.properties))


@dataclass(frozen=True)
class ProblemRow:
    """A registered problem with its summary columns (the space description is in :meth:`problem_info`)."""

    id: int
    name: str
    source_hash: str
    measurements: int
    failed: int
    devices: int
    inputs: int
    best_time_ms: float  # inf when nothing succeeded


@dataclass(frozen=True)
class ProblemInfo:
    """One problem in full: identity and the space description it was stored with."""

    id: int
    name: str
    source_hash: str
    space: dict[str, Any]


@dataclass(frozen=True)
class InputRow:
    """A registered input of a problem, its features and how many measurements it holds."""

    id: int
    problem_id: int
    name: str
    features: dict[str, Any]
    measurements: int


@dataclass(frozen=True)
class RunSummary:
    """One run's summary columns: names, counts by status, best time (inf when nothing succeeded)."""

    run: RunKey
    device: str
    problem: str
    input: str
    measurements: int
    counts: dict[str, int]
    best_time_ms: float

    @property
    def failed(self) -> int:
        return self.measurements - self.counts.get(str(Status.OK), 0)


@dataclass(frozen=True)
class GroupSummary:
    """Summary of the measurements of a problem grouped by device or by input (``key`` is that id)."""

    key: int
    name: str
    measurements: int
    counts: dict[str, int]
    best_time_ms: float
    best_config: dict[str, Any] | None  # None when nothing succeeded


@dataclass(frozen=True)
class TrajectoryPoint:
    """An evaluation that improved a run's best-so-far: its 1-based number in order of arrival."""

    evaluation: int
    id: int
    best_ms: float
    timestamp: float
    config: dict[str, Any]


@dataclass(frozen=True)
class Trajectory:
    """A run's best-so-far: only the improving evaluations (the curve is a step function between them)."""

    evaluations: int
    points: list[TrajectoryPoint] = field(default_factory=list)


@dataclass(frozen=True)
class Page:
    """One page of a run's configurations and how many match the filter in total."""

    rows: list[StoredResult]
    total: int
    offset: int
    limit: int


@dataclass(frozen=True)
class HistogramBin:
    """Successful measurements with ``low <= time_ms < high`` (the last bin includes its high end)."""

    low: float
    high: float
    count: int


PAGE_COLUMNS = ("id", "time_ms", "status", "compile_ms", "timestamp")
"""Columns a page may be sorted by; any other name sorts by that configuration parameter."""


# ------------------------------------------------------------------------------------------ interface
class BaseStore(abc.ABC):
    """Where measurements are kept and every question about them is answered.

    Writes are idempotent per (run, configuration): writing a configuration again replaces its result.
    Reads return plain records (above) and :class:`~adaptune.records.Result` objects, never driver rows.
    ``label`` names the store in messages (a path, or a URL without its password).
    """

    label: str = "store"

    # -------------------------------------------------------------- lifecycle
    def close(self) -> None:  # noqa: B027 - stores without resources need no close
        """Release connections; the store is not used afterwards."""

    def __enter__(self) -> BaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- registration (get-or-create)
    @abc.abstractmethod
    def device(self, info: DeviceInfo) -> int:
        """Id of the device (name, platform, driver), registering it on first use; properties are updated."""

    @abc.abstractmethod
    def problem(self, name: str, source_hash: str, space_desc: Mapping[str, Any] | None = None) -> int:
        """Id of the problem (name, source hash); the space description is stored/updated when given."""

    @abc.abstractmethod
    def input(self, problem_id: int, name: str, features: Mapping[str, Any] | None = None) -> int:
        """Id of the named input of a problem; features are stored/updated when given."""

    def run(self, info: DeviceInfo, problem: str, source_hash: str, input_name: str, *,
            space_desc: Mapping[str, Any] | None = None, features: Mapping[str, Any] | None = None) -> RunKey:
        """The run of ``problem`` on ``info`` for ``input_name``, registering what is new."""
        problem_id = self.problem(problem, source_hash, space_desc)
        return RunKey(self.device(info), problem_id, self.input(problem_id, input_name, features))

    # -------------------------------------------------------------- writes
    @abc.abstractmethod
    def put_many(self, device_id: int, problem_id: int, input_id: int, results: Iterable[Result]) -> int:
        """Store results in one transaction (all or nothing), replacing earlier results of the same
        configurations (the last of repeated ones wins); returns how many distinct configurations."""

    def put(self, device_id: int, problem_id: int, input_id: int, result: Result) -> None:
        """Store one result in its own transaction."""
        self.put_many(device_id, problem_id, input_id, [result])

    @abc.abstractmethod
    def put_stream(self, run: RunKey, results: Iterable[Result], *, chunk_size: int = DEFAULT_CHUNK,
                   replace: bool = True) -> int:
        """Store an iterable of any length in bounded memory: one transaction per ``chunk_size`` results.

        A process killed in the middle leaves every committed chunk and nothing of the chunk in flight;
        running the same stream again completes it without duplicates. ``replace=False`` keeps results
        already stored (an import that must not overwrite newer measurements). Returns rows written.
        """

    def put_records(self, run: RunKey, records: Iterable[Record], *, chunk_size: int = DEFAULT_CHUNK,
                    replace: bool = True) -> int:
        """:meth:`put_stream` of results given by their fields (``Record``): a store may write them without
        building a :class:`Result` each (bulk imports of millions of entries)."""
        return self.put_stream(run, (Result(*r) for r in records), chunk_size=chunk_size, replace=replace)

    @abc.abstractmethod
    def delete(self, problem_id: int | None = None, device_id: int | None = None, input_id: int | None = None,
               status: Status | str | None = None) -> int:
        """Delete the matching measurements (e.g. all timeouts, to measure them again); returns how many."""

    # -------------------------------------------------------------- point reads (resume, labelling)
    @abc.abstractmethod
    def get_many(self, device_id: int, problem_id: int, input_id: int,
                 configs: Iterable[Mapping[str, Any]]) -> dict[str, Result]:
        """The stored results of these configurations, by config key (absent ones are left out).

        One indexed lookup per batch of keys, however large the run."""

    def get(self, device_id: int, problem_id: int, input_id: int, config: Mapping[str, Any]) -> Result | None:
        """The stored result of one configuration, or None."""
        return next(iter(self.get_many(device_id, problem_id, input_id, [config]).values()), None)

    @abc.abstractmethod
    def stored_keys(self, run: RunKey, configs: Iterable[Mapping[str, Any]]) -> set[str]:
        """Which of these configurations are already stored (their config keys): what a resumed tuner asks
        about each batch of its space before measuring, one indexed query per batch."""

    # -------------------------------------------------------------- streaming reads (export)
    @abc.abstractmethod
    def iter_results(self, problem_id: int | None = None, device_id: int | None = None,
                     input_id: int | None = None, status: Status | str | None = None, *,
                     chunk_size: int = DEFAULT_CHUNK) -> Iterator[StoredResult]:
        """Matching results in order of arrival, fetched ``chunk_size`` at a time (keyset pagination):
        memory stays flat however many match."""

    def iter_records(self, run: RunKey, *, chunk_size: int = DEFAULT_CHUNK) -> Iterator[Record]:
        """A run's results as fields (``Record``), in order of arrival: what a bulk export writes, without a
        :class:`Result` each where the store can give the fields directly."""
        for stored in self.iter_results(run.problem_id, run.device_id, run.input_id, chunk_size=chunk_size):
            yield record_of(stored.result)

    def results(self, problem_id: int | None = None, device_id: int | None = None, input_id: int | None = None,
                status: Status | str | None = None) -> list[Result]:
        """Every matching result in a list, in order of arrival. For small selections (one run of a tuning
        session); whole-store work streams :meth:`iter_results` instead."""
        return [s.result for s in self.iter_results(problem_id, device_id, input_id, status)]

    # -------------------------------------------------------------- aggregates (CLI, dashboard)
    @abc.abstractmethod
    def count(self, problem_id: int | None = None, device_id: int | None = None, input_id: int | None = None,
              status: Status | str | None = None) -> int:
        """How many measurements match."""

    @abc.abstractmethod
    def status_counts(self, problem_id: int | None = None, device_id: int | None = None,
                      input_id: int | None = None) -> dict[str, int]:
        """Measurements by status (only statuses that occur), for the whole store or a part of it."""

    @abc.abstractmethod
    def top(self, problem_id: int, k: int = 10, *, device_id: int | None = None,
            input_id: int | None = None) -> list[StoredResult]:
        """The ``k`` fastest successful results of a problem (on one device, for one input when given),
        fastest first; ties in order of arrival."""

    def best(self, device_id: int, problem_id: int, input_id: int) -> Result | None:
        """The fastest successful result of a run, or None."""
        found = self.top(problem_id, 1, device_id=device_id, input_id=input_id)
        return found[0].result if found else None

    @abc.abstractmethod
    def trajectory(self, run: RunKey) -> Trajectory:
        """A run's best-so-far in order of arrival: the evaluations that improved it."""

    @abc.abstractmethod
    def page(self, run: RunKey, *, offset: int = 0, limit: int = 50, order_by: str = "time_ms",
             descending: bool = False, status: Status | str | None = None,
             where: Mapping[str, Any] | None = None) -> Page:
        """One page of a run's configurations, sorted and filtered, with the total that match.

        ``order_by``: one of :data:`PAGE_COLUMNS` or a parameter name; failures (no time) sort last when
        sorted by time, ties by id. ``where``: parameter = value filters. Implementations answer the pages
        a dashboard asks for (by time; by time with one ``where`` value; by a numeric parameter) from
        per-run summaries and an index range; other combinations may read the whole run.
        """

    @abc.abstractmethod
    def time_histogram(self, run: RunKey, bins: int = 40, *, log: bool = True) -> list[HistogramBin]:
        """The spread of a run's successful times in ``bins`` bins (log-spaced by default)."""

    @abc.abstractmethod
    def device_summaries(self, problem_id: int) -> list[GroupSummary]:
        """Per device that measured the problem: counts by status, best time and its configuration."""

    @abc.abstractmethod
    def input_summaries(self, problem_id: int, device_id: int | None = None) -> list[GroupSummary]:
        """Per input of the problem (on one device when given): counts, best time and configuration."""

    # -------------------------------------------------------------- listings
    @abc.abstractmethod
    def devices(self) -> list[DeviceRow]:
        """Registered devices, by id."""

    @abc.abstractmethod
    def problems(self, name: str | None = None) -> list[ProblemRow]:
        """Registered problems (those called ``name`` when given) with summary columns, by id."""

    @abc.abstractmethod
    def problem_info(self, problem_id: int) -> ProblemInfo:
        """One problem with its space description; KeyError when there is none with that id."""

    @abc.abstractmethod
    def inputs(self, problem_id: int | None = None) -> list[InputRow]:
        """Registered inputs (of one problem, or all), by id."""

    @abc.abstractmethod
    def runs(self, problem_id: int | None = None, device_id: int | None = None) -> list[RunSummary]:
        """Runs that hold measurements (of one problem / device when given) with summary columns."""

    @abc.abstractmethod
    def device_info(self, device_id: int) -> DeviceInfo:
        """The device with that id; KeyError when there is none."""

    def measured_pairs(self, problem_id: int) -> list[tuple[int, int]]:
        """The (device_id, input_id) pairs that hold measurements of a problem."""
        return sorted((r.run.device_id, r.run.input_id) for r in self.runs(problem_id))

    # -------------------------------------------------------------- live updates (dashboard)
    @abc.abstractmethod
    def latest_id(self) -> int:
        """The highest row id stored (0 when empty): where a live view starts polling."""

    @abc.abstractmethod
    def rows_since(self, after_id: int, *, limit: int = 1000, problem_id: int | None = None,
                   since_timestamp: float | None = None) -> list[StoredResult]:
        """Rows with an id above ``after_id`` (and a timestamp at or after ``since_timestamp``), oldest first,
        at most ``limit``. Concurrent writers may commit a lower id after a higher one: a live view that must
        see every row polls from a little before its last id, or re-reads the run summaries."""


def finite_or_inf(value: float | None) -> float:
    """A stored time (NULL for failures and empty aggregates) as a float: inf for missing."""
    return math.inf if value is None else float(value)


__all__: Sequence[str] = (
    "DEFAULT_CHUNK", "PAGE_COLUMNS", "BaseStore", "DeviceRow", "GroupSummary", "HistogramBin", "InputRow",
    "Page", "ProblemInfo", "ProblemRow", "RunKey", "RunSummary", "StoredResult", "Trajectory",
    "TrajectoryPoint", "finite_or_inf",
)
