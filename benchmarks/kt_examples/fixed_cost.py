"""Before/after of a tuning call's fixed cost: two source trees of adaptune, interleaved, on one device.

    python -m benchmarks.kt_examples.fixed_cost --before DIR [--after DIR] --backend opencl --rounds 5

``DIR`` holds an adaptune tree (``src/``; ``git archive COMMIT src | tar -x -C DIR``); ``--after`` defaults to
this checkout. Per round, each tree in a fresh process (order alternating): Kernel Tuner's ``vector_add``
(``--size`` floats, 15 block sizes) through ``adaptune.tune_kernel`` (the wall of the call), then the wall until
a worker is ready (``spare_worker`` + ``Measurer``, as ``tune_kernel`` starts it) for that kernel,
each part a second after the last (whose worker exits in the background), for the same
kernel with a generated source held by a function of ``adaptune.integrations`` (what ``tune_kernel`` sends for
a jinja2 template), and, where the tree has it, with ``GeneratedSources``. With ``--long ITERS``, also
``tune_kernel`` over 8 configurations of a kernel that runs a serial chain of ITERS steps (150 M: about 0.15 s a
run on PoCL), 7 iterations each: the per-configuration cost of kernels that run long (a warm-up run is a whole
run there). Writes ``fixed_cost.{json,md}``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from adaptune.measure.process import python_executable
from benchmarks.harness import run_metadata, study_parser, write_results

ROOT = Path(__file__).resolve().parents[2]

CHILD = r'''
import json, os, sys, time
from functools import partial
import numpy as np
import adaptune.integrations.kernel_tuner as kt
from adaptune.measure import KernelSpec, MeasureSettings, Measurer
from adaptune.measure.process import spare_worker
backend, size, long_iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
source = {"cuda": """__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) { c[i] = a[i] + b[i]; }
}""", "opencl": """__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
    if (i < n) { c[i] = a[i] + b[i]; }
}"""}[backend]
device = (0, 0) if backend == "opencl" else 0
a = np.random.randn(size).astype(np.float32)
b = np.random.randn(size).astype(np.float32)
args = [np.zeros_like(b), a, b, np.int32(size)]
blocks = [128 + 64 * i for i in range(15)]
out = {}
time.sleep(1.0)  # every timed part starts with the last one's worker gone (a closed worker exits in the background)
start = time.perf_counter()
kt.tune_kernel("vector_add", source, size, args, {"block_size_x": blocks}, lang=backend.upper(), quiet=True)
out["tune_kernel"] = time.perf_counter() - start
texts = {(n,): source for n in blocks}
sources = {"ready": source}
try:  # the tree before GeneratedSources sent a function of adaptune.integrations (gone since)
    from adaptune.integrations.kt_args import _generated
    sources["ready_generated_integrations"] = partial(_generated, texts, ("block_size_x",))
except ImportError:
    from adaptune.measure import GeneratedSources
    sources["ready_generated_sources"] = GeneratedSources(("block_size_x",), texts)
for name, src in sources.items():
    time.sleep(1.0)
    start = time.perf_counter()
    with spare_worker(backend, device), Measurer(KernelSpec(src, "vector_add", args, problem_size=size), backend,
                                                 MeasureSettings(repeats=1, warmup=0), device):
        out[name] = time.perf_counter() - start
if long_iters:  # a serial LCG chain on each work-item: its length is its run time
    spin = {"cuda": """__global__ void spin(unsigned int *out, unsigned int iters) {
    unsigned int h = 12345u + (blockIdx.x * block_size_x + threadIdx.x) * unroll_hint;
    for (unsigned int k = 0; k < iters; k++) h = h * 1664525u + 1013904223u;
    if (blockIdx.x * block_size_x + threadIdx.x == 0) out[0] = h;
}""", "opencl": """__kernel void spin(__global uint *out, const uint iters) {
    uint h = 12345u + get_global_id(0) * unroll_hint;
    for (uint k = 0; k < iters; k++) h = h * 1664525u + 1013904223u;
    if (get_global_id(0) == 0) out[0] = h;
}"""}[backend]
    m, mul, add, a_, c_, n = 1 << 32, 1, 0, 1664525, 1013904223, long_iters  # the chain's end, composed by squaring
    while n:
        if n & 1:
            mul, add = mul * a_ % m, (add * a_ + c_) % m
        a_, c_, n = a_ * a_ % m, (c_ * a_ + c_) % m, n >> 1
    answer = [np.array([(mul * 12345 + add) % m], np.uint32), None]
    time.sleep(1.0)
    start = time.perf_counter()
    kt.tune_kernel("spin", spin, 1, [np.zeros(1, np.uint32), np.uint32(long_iters)],
                   {"block_size_x": [1, 2], "unroll_hint": [0, 1, 2, 3]}, lang=backend.upper(), answer=answer,
                   quiet=True)
    out["tune_kernel_long"] = time.perf_counter() - start
print(json.dumps(out))
'''


def child(tree: Path, backend: str, size: int, work: Path, long_iters: int = 0) -> dict[str, float]:
    tree = tree.resolve()  # the child runs in ``work``
    rest = os.environ.get("PYTHONPATH", "")  # after the tree: the wheels a device machine carries
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree), *([rest] if rest else [])]),
           "ADAPTUNE_DB": str(work / "adaptune.db"), "POCL_KERNEL_CACHE": "0", "PYOPENCL_NO_CACHE": "1",
           "CUPY_CACHE_DIR": str(work / "cupy_cache")}
    proc = subprocess.run([python_executable(), "-c", CHILD, backend, str(size), str(long_iters)], capture_output=True, text=True,
                          env=env, cwd=work, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = study_parser("kt_examples", __doc__)
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=ROOT)
    ap.add_argument("--backend", choices=["cuda", "opencl"], default="opencl")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=10_000_000)
    ap.add_argument("--long", type=int, default=0, metavar="ITERS", help="also tune a kernel of ITERS serial steps")
    args = ap.parse_args()
    trees = {"before": args.before, "after": args.after}
    samples: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    loads = []
    for r in range(args.rounds):
        for label in list(trees) if r % 2 == 0 else list(trees)[::-1]:
            with tempfile.TemporaryDirectory(prefix="fixed_cost_") as tmp:
                samples[label].append(child(trees[label], args.backend, args.size, Path(tmp), args.long))
            loads.append(os.getloadavg()[0])
            print(f"round {r} {label}: {samples[label][-1]}", file=sys.stderr, flush=True)
        write(args, trees, samples, loads)  # after every round: a call stopped from outside keeps what it did


def write(args: Any, trees: dict[str, Path], samples: dict[str, list[dict[str, float]]], loads: list[float]) -> None:
    summary = {label: {k: _stats([s[k] for s in runs if k in s]) for k in dict.fromkeys(k for s in runs for k in s)}
               for label, runs in samples.items()}
    rows = [{"measure": k, **{f"{label} median s (min-max)": _text(summary[label].get(k)) for label in trees},
             "after / before (medians)": (summary["after"][k]["median"] / summary["before"][k]["median"]
                                          if k in summary["before"] and k in summary["after"] else None)}
            for k in dict.fromkeys(k for runs in summary.values() for k in runs)]
    rounds = min(len(runs) for runs in samples.values())
    write_results(args.out, "fixed_cost", {"backend": args.backend, "size": args.size, "rounds": rounds,
                                           "trees": {k: str(v) for k, v in trees.items()}, "summary": summary,
                                           "samples": samples, "load_average": loads},
                  table=rows, title=f"A tuning call's fixed cost, before and after ({args.backend})",
                  notes=f"{rounds} interleaved rounds, each tree in a fresh process; load average during the "
                        f"runs {min(loads):.1f}-{max(loads):.1f}.", metadata=run_metadata())


def _stats(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def _text(stats: dict[str, Any] | None) -> str:
    return f"{stats['median']:.3f} ({stats['min']:.3f}-{stats['max']:.3f})" if stats else ""


if __name__ == "__main__":
    main()
