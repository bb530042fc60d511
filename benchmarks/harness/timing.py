"""One timer for every study: wall clock (+ sync) on the host, CUDA events on a GPU.

Set-up stays outside: pass a function that does only the timed work. Results are summaries in
seconds (p50/p10/p90/min/max) with the raw samples, so every study reports spread the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptune.measure.timing import time_callable


def summarize(samples_s: Sequence[float]) -> dict:
    """Percentiles of samples given in seconds."""
    arr = np.asarray(samples_s, dtype=float)
    if arr.size == 0:
        raise ValueError("no samples to summarize")
    p10, p50, p90 = np.percentile(arr, [10, 50, 90])
    return {"p50": float(p50), "p10": float(p10), "p90": float(p90), "min": float(arr.min()),
            "max": float(arr.max()), "samples": [float(x) for x in arr]}


def time_host(fn: Callable[[], Any], *, warmup: int = 1, repeats: int = 7, number: int = 1,
              sync: Callable[[], Any] | None = None) -> dict:
    """Wall time of ``fn()`` in seconds per call.

    ``sync`` runs inside the timed region (e.g. a device synchronize) so asynchronous work counts;
    ``number`` calls per sample time cheap calls (a dispatch of a few microseconds) above clock noise.
    """
    if repeats < 1 or number < 1:
        raise ValueError("repeats and number must be at least 1")

    def batch() -> None:
        for _ in range(number):
            fn()

    samples_ms = time_callable(batch, repeats=repeats, warmup=warmup, sync=sync)
    return summarize([ms * 1e-3 / number for ms in samples_ms])


def time_device(fn: Callable[[], Any], *, warmup: int = 1, repeats: int = 7, cupy: Any = None) -> dict:
    """GPU time of ``fn()`` in seconds, between CUDA events on the current stream (needs CuPy)."""
    if cupy is None:
        import cupy  # optional: only GPU studies time with events
    for _ in range(warmup):
        fn()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    samples = []
    for _ in range(repeats):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3)
    return summarize(samples)
