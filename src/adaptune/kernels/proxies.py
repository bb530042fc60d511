"""Proxy micro-benchmarks: measured device features for P-DFS / CV-DFS (Nitro, seed 001 ch. 3, Alg. 1).

Nitro describes a device partly by what small proxy kernels measure on it (bandwidth, atomic throughput,
FLOP rate). Here five kernels of ``proxy_kernels.c`` (the portable dialect, so one text runs on CUDA
through NVRTC and on OpenCL/PoCL) run through ``kernels.device``; each returns a rate:

- ``copy_gbs``: device-to-device copy, bytes read + written per second (GB/s);
- ``atomic_contended_gops``: 32-bit global atomic adds, every thread on one address (Gop/s);
- ``atomic_spread_gops``: the same over 2^20 addresses (little contention);
- ``local_mem_gbs``: shared/local memory reads + writes per second (GB/s);
- ``gflops_sp_measured``: single-precision FMA chains (2 flops each; GFLOP/s);
- ``launch_us``: mean time per launch of an empty kernel in a stream of launches (µs).

Timing is host wall clock around ``inner`` launches and a device sync (median of ``repeats``): the same
on both runtimes, and with enough work per sample the launch and sync costs are small. Sizes: ``large``
(GPUs; the default on CUDA) or ``small`` (CPU OpenCL devices such as PoCL; the default there).
``cached_proxies`` measures once per device and keeps the numbers in a JSON file.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.kernels.device import Device

PROXY_NAMES: tuple[str, ...] = ("copy_gbs", "atomic_contended_gops", "atomic_spread_gops", "local_mem_gbs",
                                "gflops_sp_measured", "launch_us")

SIZES: dict[str, dict[str, int]] = {
    # copy words, atomic ops (contended, spread), local groups per compute unit and ITER,
    # FMA threads per compute unit and ITER, launches for the latency
    "large": {"copy_words": 1 << 26, "atomic_contended": 1 << 22, "atomic_spread": 1 << 26, "local_groups_per_cu": 64,
              "local_iter": 512, "fma_threads_per_cu": 8192, "fma_iter": 1024, "launches": 2000, "inner": 5},
    "small": {"copy_words": 1 << 22, "atomic_contended": 1 << 18, "atomic_spread": 1 << 20, "local_groups_per_cu": 4,
              "local_iter": 64, "fma_threads_per_cu": 512, "fma_iter": 256, "launches": 200, "inner": 2},
}
BLOCK = 256
SPREAD_SLOTS = 1 << 20


class ProxyError(RuntimeError):
    """A proxy kernel produced a wrong result (the rate would be meaningless); the message names which."""


def _timed(dev: Device, run: Callable[[], None], inner: int, repeats: int) -> float:
    """Median seconds per call of ``run`` over ``repeats`` samples of ``inner`` calls (one warm-up call)."""
    run()
    dev.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            run()
        dev.synchronize()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def _copy(dev: Device, s: dict[str, int], cus: int, repeats: int) -> float:
    n = s["copy_words"]
    src = dev.asarray(np.arange(n, dtype=np.uint32))
    dst = dev.zeros(n, np.uint32)
    copy = dev.kernel("proxy_kernels.c", "copy_u32", {"BLOCK": BLOCK})
    sec = _timed(dev, lambda: copy(cus * 32, BLOCK, (src, dst, np.uint32(n))), s["inner"], repeats)
    step = max(1, n // 4096)
    if not np.array_equal(dev.to_host(dst)[::step], np.arange(0, n, step, dtype=np.uint32)):
        raise ProxyError("copy_u32 did not copy its input")
    return 2 * 4 * n / sec / 1e9


def _atomics(dev: Device, ops: int, slots: int, s: dict[str, int], cus: int, repeats: int) -> float:
    counters = dev.zeros(slots, np.uint32)
    atomic = dev.kernel("proxy_kernels.c", "atomic_count", {"BLOCK": BLOCK})
    calls = [0]

    def run() -> None:
        atomic(cus * 32, BLOCK, (counters, np.uint32(slots), np.uint32(ops)))
        calls[0] += 1

    sec = _timed(dev, run, s["inner"], repeats)
    total = int(dev.to_host(counters).astype(np.int64).sum())
    if total != ops * calls[0]:  # every add landed (u32 counters do not wrap at these sizes)
        raise ProxyError(f"atomic_count counted {total}, expected {ops * calls[0]}")
    return ops / sec / 1e9


def _local(dev: Device, s: dict[str, int], cus: int, repeats: int) -> float:
    it, groups = s["local_iter"], cus * s["local_groups_per_cu"]
    res = dev.zeros(groups * BLOCK, np.uint32)
    local = dev.kernel("proxy_kernels.c", "local_bandwidth", {"BLOCK": BLOCK, "ITER": it})
    sec = _timed(dev, lambda: local(groups, BLOCK, (res, np.uint32(7))), s["inner"], repeats)
    return groups * BLOCK * it * 2 * 4 / sec / 1e9


def _flops(dev: Device, s: dict[str, int], cus: int, repeats: int) -> float:
    it, threads = s["fma_iter"], cus * s["fma_threads_per_cu"]
    res = dev.zeros(threads, np.float32)
    fma = dev.kernel("proxy_kernels.c", "fma_chain", {"BLOCK": BLOCK, "ITER": it})
    args = (res, np.float32(0.999), np.float32(0.001))
    sec = _timed(dev, lambda: fma(threads // BLOCK, BLOCK, args), s["inner"], repeats)
    if not np.isfinite(dev.to_host(res)).all():
        raise ProxyError("fma_chain produced non-finite values")
    return threads * it * 8 * 2 / sec / 1e9


def _launch(dev: Device, s: dict[str, int], repeats: int) -> float:
    flag = dev.zeros(1, np.uint32)
    empty = dev.kernel("proxy_kernels.c", "empty_kernel", {"BLOCK": BLOCK})
    return _timed(dev, lambda: empty(1, 32, (flag,)), s["launches"], repeats) * 1e6


def measure_proxies(dev: Device, size: str | None = None, repeats: int = 5) -> dict[str, float]:
    """Run the five proxy kernels on ``dev`` and return their rates (``PROXY_NAMES``); every result is
    checked (a wrong copy, count or a non-finite FMA result raises ``ProxyError``)."""
    size = size or ("small" if dev.xp is np else "large")
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    s = SIZES[size]
    cus = max(1, int(dev.multiprocessors))
    out = {"copy_gbs": _copy(dev, s, cus, repeats),
           "atomic_contended_gops": _atomics(dev, s["atomic_contended"], 1, s, cus, repeats),
           "atomic_spread_gops": _atomics(dev, s["atomic_spread"], SPREAD_SLOTS, s, cus, repeats),
           "local_mem_gbs": _local(dev, s, cus, repeats),
           "gflops_sp_measured": _flops(dev, s, cus, repeats),
           "launch_us": _launch(dev, s, repeats)}
    for k, v in out.items():
        if not math.isfinite(v) or v <= 0:
            raise ProxyError(f"proxy {k} measured {v}")
    return out


def device_key(dev: Device) -> str:
    """Cache key of a device: runtime and name (``cuda:NVIDIA H100 80GB HBM3``)."""
    return f"{'opencl' if dev.xp is np else 'cuda'}:{dev.name}"


def cached_proxies(dev: Device, cache: str | Path | None = None, size: str | None = None) -> dict[str, float]:
    """``measure_proxies`` once per device (``device_key``), kept in a JSON file (default
    ``~/.cache/adaptune/proxies.json``); a damaged cache is re-measured, never trusted."""
    path = Path(cache) if cache else Path.home() / ".cache" / "adaptune" / "proxies.json"
    known: dict[str, Any] = {}
    if path.exists():
        try:
            known = json.loads(path.read_text())
            if not isinstance(known, dict):
                known = {}
        except ValueError:
            known = {}
    key = device_key(dev)
    entry = known.get(key)
    if not (isinstance(entry, dict) and all(isinstance(entry.get(n), (int, float)) for n in PROXY_NAMES)):
        entry = measure_proxies(dev, size)
        known[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=1, sort_keys=True))
    return {n: float(entry[n]) for n in PROXY_NAMES}
