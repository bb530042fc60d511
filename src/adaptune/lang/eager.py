"""Eager evaluation at the IR level, below the session: the array module interprets a trace.

``evaluate_eagerly`` runs a whole trace in CuPy (CUDA) or NumPy (OpenCL) when one of its generated
kernels failed to compile; ``warn_once`` is the one warning both eager paths give (this one and the
array-level fallback of unsupported NumPy functions in :mod:`adaptune.lang.array`), naming the
operation, so nothing runs eagerly unannounced and nothing wrong is returned silently.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptune.lang.ir import Buffer, Map, Node, Reduce, Scalar, Update, View, contiguous_strides


class FallbackWarning(UserWarning):
    """An operation ran eagerly (not compiled); the message names it."""


_warned: set[str] = set()


def warn_once(name: str, why: str = "is not compiled by adaptune.lang") -> None:
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"adaptune.numpy: {name} {why}; running it eagerly", FallbackWarning, stacklevel=4)


def cupy_tricks() -> Any:
    import cupy

    return cupy.lib.stride_tricks


def ufunc_of(xp: Any, name: str) -> Any:
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
            tricks = np.lib.stride_tricks if xp is np else cupy_tricks()
            out = tricks.as_strided(src[node.offset:], node.shape, tuple(s * item for s in node.strides))
        elif isinstance(node, Map):
            vals = [ev(c) for c in node.children]
            if node.op == "cast":
                out = vals[0].astype(node.dtype)
            elif node.op == "where":
                out = xp.where(vals[0].astype(bool), vals[1].astype(node.compute), vals[2].astype(node.compute))
            else:
                out = ufunc_of(xp, node.op)(*[v.astype(node.compute) for v in vals])
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
                tricks = np.lib.stride_tricks if xp is np else cupy_tricks()
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
