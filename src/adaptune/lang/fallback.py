"""Eager paths: operations the compiler does not handle run at once in CuPy (CUDA) or NumPy (OpenCL).

Each unsupported operation warns once (naming it) and then computes the right answer; nothing wrong is
returned silently. Library calls (matrix products) take the same route without a warning: calling
cuBLAS is what a compiler should do for them. ``evaluate_eagerly`` interprets a whole trace when one of
its generated kernels failed to compile.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptune.lang.ir import Buffer, Map, Node, Reduce, Scalar, Update, View, contiguous_strides
from adaptune.lang.session import session


class FallbackWarning(UserWarning):
    """An operation ran eagerly (not compiled); the message names it."""


_warned: set[str] = set()


def warn_once(name: str, why: str = "is not compiled by adaptune.lang") -> None:
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"adaptune.numpy: {name} {why}; running it eagerly", FallbackWarning, stacklevel=4)


def _xp_value(a: Any) -> Any:
    from adaptune.lang.array import LazyArray

    if not isinstance(a, LazyArray):
        return a
    sess = session()
    if not isinstance(a.base.node, Buffer):
        sess.flush()
    bnode = a.base.node
    return sess.runtime.as_xp(bnode.data, a.shape, a.strides, a.offset, a.dtype)


def _wrap(result: Any) -> Any:
    from adaptune.lang.array import asarray

    if isinstance(result, tuple):
        return tuple(_wrap(r) for r in result)
    if np.isscalar(result) or (hasattr(result, "ndim") and result.ndim == 0 and not hasattr(result, "device")):
        return asarray(np.asarray(result))
    return asarray(result)


def eager(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Warn once, then compute ``fn(*args)`` with the device's array module and wrap the result."""
    warn_once(name)
    return library(name, fn, *args)


def library(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    values = [_xp_value(a) for a in args]
    if session().runtime.kind == "cuda":
        import cupy

        values = [cupy.asarray(v) if isinstance(v, np.ndarray) else v for v in values]
    return _wrap(fn(*values))


def eager_setitem(target: Any, key: Any, value: Any) -> None:
    """``target[key] = value`` for keys the trace cannot express (arrays, masks, transposed views)."""
    from adaptune.lang.array import LazyArray, asarray

    warn_once("setitem with this index")
    sess = session()
    base = target.base
    if not isinstance(base.node, Buffer):
        sess.flush()
    bnode = base.node
    rt = sess.runtime
    whole = rt.as_xp(bnode.data, bnode.shape, contiguous_strides(bnode.shape), 0, bnode.dtype)
    whole = np.array(whole) if rt.kind == "opencl" else whole.copy()  # the old buffer may be shared
    item = whole.dtype.itemsize
    flat = whole.reshape(-1)
    view = (np.lib.stride_tricks if rt.kind == "opencl" else _cupy_tricks()).as_strided(
        flat[target.offset:], target.shape, tuple(s * item for s in target.strides))
    k = _xp_value(key) if isinstance(key, LazyArray) else key
    v = _xp_value(value) if isinstance(value, LazyArray) else value
    view[k] = v
    base.node = asarray(whole).base.node


def _cupy_tricks() -> Any:
    import cupy

    return cupy.lib.stride_tricks


def _ufunc(xp: Any, name: str) -> Any:
    if hasattr(xp, name):
        return getattr(xp, name)
    if xp is np:
        import scipy.special

        return getattr(scipy.special, name)
    import cupyx.scipy.special

    return getattr(cupyx.scipy.special, name)


def evaluate_eagerly(roots: Sequence[Node], runtime: Any, reason: str) -> list[Any]:
    """Interpret the trace under ``roots`` with the array module (the path taken when codegen fails)."""
    warn_once(reason.splitlines()[0], "failed to compile")
    xp = runtime.xp
    memo: dict[int, Any] = {}

    def ev(node: Node) -> Any:
        hit = memo.get(id(node))
        if hit is not None:
            return hit
        if isinstance(node, Buffer):
            out = runtime.as_xp(node.data, node.shape, contiguous_strides(node.shape), 0, node.dtype)
        elif isinstance(node, Scalar):
            out = xp.asarray(node.value)
        elif isinstance(node, View):
            src = xp.ascontiguousarray(ev(node.children[0])).reshape(-1)
            item = src.dtype.itemsize
            tricks = np.lib.stride_tricks if xp is np else _cupy_tricks()
            out = tricks.as_strided(src[node.offset:], node.shape, tuple(s * item for s in node.strides))
        elif isinstance(node, Map):
            vals = [ev(c) for c in node.children]
            if node.op == "cast":
                out = vals[0].astype(node.dtype)
            elif node.op == "where":
                out = xp.where(vals[0].astype(bool), vals[1].astype(node.compute), vals[2].astype(node.compute))
            else:
                out = _ufunc(xp, node.op)(*[v.astype(node.compute) for v in vals])
            out = xp.asarray(out).astype(node.dtype)
        elif isinstance(node, Reduce):
            out = getattr(xp, node.op).reduce(ev(node.children[0]).astype(node.dtype), axis=node.axes)
        elif isinstance(node, Update):
            old, val = (ev(c) for c in node.children)
            out = xp.array(old, copy=True)
            if node.strided is not None:
                strides, offset = node.strided
                flat = out.reshape(-1)
                item = flat.dtype.itemsize
                tricks = np.lib.stride_tricks if xp is np else _cupy_tricks()
                view = tricks.as_strided(flat[offset:], val.shape, tuple(s * item for s in strides))
                view[...] = val
            elif node.rng is not None:
                out.reshape(-1)[node.rng:node.rng + val.size] = val.reshape(-1)
            else:
                index = tuple(slice(s, s + st * c if s + st * c >= 0 else None, st) for s, st, c in node.region)
                out[index] = val.reshape(tuple(c for _, _, c in node.region))
        else:
            raise TypeError(f"cannot interpret {type(node).__name__}")
        memo[id(node)] = out
        return out

    return [runtime.from_xp(xp.ascontiguousarray(ev(r))) for r in roots]
