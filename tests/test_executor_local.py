"""The parallel driver over a LocalExecutor (no Ray needed): real measurement worker processes, real SQLite.

A worker that dies is simulated at the executor's boundary (its completion comes back without a result and
it stays away for a while, as a restarting Ray actor does); everything behind it is real.
"""

from __future__ import annotations

import threading

from adaptune.distributed import LocalExecutor
from adaptune.distributed.executor import Completion
from adaptune.measure import CallableSpec
from adaptune.records import Status
from adaptune.space import Space
from adaptune.store import Store
from adaptune.tuning import Problem, tune


def _quick(config, *args):
    import time as _t

    _t.sleep(0.05)


class _WorkerDiesOnce(LocalExecutor):
    """Worker 0 'dies' on its second configuration and comes back only after ``away_s`` seconds."""

    def __init__(self, away_s: float) -> None:
        super().__init__(devices=["cpu", "cpu"])
        self.away_s, self.given, self.lost = away_s, 0, 0

    def submit(self, worker, config, best_ms=None):
        if worker == 0:
            self.given += 1
            if self.given == 2:
                self.lost += 1
                self._done.put(Completion(0, dict(config), None, "killed by the test"))
                timer = threading.Timer(self.away_s, lambda: self._done.put(
                    Completion(0, {}, None, kind="recovered")))
                timer.daemon = True
                timer.start()
                return
        super().submit(worker, config, best_ms)


def test_configurations_asked_ahead_for_a_dead_worker_are_not_lost(tmp_path):
    # worker 0 had configurations asked ahead (brute force prefetches 4) when it died; the other worker must
    # measure them, and the run must not end while they wait for the dead one (before the fix: 12 of 16)
    problem = Problem("quick", CallableSpec(_quick), Space({"x": list(range(16))}), input_name="default")
    executor = _WorkerDiesOnce(away_s=30.0)  # longer than the whole run: only worker 1 can finish the work
    db = tmp_path / "t.db"
    report = tune(problem, "brute_force", repeats=1, warmup=0, verify=False, backend="python", db=db,
                  progress=False, executor=executor, discard_factor=None)
    assert executor.lost == 1
    assert report.evaluated == 16 and all(r.status == Status.OK for r in report.results)
    with Store(db) as store:
        rows = store.results()
    assert sorted(r.config["x"] for r in rows) == list(range(16))
