"""How fast can one machine compile CUDA kernels: threads in one process against processes (issue 22, a probe).

Why: on the H100 the drop-in's measurement worker waits for its compiles on most Kernel Tuner examples
(``worker_stats.compile_waits``: 11 of 15 configurations of vector_add, 90 of 128 of spmv), its 8 compile threads
spending ~130 ms per kernel where one compile alone takes less. This times N distinct vector_add-sized kernels
(one define differs, so no cache hit) compiled
- ``cupy``: the CUDA backend's own build (CuPy ``RawModule`` + load), in a thread pool of 1, 4, 8, 16 threads, in
  a process that holds a CUDA context (as the worker does);
- ``nvrtc``: NVRTC to a cubin (``backends.binary.compile_binary``, no GPU needed), in threads of one process and
  in a pool of forked processes (1, 4, 8, 16), none of which touches CUDA.

    python -m benchmarks.kt_examples.compile_throughput --out DIR     # -> DIR/compile_throughput.{json,md}
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from adaptune.backends import make_backend
from adaptune.backends.binary import compile_binary
from benchmarks.harness import run_metadata, study_parser, write_results

SOURCE = """
extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) { c[i] = a[i] + b[i] * (float)salt; }
}
"""


def source(i: int, block: int = 256) -> str:
    return f"#define block_size_x {block}\n#define salt {i}\n" + SOURCE


def nvrtc_one(args: tuple[str, str]) -> float:
    target, text = args
    t0 = time.perf_counter()
    compile_binary("cuda", target, text, "vector_add", ("--std=c++17",))
    return (time.perf_counter() - t0) * 1e3


def timed_pool(make_pool: Any, fn: Any, items: list[Any]) -> dict[str, float]:
    with make_pool() as pool:
        list(pool.map(fn, items[:2]))  # warm: the library loaded, the processes started
        t0 = time.perf_counter()
        per = list(pool.map(fn, items[2:]))
        wall = time.perf_counter() - t0
    return {"kernels": len(per), "wall_s": wall, "per_s": len(per) / wall, "each_ms_median": sorted(per)[len(per) // 2]}


def main() -> None:
    ap = study_parser("kt_examples", __doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=66)
    ap.add_argument("--workers", default="1,4,8,16")
    ap.add_argument("--target", default="sm_90", help="the GPU's architecture (an H100: sm_90)")
    args = ap.parse_args()
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="compile_throughput_")  # no disk-cache hits
    counts = [int(w) for w in args.workers.split(",")]
    rows: list[dict[str, Any]] = []
    ctx = multiprocessing.get_context("fork")  # forked before this process touches CUDA
    salt = [0]

    def batch() -> list[str]:
        salt[0] += 1
        return [source(salt[0] * 100000 + i) for i in range(args.kernels)]

    target = args.target  # given, not asked of the device: the process pools fork before any CUDA call here
    for n in counts:  # processes first: forked while this process has not created a CUDA context
        rows.append({"how": "nvrtc, processes", "workers": n,
                     **timed_pool(lambda n=n: ProcessPoolExecutor(n, mp_context=ctx), nvrtc_one,
                                  [(target, s) for s in batch()])})
        print(rows[-1], flush=True)
    for n in counts:
        rows.append({"how": "nvrtc, threads", "workers": n,
                     **timed_pool(lambda n=n: ThreadPoolExecutor(n), nvrtc_one, [(target, s) for s in batch()])})
        print(rows[-1], flush=True)
    be = make_backend("cuda", 0)
    if be.binary_target() != target:
        print(f"the device is {be.binary_target()}, the cubins above were for {target}")

    def cupy_one(text: str) -> float:
        t0 = time.perf_counter()
        be.compile_timed(text, "vector_add", options=("--std=c++17",))
        return (time.perf_counter() - t0) * 1e3

    for n in counts:
        rows.append({"how": "cupy RawModule + load, threads", "workers": n,
                     **timed_pool(lambda n=n: ThreadPoolExecutor(n), cupy_one, batch())})
        print(rows[-1], flush=True)
    write_results(args.out, "compile_throughput", {"target": target, "cpus": os.cpu_count(), "rows": rows},
                  table=rows, title=f"CUDA compile throughput ({target}, {os.cpu_count()} CPUs)",
                  notes=__doc__.split("\n\n")[1], metadata=run_metadata())


if __name__ == "__main__":
    main()
