"""Where one example's tuning call spends its time, with and without compile processes (issue 22, a probe).

Why: ``results/compile_ahead_h100/`` found Kernel Tuner's ``cuda/matmul.py`` 1.5-4 s slower with the compile
processes on, while its kernels timed the same and no measurement waited for a binary. This runs the example
(import line swapped, as ``run.py`` does; adaptune only) in fresh processes, ``ADAPTUNE_COMPILE_PROCESSES`` 0
and 8 alternating, with timers wrapped around the steps of a measurement on both sides of the worker's pipe:

- the tuning process: each ``Measurer.measure`` round trip, handing binaries over, storing results, the search
  loop as a whole;
- the worker (forked from it, so the wrappers are there too): each ``KernelRunner.measure``, its ``_benchmark``
  (checking the output and timing), its untimed runs' enqueue, the timed samples, the check itself, copying
  outputs back, and in its compile pool each binary's load and each compile;
- the compile processes (forked too): each job, its NVML query and its compile, as (pid, start, ms).

    python -m benchmarks.kt_examples.phases --kt-repo PATH --example examples/cuda/matmul.py --rounds 2 --out DIR
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import adaptune
from adaptune.backends.cuda import CUDABackend
from adaptune.measure import compile_ahead, runners
from adaptune.measure.measurer import Measurer
from adaptune.store import Store
from benchmarks.harness import run_metadata, study_parser, write_results
from benchmarks.kt_examples.run import swap_imports

tune = importlib.import_module("adaptune.tuning.tune")  # the module: the package's ``tune`` is its function
_TIMES: dict[str, list[float]] = defaultdict(list)  # step -> durations (ms), in whichever process ran it
_LOCK = threading.Lock()
_STARTS: list[dict[str, float]] = []  # Measurer.start_phases of each worker started


def _wrap(owner: Any, name: str, step: str, record: Callable[[str, float, float], None]) -> None:
    """Wrap ``owner.name`` so each call's ``record(step, start, ms)``."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            record(step, t0, (time.perf_counter() - t0) * 1e3)

    setattr(owner, name, wrapper)


def _in_memory(step: str, start: float, ms: float) -> None:
    """This process's (or the worker's, which sends its own back with its stats) durations per step."""
    with _LOCK:
        _TIMES[step].append(ms)


def _to_log(step: str, start: float, ms: float) -> None:
    """For the compile processes (forked from this one): start (perf_counter, one clock for every process of the
    machine), duration and pid, a line each, to the file ``PHASES_CHILD_LOG`` names."""
    line = json.dumps({"step": step, "pid": os.getpid(), "start": start, "ms": ms})
    with open(os.environ["PHASES_CHILD_LOG"], "a") as log:
        log.write(line + "\n")


def _instrument() -> None:
    runner = runners.KernelRunner
    for owner, name, step in [(Measurer, "measure", "parent.measure_round_trip"),
                              (tune._Session, "_hand_over", "parent.hand_over"),
                              (Store, "put", "parent.store_put"),
                              (tune, "_search_loop", "parent.search_loop"),
                              (runner, "measure", "worker.measure"),
                              (runner, "_benchmark", "worker.benchmark_and_check"),
                              (runner, "_run", "worker.untimed_run"),
                              (runner, "_load", "worker.pool_load"),
                              (runner, "_compile", "worker.pool_compile_or_cache"),
                              (runners, "check", "worker.check"),
                              (runners, "collect", "worker.timed_samples"),
                              (CUDABackend, "copy_out", "worker.copy_out")]:
        _wrap(owner, name, step, _in_memory)
    for owner, name, step in [(compile_ahead, "gpu_target", "compile_process.nvml"),
                              (compile_ahead, "compile_binaries", "compile_process.compile"),
                              (compile_ahead, "_compile", "compile_process.job")]:
        _wrap(owner, name, step, _to_log)
    original_stats = runner.stats

    def stats(self: Any) -> dict[str, Any]:  # the worker's timers ride back with its counters
        with _LOCK:
            return {**original_stats(self), "probe_ms": {k: list(v) for k, v in _TIMES.items()}}

    runner.stats = stats
    original_start = Measurer._start

    def start(self: Any) -> None:  # the worker's own start phases (s from its fork or spawn)
        original_start(self)
        _STARTS.append(dict(self.start_phases))

    Measurer._start = start


def one(example: Path, processes: int, record: Path) -> None:
    """Run ``example`` once (this process), recording each tuning call's env and both sides' timers."""
    os.environ["ADAPTUNE_COMPILE_PROCESSES"] = str(processes)
    _instrument()
    calls: list[dict[str, Any]] = []
    tune_kernel = adaptune.tune_kernel

    def recorded(*args: Any, **kwargs: Any) -> Any:
        _TIMES.clear()
        _STARTS.clear()
        log = Path(os.environ["PHASES_CHILD_LOG"])
        log.unlink(missing_ok=True)
        t0 = time.perf_counter()
        results, env = tune_kernel(*args, **kwargs)
        wall = time.perf_counter() - t0
        children = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
        stats = dict(env.get("worker_stats") or {})
        worker = stats.pop("probe_ms", {})
        parent = {k: v for k, v in _TIMES.items() if k.startswith("parent.")}
        calls.append({"wall_s": wall, "results": len(results), "phases": env.get("phases"), "worker_stats": stats,
                      "worker_start": env.get("worker_start"), "worker_start_phases": list(_STARTS),
                      "compile_processes": [{**c, "start": round(c["start"] - t0, 4)} for c in children],
                      "steps": {k: _summary(v) for k, v in sorted({**parent, **worker}.items())}})
        return results, env

    adaptune.tune_kernel = recorded
    sys.argv = [str(example)]
    runpy.run_path(str(example), run_name="__main__")
    record.write_text(json.dumps({"processes": processes, "calls": calls}))


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"n": len(values), "sum_ms": round(sum(values), 1),
            "median_ms": round(ordered[len(ordered) // 2], 2) if ordered else 0.0,
            "max_ms": round(ordered[-1], 1) if ordered else 0.0}


def run_once(repo: Path, example: str, processes: int, work: Path) -> dict[str, Any]:
    folder = work / f"p{processes}"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree((repo / example).parent, folder)
    target = folder / Path(example).name
    target.write_text(swap_imports(target.read_text())[0])
    record = folder / "_phases.json"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root),
                                                        *filter(None, [os.environ.get("PYTHONPATH")])]),
           "ADAPTUNE_DB": str(folder / "adaptune.db"), "CUPY_CACHE_DIR": str(folder / "cupy_cache"),
           "PHASES_CHILD_LOG": str(folder / "_compile_processes.jsonl"),
           "POCL_KERNEL_CACHE": "0", "PYOPENCL_NO_CACHE": "1"}  # as run.py: no compiled kernel from a run before
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.kt_examples.phases", "--one", str(target),
                           "--processes", str(processes), "--record", str(record)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    out = {"processes": processes, "script_wall_s": time.perf_counter() - t0, "rc": proc.returncode}
    if proc.returncode != 0:
        out["stderr_tail"] = proc.stderr[-2000:]
        return out
    return {**out, **json.loads(record.read_text())}


def markdown(runs: list[dict[str, Any]], example: str) -> str:
    steps = sorted({s for r in runs for c in r.get("calls", []) for s in c["steps"]})
    head = ["processes", "wall s", *steps]
    lines = [f"# Where `{example}`'s tuning call spends its time (sum of ms per step; n calls)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        for c in r.get("calls", []):
            cells = [f"{c['steps'][s]['sum_ms']:.0f} ({c['steps'][s]['n']})" if s in c["steps"] else "-"
                     for s in steps]
            lines.append(f"| {r['processes']} | {c['wall_s']:.2f} | " + " | ".join(cells) + " |")
        if r.get("rc"):
            lines.append(f"| {r['processes']} | failed (rc {r['rc']}) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = study_parser("kt_examples", __doc__)
    parser.add_argument("--kt-repo", type=Path)
    parser.add_argument("--example", default="examples/cuda/matmul.py")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--processes", type=int, nargs="+", default=[0, 8])
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.processes[0], args.record)
        return
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for n in args.processes:
                runs.append(run_once(args.kt_repo, args.example, n, Path(tmp)))
                calls = runs[-1].get("calls", [])
                print(f"processes {n}: " + (f"{calls[0]['wall_s']:.2f} s" if calls else f"rc {runs[-1]['rc']}"),
                      flush=True)
    report = {"example": args.example, "runs": runs}
    write_results(args.out, "phases", report, table=markdown(runs, args.example), metadata=run_metadata())


if __name__ == "__main__":
    main()
