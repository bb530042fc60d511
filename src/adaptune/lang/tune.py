"""Work-group size tuning of generated element-wise kernels, stored in adaptune's ``Store`` and reused.

A kernel is identified by a hash of its generated text (which holds its shapes), so "tuned once per
device and shape class" is one stored input per (device, kernel). On a plan-cache miss, each element-wise
step is re-launched with every candidate size (kernels are pure: they only write fresh outputs, so a
re-launch is harmless), the timings go into the store, and the best size is kept in the plan. A later
process finds the stored results and measures nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

from adaptune.lang.fuse import Step
from adaptune.lang.runtime import Runtime
from adaptune.records import DeviceInfo, Result

CANDIDATES = (64, 128, 256, 512, 1024)


class WorkGroupTuner:
    """Pick each element-wise kernel's work-group size by measurement, once per device and kernel."""

    def __init__(self, db: Any = "adaptune.db", candidates: Sequence[int] = CANDIDATES, repeats: int = 5,
                 launches: int = 3) -> None:
        from adaptune.store import Store

        self.store = db if isinstance(db, Store) else Store(db)
        self.candidates = tuple(candidates)
        self.repeats, self.launches = repeats, launches
        self.measured = 0
        self.reused = 0
        self.report: list[dict[str, Any]] = []

    def tune(self, recorded: list[tuple[Step, list]], runtime: Runtime) -> None:
        device = self.store.device(DeviceInfo(runtime.name, f"lang:{runtime.kind}"))
        for step, args in recorded:
            if not step.items:
                continue
            digest = hashlib.sha1(step.source.encode()).hexdigest()[:16]
            problem = self.store.problem("lang.elementwise", digest, {"block": list(self.candidates)})
            inp = self.store.input(problem, f"n={step.items}", {"items": step.items})
            best = self.store.best(device, problem, inp)
            default = step.block
            if best is None:
                results = [self._measure(step, args, runtime, b) for b in self.candidates if b <= runtime.max_block]
                self.store.put_many(device, problem, inp, results)
                self.measured += len(results)
                best = min(results, key=lambda r: r.time_ms)
                times = {r.config["block"]: r.time_ms for r in results}
            else:
                self.reused += 1
                times = {r.config["block"]: r.time_ms for r in self.store.results(problem, device, inp)}
            block = int(best.config["block"])
            step.block = block
            step.grid = -(-step.items // (block * step.per_item))
            self.report.append({"kernel": digest, "what": step.what, "items": step.items, "best_block": block,
                                "default_block": default, "times_ms": times})

    def _measure(self, step: Step, args: list, runtime: Runtime, block: int) -> Result:
        grid = -(-step.items // (block * step.per_item))
        step.launch(grid, block, args)
        runtime.synchronize()
        samples = []
        for _ in range(self.repeats):
            t0 = time.perf_counter()
            for _ in range(self.launches):
                step.launch(grid, block, args)
            runtime.synchronize()
            samples.append((time.perf_counter() - t0) * 1e3 / self.launches)
        return Result.from_samples({"block": block}, samples)
