"""Where a tuning call's fixed cost goes: the measurement worker's start, phase by phase.

    python -m benchmarks.kt_examples.worker_start --backend opencl --rounds 5          # PoCL here
    bash benchmarks/gpu.sh kt_examples.worker_start --backend cuda --rounds 7         # the H100

adaptune measures in a worker process, so a ``tune_kernel`` call pays an interpreter, imports, the device
library, a context and the argument upload before its first measurement, where Kernel Tuner measures in the
caller's process (its device library was imported with ``kernel_tuner``). Per round, interleaved, in fresh
processes:

- ``steps``: a child that stamps ``time.monotonic()`` (one clock for every process) after the interpreter's
  start, after importing the worker's modules, the device library (CuPy or PyOpenCL), opening the device and
  the compiler's warm-up build;
- ``spare``: a real :class:`~adaptune.measure.Measurer` for Kernel Tuner's vector_add (``--size`` floats, three
  arrays shipped to the worker), the worker started ahead as ``tune_kernel`` does (``spare_worker``); its
  ``start_phases`` say when the worker had imported, opened the device, received and unpickled the spec,
  built its runner, and when the caller saw it ready;
- ``forked``: as ``spare``, the worker forked from this process (``ADAPTUNE_WORKER_START=fork``: the child has NumPy
  and adaptune imported; ``spare`` and ``generated`` exec theirs, ``ADAPTUNE_WORKER_START=exec``);
- ``generated``: as ``spare`` with a generated source (``GeneratedSources``: a jinja2 template's texts, made
  ahead; ``tune_kernel`` sent them behind a function of ``adaptune.integrations`` before cfdc3e2, whose unpickling
  imported the integrations and scikit-learn: ``results/`` keeps that comparison).

Once, ``python -X importtime`` of the worker's modules and the device library: the 30 slowest (cumulative).
Writes ``worker_start.{json,md}`` (medians and spread over rounds, seconds from the worker's start).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

from adaptune.measure import GeneratedSources, KernelSpec, Measurer, MeasureSettings
from adaptune.measure.process import child_env, python_executable, spare_worker
from benchmarks.harness import run_metadata, study_parser, write_results

KERNELS = {
    "cuda": """__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) { c[i] = a[i] + b[i]; }
}""",
    "opencl": """__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
    if (i < n) { c[i] = a[i] + b[i]; }
}""",
}
BLOCKS = [128 + 64 * i for i in range(15)]
LIBRARY = {"cuda": "cupy", "opencl": "pyopencl"}

#: the ``steps`` child: stamps after each step of a worker's start, as JSON on stdout
STEPS = """import time; t = {"interpreter": time.monotonic()}
import sys, json
import adaptune.measure.worker; t["imports"] = time.monotonic()
import %(library)s; t["device_library"] = time.monotonic()
from adaptune.backends import make_backend
b = make_backend(%(backend)r, %(device)r); t["device_opened"] = time.monotonic()
b.warm_up(); t["warm_up_build"] = time.monotonic()
print(json.dumps(t))
"""


def steps(backend: str, device: Any) -> dict[str, float]:
    start = time.monotonic()
    code = STEPS % {"library": LIBRARY[backend], "backend": backend, "device": device}
    out = subprocess.run([python_executable(), "-c", code], capture_output=True, text=True, env=child_env(),
                         check=True).stdout
    return {k: v - start for k, v in json.loads(out.strip().splitlines()[-1]).items()}


def spec(backend: str, size: int, source: Any = None) -> KernelSpec:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(size, dtype=np.float32), rng.standard_normal(size, dtype=np.float32)
    return KernelSpec(source or KERNELS[backend], "vector_add", [np.zeros_like(a), a, b, np.int32(size)],
                      problem_size=size)


def generated(backend: str, size: int) -> KernelSpec:
    """A generator's texts made ahead, as tune_kernel sends them (before GeneratedSources it sent a function of
    adaptune.integrations, whose unpickling imported the integrations and scikit-learn: history/ has that run)."""
    texts = {(block,): KERNELS[backend] for block in BLOCKS}
    return spec(backend, size, GeneratedSources(("block_size_x",), texts))


#: how each Measurer variant starts its worker (``$ADAPTUNE_WORKER_START``)
START = {"spare": "exec", "generated": "exec", "forked": "fork"}


def measurer_phases(kernel: KernelSpec, backend: str, device: Any, start: str) -> dict[str, float]:
    """A Measurer's start phases, its worker started ahead by ``start`` (exec or fork)."""
    os.environ["ADAPTUNE_WORKER_START"] = start
    try:
        with spare_worker(backend, device), Measurer(kernel, backend, MeasureSettings(repeats=1, warmup=0),
                                                     device) as m:
            assert m.worker_start.split()[0] == start, m.worker_start
            return dict(m.start_phases)
    finally:
        del os.environ["ADAPTUNE_WORKER_START"]


def import_times(backend: str, top: int = 30) -> list[dict[str, Any]]:
    """The slowest imports (cumulative microseconds) of a worker's modules and the device library."""
    err = subprocess.run([python_executable(), "-X", "importtime", "-c",
                          f"import adaptune.measure.worker, {LIBRARY[backend]}"], capture_output=True, text=True,
                         env=child_env(), check=True).stderr
    rows = [line.split("|") for line in err.splitlines() if line.startswith("import time:") and "cumulative" not in line]
    parsed = [{"module": r[2].rstrip(), "self_us": int(r[0].split(":")[1]), "cumulative_us": int(r[1])} for r in rows]
    return sorted(parsed, key=lambda r: -r["cumulative_us"])[:top]


def _summary(samples: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    keys = dict.fromkeys(k for s in samples for k in s)
    return {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
            for k in keys if (v := [s[k] for s in samples if k in s])}


def main() -> None:
    ap = study_parser("kt_examples", __doc__)
    ap.add_argument("--backend", choices=sorted(KERNELS), default="opencl")
    ap.add_argument("--device", default=None, help="device (cuda: an index; opencl: PLATFORM,DEVICE); default 0")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=10_000_000, help="vector_add's floats per array (Kernel Tuner's)")
    ap.add_argument("--variants", default="steps,spare,forked,generated")
    args = ap.parse_args()
    device: Any = (tuple(int(x) for x in (args.device or "0,0").split(",")) if args.backend == "opencl"
                   else int(args.device or 0))
    kernels = {"spare": spec(args.backend, args.size), "forked": spec(args.backend, args.size),
               "generated": generated(args.backend, args.size)}
    variants = [v for v in args.variants.split(",") if v]
    samples: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    loads: list[float] = []
    for r in range(args.rounds):
        for variant in variants if r % 2 == 0 else variants[::-1]:  # interleaved, order alternating
            samples[variant].append(steps(args.backend, device) if variant == "steps" else
                                    measurer_phases(kernels[variant], args.backend, device, START[variant]))
            loads.append(os.getloadavg()[0])
            print(f"round {r} {variant}: " + ", ".join(f"{k} {v:.3f}" for k, v in samples[variant][-1].items()),
                  file=sys.stderr, flush=True)
    summary = {v: _summary(s) for v, s in samples.items()}
    imports = import_times(args.backend)
    table = [{"variant": v, "phase": k, "median s": st["median"], "min s": st["min"], "max s": st["max"]}
             for v, phases in summary.items() for k, st in phases.items()]
    meta = run_metadata(args.device if args.backend == "cuda" else None)
    write_results(args.out, "worker_start", {"backend": args.backend, "size": args.size, "rounds": args.rounds,
                                             "summary": summary, "samples": samples, "import_times": imports,
                                             "load_average": loads},
                  table=table, title=f"The measurement worker's start, phase by phase ({args.backend})",
                  notes="Seconds from the worker's start (spawn) to each moment; medians and range over "
                        f"{args.rounds} interleaved rounds (load average {min(loads):.1f}-{max(loads):.1f}). steps: a child "
                        "importing and opening step by step. spare: a Measurer for vector_add, its worker started "
                        "ahead and exec'd; forked: the same, the worker forked from the benchmark's process; "
                        "generated: its source a generator's texts made ahead, held by GeneratedSources."
                        "\n\nSlowest imports (cumulative "
                        "ms): " + ", ".join(f"{r['module'].strip()} {r['cumulative_us'] / 1e3:.0f}" for r in imports[:15]),
                  metadata=meta)


if __name__ == "__main__":
    main()
