"""Input features: named callables returning numbers, evaluated in order, in parallel or ahead of time.

Nitro's ``fix_inputs`` starts feature evaluation as soon as the inputs are known and joins when the
variant is called; :class:`PendingFeatures` is that handle. Threads help when features release the
GIL (NumPy reductions over large arrays, GPU calls); for cheap pure-Python features sequential
evaluation is faster, so it stays the default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Feature:
    """One input feature: same arguments as the variants, returns a number."""

    name: str
    fn: Callable[..., float]


class FeatureError(ValueError):
    """A feature raised or returned something that is not a finite number."""


class FeatureSet:
    """The ordered features of one code variant and the ways to evaluate them."""

    def __init__(self) -> None:
        self.features: list[Feature] = []
        self._pool: ThreadPoolExecutor | None = None

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]

    def add(self, fn: Callable[..., float], name: str | None = None) -> Feature:
        name = name or getattr(fn, "__name__", "")
        if not name or name == "<lambda>":
            name = f"feature{len(self.features)}"
        if name in self.names:
            raise ValueError(f"feature {name!r} is already registered")
        feature = Feature(name, fn)
        self.features.append(feature)
        return feature

    def evaluate(self, args: Sequence[Any]) -> np.ndarray:
        """All features, in order, as a float vector (the hot path: no checks beyond float())."""
        return np.array([f.fn(*args) for f in self.features], dtype=float)

    def evaluate_checked(self, args: Sequence[Any]) -> np.ndarray:
        """Like :meth:`evaluate`, but a bad feature names itself (training and evaluation use this)."""
        values = []
        for f in self.features:
            try:
                v = float(f.fn(*args))
            except Exception as exc:  # a user function: report which one failed, and why
                raise FeatureError(f"feature {f.name!r} failed: {type(exc).__name__}: {exc}") from exc
            if not math.isfinite(v):
                raise FeatureError(f"feature {f.name!r} returned {v}, not a finite number")
            values.append(v)
        return np.array(values, dtype=float)

    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=max(1, min(8, len(self.features))),
                                            thread_name_prefix="adaptune-features")
        return self._pool

    def evaluate_parallel(self, args: Sequence[Any]) -> np.ndarray:
        """Every feature on its own thread; returns when all are done."""
        futures = [self.pool().submit(f.fn, *args) for f in self.features]
        return np.array([fut.result() for fut in futures], dtype=float)

    def start(self, args: Sequence[Any], parallel: bool) -> PendingFeatures:
        """Begin evaluating features in the background (Nitro's ``fix_inputs``)."""
        if parallel:
            futures = [self.pool().submit(f.fn, *args) for f in self.features]
        else:
            futures = [self.pool().submit(self.evaluate, args)]
        return PendingFeatures(tuple(args), futures, parallel)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


@dataclass
class PendingFeatures:
    """Features being evaluated for fixed inputs; :meth:`result` is the barrier."""

    args: tuple[Any, ...]
    futures: list[Future]
    parallel: bool

    def result(self) -> np.ndarray:
        if self.parallel:
            return np.array([f.result() for f in self.futures], dtype=float)
        return self.futures[0].result()
