"""Output checking: poison before the checked run, compare after it.

Poisoning (NaN for floats, 0x7f bytes for integers) makes a kernel that skips elements fail
even when the buffer happened to hold the right values from an earlier run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptune.measure.spec import Tolerance


def poison_value(dtype: np.dtype) -> np.ndarray:
    """One element of the poison pattern for ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.array([np.nan], dtype=dtype)
    return np.frombuffer(b"\x7f" * dtype.itemsize, dtype=dtype).copy()


def _tol(tol: Tolerance, i: int, default: float) -> float:
    if isinstance(tol, int | float):
        return float(tol)
    value = tol[i] if i < len(tol) else None
    return default if value is None else float(value)


def compare(i: int, got: Any, expected: Any, atol: float, rtol: float) -> str | None:
    """None when output ``i`` matches, else one line saying how it differs."""
    got_arr, exp_arr = np.asarray(got), np.asarray(expected)
    if got_arr.shape != exp_arr.shape and got_arr.size == exp_arr.size:
        got_arr = got_arr.reshape(exp_arr.shape)  # a flat device buffer checked against a shaped answer
    if got_arr.shape != exp_arr.shape:
        return f"output {i}: shape {got_arr.shape}, expected {exp_arr.shape}"
    if exp_arr.dtype.kind in "fc" or got_arr.dtype.kind in "fc":
        if _all_close(got_arr, exp_arr, atol, rtol):
            return None
        with np.errstate(invalid="ignore", over="ignore"):
            good = np.isclose(got_arr, exp_arr, atol=atol, rtol=rtol, equal_nan=False)
    else:
        good = got_arr == exp_arr
    if np.all(good):
        return None
    bad = np.flatnonzero(~np.asarray(good))
    first = int(bad[0])
    idx = np.unravel_index(first, exp_arr.shape) if exp_arr.ndim > 1 else first
    g, e = got_arr.reshape(-1)[first], exp_arr.reshape(-1)[first]
    line = f"output {i}: {bad.size} of {exp_arr.size} values differ; first at {idx}: got {g!r}, expected {e!r}"
    if exp_arr.dtype.kind in "fc":
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(got_arr.astype(np.complex128 if exp_arr.dtype.kind == "c" else np.float64) - exp_arr)
        finite = err[np.isfinite(err)]
        nonfinite = int(err.size - finite.size)
        line += f"; max abs error {float(finite.max()) if finite.size else float('nan'):.3g}"
        if nonfinite:
            line += f"; {nonfinite} not finite (unwritten elements stay NaN)"
    return line


def _all_close(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> bool:
    """``np.isclose(...).all()`` where every value is finite, in two temporaries instead of isclose's many
    (half the time on a 4096² output: Kernel Tuner's ``convolution_correct.py`` checks one per configuration).
    False also where a value is not finite (NaN, or an infinity isclose may still call close): the caller then
    asks isclose itself."""
    if "c" in (got.dtype.kind, expected.dtype.kind):
        return False  # complex values: isclose's own rules
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.subtract(got, expected)
        np.abs(diff, out=diff)
        bound = np.abs(expected).astype(diff.dtype, copy=False)  # a fresh array: scaled in place
        np.multiply(bound, rtol, out=bound)
        np.add(bound, atol, out=bound)
        # an infinite or NaN answer makes its bound infinite or NaN: isclose decides those (a finite output is
        # never close to an infinity, yet within an infinite bound)
        return bool(np.less_equal(diff, bound).all()) and (bound.size == 0 or bool(np.isfinite(bound.max())))


def check(outputs: Sequence[Any], answer: Sequence[Any] | Callable[[list[Any]], bool],
          atol: Tolerance, rtol: Tolerance) -> str | None:
    """None when ``outputs`` are right, else a message for ``Result.error``."""
    if callable(answer):
        try:
            ok = answer(list(outputs))
        except Exception as exc:  # the user's checker failing is a wrong result, with its reason
            return f"answer check raised {type(exc).__name__}: {exc}"
        return None if ok else "answer check returned False"
    if len(answer) != len(outputs):
        return f"got {len(outputs)} outputs, the answer has {len(answer)} entries"
    problems = []
    for i, (got, expected) in enumerate(zip(outputs, answer, strict=True)):
        if expected is None:
            continue
        msg = compare(i, got, expected, _tol(atol, i, 1e-6), _tol(rtol, i, 1e-5))
        if msg:
            problems.append(msg)
    return "; ".join(problems) or None
