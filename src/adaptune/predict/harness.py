"""Batch harness for LS-CAT kernels on a CUDA device (CuPy), run inside a restartable worker process.

One call measures one kernel: load its cubin (or compile its source with NVRTC), read its attributes
and the CUDA occupancy API's suggested block size, then for each matrix size build the arguments by
the sizing rule of :mod:`adaptune.predict.corpus` and time each of LS-CAT's 20 block shapes with CUDA
events. Faults are classified, never raised: a launch the device refuses is a ``launch_error`` for that
shape; a sticky fault (illegal address, i.e. out-of-bounds) ends the kernel as ``crash`` and the worker
must be replaced, because the CUDA context is lost. Hangs are the parent's business (it kills the worker).

Why not adaptune's Measurer for the bulk: it measures one configuration a call for one KernelSpec,
recompiling per configuration and checking outputs; LS-CAT needs 60 launches of each of thousands of
unrelated kernels, with a context that may die at any kernel. This harness keeps one module per kernel,
reuses argument buffers across shapes, and loses at most the current kernel to a crash.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from adaptune.predict import corpus

#: statuses of a (kernel, size, shape) row
OK, LAUNCH_ERROR, CRASH, TOO_MANY_THREADS, SKIPPED = "ok", "launch_error", "crash", "too_many_threads", "skipped"

_STICKY = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "MISALIGNED", "ILLEGAL_INSTRUCTION", "HARDWARE_STACK_ERROR",
           "ASSERT", "ILLEGAL", "cudaErrorLaunchFailure", "unspecified launch failure", "TRAP")


#: kernel statuses after which the worker's CUDA context may be unusable
FATAL = (CRASH, "alloc_error")


def _is_sticky(exc: BaseException) -> bool:
    text = str(exc)
    return any(s.lower() in text.lower() for s in _STICKY)


def _function_ptr(kernel: Any, cubin_path: str | None, name: str) -> int | None:
    """The CUfunction handle of a CuPy RawKernel (or of the cubin loaded once more through CuPy)."""
    for get in (lambda: kernel.kernel.ptr, lambda: kernel._kernel.ptr):
        try:
            return int(get())
        except Exception:  # noqa: BLE001, S112 - try the next route
            continue
    if cubin_path:
        try:
            import cupy as cp

            mod = cp.cuda.function.Module()
            mod.load_file(cubin_path)
            fn = mod.get_function(name)
            _KEEP.append(mod)
            return int(fn.ptr)
        except Exception:  # noqa: BLE001
            return None
    return None


_KEEP: list = []  # modules loaded only for the occupancy query stay alive with the process


def occupancy_block(kernel: Any, shared_per_thread: int = 0, cubin_path: str | None = None,
                    name: str = "") -> int | None:
    """``cuOccupancyMaxPotentialBlockSize`` for a kernel (CuPy's driver wrapper, else cuda-python's);
    None if unavailable. With dynamic shared memory it searches 32..1024 for the block size with the
    most resident threads, using the per-block size the harness launches with."""
    ptr = _function_ptr(kernel, cubin_path, name)
    if ptr is None:
        return None
    try:
        import cupy as cp

        drv = cp.cuda.driver
        if not shared_per_thread:
            return int(drv.occupancyMaxPotentialBlockSize(ptr, 0, 0)[1])
        best, best_occ = None, -1
        for bs in range(1024, 31, -32):
            blocks = drv.occupancyMaxActiveBlocksPerMultiprocessor(ptr, bs, min(shared_per_thread * bs, 48 * 1024))
            if blocks * bs > best_occ:
                best, best_occ = bs, blocks * bs
        return best
    except Exception:  # noqa: BLE001 - fall back to cuda-python
        pass
    try:
        from cuda.bindings import driver  # type: ignore[import-not-found]

        func = driver.CUfunction(init_value=ptr)
        err, _grid, block = driver.cuOccupancyMaxPotentialBlockSize(func, None, 0, 0)
        return int(block) if err == driver.CUresult.CUDA_SUCCESS else None
    except Exception:  # noqa: BLE001 - the baseline is optional; absence is recorded as None
        return None


def _fill(cp: Any, arg: corpus.Arg, rng: Any) -> Any:
    p = arg.param
    n = arg.elements * p.lanes
    u = rng.random(n, dtype=cp.float32)
    if p.dtype.startswith("float"):
        return u.astype(p.dtype)
    if p.dtype == "bool":
        return u < 0.5
    return (u * 16).astype(p.dtype)  # small non-negative values: safe as indices, rarely zero


def _scalar(np: Any, arg: corpus.Arg) -> Any:
    return np.dtype(arg.param.dtype).type(arg.value)


def _time_launches(cp: Any, launch: Any, first_ms: float, target_ms: float = 0.05, samples: int = 3,
                   max_reps: int = 20) -> float:
    """Median per-launch time (ms) over ``samples`` batches of back-to-back launches between events."""
    if first_ms > 20.0:
        return first_ms
    reps = max(1, min(max_reps, math.ceil(target_ms / max(first_ms, 1e-4))))
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(samples):
        start.record()
        for _ in range(reps):
            launch()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / reps)
    times.sort()
    return times[len(times) // 2]


def _time_shape(cp: Any, launch: Any, warm: bool, batches: int = 3, batch_ms: float = 0.05) -> tuple[float, float]:
    """(median per-launch ms, first launch ms) of one shape: an optional untimed warm-up, one timed
    launch (it sizes the batches), then ``batches`` batches of about ``batch_ms`` between CUDA events."""
    if warm:
        launch()  # first launch of the kernel at this size: module and buffers touched
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    launch()
    stop.record()
    stop.synchronize()
    first = cp.cuda.get_elapsed_time(start, stop)
    return _time_launches(cp, launch, first, target_ms=batch_ms, samples=batches), first


def measure_kernel(item: dict, sizes: Sequence[int], cubin_path: str | None = None,
                   kernel_budget_s: float = 6.0, slow_ms: float = 100.0, rule: str = "2xy",
                   passes: int = 1, batches: int = 3, batch_ms: float = 0.05) -> dict:
    """Measure one working-set kernel at ``sizes`` over corpus.SHAPES. Returns a dict with ``rows``
    [(size, bx, by, time_us | None, status, time2_us | None)], ``attrs``, ``occ_block``, ``status`` and
    ``error``. With ``passes=2`` every shape is timed again in a second sweep over the 20 shapes
    (``time2_us``): two independent measurements a shape, interleaved, so noise can be measured and a
    chooser can be scored on data it was not chosen on. Buffers follow corpus buffer ``rule``.
    Raises nothing for kernel faults; after a sticky fault ``status`` is 'crash' and the caller must
    discard this process's CUDA context. ``batches``/``batch_ms``: more and longer batches a measurement
    (runs 1-5 used 3 x ~50 us) lower the noise of µs-scale kernels at the cost of time."""
    import cupy as cp
    import numpy as np

    out: dict = {"id": item["id"], "rows": [], "attrs": {}, "occ_block": None, "status": OK, "error": ""}
    t_kernel = time.perf_counter()
    try:
        try:
            if not cubin_path:
                raise FileNotFoundError("no cubin")
            kernel = cp.RawModule(path=cubin_path).get_function(item["function"])
            attrs = dict(kernel.attributes)
        except Exception:  # noqa: BLE001 - fall back to CuPy's own NVRTC on the source
            module = cp.RawModule(code=item["source"], options=("-std=c++17",), backend="nvrtc")
            kernel = module.get_function(item["function"])
            attrs = dict(kernel.attributes)
    except Exception as exc:  # noqa: BLE001 - a load/compile failure is a result, not an error
        out.update(status="compile_error", error=str(exc).splitlines()[0][:300] if str(exc) else repr(exc))
        return out
    out["attrs"] = {k: int(v) for k, v in attrs.items() if isinstance(v, (int, np.integer))}
    two_d = bool(item.get("two_d", corpus.is_2d(item["source"])))
    shared_pt = 8 if corpus.dynamic_shared_bytes(item["source"], (1, 1)) else 0
    out["occ_block"] = occupancy_block(kernel, shared_pt, cubin_path, item["function"])
    params = corpus.parse_params(item["params"])
    max_threads = int(attrs.get("max_threads_per_block", 1024))
    rng = cp.random.default_rng(12345)
    pool = cp.get_default_memory_pool()
    for size in sorted(sizes):
        if time.perf_counter() - t_kernel > kernel_budget_s:
            out["rows"] += [(size, bx, by, None, SKIPPED, None) for bx, by in corpus.SHAPES]
            out["status"] = "budget"
            continue
        bounds = None
        if rule == "index":
            from adaptune.predict import indexbound

            try:
                bounds = indexbound.pointer_bounds(item["source"], item["function"], params, size, size, two_d)
            except Exception:  # noqa: BLE001 - a text the heuristic cannot read: the 4xy+64k buffers
                bounds = None
        plan = corpus.build_args(params, size, size, rule, bounds)
        try:
            args = [_fill(cp, a, rng) if a.param.pointer else _scalar(np, a) for a in plan]
            cp.cuda.Device().synchronize()
        except Exception as exc:  # noqa: BLE001
            out.update(status="alloc_error", error=str(exc)[:300])
            return out
        times: dict[tuple[int, int], list[float]] = {}
        status: dict[tuple[int, int], str] = {}
        slow = False
        for sweep in range(passes):
            for bx, by in corpus.SHAPES:
                key = (bx, by)
                if key in status and status[key] != OK:
                    continue
                if slow or time.perf_counter() - t_kernel > kernel_budget_s:
                    status.setdefault(key, SKIPPED)
                    continue
                if bx * by > max_threads:
                    status[key] = TOO_MANY_THREADS
                    continue
                grid, block = corpus.launch_geometry((bx, by), size, size, two_d)
                smem = corpus.dynamic_shared_bytes(item["source"], (bx, by))

                def launch(grid=grid, block=block, smem=smem, args=args) -> None:
                    kernel(grid, block, args, shared_mem=smem)

                try:
                    t, first = _time_shape(cp, launch, warm=sweep == 0, batches=batches, batch_ms=batch_ms)
                except Exception as exc:  # noqa: BLE001
                    if _is_sticky(exc):
                        status[key] = CRASH
                        out["rows"] += _size_rows(size, times, status)
                        out.update(status=CRASH, error=str(exc)[:300])
                        return out
                    status[key] = LAUNCH_ERROR
                    out["error"] = str(exc)[:300]
                    continue
                times.setdefault(key, []).append(round(t * 1000.0, 4))
                status[key] = OK
                slow = slow or first > slow_ms
        out["rows"] += _size_rows(size, times, status)
        del args
        try:
            pool.free_all_blocks()
            cp.cuda.Device().synchronize()
        except Exception as exc:  # noqa: BLE001 - a late sticky fault
            out.update(status=CRASH, error=str(exc)[:300])
            return out
    return out


def _size_rows(size: int, times: dict, status: dict) -> list[tuple]:
    """Rows of one size in SHAPES order: (size, bx, by, time_us, status, time2_us); shapes not reached
    before a crash are left out."""
    rows = []
    for key in corpus.SHAPES:
        if key not in status:
            continue
        ts = times.get(key, [])
        st = status[key] if ts or status[key] != OK else SKIPPED
        if st != OK:
            ts = []
        rows.append((size, key[0], key[1], ts[0] if ts else None, st, ts[1] if len(ts) > 1 else None))
    return rows


def warm_up(cp: Any) -> None:
    """First-use costs of a fresh worker (CuPy's elementwise and random kernels for every dtype the
    harness fills, events, a RawKernel launch) paid before it reports ready, not inside a timed kernel."""
    rng = cp.random.default_rng(1)
    for dt in ("float32", "float64", "int32", "uint32", "int64", "uint64", "int16", "uint16", "int8", "uint8"):
        _fill(cp, corpus.Arg(corpus.Param("t", "a", dt, 1, True), elements=1024), rng)
    _fill(cp, corpus.Arg(corpus.Param("bool", "a", "bool", 1, True), elements=1024), rng)
    k = cp.RawKernel('extern "C" __global__ void k(float *a) { a[threadIdx.x] += 1.0f; }', "k")
    a = cp.zeros(64, cp.float32)
    _time_shape(cp, lambda: k((1,), (64,), (a,)), warm=True)
    cp.cuda.Device().synchronize()


def worker_main(conn: Any, sizes: Sequence[int], kernel_budget_s: float, rule: str = "2xy",
                passes: int = 1, batches: int = 3, batch_ms: float = 0.05) -> None:
    """Worker process loop: receive (item, cubin path or None) pairs, send results; exit after a crash."""
    import os

    import cupy as cp

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # device printf from corpus kernels must not flood the log
    os.dup2(devnull, 2)  # nor CuPy's destructor tracebacks after a sticky fault (results go through conn)
    conn.send(("ready", None))  # imported, no CUDA context yet: a standby does nothing on the GPU
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if msg == "warm":  # this worker becomes the measuring one: context and CuPy's kernels now, while
            cp.cuda.Device(0).use()  # no other worker is timing (a standby warming up during another
            warm_up(cp)  # worker's timings made runs 3-4 noisier: twin shapes 3.7 % apart vs 2.5 %)
            conn.send(("warm", None))
            continue
        item, cubin_path = msg
        res = measure_kernel(item, sizes, cubin_path, kernel_budget_s, rule=rule, passes=passes, batches=batches,
                             batch_ms=batch_ms)
        conn.send(("result", res))
        if res["status"] in FATAL:
            return
