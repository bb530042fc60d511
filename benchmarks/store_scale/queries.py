"""The dashboard's, ``show``'s and a resume's queries against one store, timed inside one process.

``python -m benchmarks.store_scale.queries TARGET REPEATS`` prints one JSON object: per query the seconds of
the first (cold) call and of ``REPEATS`` warm calls. The parent measures this process's peak memory.
"""

from __future__ import annotations

import json
import random
import sys
import time

from adaptune.store import Store
from benchmarks.store_scale.synthetic import config


def _show_top10(store: Store) -> int:
    """What ``adaptune show --top 10`` reads: problems with counts, devices, the top 10, input names."""
    devices = store.devices()
    n = 0
    for problem in store.problems():
        n += len(store.top(problem.id, 10)) + len(store.inputs(problem.id))
    return n + len(devices)


def main(target: str, repeats: int) -> dict:
    store = Store(target)
    (problem,) = store.problems()
    (summary,) = store.runs(problem.id)
    run = summary.run
    rows = summary.measurements
    rng = random.Random(0)
    lookup = [config(rng.randrange(2 * rows)) for _ in range(1000)]  # about half of them stored
    queries = {
        "show --top 10": lambda: _show_top10(store),
        "problems": lambda: store.problems(),
        "runs": lambda: store.runs(),
        "status counts": lambda: store.status_counts(problem.id),
        "top 10 of the problem": lambda: store.top(problem.id, 10),
        "best-so-far trajectory": lambda: store.trajectory(run),
        "page 1 (fastest 50)": lambda: store.page(run, limit=50),
        "page 100 (by time)": lambda: store.page(run, offset=99 * 50, limit=50),
        "last page (failures)": lambda: store.page(run, offset=rows - 50, limit=50),
        "page sorted by a parameter": lambda: store.page(run, order_by="p3", limit=50),
        "page filtered by a parameter": lambda: store.page(run, where={"p0": 64}, limit=50),
        "time histogram": lambda: store.time_histogram(run),
        "per-device summary": lambda: store.device_summaries(problem.id),
        "per-input summary": lambda: store.input_summaries(problem.id),
        "rows since (live, 1000)": lambda: store.rows_since(store.latest_id() - 1000),
        "resume lookup (1000 configs)": lambda: store.stored_keys(run, lookup),
    }
    out: dict = {"rows_stored": rows, "queries": {}}
    for name, query in queries.items():
        times, cpu = [], []
        for _ in range(repeats + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            query()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        out["queries"][name] = {"cold_s": times[0], "warm_s": times[1:], "warm_cpu_s": cpu[1:]}
    store.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
