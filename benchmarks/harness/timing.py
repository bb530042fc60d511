"""One timer for every study: wall clock (+ sync) on the host, CUDA events on a GPU.

Set-up stays outside: pass a function that does only the timed work. Results are summaries in
seconds (p50/p10/p90/min/max) with the raw samples, so every study reports spread the same way.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def summarize(samples_s: Sequence[float]) -> dict:
    """Percentiles of samples given in seconds."""
    arr = np.asarray(samples_s, dtype=float)
    if arr.size == 0:
        raise ValueError("no samples to summarize")
    p10, p50, p90 = np.percentile(arr, [10, 50, 90])
    return {"p50": float(p50), "p10": float(p10), "p90": float(p90), "min": float(arr.min()),
            "max": float(arr.max()), "samples": [float(x) for x in arr]}


def paired_summary(samples: dict[str, list[list[float]]], baseline: str = "baseline", digits: int = 2
                   ) -> list[dict[str, Any]]:
    """Per side of an interleaved A/B (``samples``: side -> rounds of single timings in us, the i-th call of every
    side timed in the same repeat): p50 / p10 / p90, each round's p50, the median of each call over the
    ``baseline`` call of its repeat (``paired_ratio_p50``), the ratio of the p50s, and the number of calls."""
    base = sum(samples[baseline], [])
    rows = []
    for side, rounds in samples.items():
        flat = sum(rounds, [])
        rows.append({"side": side, "p50_us": statistics.median(flat), "p10_us": float(np.percentile(flat, 10)),
                     "p90_us": float(np.percentile(flat, 90)),
                     "p50_per_round": " / ".join(f"{statistics.median(r):.{digits}f}" for r in rounds),
                     "paired_ratio_p50": statistics.median(a / b for a, b in zip(flat, base, strict=True)),
                     "ratio_of_p50s": statistics.median(flat) / statistics.median(base), "calls": len(flat)})
    return rows


def time_host(fn: Callable[[], Any], *, warmup: int = 1, repeats: int = 7, number: int = 1,
              sync: Callable[[], Any] | None = None, budget_s: float | None = None,
              setup: Callable[[], Any] | None = None) -> dict:
    """Wall time of ``fn()`` in seconds per call.

    ``sync`` runs inside the timed region (e.g. a device synchronize) so asynchronous work counts;
    ``number`` calls per sample time cheap calls (a dispatch of a few microseconds) above clock noise;
    ``budget_s`` stops after 3 samples once the samples add up to that long (slow calls); ``setup`` runs
    before every sample, outside the timed region (e.g. drop a cached result so each sample is a first call).
    """
    if repeats < 1 or number < 1:
        raise ValueError("repeats and number must be at least 1")

    def sample() -> float:
        if setup is not None:
            setup()
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        if sync is not None:
            sync()
        return (time.perf_counter_ns() - t0) * 1e-9 / number

    for _ in range(warmup):
        sample()
    return summarize(_collect(sample, repeats, budget_s))


def time_device(fn: Callable[[], Any], *, warmup: int = 1, repeats: int = 7, cupy: Any = None,
                budget_s: float | None = None) -> dict:
    """GPU time of ``fn()`` in seconds, between CUDA events on the current stream (needs CuPy)."""
    if cupy is None:
        import cupy  # optional: only GPU studies time with events
    for _ in range(warmup):
        fn()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()

    def sample() -> float:
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop) * 1e-3

    return summarize(_collect(sample, repeats, budget_s))


def fastest_us(fn: Callable[[], Any], calls: int = 2000, batches: int = 7) -> float:
    """Microseconds a call of a sub-microsecond host function, the fastest of ``batches`` loops of ``calls``
    (a shared host's load only adds to it, so the minimum is the cost)."""
    fn()
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return float(min(samples))


def _collect(sample: Callable[[], float], repeats: int, budget_s: float | None) -> list[float]:
    samples: list[float] = []
    for _ in range(repeats):
        samples.append(sample())
        if budget_s is not None and len(samples) >= 3 and sum(samples) > budget_s:
            break
    return samples
