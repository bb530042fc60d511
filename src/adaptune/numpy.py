"""``import adaptune.numpy as anp``: NumPy's interface, recorded lazily and compiled into fused GPU kernels.

    import adaptune.numpy as anp
    a = anp.random.random((4096, 4096)).astype(anp.float32)
    for _ in range(100):
        a[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    anp.flush()                 # one generated kernel per iteration, compiled once
    print(anp.last_flush())     # kernels, bytes moved, cache hit, host time

The device is CUDA (CuPy) when a GPU is present, else OpenCL (PoCL on a CPU); ``ADAPTUNE_LANG_DEVICE``
overrides. Anything NumPy has that is not compiled here runs eagerly (CuPy or NumPy) after one
``FallbackWarning`` naming it.
"""

from __future__ import annotations

import builtins as _builtins
from typing import Any

import numpy as _np

from adaptune.lang import ops as _ops
from adaptune.lang.array import (
    LazyArray,
    apply,
    asarray,
    divmod_,
    dot,
    eager,
    eager_numpy,
    matmul,
    mean,
    reduce,
)
from adaptune.lang.eager import FallbackWarning
from adaptune.lang.ir import Scalar, View, check_dtype
from adaptune.lang.jit import jit
from adaptune.lang.session import FlushStats, session, use_runtime

ndarray = LazyArray
newaxis = None
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
bool_, int32, int64, uint8, uint32 = _np.bool_, _np.int32, _np.int64, _np.uint8, _np.uint32
float32, float64 = _np.float32, _np.float64
dtype = _np.dtype

__all__ = ["FallbackWarning", "FlushStats", "LazyArray", "ndarray", "array", "asarray", "asnumpy", "flush",
           "last_flush", "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
           "arange", "linspace", "where", "sum", "prod", "max", "min", "amax", "amin", "mean", "any", "all",
           "dot", "matmul", "divmod", "jit", "reshape", "transpose", "random", "use_device"]


def flush() -> FlushStats:
    """Run everything recorded so far (the explicit flush point); returns what the flush did."""
    return session().flush()


def last_flush() -> FlushStats:
    return session().last


def use_device(kind: str | None = None, *, fast_math: bool = False) -> None:
    """Switch to a fresh session on ``"cuda"`` or ``"opencl"`` (pending work is flushed first).

    ``fast_math=True`` compiles with the compiler's relaxed floating point (approximate division and
    transcendentals, as JAX/XLA's GPU code does); the default keeps NumPy's IEEE results."""
    from adaptune.lang.runtime import Runtime

    use_runtime(Runtime(kind, fast_math=fast_math) if kind or fast_math else None)


def asnumpy(a: Any) -> _np.ndarray:
    return a.get() if isinstance(a, LazyArray) else _np.asarray(a)


def array(obj: Any, dtype: Any = None, copy: bool = True) -> LazyArray:
    if isinstance(obj, LazyArray):
        return obj.astype(dtype or obj.dtype, copy=copy)
    return asarray(obj, dtype)


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int | _np.integer) else tuple(int(s) for s in shape)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> LazyArray:
    shp = _shape(shape)
    if _builtins.any(n < 0 for n in shp):
        raise ValueError("negative dimensions are not allowed")
    if isinstance(fill_value, LazyArray) or _np.ndim(fill_value) > 0:  # an array of fill values, broadcast
        fill = asarray(fill_value)
        return fill.astype(dtype if dtype is not None else fill.dtype).broadcast_to(shp).copy()
    dt = check_dtype(dtype if dtype is not None else _np.asarray(fill_value).dtype)
    node = View(Scalar(fill_value, dt), shp, (0,) * len(shp), 0)
    return LazyArray.wrap(_fill(node))


def _fill(view: View) -> Any:
    from adaptune.lang.ir import Map

    return Map("cast", (view,), view.shape, view.dtype, view.dtype)


def zeros(shape: Any, dtype: Any = float64) -> LazyArray:
    return full(shape, 0, dtype)


def ones(shape: Any, dtype: Any = float64) -> LazyArray:
    return full(shape, 1, dtype)


def empty(shape: Any, dtype: Any = float64) -> LazyArray:
    return full(shape, 0, dtype)


def zeros_like(a: Any, dtype: Any = None) -> LazyArray:
    return zeros(_np.shape(a) if not isinstance(a, LazyArray) else a.shape, dtype or a.dtype)


def ones_like(a: Any, dtype: Any = None) -> LazyArray:
    return ones(a.shape, dtype or a.dtype)


def empty_like(a: Any, dtype: Any = None) -> LazyArray:
    return zeros(a.shape, dtype or a.dtype)


def full_like(a: Any, fill_value: Any, dtype: Any = None) -> LazyArray:
    return full(a.shape, fill_value, dtype or a.dtype)


def arange(*args: Any, dtype: Any = None) -> LazyArray:
    return asarray(_np.arange(*args, dtype=dtype))


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None) -> LazyArray:
    return asarray(_np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype))


def where(condition: Any, x: Any = None, y: Any = None) -> LazyArray:
    if x is None and y is None:
        return eager("where (one argument)", lambda c: c.nonzero(), condition)
    return apply("where", condition, x, y)


def sum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> LazyArray:  # noqa: A001
    return reduce("add", a, axis, dtype=dtype, keepdims=keepdims)


def prod(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> LazyArray:
    return reduce("multiply", a, axis, dtype=dtype, keepdims=keepdims)


def max(a: Any, axis: Any = None, keepdims: bool = False) -> LazyArray:  # noqa: A001
    return reduce("maximum", a, axis, keepdims=keepdims)


def min(a: Any, axis: Any = None, keepdims: bool = False) -> LazyArray:  # noqa: A001
    return reduce("minimum", a, axis, keepdims=keepdims)


amax, amin = max, min


def any(a: Any, axis: Any = None, keepdims: bool = False) -> LazyArray:  # noqa: A001
    return reduce("logical_or", a, axis, keepdims=keepdims)


def all(a: Any, axis: Any = None, keepdims: bool = False) -> LazyArray:  # noqa: A001
    return reduce("logical_and", a, axis, keepdims=keepdims)


divmod = divmod_  # noqa: A001


def reshape(a: Any, shape: Any) -> LazyArray:
    return asarray(a).reshape(shape)


def transpose(a: Any, axes: Any = None) -> LazyArray:
    return asarray(a).transpose(axes)


def _make_ufunc(name: str) -> Any:
    def ufunc(*args: Any) -> LazyArray:
        return apply(name, *args)

    ufunc.__name__ = name
    ufunc.__doc__ = f"Lazily recorded ``numpy.{name}``."
    return ufunc


for _name in _ops.UFUNCS:
    if _name not in ("cast", "where"):
        globals()[_name] = _make_ufunc(_name)
        __all__.append(_name)
abs = globals()["absolute"]  # noqa: A001


class _Random:
    """``anp.random``: NumPy's generator on the host, uploaded (same numbers on every device for a seed)."""

    def __init__(self) -> None:
        self._rng = _np.random.default_rng(0)

    def seed(self, seed: int | None = None) -> None:
        self._rng = _np.random.default_rng(seed)

    def random(self, size: Any = None, dtype: Any = float64) -> LazyArray:
        return asarray(self._rng.random(size, dtype=dtype))

    def rand(self, *shape: int) -> LazyArray:
        return asarray(self._rng.random(shape))

    def randn(self, *shape: int) -> LazyArray:
        return asarray(self._rng.standard_normal(shape))

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> LazyArray:
        return asarray(self._rng.uniform(low, high, size))

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> LazyArray:
        return asarray(self._rng.normal(loc, scale, size))

    def standard_normal(self, size: Any = None) -> LazyArray:
        return asarray(self._rng.standard_normal(size))

    def randint(self, low: int, high: int | None = None, size: Any = None) -> LazyArray:
        return asarray(self._rng.integers(low, high, size))


random = _Random()


def __getattr__(name: str) -> Any:
    """Any other NumPy function: run eagerly, after one warning naming it (lazy arrays may sit anywhere in
    its arguments: lists, tuples, keywords, ``out=``)."""
    target = getattr(_np, name, None)
    if callable(target):
        def fallback(*args: Any, **kwargs: Any) -> Any:
            return eager_numpy(name, *args, **kwargs)

        fallback.__name__ = name
        fallback.__doc__ = f"``numpy.{name}``, run eagerly (not compiled by adaptune)."
        return fallback
    raise AttributeError(f"module 'adaptune.numpy' has no attribute {name!r}")
