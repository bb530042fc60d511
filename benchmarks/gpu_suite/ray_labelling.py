"""GPU-suite labelling (every training input x every variant) on 1 vs N workers through Ray actors.

Labelling is what ``CodeVariant.train`` spends its time on; here the GPU suite's own labelling
(``benchmarks/gpu_suite/run.py``'s ``measure_input``: every variant of one input checked and timed with CUDA
events) runs on ``adaptune.distributed.ray_map`` — one long-lived actor per GPU that builds each input on its
own GPU from its spec (inputs travel as specs, not arrays). Reported: wall time per worker count, the
speed-up, and whether the labels agree (the best variant per input in both runs, and how far apart the
times of the same (input, variant) are).

    python -m benchmarks.gpu_suite.ray_labelling --gpus 1 2 [--out DIR]        # CUDA, one actor a GPU
    python -m benchmarks.gpu_suite.ray_labelling --device opencl --size-scale 0.01 --gpus 1 2   # PoCL pilot

Writes DIR/distributed_labelling_<device>.json (default DIR: out/gpu_suite/); the committed 2-GPU run is
part of benchmarks/distributed/results/ (docs/distributed.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

import benchmarks.gpu_suite.run as gpu_suite
from adaptune.distributed.tasks import ray_map
from benchmarks.harness import device_tag, git_commit

ROOT = Path(__file__).resolve().parents[2]
_STATE: dict[str, Any] = {}  # per actor process: the runtime and benches, built once


def label_one(name: str, spec: Any, device: str) -> dict[str, Any]:
    """Every variant of one input timed on this actor's device (the suite's own measuring code)."""
    if "rt" not in _STATE:
        _STATE["rt"] = gpu_suite.Runtime(device)
        _STATE["benches"] = {}
    rt = _STATE["rt"]
    bench = _STATE["benches"].get(name) or _STATE["benches"].setdefault(name, gpu_suite.BENCHES[name](rt))
    repeats, budget = gpu_suite.TIMING[name]
    record = gpu_suite.measure_input(bench, spec, rt.timer(repeats, budget))
    rt.free()
    record["worker_pid"] = os.getpid()
    record["device_name"] = _STATE.setdefault("device_name", gpu_suite.device_description(rt)["name"])
    return record


def run(names: list[str], n_workers: int, device: str, size_scale: float, seed: int) -> dict[str, Any]:
    items = []
    for name in names:
        make, n_train, _ = gpu_suite.SETS[name]
        train = gpu_suite.shrink(make(n_train, seed), size_scale)
        items += [(name, spec, device) for spec in train]
    t0 = time.perf_counter()
    records: dict[int, dict[str, Any]] = {}
    for k, rec in ray_map(label_one, items, num_gpus=1 if device == "cuda" else 0, n_workers=n_workers):
        records[k] = rec
        if len(records) % 25 == 0:
            print(f"  {n_workers} worker(s): {len(records)}/{len(items)} inputs, "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    wall = time.perf_counter() - t0
    ordered = [records[k] for k in range(len(items))]
    return {"workers": n_workers, "wall_s": wall, "inputs": len(items),
            "pids": len({r["worker_pid"] for r in ordered}), "device_name": ordered[0]["device_name"],
            "labels": [{"benchmark": it[0], "name": r["name"], "times_ms": r["times_ms"]}
                       for it, r in zip(items, ordered, strict=True)]}


def _best(times: dict[str, float | None]) -> str | None:
    ok = {v: t for v, t in times.items() if t is not None}
    return min(ok, key=ok.get) if ok else None


def compare(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Speed-up, same best variant per input, and the spread of the times of one (input, variant)."""
    same, ratios, near = 0, [], 0
    for a, b in zip(base["labels"], other["labels"], strict=True):
        ba, bb = _best(a["times_ms"]), _best(b["times_ms"])
        same += ba == bb
        if ba and bb and ba != bb:  # a different best: is it a near-tie in the base run's own times?
            ta, tb = a["times_ms"][ba], a["times_ms"].get(bb)
            near += tb is not None and tb <= 1.05 * ta
        ratios += [b["times_ms"][v] / t for v, t in a["times_ms"].items()
                   if t is not None and b["times_ms"].get(v) is not None]
    r = np.array(ratios)
    return {"speedup": base["wall_s"] / other["wall_s"], "same_best_fraction": same / len(base["labels"]),
            "different_best_within_5pct": near, "time_ratio_median": float(np.median(r)),
            "time_ratio_p05": float(np.percentile(r, 5)), "time_ratio_p95": float(np.percentile(r, 95))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu_suite.ray_labelling", description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", nargs="+", default=["spmv", "histogram", "sort", "bfs"])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 2], help="worker counts to compare")
    ap.add_argument("--device", default="cuda", choices=("cuda", "opencl"))
    ap.add_argument("--size-scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("out/gpu_suite"), help="folder (default out/gpu_suite/)")
    args = ap.parse_args(argv)
    import ray  # optional: the distributed extra

    # actors import this module (and adaptune) by name: the repository root and src/ on their path
    path = os.pathsep.join([str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    ray.init(include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    resources = ray.cluster_resources()
    runs = []
    for n in args.gpus:
        runs.append(run(args.benchmarks, n, args.device, args.size_scale, args.seed))
    ray.shutdown()
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": git_commit(),
           "device": args.device, "device_name": runs[0]["device_name"], "size_scale": args.size_scale, "benchmarks": args.benchmarks,
           "cluster": {k: v for k, v in resources.items() if k in ("CPU", "GPU")},
           "runs": [{k: v for k, v in r.items() if k != "labels"} for r in runs],
           "comparisons": {str(r["workers"]): compare(runs[0], r) for r in runs[1:]}}
    for r in runs:
        print(f"  {r['workers']} worker(s): {r['wall_s']:.1f} s for {r['inputs']} inputs")
    for n, c in doc["comparisons"].items():
        print(f"  {n} vs {runs[0]['workers']}: speed-up {c['speedup']:.2f}, same best on "
              f"{c['same_best_fraction']:.1%} of inputs, time ratio median {c['time_ratio_median']:.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"distributed_labelling_{device_tag(doc['device_name'])}.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
