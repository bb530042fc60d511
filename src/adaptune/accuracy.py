"""Tunable arguments and accuracy observers, as Kernel Tuner's ``kernel_tuner.accuracy`` spells them.

``import adaptune as kernel_tuner`` gives ``kernel_tuner.accuracy.TunablePrecision``, and
``from adaptune.accuracy import TunablePrecision, AccuracyObserver`` replaces ``from kernel_tuner.accuracy
import ...``. ``adaptune.tune_kernel`` also takes Kernel Tuner's own objects of these classes (recognised by
their shape, without importing Kernel Tuner).

- :class:`Tunable`: an argument a tuning parameter picks from several arrays (``Tunable("layout", {"c": m,
  "f": m.T})``).
- :class:`TunablePrecision`: one array in the precision a tuning parameter names (``"half"``, ``"float"``,
  ``"double"``, ``"bfloat16"`` where ``ml_dtypes`` is installed). Unlike Kernel Tuner's, it makes no copy up
  front: each precision is cast where the kernel runs, the first time a configuration asks for it.
- :class:`AccuracyObserver`: the error of the outputs against ``answer`` under a name in each result row
  (``"RMSE"`` by default; the metrics of :func:`error_metric_from_name`). With an output observer and no
  ``verify`` function the outputs are observed, not checked against ``atol``: a lower precision is expected
  to differ.
"""

from __future__ import annotations

import re
from collections import UserDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

Metric = Callable[[np.ndarray, np.ndarray], float]


class Tunable(UserDict):
    """An argument chosen per configuration: ``arrays[value of param_key]`` (``param_key`` may also be a
    callable(params) or an expression of the parameters)."""

    def __init__(self, param_key: str | Callable[[dict[str, Any]], Hashable],
                 arrays: Mapping[Hashable, Any] | Sequence[Any]) -> None:
        super().__init__(dict(enumerate(arrays)) if isinstance(arrays, list | tuple) else arrays)
        self.param_key = param_key


def bfloat16() -> np.dtype | None:
    """bfloat16 from ``ml_dtypes`` (JAX installs it), or None."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


_FLOAT_NAMES = {np.dtype(np.float16): ("half", "f16", "float16", "__half", "khalf", 16),
                np.dtype(np.float32): ("float", "single", "f32", "float32", "kfloat", 32),
                np.dtype(np.float64): ("double", "f64", "float64", "kdouble", 64)}


def float_dtype(name: Any) -> np.dtype:
    """A precision's dtype from the names Kernel Tuner knows (``f16``, ``kfloat``, ``__nv_bfloat16``, 64...)."""
    key = name.lower() if isinstance(name, str) else name
    if key in ("bfloat16", "bf16", "kbfloat16", "__nv_bfloat16") and bfloat16() is not None:
        return bfloat16()  # type: ignore[return-value]
    for dtype, names in _FLOAT_NAMES.items():
        if key in names:
            return dtype
    return np.dtype(name)


def default_precisions() -> dict[str, np.dtype]:
    out = {"half": np.dtype(np.float16), "float": np.dtype(np.float32), "double": np.dtype(np.float64)}
    if bfloat16() is not None:
        out["bfloat16"] = bfloat16()  # type: ignore[assignment]
    return out


class TunablePrecision:
    """``array`` in the precision the parameter ``param_key`` names; ``dtypes``: names -> dtypes, or a list of
    names (default half, float, double and, with ``ml_dtypes``, bfloat16). The casts are made lazily."""

    def __init__(self, param_key: str | Callable[[dict[str, Any]], Hashable], array: Any,
                 dtypes: Mapping[str, Any] | Sequence[str] | None = None) -> None:
        if not dtypes:
            dtypes = default_precisions()
        elif isinstance(dtypes, list | tuple):
            dtypes = {name: float_dtype(name) for name in dtypes}
        self.param_key = param_key
        self.array = array if isinstance(array, np.generic) else np.asarray(array)
        self.dtypes = {k: np.dtype(v) for k, v in dtypes.items()}

    def __getitem__(self, precision: str) -> Any:
        return self.array.astype(self.dtypes[precision])

    def keys(self) -> list[str]:
        return list(self.dtypes)


# ---------------------------------------------------------------------------------------------- metrics
def _relative(a: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    return np.abs(a - b) / np.maximum(np.abs(a), eps)


def _log_difference(a: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    return np.log10(a + eps) - np.log10(b + eps)


#: metric -> (its names after normalising, error of (reference a, output b) with eps)
METRICS: dict[str, tuple[tuple[str, ...], Callable[[np.ndarray, np.ndarray, float], Any]]] = {
    "mse": (("mse", "mean squared"), lambda a, b, eps: np.mean(np.square(a - b))),
    "rmse": (("rmse", "root mean squared"), lambda a, b, eps: np.sqrt(np.mean(np.square(a - b)))),
    "nrmse": (("nrmse", "normalized root mean squared"),
              lambda a, b, eps: np.sqrt(np.mean(np.square(a - b)) / np.mean(np.square(a)))),
    "mae": (("mae", "absolute", "mean absolute"), lambda a, b, eps: np.mean(np.abs(a - b))),
    "mre": (("mre", "relative", "mean relative"), lambda a, b, eps: np.mean(_relative(a, b, eps))),
    "rmsre": (("rmsre", "root mean squared relative"),  # Kernel Tuner divides by max(a, eps), not |a|
              lambda a, b, eps: np.sqrt(np.mean(np.square(a - b) / np.square(np.maximum(a, eps))))),
    "male": (("male", "mean absolute logarithmic"), lambda a, b, eps: np.mean(np.abs(_log_difference(a, b, eps)))),
    "rmsle": (("rmsle", "root mean squared logarithmic"),
              lambda a, b, eps: np.sqrt(np.mean(np.square(_log_difference(a, b, eps))))),
    "max": (("maximum absolute", "maximum"), lambda a, b, eps: np.max(np.abs(a - b))),
    "max rel": (("maximum relative",), lambda a, b, eps: np.max(_relative(a, b, eps))),
}
_ABBREVIATIONS = {"average": "mean", "avg": "mean", "square": "squared", "sq": "squared", "max": "maximum",
                  "rel": "relative", "abs": "absolute", "log": "logarithmic"}


class ErrorMetric:
    """One of :data:`METRICS` on float64 copies of (reference, output); picklable, so it runs in the worker."""

    def __init__(self, name: str, eps: float = 1e-8) -> None:
        key = re.sub(r"[\s_-]+", " ", re.sub(r"\berror\b", " ", name.lower())).strip()
        key = " ".join(_ABBREVIATIONS.get(word, word) for word in key.split(" "))
        found = [m for m, (names, _) in METRICS.items() if key in names]
        if not found:
            raise ValueError(f"invalid error metric provided: {name}")
        self.name, self.metric, self.eps = name, found[0], eps

    def __call__(self, reference: np.ndarray, output: np.ndarray) -> float:
        a = np.asarray(reference).astype(np.float64, copy=False)
        b = np.asarray(output).astype(np.float64, copy=False).reshape(a.shape)
        return float(METRICS[self.metric][1](a, b, self.eps))


def error_metric_from_name(name: str, eps: float = 1e-8) -> ErrorMetric:
    """Kernel Tuner's metric names: MSE, RMSE, NRMSE, RMSRE, RMSLE, MAE, MRE, MALE, max, max rel (any case;
    "error", "_" and "-" ignored; avg/sq/max/rel/abs/log spelt out), e.g. ``"mean relative error"``."""
    return ErrorMetric(name, eps)


class AccuracyObserver:
    """The error of the outputs against the answer under ``key`` in each result: the largest over the outputs
    the answer gives. ``metric``: a name for :func:`error_metric_from_name` (default RMSE) or a
    ``callable(reference, output)``; ``atol`` keeps relative metrics from dividing by zero."""

    def __init__(self, metric: str | Metric | None = None, key: str = "error", *, atol: float = 1e-8) -> None:
        self.metric = error_metric_from_name(metric or "rmse", atol) if isinstance(metric, str | None) else metric
        self.key = key
        self.result: float | None = None

    def process_output(self, answers: Sequence[Any], outputs: Sequence[Any]) -> None:
        errors = [self.metric(a, o) for a, o in zip(answers, outputs, strict=False) if a is not None]
        self.result = max(errors) if errors else None

    def get_results(self) -> dict[str, Any]:
        return {self.key: self.result}


def observe_outputs(observer: Any, answer: Sequence[Any], outputs: Sequence[Any]) -> dict[str, float]:
    """One output observer's values for these outputs (those it could compute)."""
    observer.process_output(answer, outputs)
    return {k: float(v) for k, v in observer.get_results().items() if v is not None}
