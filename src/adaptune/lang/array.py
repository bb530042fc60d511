"""``LazyArray``: NumPy's array interface over the recorded trace, and the eager path for the rest of NumPy.

An array is a view (shape, strides, offset, in elements) of a :class:`~adaptune.lang.session.Base`,
whose current version is an IR node. Operations build nodes and return new arrays immediately; nothing
runs until a value is needed (``.get()``, ``np.asarray``, ``print``, ``float``/``bool``, or ``flush()``).
Views alias like NumPy's: ``c = a[1:-1]; c[:] = 0`` changes ``a``. Shape errors and unsupported dtypes raise
NumPy's own exception types.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptune.lang import ops
from adaptune.lang.eager import cupy_tricks, warn_once
from adaptune.lang.ir import (
    SUPPORTED_SET,
    Buffer,
    Map,
    Node,
    Reduce,
    Scalar,
    Update,
    View,
    check_dtype,
    contiguous_strides,
    nested_view,
)
from adaptune.lang.session import Base, session

PyScalar = (bool, int, float)


class LazyArray:
    """A lazily evaluated n-dimensional array on the device (see the module docstring)."""

    __slots__ = ("base", "shape", "dtype", "strides", "offset", "region", "vdims", "whole", "__weakref__")
    __array_priority__ = 100

    def __init__(self, base: Base, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
                 region: tuple[tuple[int, int, int], ...] | None, vdims: tuple[int, ...] | None,
                 whole: bool | None = None) -> None:
        self.base = base
        self.shape = shape
        self.dtype: np.dtype = base.node.dtype  # a base's dtype never changes: read on every recorded operation
        self.strides = strides
        self.offset = offset
        self.region = region
        self.vdims = vdims
        # the view is its base, all of it in C order (a base's shape never changes), so ``node()`` is the base's
        # node: known once here instead of compared on every operation that reads this array
        self.whole = whole if whole is not None else (
            offset == 0 and shape == base.node.shape and strides == contiguous_strides(shape))

    # ------------------------------------------------------------------------ construction

    @classmethod
    def wrap(cls, node: Node) -> LazyArray:
        if node.children:  # an expression (buffers and scalars have no children): computed at the next flush
            return _expression(node)
        strides, region, vdims = _whole(node.shape)
        return cls(Base(node), node.shape, strides, 0, region, vdims, True)

    def node(self) -> Node:
        """The IR node of this view's current value."""
        if self.whole:
            return self.base.node
        return View(self.base.node, self.shape, self.strides, self.offset)

    # ------------------------------------------------------------------------ NumPy attributes

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def T(self) -> LazyArray:  # noqa: N802 - NumPy's name
        return self.transpose()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # ------------------------------------------------------------------------ flush points

    def get(self) -> np.ndarray:
        """The value as a NumPy array (flushes the pending trace)."""
        sess = session()
        sess.reads += 1
        if not isinstance(self.base.node, Buffer):
            sess.flush()
        bnode = self.base.node
        assert isinstance(bnode, Buffer)
        rt = sess.runtime
        if self.whole:
            return rt.download(bnode.data, self.shape, self.dtype)
        full = rt.download(bnode.data, (bnode.size,), self.dtype)
        item = full.dtype.itemsize
        if self.size == 0:
            return np.empty(self.shape, self.dtype)
        view = np.lib.stride_tricks.as_strided(full[self.offset:], self.shape,
                                               tuple(s * item for s in self.strides))
        return view.copy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.get()
        return out.astype(dtype) if dtype is not None else out

    def tolist(self) -> Any:
        return self.get().tolist()

    def item(self) -> Any:
        return self.get().item()

    def __float__(self) -> float:
        return float(self.get())

    def __int__(self) -> int:
        return int(self.get())

    def __index__(self) -> int:
        if self.dtype.kind not in "iu":
            raise TypeError("only integer arrays can be converted to an index")
        return int(self.get())

    def __bool__(self) -> bool:
        return bool(self.get())

    def __repr__(self) -> str:
        return "anp." + repr(self.get())

    def __str__(self) -> str:
        return str(self.get())

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # ------------------------------------------------------------------------ views

    def __getitem__(self, key: Any) -> LazyArray:
        if _advanced(key):
            return eager("advanced indexing", lambda a, k: a[k], self, key)
        if key is Ellipsis:  # a[...]: the same view (the common target of an update)
            return LazyArray(self.base, self.shape, self.strides, self.offset, self.region, self.vdims,
                             self.whole)
        if not isinstance(key, tuple):
            key = (key,)
        view = (self.shape, self.strides, self.region, self.vdims)
        sig = _index_signature(key)
        if sig is None:  # (NumPy integers, say): worked out every time
            shape, strides, delta, region, vdims = _basic_index(*view, key)
        else:  # a loop indexes the same way every step: worked out once per view and key
            hit = _BASIC_VIEWS.get((view, sig))
            if hit is None:
                hit = _basic_index(*view, key)
                if len(_BASIC_VIEWS) >= BASIC_VIEW_ENTRIES:
                    _BASIC_VIEWS.clear()
                _BASIC_VIEWS[(view, sig)] = hit
            shape, strides, delta, region, vdims = hit
        return LazyArray(self.base, shape, strides, self.offset + delta, region, vdims)

    def __setitem__(self, key: Any, value: Any) -> None:
        if key is Ellipsis:
            target = self  # ``a[...] = v``, the common update: ``self[...]`` would be a copy of this view
        elif _advanced(key):
            eager_setitem(self, key, value)
            return
        else:
            target = self[key]
        if target.size == 0:
            return
        if isinstance(value, LazyArray) and value.base is self.base and value.shape == target.shape and \
                value.strides == target.strides and value.offset == target.offset:
            return  # a view assigned to itself (``a[3] += 1`` ends so, after __iadd__ wrote it): nothing to do
        val = value if isinstance(value, LazyArray) else None
        if val is None:
            if isinstance(value, PyScalar + (np.generic,)):
                vnode: Node = Scalar(value, self.dtype)
                vshape: tuple[int, ...] = ()
            else:
                val = asarray(value)
        if val is not None:
            if val.shape != target.shape:
                try:
                    if broadcast_shapes(val.shape, target.shape) != target.shape:
                        raise ValueError
                except ValueError:
                    raise ValueError(f"could not broadcast input array from shape {val.shape} into shape "
                                     f"{target.shape}") from None
                val = val.broadcast_to(target.shape)
            vnode = val.node()
            vshape = val.shape
        if vnode.dtype != self.dtype:
            vnode = Map("cast", (vnode,), vnode.shape, self.dtype, vnode.dtype)
        if vshape != target.shape:  # a scalar: broadcast through a zero-stride view
            vnode = View(vnode, target.shape, (0,) * target.ndim, 0)
        base = self.base
        if target.region is not None:
            new = Update(base.node, target.region, target.vdims or (), vnode)
        elif target.strides == contiguous_strides(target.shape):
            new = Update(base.node, (), (), vnode, rng=target.offset)
        elif nested_view(target.shape, target.strides):
            new = Update(base.node, (), (), vnode, strided=(target.strides, target.offset))
        else:
            eager_setitem(self, key, value)
            return
        base.node = new
        session().track(base)

    def broadcast_node(self, shape: tuple[int, ...]) -> Node:
        """``self.broadcast_to(shape).node()`` without the intermediate array (a recorded operation over
        differently shaped operands builds one per operand)."""
        if shape == self.shape:
            return self.node()
        strides = _broadcast_strides(self.shape, self.strides, shape)
        bnode = self.base.node
        if self.offset == 0 and shape == bnode.shape and strides == contiguous_strides(shape):
            return bnode  # (only a zero-size broadcast can come back to its whole base)
        return View(bnode, shape, strides, self.offset)

    def broadcast_to(self, shape: tuple[int, ...]) -> LazyArray:
        shape = tuple(shape)
        if shape == self.shape:
            return self
        return LazyArray(self.base, shape, _broadcast_strides(self.shape, self.strides, shape), self.offset,
                         None, None)

    def transpose(self, *axes: Any) -> LazyArray:
        if len(axes) == 1 and isinstance(axes[0], Sequence | type(None)):
            axes = tuple(axes[0]) if axes[0] is not None else ()
        perm = tuple(range(self.ndim))[::-1] if not axes else tuple(int(a) % self.ndim for a in axes)
        if sorted(perm) != list(range(self.ndim)):
            raise ValueError("axes don't match array")
        region = self.region
        vdims = tuple(self.vdims[p] for p in perm) if self.vdims is not None else None
        return LazyArray(self.base, tuple(self.shape[p] for p in perm), tuple(self.strides[p] for p in perm),
                         self.offset, region if vdims is not None and _ordered(vdims) else None,
                         vdims if vdims is not None and _ordered(vdims) else None)

    def reshape(self, *shape: Any) -> LazyArray:
        if len(shape) == 1 and isinstance(shape[0], Sequence):
            shape = tuple(shape[0])
        new = _reshape_shape(self.size, tuple(int(s) for s in shape))
        if self.strides != contiguous_strides(self.shape):
            return self.copy().reshape(new)
        return LazyArray(self.base, new, contiguous_strides(new), self.offset, None, None)

    def ravel(self) -> LazyArray:
        return self.reshape(-1)

    def flatten(self) -> LazyArray:
        return self.copy().reshape(-1)

    def copy(self) -> LazyArray:
        node = self.node()
        if isinstance(node, View):
            return LazyArray.wrap(Map("cast", (node,), node.shape, node.dtype, node.dtype))
        if isinstance(node, Buffer):
            node.share()  # two arrays hold one storage now: neither may be written in place
        return LazyArray.wrap(node)  # versions are immutable: sharing the node is a copy

    def astype(self, dtype: Any, copy: bool = True) -> LazyArray:
        dt = check_dtype(dtype)
        if dt == self.dtype:
            return self.copy() if copy else self
        node = self.node()
        return LazyArray.wrap(Map("cast", (node,), node.shape, dt, node.dtype))

    def fill(self, value: Any) -> None:
        self[...] = value

    # ------------------------------------------------------------------------ arithmetic

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            return divmod_(*inputs) if ufunc.__name__ == "divmod" else apply(ufunc.__name__, *inputs)
        out = kwargs.get("out")
        if method == "__call__" and set(kwargs) == {"out"} and isinstance(out, tuple) and len(out) == 1 \
                and isinstance(out[0], LazyArray):
            out[0][...] = apply(ufunc.__name__, *inputs)  # out= becomes a recorded write
            return out[0]
        if method == "reduce" and ufunc.__name__ in ops.REDUCTIONS and set(kwargs) <= {"axis", "keepdims"}:
            return reduce(ufunc.__name__, inputs[0], kwargs.get("axis", 0), keepdims=kwargs.get("keepdims", False))
        return eager(f"{ufunc.__name__}.{method}", getattr(ufunc, method), *inputs, **kwargs)

    def __add__(self, o): return binary("add", self, o)  # noqa: E704
    def __radd__(self, o): return binary("add", o, self)  # noqa: E704
    def __sub__(self, o): return binary("subtract", self, o)  # noqa: E704
    def __rsub__(self, o): return binary("subtract", o, self)  # noqa: E704
    def __mul__(self, o): return binary("multiply", self, o)  # noqa: E704
    def __rmul__(self, o): return binary("multiply", o, self)  # noqa: E704
    def __truediv__(self, o): return binary("true_divide", self, o)  # noqa: E704
    def __rtruediv__(self, o): return binary("true_divide", o, self)  # noqa: E704
    def __floordiv__(self, o): return binary("floor_divide", self, o)  # noqa: E704
    def __rfloordiv__(self, o): return binary("floor_divide", o, self)  # noqa: E704
    def __mod__(self, o): return binary("remainder", self, o)  # noqa: E704
    def __rmod__(self, o): return binary("remainder", o, self)  # noqa: E704
    def __divmod__(self, o): return divmod_(self, o)  # noqa: E704
    def __rdivmod__(self, o): return divmod_(o, self)  # noqa: E704
    def __pow__(self, o): return _power(self, o)  # noqa: E704
    def __rpow__(self, o): return binary("power", o, self)  # noqa: E704
    def __neg__(self): return apply("negative", self)  # noqa: E704
    def __pos__(self): return apply("positive", self)  # noqa: E704
    def __abs__(self): return apply("absolute", self)  # noqa: E704
    def __invert__(self): return apply("invert" if self.dtype == np.bool_ else "bitwise_not", self)  # noqa: E704
    def __and__(self, o): return binary("bitwise_and", self, o)  # noqa: E704
    def __rand__(self, o): return binary("bitwise_and", o, self)  # noqa: E704
    def __or__(self, o): return binary("bitwise_or", self, o)  # noqa: E704
    def __ror__(self, o): return binary("bitwise_or", o, self)  # noqa: E704
    def __xor__(self, o): return binary("bitwise_xor", self, o)  # noqa: E704
    def __lt__(self, o): return binary("less", self, o)  # noqa: E704
    def __le__(self, o): return binary("less_equal", self, o)  # noqa: E704
    def __gt__(self, o): return binary("greater", self, o)  # noqa: E704
    def __ge__(self, o): return binary("greater_equal", self, o)  # noqa: E704
    def __eq__(self, o): return binary("equal", self, o)  # noqa: E704
    def __ne__(self, o): return binary("not_equal", self, o)  # noqa: E704
    def __matmul__(self, o): return matmul(self, o)  # noqa: E704
    def __rmatmul__(self, o): return matmul(o, self)  # noqa: E704

    __hash__ = None  # type: ignore[assignment]  # mutable, like ndarray

    def _inplace(self, name: str, o: Any) -> LazyArray:
        self[...] = binary(name, self, o)
        return self

    def __iadd__(self, o): return self._inplace("add", o)  # noqa: E704
    def __isub__(self, o): return self._inplace("subtract", o)  # noqa: E704
    def __imul__(self, o): return self._inplace("multiply", o)  # noqa: E704
    def __itruediv__(self, o): return self._inplace("true_divide", o)  # noqa: E704
    def __ifloordiv__(self, o): return self._inplace("floor_divide", o)  # noqa: E704
    def __imod__(self, o): return self._inplace("remainder", o)  # noqa: E704

    # ------------------------------------------------------------------------ reductions

    def sum(self, axis=None, dtype=None, keepdims=False):  # noqa: D102
        return reduce("add", self, axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):  # noqa: D102
        return reduce("multiply", self, axis, dtype=dtype, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):  # noqa: D102
        return reduce("maximum", self, axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):  # noqa: D102
        return reduce("minimum", self, axis, keepdims=keepdims)

    def any(self, axis=None, keepdims=False):  # noqa: D102
        return reduce("logical_or", self, axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):  # noqa: D102
        return reduce("logical_and", self, axis, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):  # noqa: D102
        return mean(self, axis, dtype=dtype, keepdims=keepdims)


_INDEX_ARRAYS = (LazyArray, np.ndarray, list)


_SLICE_PARTS = frozenset((type(None), int))
_BASIC_VIEWS: dict[tuple, tuple] = {}  # (view, index signature) -> _basic_index
BASIC_VIEW_ENTRIES = 4096


def _index_signature(key: tuple) -> tuple | None:
    """A hashable stand-in for a basic index (slices are not hashable before Python 3.12); None where the key
    holds anything but None, ``...``, Python ints and slices of them."""
    sig: list[Any] = []
    for k in key:
        t = type(k)
        if t is int or k is None or k is Ellipsis:
            sig.append(k)
        elif t is slice and type(k.start) in _SLICE_PARTS and type(k.stop) in _SLICE_PARTS \
                and type(k.step) in _SLICE_PARTS:
            sig.append((k.start, k.stop, k.step))
        else:
            return None
    return tuple(sig)


def _basic_index(shape_in: tuple[int, ...], strides_in: tuple[int, ...],
                 region_in: tuple[tuple[int, int, int], ...] | None, vdims_in: tuple[int, ...] | None,
                 key: tuple) -> tuple[tuple[int, ...], tuple[int, ...], int, Any, Any]:
    """NumPy's basic indexing of a view: (shape, strides, offset added, region, vdims) of the result."""
    ndim = len(shape_in)
    if len(key) == ndim and all(type(k) is slice for k in key):
        expanded: list[Any] = list(key)  # the common case: one slice per dimension
    else:
        n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
        if sum(1 for k in key if k is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if n_real > ndim:
            raise IndexError(f"too many indices for array: array is {ndim}-dimensional, "
                             f"but {n_real} were indexed")
        expanded = []
        for k in key:
            if k is Ellipsis:
                expanded.extend([slice(None)] * (ndim - n_real))
            else:
                expanded.append(k)
        expanded.extend([slice(None)] * (ndim - sum(1 for k in expanded if k is not None)))
    shape, strides, vdims = [], [], []
    offset = 0
    region = list(region_in) if region_in is not None else None
    d = 0
    for k in expanded:
        if k is None:
            shape.append(1)
            strides.append(0)
            vdims.append(-1)
            continue
        n, st = shape_in[d], strides_in[d]
        bd = vdims_in[d] if vdims_in is not None else -1
        if type(k) is slice:
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if count:
                offset += start * st
            shape.append(count)
            strides.append(st * step)
            if region is not None and bd >= 0:
                s0, s1, _ = region[bd]
                region[bd] = (s0 + start * s1, s1 * step, count)
            vdims.append(bd)
        elif isinstance(k, numbers.Integral) and not isinstance(k, bool):
            i = int(k) + n if int(k) < 0 else int(k)
            if not 0 <= i < n:
                raise IndexError(f"index {int(k)} is out of bounds for axis {d} with size {n}")
            offset += i * st
            if region is not None and bd >= 0:
                s0, s1, _ = region[bd]
                region[bd] = (s0 + i * s1, s1, 1)
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
                             "integer or boolean arrays are valid indices")
        d += 1
    return (tuple(shape), tuple(strides), offset, tuple(region) if region is not None else None,
            tuple(vdims) if region is not None else None)


def _advanced(key: Any) -> bool:
    """True for keys only the eager path handles (integer or boolean arrays, lists, in a tuple too)."""
    if isinstance(key, _INDEX_ARRAYS):
        return True
    if type(key) is tuple:
        for k in key:
            if isinstance(k, _INDEX_ARRAYS):
                return True
    return False


@functools.lru_cache(maxsize=4096)
def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """``np.broadcast_shapes`` for shape tuples, cached: NumPy's builds arrays per call (several us, on every
    recorded operation over differently shaped operands); NumPy's own error on a mismatch."""
    if len(set(shapes)) == 1:
        return shapes[0]
    out: list[int] = []
    for dims in itertools.zip_longest(*[s[::-1] for s in shapes], fillvalue=1):
        sizes = set(dims) - {1}
        if len(sizes) > 1:
            return np.broadcast_shapes(*shapes)  # raises NumPy's ValueError
        out.append(sizes.pop() if sizes else 1)
    return tuple(out[::-1])


@functools.lru_cache(maxsize=4096)
def _broadcast_strides(shape: tuple[int, ...], strides: tuple[int, ...], to: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a view of ``shape``/``strides`` broadcast to ``to`` (NumPy's ValueError on a mismatch);
    cached: a loop broadcasts the same operands every step."""
    broadcast_shapes(shape, to)  # NumPy's ValueError on mismatch
    lead = len(to) - len(shape)
    if lead < 0:
        raise ValueError(f"cannot broadcast a non-scalar to a scalar array: {shape} -> {to}")
    out = [0] * lead
    for n_in, n_out, st in zip(shape, to[lead:], strides, strict=True):
        if n_in == n_out:
            out.append(st)
        elif n_in == 1:
            out.append(0)
        else:
            raise ValueError(f"operands could not be broadcast together with remapped shapes "
                             f"{shape} and requested shape {to}")
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _whole(shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[tuple[int, int, int], ...], tuple[int, ...]]:
    return contiguous_strides(shape), tuple((0, 1, n) for n in shape), tuple(range(len(shape)))


def _ordered(vdims: tuple[int, ...]) -> bool:
    real = [d for d in vdims if d >= 0]
    return real == sorted(real)


def _reshape_shape(size: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    known = math.prod([s for s in shape if s != -1])
    if -1 in shape:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return shape


# ---------------------------------------------------------------------------- construction helpers


def asarray(obj: Any, dtype: Any = None) -> LazyArray:
    """A device array from a LazyArray, NumPy array, CuPy array, scalar or nested list."""
    if isinstance(obj, LazyArray):
        return obj if dtype is None or np.dtype(dtype) == obj.dtype else obj.astype(dtype)
    sess = session()
    if type(obj).__module__.startswith("cupy") and sess.runtime.kind == "cuda":
        dt = check_dtype(dtype or obj.dtype)
        data = sess.runtime.from_xp(obj.astype(dt, copy=False))
        return LazyArray.wrap(Buffer(data, tuple(obj.shape), dt))
    if type(obj).__module__.startswith("cupy"):
        obj = obj.get()
    host = np.asarray(obj, dtype=dtype)
    if host.dtype == np.float16 or host.dtype.kind in "c":
        check_dtype(host.dtype)
    if dtype is None and host.dtype not in SUPPORTED_SET:
        host = host.astype(_default_for(host.dtype))
    dt = check_dtype(host.dtype)
    return LazyArray.wrap(Buffer(sess.runtime.upload(host), host.shape, dt, owned=True))


def _default_for(dt: np.dtype) -> np.dtype:
    """Unsupported integer widths are widened the way NumPy would compute with them."""
    if dt.kind == "i":
        return np.dtype(np.int64) if dt.itemsize > 4 else np.dtype(np.int32)
    if dt.kind == "u":
        return np.dtype(np.int64)
    return dt


_PY_SCALARS = frozenset(PyScalar)
_PLAIN = _PY_SCALARS | {LazyArray}  # operands ``_operand`` returns as they are (exact types)


def _operand(o: Any) -> Any:
    if isinstance(o, (LazyArray, PyScalar, np.generic)):
        return o
    if isinstance(o, np.ndarray) and o.ndim == 0:
        return o[()]
    return asarray(o)


_RESOLVED: dict[tuple, tuple[np.dtype, np.dtype, bool]] = {}  # (ufunc, operands' dtypes or types) -> _resolved


def _resolved(name: str, ops_in: list[Any]) -> tuple[np.dtype, np.dtype, bool]:
    """(output dtype, compute dtype, whether the compiler takes it) of ``np.<name>`` over the operands, cached by
    the arrays' dtypes and the scalars' types: NumPy's rules (``ops.resolve``) depend on nothing else, and a
    recorded operation then pays one dict look-up for them."""
    key = (name, *[o.dtype if isinstance(o, LazyArray) else type(o) for o in ops_in])
    hit = _RESOLVED.get(key)
    if hit is None:
        keys = [o.dtype if isinstance(o, LazyArray) else np.dtype(type(o)) if isinstance(o, np.generic) else o
                for o in ops_in]
        out, compute = ops.resolve(name, keys)
        if out not in SUPPORTED_SET:
            check_dtype(out)  # NumPy's TypeError, not cached
        compiles = compute.kind in ops.UFUNCS[name][2] or (compute.kind == "b" and name in ops.BOOL_OPS)
        hit = _RESOLVED[key] = (out, compute, compiles)
    return hit


def _expression(node: Node) -> LazyArray:
    """A new array over a new operation node, tracked for the next flush (``LazyArray.wrap``'s expression case;
    recording's hot path calls it directly: no class-method binding, no check)."""
    base = Base(node)
    session().track(base)
    shape = node.shape
    strides, region, vdims = _whole(shape)
    return LazyArray(base, shape, strides, 0, region, vdims, True)


def binary(name: str, x: Any, y: Any) -> LazyArray:
    """``apply(name, x, y)``: the common step, once its types were resolved, without the general path's loops
    (same key, same nodes); the operators call it directly."""
    tx, ty = type(x), type(y)
    if tx is LazyArray and (ty is LazyArray or ty in _PY_SCALARS):
        hit = _RESOLVED.get((name, x.dtype, y.dtype if ty is LazyArray else ty))
        if hit is not None and hit[2]:
            out, compute, _ = hit
            if ty is not LazyArray:  # (``node()`` inlined for the common whole array)
                return _expression(Map(name, (x.base.node if x.whole else x.node(), Scalar(y, compute)), x.shape,
                                       out, compute))
            if x.shape == y.shape:
                return _expression(Map(name, (x.base.node if x.whole else x.node(),
                                              y.base.node if y.whole else y.node()), x.shape, out, compute))
            shape = broadcast_shapes(x.shape, y.shape)  # (NumPy's ValueError on a mismatch)
            return _expression(Map(name, (x.broadcast_node(shape), y.broadcast_node(shape)), shape, out, compute))
    elif ty is LazyArray and tx in _PY_SCALARS:
        hit = _RESOLVED.get((name, tx, y.dtype))
        if hit is not None and hit[2]:
            out, compute, _ = hit
            return _expression(Map(name, (Scalar(x, compute), y.base.node if y.whole else y.node()), y.shape, out,
                                   compute))
    return _apply(name, (x, y))


def apply(name: str, *operands: Any) -> LazyArray:
    """Record ``np.<name>(*operands)`` element-wise (broadcasting, NumPy's dtype rules); eager if unknown."""
    if len(operands) == 2:
        return binary(name, *operands)
    return _apply(name, operands)


def _apply(name: str, operands: tuple[Any, ...]) -> LazyArray:
    if name not in ops.UFUNCS:
        return eager(name, getattr(np, name), *operands)
    ops_in = [o if type(o) in _PLAIN else _operand(o) for o in operands]
    out, compute, compiles = _resolved(name, ops_in)
    if not compiles:
        return eager(f"{name} on {compute.name}", getattr(np, name), *ops_in)
    shapes = [o.shape for o in ops_in if isinstance(o, LazyArray)]
    shape = shapes[0] if len(shapes) == 1 else broadcast_shapes(*shapes)
    children: list[Node] = []
    for o in ops_in:
        if isinstance(o, LazyArray):
            children.append(o.broadcast_node(shape))
        else:
            children.append(Scalar(o, o.dtype if isinstance(o, np.generic) else compute))
    return LazyArray.wrap(Map(name, tuple(children), shape, out, compute))


def divmod_(a: Any, b: Any) -> tuple[LazyArray, LazyArray]:
    """``np.divmod``: floor quotient and remainder, recorded together (one fused kernel computes both)."""
    return apply("floor_divide", a, b), apply("remainder", a, b)


def _power(a: LazyArray, o: Any) -> LazyArray:
    if isinstance(o, numbers.Integral) and not isinstance(o, bool) and 0 <= int(o) <= 4:
        if int(o) == 0:
            return apply("add", apply("multiply", a, 0), 1)
        result = a
        for _ in range(int(o) - 1):
            result = apply("multiply", result, a)
        return result
    return apply("power", a, o)


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if type(axis) is int:  # the common ``axis=k``: a look-up (a recorded reduction pays it every step)
        hit = _ONE_AXIS.get((axis, ndim))
        if hit is None:
            if not -ndim <= axis < ndim:
                raise np.exceptions.AxisError(axis, ndim)
            hit = _ONE_AXIS[(axis, ndim)] = (axis % ndim,)
        return hit
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= int(a) < ndim:
            raise np.exceptions.AxisError(int(a), ndim)
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(out))


_ONE_AXIS: dict[tuple[int, int], tuple[int]] = {}  # (axis, ndim) -> normalize_axes (bounded: ndim <= 64)


def reduce(op: str, a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> LazyArray:
    """``np.<op>.reduce`` over ``axis`` (None: all), NumPy's result dtype, fused with ``a``'s producer."""
    a = a if isinstance(a, LazyArray) else asarray(a)
    axes = normalize_axes(axis, a.ndim)
    src = a.node()
    if dtype is not None:
        dt = check_dtype(dtype)
        if dt != src.dtype:
            src = Map("cast", (src,), src.shape, dt, src.dtype)
    out_dt = ops.reduce_dtype(op, src.dtype)
    if op in ("logical_or", "logical_and"):
        src = Map("cast", (src,), src.shape, np.dtype(np.bool_), src.dtype) if src.dtype != np.bool_ else src
        out_dt = np.dtype(np.bool_)
    length = math.prod([a.shape[d] for d in axes])
    if length == 0 and op in ("maximum", "minimum"):
        raise ValueError(f"zero-size array to reduction operation {op} which has no identity")
    if not axes:
        result = LazyArray.wrap(Map("cast", (src,), src.shape, out_dt, src.dtype))
    else:
        result = LazyArray.wrap(Reduce(op, src, axes, out_dt))
    if keepdims:
        result = result.reshape(tuple(1 if d in axes else n for d, n in enumerate(a.shape)))
    return result


def mean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> LazyArray:
    a = a if isinstance(a, LazyArray) else asarray(a)
    axes = normalize_axes(axis, a.ndim)
    count = math.prod([a.shape[d] for d in axes])
    acc = dtype or (np.float64 if a.dtype.kind in "biu" else a.dtype)
    total = reduce("add", a, axis, dtype=acc, keepdims=keepdims)
    return apply("true_divide", total, float(count)) if count else apply("multiply", total, float("nan"))


def dot(a: Any, b: Any) -> LazyArray:
    """``np.dot`` through the vendor library (cuBLAS via CuPy; NumPy's BLAS on the OpenCL device); a scalar
    operand multiplies, as in NumPy."""
    if _ndim(a) == 0 or _ndim(b) == 0:
        return apply("multiply", a, b)
    return library("dot", lambda x, y: session().runtime.xp.dot(x, y), a, b)


def matmul(a: Any, b: Any) -> LazyArray:
    """``a @ b`` through the vendor library (cuBLAS via CuPy; NumPy's BLAS on the OpenCL device)."""
    return library("matmul", lambda x, y: x @ y, a, b)


def _ndim(v: Any) -> int:
    return v.ndim if isinstance(v, LazyArray) else np.ndim(v)


# ---------------------------------------------------------------------------- eager fallback (array level)


def _xp_value(a: LazyArray) -> Any:
    """``a``'s value as an array of the device's array module (CuPy on CUDA, NumPy on OpenCL); flushes."""
    sess = session()
    sess.reads += 1
    if not isinstance(a.base.node, Buffer):
        sess.flush()
    bnode = a.base.node
    return sess.runtime.as_xp(bnode.data, a.shape, a.strides, a.offset, a.dtype)


def _each_leaf(obj: Any, leaf: Callable[[Any], Any]) -> Any:
    """``leaf`` applied to everything inside ``obj`` that is not a list, tuple or dict (nested ones too)."""
    if type(obj) is list or type(obj) is tuple:
        return type(obj)(_each_leaf(o, leaf) for o in obj)
    if type(obj) is dict:
        return {k: _each_leaf(v, leaf) for k, v in obj.items()}
    return leaf(obj)


def _to_xp(obj: Any, cuda: bool) -> Any:
    """Every lazy array inside ``obj`` (nested lists, tuples, dicts) as an array-module value; on CUDA host
    arrays are moved to the device too, so CuPy receives what NumPy would."""
    def leaf(o: Any) -> Any:
        if isinstance(o, LazyArray):
            return _xp_value(o)
        return _cupy().asarray(o) if cuda and isinstance(o, np.ndarray) else o

    return _each_leaf(obj, leaf)


def _to_host(obj: Any) -> Any:
    """Every lazy or CuPy array inside ``obj`` (nested lists, tuples, dicts) as a NumPy array."""
    def leaf(o: Any) -> Any:
        if isinstance(o, LazyArray) or (type(o).__module__.startswith("cupy") and hasattr(o, "get")):
            return o.get()
        return o

    return _each_leaf(obj, leaf)


def _cupy() -> Any:
    import cupy  # optional: only reached on a CUDA session, which needs CuPy (extra ``cuda``)

    return cupy


def _wrap(result: Any) -> Any:
    """Arrays (and NumPy scalars, as 0-d arrays) become lazy arrays, inside tuples and lists too; Python
    values (``np.ndim``'s int, ``np.shape``'s tuple of ints) are returned as NumPy returns them."""
    if type(result) is tuple or type(result) is list:
        return type(result)(_wrap(r) for r in result)
    if isinstance(result, np.generic):
        return asarray(np.asarray(result))
    if isinstance(result, np.ndarray) or type(result).__module__.startswith("cupy"):
        return asarray(result)
    return result


#: what CuPy raises where its version of a NumPy function takes other arguments or shapes than NumPy's
CUPY_DIFFERS = (TypeError, ValueError, NotImplementedError, AttributeError)


def eager(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Warn once, then compute ``fn(*args, **kwargs)`` with the device's array module and wrap the result."""
    warn_once(name)
    return library(name, fn, *args, **kwargs)


def eager_numpy(name: str, *args: Any, **kwargs: Any) -> Any:
    """NumPy's function ``name``, run eagerly with the device's array module.

    On CUDA, where CuPy lacks the function or rejects arguments NumPy takes (CuPy's ``clip`` wants its bounds
    by position, its ``percentile`` a 1-d ``q``, it has no ``block``, ...), NumPy computes it on host copies
    instead, so a program written for NumPy runs; NumPy's own error is raised where NumPy rejects them too."""
    warn_once(name)
    runtime = session().runtime
    fn = getattr(runtime.xp, name, None)
    if fn is not None:
        try:
            return library(name, fn, *args, **kwargs)
        except CUPY_DIFFERS:
            if runtime.kind != "cuda":
                raise
    return library(name, getattr(np, name), *args, host=True, **kwargs)


def library(name: str, fn: Callable[..., Any], *args: Any, host: bool = False, **kwargs: Any) -> Any:
    """``fn`` on array-module values (``host``: on NumPy arrays): lazy arrays anywhere in the arguments are
    computed and handed over as NumPy would take them; a lazy ``out=`` receives the result as a recorded write
    (and is returned)."""
    out = kwargs.pop("out", None)
    lazy_out = isinstance(out, LazyArray) or (
        type(out) is tuple and any(isinstance(o, LazyArray) for o in out))
    if out is not None and not lazy_out:
        kwargs["out"] = out
    if host:
        result = _wrap(fn(*_to_host(args), **_to_host(kwargs)))
    else:
        cuda = session().runtime.kind == "cuda"
        result = _wrap(fn(*_to_xp(args, cuda), **_to_xp(kwargs, cuda)))
    if not lazy_out:
        return result
    outs, results = (out, result) if type(out) is tuple else ((out,), (result,))
    for o, r in zip(outs, results, strict=True):
        if o is not None:
            o[...] = r
    return out


def eager_setitem(target: LazyArray, key: Any, value: Any) -> None:
    """``target[key] = value`` for keys the trace cannot express (arrays, masks, transposed views)."""
    warn_once("setitem with this index")
    sess = session()
    sess.reads += 1
    base = target.base
    if not isinstance(base.node, Buffer):
        sess.flush()
    bnode = base.node
    rt = sess.runtime
    whole = rt.as_xp(bnode.data, bnode.shape, contiguous_strides(bnode.shape), 0, bnode.dtype)
    whole = np.array(whole) if rt.kind == "opencl" else whole.copy()  # the old buffer may be shared
    item = whole.dtype.itemsize
    flat = whole.reshape(-1)
    view = (np.lib.stride_tricks if rt.kind == "opencl" else cupy_tricks()).as_strided(
        flat[target.offset:], target.shape, tuple(s * item for s in target.strides))
    cuda = rt.kind == "cuda"
    view[_to_xp(key, cuda)] = _to_xp(value, cuda)
    base.node = asarray(whole).base.node
