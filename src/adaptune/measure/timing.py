"""Sample collection: a fixed number of repeats, or adaptive repeats until the median is known.

The adaptive rule uses the distribution-free confidence interval of the median (order
statistics with binomial ranks), so it makes no normality assumption about run times, which
are usually skewed by a few slow outliers.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=512)
def _median_ci_ranks(n: int, confidence: float) -> tuple[int, int]:
    from scipy.stats import binom  # lazily: only adaptive repeats need it

    j = int(binom.ppf((1 - confidence) / 2, n, 0.5))
    return max(j - 1, 0), min(n - j, n - 1)


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median of ``samples``."""
    ordered = sorted(samples)
    lo, hi = _median_ci_ranks(len(ordered), confidence)
    return ordered[lo], ordered[hi]


def median_is_known(samples: Sequence[float], rel: float, confidence: float = 0.95) -> bool:
    """True when the CI half-width is within ``rel`` of the median."""
    if len(samples) < 3:
        return False
    lo, hi = median_ci(samples, confidence)
    med = statistics.median(samples)
    return (hi - lo) / 2 <= rel * abs(med)


#: Settling: warm-up runs (at least twice SETTLE_WINDOW) go on while the best of the last SETTLE_WINDOW runs is
#: SETTLE_GAIN faster than every run before them, for at most SETTLE_MAX_RUNS runs or SETTLE_MAX_MS milliseconds.
SETTLE_WINDOW, SETTLE_GAIN, SETTLE_MAX_RUNS, SETTLE_MAX_MS = 3, 0.05, 20, 500.0


def settle(run_once: Callable[[], float]) -> int:
    """Timed warm-up runs until the device runs the kernel at a steady speed; returns how many it took.

    Where the first runs after a build are slower than the rest (PoCL on two shared cores: about 10 runs, the first
    2-3x the later ones, in a plain PyOpenCL loop too), a fixed warm-up leaves the median of the timed runs on that
    slope rather than at the kernel's speed. A window of runs, not one, must stop improving: single runs there
    spike by 50 % and more."""
    times: list[float] = []
    while len(times) < SETTLE_MAX_RUNS and sum(times) < SETTLE_MAX_MS:
        times.append(run_once())
        if len(times) >= 2 * SETTLE_WINDOW and (min(times[-SETTLE_WINDOW:])
                                            >= (1 - SETTLE_GAIN) * min(times[:-SETTLE_WINDOW])):
            break
    return len(times)


def collect(run_once: Callable[[], float], repeats: int | str, *, min_repeats: int = 5,
            max_repeats: int = 100, max_seconds: float = 2.0, rel_ci: float = 0.02,
            give_up: Callable[[float], bool] | None = None, first: float | None = None) -> list[float]:
    """Call ``run_once`` (returns one sample in ms) ``repeats`` times, or adaptively for "auto".

    ``give_up(sample)`` true for the first two samples stops there (racing against the incumbent): one run far
    behind may be a hiccup of a shared host (PoCL on two shared cores: single runs spike by 50 % and more), so a
    second run must agree. ``first``: a sample already taken, counted as the first.
    """
    samples: list[float] = [first if first is not None else run_once()]
    if give_up is not None and give_up(samples[0]) and repeats != 1:
        samples.append(run_once())
        if give_up(samples[-1]):
            return samples
    if repeats != "auto":
        return [*samples, *(run_once() for _ in range(int(repeats) - len(samples)))]
    deadline = time.perf_counter() + max_seconds
    while len(samples) < max_repeats:
        samples.append(run_once())
        if len(samples) >= min_repeats and (median_is_known(samples, rel_ci) or time.perf_counter() > deadline):
            break
    return samples


def time_callable(fn: Callable[..., Any], args: Sequence[Any] = (), *, repeats: int | str = 7, warmup: int = 1,
                  sync: Callable[[], Any] | None = None, max_seconds: float = 2.0,
                  rel_ci: float = 0.02) -> list[float]:
    """Run ``fn(*args)`` in this process; return the ``repeats`` wall times in ms.

    ``sync`` is called inside the timed region after each call (e.g.
    ``cupy.cuda.Device().synchronize``) so asynchronous GPU work is counted.
    """
    def once() -> float:
        t0 = time.perf_counter_ns()
        fn(*args)
        if sync is not None:
            sync()
        return (time.perf_counter_ns() - t0) * 1e-6

    for _ in range(warmup):
        once()
    return collect(once, repeats, max_seconds=max_seconds, rel_ci=rel_ci)
