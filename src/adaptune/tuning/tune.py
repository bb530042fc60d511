"""Orchestration: a strategy proposes, the measurement worker measures, the store remembers.

Compilation is pipelined: the tuner asks the strategy a few configurations ahead and hands them to the
worker's compile pool (CUDA: to compile processes forked at the start, :mod:`adaptune.measure.compile_ahead`,
whose cubins the worker loads), so the device is never idle waiting for the compiler. Not on an OpenCL CPU
device, whose kernels run on the compiler's cores (:func:`~adaptune.measure.runners.shares_host_cores`): there
processes fill PoCL's kernel cache in bursts between timed runs (:mod:`adaptune.measure.cache_warm`).
Measurements already in the store for the same (device, problem, input, configuration) are reused, so an
interrupted run resumes.
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from typing import Any

from adaptune.backends.binary import binary_target_of
from adaptune.measure import Measurer, MeasureSettings
from adaptune.measure.cache_warm import KernelCacheWarmer
from adaptune.measure.compile_ahead import CompileAhead
from adaptune.measure.runners import OUT_OF_PROCESS_BUILDS, compile_threads, racing_time, shares_host_cores
from adaptune.progress import BestSoFarProgress
from adaptune.records import Result
from adaptune.search import make_strategy
from adaptune.store import Store
from adaptune.tuning.parallel import tune_with_executor
from adaptune.tuning.problem import Problem
from adaptune.tuning.report import TuneReport, report_from_results, warn_if_all_failed
from adaptune.tuning.resume import StoredLookup, adopt_known

#: configurations asked ahead per compile process, for a strategy that is not adaptive (brute force, random)
AHEAD_PER_PROCESS = 8


def tune(
    problem: Problem,
    strategy: str = "brute_force",
    *,
    max_evals: int | None = None,
    max_seconds: float | None = None,
    repeats: int = 7,
    warmup: int = 1,
    backend: str = "opencl",
    device: int | str | None = None,
    db: str = "adaptune.db",
    seed: int | None = None,
    progress: bool = True,
    timeout_s: float = 10.0,
    lookahead: int = 8,
    observers: tuple[str, ...] = (),
    verify: bool = True,
    strategy_options: dict[str, Any] | None = None,
    discard_factor: float | None = 2.0,
    hold_short_launches: bool = False,
    executor: Any = None,
    n_parallel: int | None = None,
    address: str | None = None,
) -> TuneReport:
    """Tune ``problem`` with ``strategy`` under a budget; every outcome is stored in ``db``.

    ``discard_factor`` races configurations against the best so far: one whose first two timed runs are more
    than that many times slower gets no further repeats (None: every configuration gets every repeat).
    ``hold_short_launches``: :attr:`MeasureSettings.hold_short_launches` (CUDA: short kernels timed without the
    host's enqueue latency; off by default, so times stay comparable with those of other runners).
    ``executor``: ``"ray"`` (a Ray cluster at ``address``, None = a local one), ``"local"`` (``n_parallel``
    local devices) or an ``adaptune.distributed`` Executor: measure on several workers at once, one search
    per device kind (docs/distributed.md); ``n_parallel`` alone means ``"local"`` with that many devices.
    """
    start = time.perf_counter()
    space = problem.space
    settings = MeasureSettings(repeats=repeats, warmup=warmup, timeout_s=timeout_s, verify=verify,
                               observers=tuple(observers), discard_factor=discard_factor,
                               hold_short_launches=hold_short_launches)
    if executor is not None or (n_parallel or 1) > 1:
        report = tune_with_executor(problem, strategy, executor=executor or "local", n_parallel=n_parallel,
                                    address=address, device=device, settings=settings, backend=backend, db=db,
                                    seed=seed, max_evals=max_evals, max_seconds=max_seconds,
                                    strategy_options=strategy_options, progress=progress, start=start)
        warn_if_all_failed(report)
        return report
    search = make_strategy(strategy, space, seed=seed, **(strategy_options or {}))
    total = min(len(space), max_evals) if max_evals else len(space)
    store = Store(db)
    ahead = CompileAhead.for_tuning(problem.spec, backend)
    warmer: KernelCacheWarmer | None = None
    first: list[int] = []
    if backend in OUT_OF_PROCESS_BUILDS and not search.adaptive:  # ask far enough ahead to keep every compiler busy
        lookahead = max(lookahead, 2 * compile_threads(backend))
    if ahead is not None:  # the first configurations are compiled while the worker opens the device
        if not search.adaptive:  # its proposals do not wait for results: compile further ahead
            lookahead = max(lookahead, AHEAD_PER_PROCESS * ahead.processes)
        first = _ask_ahead(search, lookahead)
        ahead.compile(space.config(i) for i in first)
    try:
        with Measurer(problem.spec, backend=backend, settings=settings, device=device,
                      started=ahead.start if ahead is not None else None) as measurer:
            phases = {"worker_ready": time.perf_counter() - start}
            info = measurer.device_info()
            if ahead is not None:
                ahead.expect(binary_target_of(info), info.properties.get("max_threads_per_block"))
            ids = (store.device(info),
                   store.problem(problem.name, problem.source_hash(), problem.space_description()))
            ids = (*ids, store.input(ids[1], problem.input_name, problem.features or None))
            adopt_known(store, ids, space, problem.known_results)
            warmer = KernelCacheWarmer.for_device(problem.spec, info, device)
            if warmer is not None and not search.adaptive:  # ask far enough ahead to fill a burst
                lookahead = max(lookahead, warmer.burst_size)
            session = _Session(space, measurer, store, ids, ahead, compile_ahead=not shares_host_cores(info),
                               warmer=warmer)
            results, reused = _search_loop(search, session, (max_evals, max_seconds), total, lookahead,
                                           progress, problem.name, start, first)
            default_result = _default_result(space, results, session)
            phases["search_done"] = time.perf_counter() - start
            worker_start, worker_stats = measurer.worker_start, measurer.stats(start=False)
            if ahead is not None:  # the compile processes' part: the time measuring waited for their binaries
                worker_stats["compile_processes"] = ahead.processes
                worker_stats["compile_ahead_waited_ms"] = round(ahead.waited_s * 1e3)
            if warmer is not None:
                worker_stats.update(warmer.stats())
    except KeyboardInterrupt:
        # The worker is already killed (Measurer.__exit__); every finished measurement is committed.
        print(f"\ninterrupted: the {_stored_count(store)} results in {db} are kept; run the same tuning "
              "again to resume without re-measuring them", file=sys.stderr)
        raise
    finally:
        if ahead is not None:
            ahead.close()
        if warmer is not None:
            warmer.close()
        store.close()

    report = report_from_results(problem, strategy, info, results, default_result, reused, start, db)
    report.phases, report.worker_start, report.worker_stats = phases, worker_start, worker_stats
    warn_if_all_failed(report)
    return report


def _stored_count(store: Store) -> int:
    try:
        return store.count()
    except Exception:  # noqa: BLE001 - only for the message; the data is safe either way
        return -1


def _ask_ahead(search: Any, n: int) -> list[int]:
    """The strategy's first ``n`` configurations, asked before the worker is ready (to compile them meanwhile)."""
    first: list[int] = []
    while len(first) < n and (index := search.ask()) is not None:
        first.append(index)
    return first


class _Session:
    """One tuning run's link to the worker and the store: stored results are reused, never re-measured.
    ``ahead``: compile processes (CUDA) that make what the worker would otherwise compile ahead itself;
    ``warmer``: processes that fill PoCL's kernel cache before the worker measures (an OpenCL CPU device)."""

    def __init__(self, space, measurer: Measurer, store: Store, ids: tuple[int, int, int],
                 ahead: CompileAhead | None = None, compile_ahead: bool = True,
                 warmer: KernelCacheWarmer | None = None) -> None:
        self.space, self.measurer, self.store, self.ids = space, measurer, store, ids
        self.stored = StoredLookup(store, ids, space, observed=bool(measurer.settings.observers))  # batch of asks
        self.best_ms = math.inf  # the incumbent, for racing (:func:`racing_time`)
        self.ahead = ahead
        self.compile_ahead = compile_ahead
        self.warmer = warmer

    def prefetch(self, indices: list[int]) -> None:
        configs = [self.space.config(i) for i in indices]
        self.stored.lookup(configs)
        fresh = [c for c in configs if self.stored.get(c) is None]
        if self.ahead is not None and self.ahead.usable:
            self.ahead.compile(fresh)
        elif self.warmer is not None:
            self.warmer.queue(fresh)
        elif self.compile_ahead:
            self.measurer.prefetch(fresh)

    def _hand_over(self, config: dict[str, Any]) -> None:
        """The binaries compiled ahead so far (this configuration's awaited) go to the worker; what did not
        compile there (and, once none can come, all that is outstanding) the worker compiles ahead itself, as
        without compile processes."""
        ahead = self.ahead
        if ahead is None or not ahead.usable:
            return
        items = ahead.binaries(config)
        self.stored.lookup(c for c, _ in items)  # the first ones were compiled before the store could be asked
        items = [(c, b) for c, b in items if self.stored.get(c) is None]
        if items:
            self.measurer.preload(items)
        left = ahead.left_to_worker()
        if left:
            self.measurer.prefetch(left)

    def measure(self, config: dict[str, Any]) -> tuple[Result, bool]:
        """The configuration's result, and whether it came from the store."""
        result = self.stored.get(config)
        reused = result is not None
        if result is None:
            self._hand_over(config)
            if self.warmer is not None:
                self.warmer.ready(config)
            result = self.measurer.measure(config, best_ms=self.best_ms)
            self.store.put(*self.ids, result)
            self.stored.add(config, result)
        self.best_ms = min(self.best_ms, racing_time(result))
        return result, reused


def _search_loop(search, session: _Session, budget: tuple[int | None, float | None], total: int,
                 lookahead: int, progress: bool, name: str, start: float,
                 first: list[int] | None = None) -> tuple[list[Result], int]:
    """Ask ahead (to compile ahead), measure in order, tell the strategy; stop at the budget. ``first``:
    configurations asked already (:func:`_ask_ahead`)."""
    max_evals, max_seconds = budget
    pending: deque[int] = deque(first or ())
    results: list[Result] = []
    reused = 0
    exhausted = False
    with BestSoFarProgress(f"tuning {name}", total, enabled=progress) as bar:
        if pending:
            session.prefetch(list(pending))
        while True:
            fresh: list[int] = []
            while not exhausted and len(pending) < lookahead:
                index = search.ask()
                if index is None:
                    exhausted = True
                    break
                pending.append(index)
                fresh.append(index)
            if fresh:
                session.prefetch(fresh)
            if not pending:
                break
            index = pending.popleft()
            result, was_stored = session.measure(session.space.config(index))
            reused += was_stored
            search.tell(index, result.time_ms)
            results.append(result)
            bar.advance(result.time_ms)
            if (max_evals and len(results) >= max_evals) or (
                    max_seconds and time.perf_counter() - start >= max_seconds):
                break
    return results, reused


def _default_result(space, results: list[Result], session: _Session) -> Result | None:
    """The default configuration's result: from the run if it was visited, else measured once more."""
    index = space.default_index()
    if index is None:
        return None
    config = space.config(index)
    key = space.key(config)
    for r in results:
        if space.key(r.config) == key:
            return r
    return session.measure(config)[0]
