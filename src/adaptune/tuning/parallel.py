"""Tuning on several workers at once (an executor: local devices or a Ray cluster), one search per device kind.

Workers are grouped by device kind (name, platform, driver): each kind gets its own strategy and its own
store key, so a mixed cluster tunes every kind separately and never mixes their timings. A strategy gets
as many asks in flight as its kind has workers (model-based strategies can fill the gaps of a batch
with a constant liar: ``strategy_options={"liar": "min"}``, docs/distributed.md). Every result goes to the
store the moment it arrives; results already stored are reused, so a driver that dies is resumed by running
it again. A worker that dies mid-measurement
costs a retry of that one configuration (recorded as a launch error after ``max_attempts``), never a loss.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from adaptune.distributed.executor import Completion, Executor, device_kind, make_executor
from adaptune.measure.runners import racing_time
from adaptune.progress import BestSoFarProgress
from adaptune.records import DeviceInfo, Result, Status
from adaptune.search import make_strategy
from adaptune.store import Store
from adaptune.tuning.report import report_from_results
from adaptune.tuning.resume import StoredLookup, adopt_known


@dataclass
class _Group:
    """One device kind: its workers, its search, its store ids and what it has measured."""

    info: DeviceInfo
    workers: list[int]
    search: Any
    ids: tuple[int, int, int]
    stored: StoredLookup
    results: list[Result] = field(default_factory=list)
    reused: int = 0
    best_ms: float = math.inf
    exhausted: bool = False
    done: bool = False
    ready: list[int] = field(default_factory=list)     # asked, already stored: told without measuring
    retry: list[dict[str, Any]] = field(default_factory=list)  # configs whose worker died: measured again
    inflight: dict[str, int] = field(default_factory=dict)  # config key -> index


def tune_on_executor(problem, executor: Executor, strategy: str, *, settings, backend: str, store: Store,
                     seed: int | None, max_evals: int | None, max_seconds: float | None,
                     strategy_options: dict[str, Any] | None, progress: bool, max_attempts: int = 3,
                     prefetch: int | None = None) -> list[tuple[DeviceInfo, list[Result], int, Any, dict]]:
    """Run one search per device kind over the executor's workers.

    Returns per kind (device, results in order of arrival, how many were reused, store ids, every stored
    result by space key).
    """
    start = time.perf_counter()
    space = problem.space
    infos = executor.start(problem.spec, backend, settings)
    kinds: dict[tuple[str, str, str], list[int]] = {}
    for w, info in enumerate(infos):
        kinds.setdefault(device_kind(info), []).append(w)
    problem_id = store.problem(problem.name, problem.source_hash(), problem.space_description())
    input_id = store.input(problem_id, problem.input_name, problem.features or None)
    options = dict(strategy_options or {})
    groups: list[_Group] = []
    for workers in kinds.values():
        info = infos[workers[0]]
        opts = dict(options)  # the constant liar is opt-in (strategy_options={"liar": "min"}): measured on
        # the recorded spaces it did not help `auto` with 2 workers (docs/distributed.md)
        ids = (store.device(info), problem_id, input_id)
        adopt_known(store, ids, space, problem.known_results)  # a Kernel Tuner cache: reused as stored results
        stored = StoredLookup(store, ids, space)
        groups.append(_Group(info, workers, make_strategy(strategy, space, seed=seed, **opts), ids, stored))
    if prefetch is None:  # asks that learn nothing: compile ahead (further when compile actors do it)
        prefetch = max(4, executor.lookahead) if strategy in ("brute_force", "random") else 0
    owner = {w: g for g in groups for w in g.workers}
    idle = {w for g in groups for w in g.workers}
    attempts: dict[tuple[int, str], int] = {}
    queued: dict[int, list[int]] = {w: [] for w in owner}  # asked ahead for a worker (compiled meanwhile)
    total = sum(min(len(space), max_evals) if max_evals else len(space) for _ in groups)

    def over_budget(g: _Group, committed: bool = False) -> bool:
        """Spent (results) or, with ``committed``, promised: in flight, stored-to-tell and asked ahead."""
        n = len(g.results)
        if committed:
            n += len(g.inflight) + len(g.ready) + sum(len(queued.get(w, ())) for w in g.workers)
        return bool((max_evals and n >= max_evals) or (max_seconds and time.perf_counter() - start >= max_seconds))

    def next_index(g: _Group) -> int | None:
        while not g.exhausted and not over_budget(g, committed=True):
            i = g.search.ask()
            if i is None:
                g.exhausted = True
                return None
            if g.stored.get(space.config(i)) is not None:  # measured before (resume): told without measuring
                g.ready.append(i)
                continue
            return i
        return None

    def record(g: _Group, index: int, result: Result, reused: bool, bar: BestSoFarProgress) -> None:
        g.search.tell(index, result.time_ms)
        g.results.append(result)
        g.reused += reused
        g.best_ms = min(g.best_ms, racing_time(result))
        bar.advance(result.time_ms)

    with BestSoFarProgress(f"tuning {problem.name} on {len(owner)} workers", total, enabled=progress) as bar:
        while True:
            for g in groups:  # stored results first: they cost nothing
                while g.ready and not over_budget(g):
                    i = g.ready.pop(0)
                    record(g, i, g.stored.get(space.config(i)), True, bar)
            for w in sorted(idle):
                g = owner[w]
                if g.retry:  # a configuration whose worker died: first in line
                    config = g.retry.pop(0)
                    executor.submit(w, config, g.best_ms if math.isfinite(g.best_ms) else None)
                    idle.discard(w)
                    continue
                while len(queued[w]) < 1 + prefetch:  # new asks within the budget (next_index checks it)
                    i = next_index(g)
                    if i is None:
                        break
                    queued[w].append(i)
                if not queued[w]:
                    continue
                i = queued[w].pop(0)
                if queued[w]:
                    executor.prefetch(w, [space.config(j) for j in queued[w]])
                config = space.config(i)
                g.inflight[space.key(config)] = i
                executor.submit(w, config, g.best_ms if math.isfinite(g.best_ms) else None)
                idle.discard(w)
            if not any(g.inflight for g in groups) and not any(queued.values()):
                if all(not g.ready or over_budget(g) for g in groups):
                    break
                continue
            for c in executor.wait(timeout=1.0):
                g = owner[c.worker]
                if c.kind == "dead" or (c.kind == "measured" and c.result is None):
                    # the worker died: what it was asked ahead goes to the others of its kind at once (left
                    # in its queue while it restarts, those asks were neither in flight nor measured, and a
                    # run could end without them)
                    for i in queued.get(c.worker, []):
                        config = space.config(i)
                        g.inflight[space.key(config)] = i
                        g.retry.append(config)
                    queued[c.worker] = []
                if c.kind == "dead":  # gone for good
                    g.workers.remove(c.worker)
                    del queued[c.worker]
                    if not g.workers:
                        raise RuntimeError(f"every measurement worker on {g.info.name} died ({c.error}); "
                                           "what was measured is stored: run again to resume")
                    continue
                _complete(c, g, space, store, attempts, max_attempts, idle, record, bar)
        for g in groups:  # the default configuration, for the speed-up over it: measured once if not visited
            index = space.default_index()
            if index is None or g.stored.get(space.config(index)) is not None:
                continue
            config = space.config(index)
            g.inflight[space.key(config)] = index
            executor.submit(g.workers[0], config, None)
            while g.inflight:
                for c in executor.wait(timeout=1.0):
                    _complete(c, owner[c.worker], space, store, attempts, max_attempts, idle,
                              lambda *a: None, bar)
                for w in g.workers:
                    if g.retry and w in idle:
                        executor.submit(w, g.retry.pop(0), None)
                        idle.discard(w)
    return [(g.info, g.results, g.reused, g.ids, g.stored) for g in groups]


def _complete(c: Completion, g: _Group, space, store: Store, attempts: dict, max_attempts: int,
              idle: set[int], record, bar) -> None:
    """Store and tell one completion; a dead worker's configuration is measured again (or recorded failed)."""
    if c.kind == "recovered":
        idle.add(c.worker)
        return
    if c.kind == "dead":
        return
    key = space.key(c.config)
    index = g.inflight[key]
    result = c.result
    if result is None:  # the worker died: it comes back as "recovered"; the config goes to the next idle one
        n = attempts[(id(g), key)] = attempts.get((id(g), key), 0) + 1
        if n < max_attempts:
            g.retry.append(c.config)
            return
        result = Result.failure(c.config, Status.LAUNCH_ERROR,
                                f"the measurement worker died {n} times on this configuration: {c.error}")
    else:
        idle.add(c.worker)
    del g.inflight[key]
    store.put(*g.ids, result)
    g.stored.add(c.config, result)
    record(g, index, result, False, bar)



def tune_with_executor(problem, strategy: str, *, executor: Any, n_parallel: int | None, address: str | None,
                       device: int | str, settings, backend: str, db: Any, seed: int | None,
                       max_evals: int | None, max_seconds: float | None,
                       strategy_options: dict[str, Any] | None, progress: bool, start: float):
    """``tune(..., executor=...)``: the report of the first device kind, the other kinds in ``.others``."""
    devices = None
    if executor == "local":  # CUDA: n GPUs from ``device`` on; OpenCL/Python: n workers on the one device
        base = int(device) if isinstance(device, int) or str(device).isdigit() else 0
        n = n_parallel or 1
        devices = list(range(base, base + n)) if backend == "cuda" else [device] * n
    ex = make_executor(executor, address=address, n_workers=n_parallel, devices=devices)
    store = Store(db)
    try:
        with ex:
            per_kind = tune_on_executor(problem, ex, strategy, settings=settings, backend=backend, store=store,
                                        seed=seed, max_evals=max_evals, max_seconds=max_seconds,
                                        strategy_options=strategy_options, progress=progress)
    finally:
        store.close()
    reports = []
    default_index = problem.space.default_index()
    for info, results, reused, _ids, stored in per_kind:
        default = None if default_index is None else stored.get(problem.space.config(default_index))
        reports.append(report_from_results(problem, strategy, info, results, default, reused, start, db))
    reports[0].others = reports[1:]
    return reports[0]
