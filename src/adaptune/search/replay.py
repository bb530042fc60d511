"""Replay: answer a strategy from a recorded full search space instead of running kernels.

The valid configurations of a replayed space are exactly the recorded ones (the recorded space *is* the
tuning problem, whatever restrictions produced it). Recorded failures (Kernel Tuner's ``InvalidConfig``,
``CompilationFailedConfig``, ``RuntimeFailedConfig``; our non-ok statuses) are told back as failures and
count as evaluations, as Kernel Tuner's simulation mode counts them. A simulated clock charges each first
visit its recorded compile + verification + benchmark time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptune.search.base import Budget, Strategy, make_strategy

if TYPE_CHECKING:
    from adaptune.space import Space
    from adaptune.store import RecordedSpace


@dataclass
class Trace:
    """One replayed search: the configurations in the order they were evaluated and what they cost."""

    strategy: str
    indices: np.ndarray       # space indices, evaluation order
    values: np.ndarray        # objective per evaluation (inf = failed)
    sim_seconds: np.ndarray   # cumulative simulated seconds after each evaluation
    wall_seconds: float       # wall time spent in the strategy (ask + tell)

    @property
    def best_so_far(self) -> np.ndarray:
        return np.minimum.accumulate(self.values) if len(self.values) else self.values

    @property
    def best(self) -> float:
        return float(self.values.min()) if len(self.values) else math.inf

    def __len__(self) -> int:
        return len(self.indices)


class Replay:
    """A recorded space, ready to answer strategies: objective, failure and cost per valid index."""

    def __init__(self, space: Space, values: np.ndarray, cost_seconds: np.ndarray | None = None,
                 samples: list[list[float]] | None = None, name: str = "") -> None:
        self.space = space
        self.values = np.asarray(values, dtype=float)
        if len(self.values) != len(space):
            raise ValueError(f"replay {name!r}: {len(self.values)} values for {len(space)} configurations")
        self.cost_seconds = (np.zeros(len(space)) if cost_seconds is None
                             else np.asarray(cost_seconds, dtype=float))
        self.samples = samples
        self.name = name
        ok = np.isfinite(self.values)
        if not ok.any():
            raise ValueError(f"replay {name!r}: no configuration in the record succeeded")
        self.optimum = float(self.values[ok].min())

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_recorded(cls, recorded: RecordedSpace, name: str = "") -> Replay:
        """Build from a ``RecordedSpace`` (store layer): valid configurations = the recorded ones."""
        from adaptune.space import Space

        params = {k: list(v) for k, v in recorded.params.items()}
        names = list(params)
        by_key: dict[tuple, Any] = {}
        for r in recorded.results:
            by_key[tuple(r.config[k] for k in names)] = r
        keys = frozenset(by_key)

        def recorded_config(config: dict) -> bool:
            return tuple(config[k] for k in names) in keys

        space = Space(params, constraints=[recorded_config])
        values = np.full(len(space), math.inf)
        cost = np.zeros(len(space))
        samples: list[list[float]] = [[] for _ in range(len(space))]
        for i, config in enumerate(space.configs()):
            r = by_key[tuple(config[k] for k in names)]
            if r.ok and math.isfinite(r.time_ms):
                values[i] = r.time_ms
                samples[i] = [float(s) for s in r.samples if s is not None and math.isfinite(s)]
            cost[i] = (r.compile_ms + r.verify_ms + r.benchmark_ms) / 1000.0
        label = name or f"{recorded.kernel_name}@{recorded.device_name}"
        return cls(space, values, cost, samples, name=label)

    @classmethod
    def from_file(cls, path: str | Path) -> Replay:
        """Load a Kernel Tuner cache (.json, .json.gz, open form), a T4 file, or an adaptune store."""
        from adaptune.store import load_recorded

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"recorded space {path} does not exist")
        recorded = load_recorded(path)
        return cls.from_recorded(recorded, name=_space_name(path))

    # -- evaluation --------------------------------------------------------------------------------
    def evaluate(self, index: int, rng: np.random.Generator | None = None) -> float:
        """The recorded objective; with ``rng``, the median of a bootstrap draw of the recorded runs."""
        v = float(self.values[index])
        if rng is None or not math.isfinite(v) or not self.samples or not self.samples[index]:
            return v
        s = self.samples[index]
        return float(np.median(rng.choice(s, size=len(s), replace=True)))

    def run(self, strategy: Strategy | str, budget: Budget, seed: int | None = None,
            noise: bool = False, n_parallel: int = 1, **options: Any) -> Trace:
        """Run a strategy against the record until the budget or the space is exhausted.

        ``n_parallel`` > 1 replays a tuner with that many workers: that many asks are in flight, and
        each tell (oldest first) is followed by a new ask, as when every measurement takes as long.
        """
        if isinstance(strategy, str):
            strategy = make_strategy(strategy, self.space, seed=seed, **options)
        rng = np.random.default_rng(None if seed is None else seed + 7919) if noise else None
        tracker = budget.start()
        indices: list[int] = []
        values: list[float] = []
        sim: list[float] = []
        wall = 0.0
        inflight: list[int] = []
        while not tracker.exhausted():
            t0 = time.perf_counter()
            while len(inflight) < max(1, n_parallel):
                asked = strategy.ask()
                if asked is None:
                    break
                inflight.append(asked)
            wall += time.perf_counter() - t0
            if not inflight:
                break
            i = inflight.pop(0)
            v = self.evaluate(i, rng)
            t0 = time.perf_counter()
            strategy.tell(i, v)
            wall += time.perf_counter() - t0
            tracker.spend(1, float(self.cost_seconds[i]))
            indices.append(i)
            values.append(v)
            sim.append(tracker.sim_seconds)
        return Trace(strategy.name, np.asarray(indices, dtype=np.int64), np.asarray(values, dtype=float),
                     np.asarray(sim, dtype=float), wall)


def _space_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return f"{path.parent.name}/{name}"
