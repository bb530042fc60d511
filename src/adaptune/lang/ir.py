"""The recorded trace: a small DAG of operations over array views (seed 002's instruction list, as nodes).

Every node has a ``shape`` and a ``dtype`` and is immutable once built, so a node can be shared by many
arrays and evaluated at most once per flush. Memory is only ever touched through :class:`Buffer` leaves
(contiguous device storage) read through :class:`View` nodes (shape, strides, offset, in elements).
``a[region] = value`` records an :class:`Update` that yields a new version of ``a``'s whole base. The
fuser writes it *in place* (a kernel over the region only, storing into the old buffer) when that is safe:
the old buffer is ``owned`` (no other array holds it), every element the value reads from it is the element
the same work-item writes, and no later kernel reads the old version. Otherwise it becomes one select-kernel
into a fresh buffer (value inside the region, old element outside): the double-buffered kernel a
hand-written Jacobi step would use, i.e. the copy that overlapping shifted reads need.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

# dtype -> C type of the portable dialect (bool is stored as one byte)
CTYPES: dict[str, str] = {
    "bool": "u8", "uint8": "u8", "int32": "i32", "uint32": "u32", "int64": "i64",
    "float32": "float", "float64": "double",
}
SUPPORTED = tuple(np.dtype(n) for n in CTYPES)
SUPPORTED_SET = frozenset(SUPPORTED)


def check_dtype(dtype: Any) -> np.dtype:
    """The dtype if the compiler supports it; otherwise NumPy's own exception type (TypeError)."""
    dt = np.dtype(dtype)
    if dt.name not in CTYPES:
        raise TypeError(f"adaptune.numpy: dtype {dt.name} is not supported "
                        f"(supported: {', '.join(CTYPES)})")
    return dt


def ctype(dtype: np.dtype) -> str:
    return CTYPES[dtype.name]


@functools.lru_cache(maxsize=4096)
def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def size_of(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


class Tape:
    """The structure recorded since the last flush, written down while recording: the plan-cache key a cache
    hit needs, without walking the trace at the flush.

    Every operation node, when built, gets the next position on the tape (``_tp``, valid while ``_te`` is the
    tape's ``epoch``) and appends its description and, per child, the child's position, or the child's
    description where a leaf (buffer, scalar) is read for the first time (it then gets a position too), so
    two reads of one buffer share a position: aliasing is part of the key, as in ``fuse.linearise``'s key.
    ``ok`` turns False when the tape cannot describe the trace (a node of an earlier flush read again, a
    buffer's ownership changed after it was read); the flush then walks the trace as before.
    """

    __slots__ = ("nodes", "items", "ok", "epoch")

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.items: list[Any] = []
        self.ok = True
        self.epoch = 0

    def add(self, node: Node) -> None:
        """Put a new operation node (and the leaves it reads first) on the tape."""
        ep, nodes, items = self.epoch, self.nodes, self.items
        k = node._key
        if k is None:  # a new node's description (``Map`` writes its own, inline: the most common node)
            k = node._key = node.desc()
        items.append(k)
        for c in node.children:
            if c._te == ep:
                items.append(c._tp)
            else:
                if c.children:
                    self.ok = False  # built before the last flush: its structure is not on this tape
                c._te, c._tp = ep, len(nodes)
                nodes.append(c)
                items.append(c._key or c.key)  # (a leaf's description, computed once)
        node._te, node._tp = ep, len(nodes)
        nodes.append(node)

    def take(self) -> tuple[list[Node], list[Any], bool, int]:
        """(nodes, items, ok, epoch) of the trace recorded so far; a new, empty tape starts."""
        taken = (self.nodes, self.items, self.ok, self.epoch)
        self.nodes, self.items, self.ok = [], [], True
        self.epoch += 1
        return taken


class Node:
    """Base class: ``shape``, ``dtype``, ``children`` and a structural description ``desc``."""

    __slots__ = ("shape", "dtype", "children", "_key", "_te", "_tp", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, children: tuple[Node, ...] = ()) -> None:
        self.shape = shape
        self.dtype = dtype
        self.children = children
        self._key: tuple | None = None
        self._te = -1  # the tape epoch and position of this node (see Tape)
        self._tp = 0

    @property
    def key(self) -> tuple:
        """``desc()``, computed once (a flush hashes it for every node of the trace)."""
        k = self._key
        if k is None:
            k = self._key = self.desc()
        return k

    @property
    def size(self) -> int:
        return size_of(self.shape)

    def desc(self) -> tuple:
        """Everything about this node except its children and its data (the compile-cache key part)."""
        raise NotImplementedError


class Buffer(Node):
    """Materialised, contiguous device storage of ``size`` elements (shape is its logical shape).

    ``owned``: this node is the only holder of ``data`` (adaptune allocated or uploaded it and no second array
    shares it), so an update may overwrite it in place. Part of the plan-cache key (the plan differs).
    """

    __slots__ = ("data", "owned", "arg")

    def __init__(self, data: Any, shape: tuple[int, ...], dtype: np.dtype, owned: bool = False) -> None:
        self.shape, self.dtype, self.children = shape, dtype, ()  # (Node.__init__, inlined: nodes are built on
        # every recorded operation and every flush)
        self._key = ("buf", dtype.char, shape, owned)  # (``desc()``, inlined: a flush's results are read next)
        self._te = -1
        self.data = self.arg = data  # ``arg``: what a kernel receives, as for a Scalar (a flush binds a plan's
        # leaves and scalars by one attribute); ``data`` is never reassigned
        self.owned = owned

    def desc(self) -> tuple:
        return ("buf", self.dtype.char, self.shape, self.owned)

    def share(self) -> None:
        """A second array now holds this storage: never write it in place again."""
        if self.owned:
            self.owned = False
            self._key = None
            if self._te == TAPE.epoch:
                TAPE.ok = False  # the tape holds its old description


_SCALAR_KEYS: dict[np.dtype, tuple] = {}
_SCALAR_VALUES: dict[tuple, tuple[Any, Any]] = {}  # (Python type, value, dtype) -> (value, kernel argument)
_CACHED_SCALAR_TYPES = frozenset((bool, int, float))
SCALAR_CACHE_ENTRIES = 4096


class Scalar(Node):
    """A host scalar passed as a kernel argument (so a changing value never recompiles)."""

    __slots__ = ("value", "arg")

    def __init__(self, value: Any, dtype: np.dtype) -> None:
        self.shape, self.dtype, self.children = (), dtype, ()
        self._key = _SCALAR_KEYS.get(dtype) or _SCALAR_KEYS.setdefault(dtype, ("scalar", dtype.char))
        self._te = -1
        # a NumPy scalar costs more to make than to look up, and a loop passes the same constants every step;
        # looked up by type and value (equal values, equal bits), except zero (-0.0 == 0.0) and NaN
        cached = type(value) in _CACHED_SCALAR_TYPES and value and value == value
        hit = _SCALAR_VALUES.get((type(value), value, dtype)) if cached else None
        if hit is None:
            v = dtype.type(value)
            hit = (v, np.uint8(v) if dtype.kind == "b" else v)  # (the value, what a kernel receives)
            if cached:
                if len(_SCALAR_VALUES) >= SCALAR_CACHE_ENTRIES:
                    _SCALAR_VALUES.clear()
                _SCALAR_VALUES[(type(value), value, dtype)] = hit
        self.value, self.arg = hit

    def desc(self) -> tuple:
        return ("scalar", self.dtype.char)


class View(Node):
    """``src`` read through (shape, strides, offset) in units of ``src``'s C-order flat index."""

    __slots__ = ("strides", "offset", "bcast")

    def __init__(self, src: Node, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> None:
        self.shape, self.dtype, self.children = shape, src.dtype, (src,)
        self._key = ("view", shape, strides, offset)  # (``desc()``, inlined: a broadcast builds one per operand)
        self.strides = strides
        self.offset = offset
        self.bcast = is_broadcast_view(src.shape, shape, strides, offset)
        TAPE.add(self)

    def desc(self) -> tuple:
        return ("view", self.shape, self.strides, self.offset)


class Map(Node):
    """An element-wise operation ``op`` over same-shaped inputs (broadcasting is explicit, via Views).

    ``compute`` is the dtype the inputs are converted to before the operation (NumPy's loop type).
    """

    __slots__ = ("op", "compute")

    def __init__(self, op: str, inputs: tuple[Node, ...], shape: tuple[int, ...], dtype: np.dtype,
                 compute: np.dtype) -> None:
        self.shape, self.dtype, self.children = shape, dtype, inputs
        self.op = op
        self.compute = compute
        self._key = ("map", op, shape, dtype.char, compute.char)  # (``desc()``, inlined)
        TAPE.add(self)

    def desc(self) -> tuple:
        return ("map", self.op, self.shape, self.dtype.char, self.compute.char)


class Reduce(Node):
    """``op`` (add, multiply, maximum, minimum, logical_or, logical_and) of ``src`` over ``axes``."""

    __slots__ = ("op", "axes")

    def __init__(self, op: str, src: Node, axes: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape, self.dtype, self.children, self._key = _reduced_shape(src.shape, axes), dtype, (src,), None
        self.op = op
        self.axes = axes
        TAPE.add(self)

    def desc(self) -> tuple:
        return ("reduce", self.op, self.axes, self.shape, self.dtype.char)

    @property
    def length(self) -> int:
        return size_of(tuple(self.children[0].shape[a] for a in self.axes))


@functools.lru_cache(maxsize=4096)
def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for d, n in enumerate(shape) if d not in axes)


class Update(Node):
    """A new version of ``old`` with a region replaced by ``value`` (already of the region's shape).

    Either a basic-slice region: per dimension of ``old`` ``(start, step, count)``, with ``vdims`` mapping
    each dimension of ``value`` to the dimension of ``old`` it runs along (-1: a new axis of length 1);
    or (``rng`` not None) the contiguous flat range starting at ``rng`` (a reshaped contiguous view).
    """

    __slots__ = ("region", "vdims", "rng", "strided")

    def __init__(self, old: Node, region: tuple[tuple[int, int, int], ...], vdims: tuple[int, ...],
                 value: Node, rng: int | None = None, strided: tuple | None = None) -> None:
        self.shape, self.dtype, self.children, self._key = old.shape, old.dtype, (old, value), None  # (as Map)
        self.region = region
        self.vdims = vdims
        self.rng = rng
        self.strided = strided  # (strides, offset) of an injective view (value.shape) over old's flat layout
        TAPE.add(self)

    def desc(self) -> tuple:
        return ("update", self.shape, self.region, self.vdims, self.rng, self.strided)

    def target(self) -> tuple[tuple[int, ...], int]:
        """(strides, offset) of the written region over ``old``'s flat layout, in ``value``'s coordinates."""
        val = self.children[1]
        if self.strided is not None:
            return self.strided
        if self.rng is not None:
            return contiguous_strides(val.shape), self.rng
        cs = contiguous_strides(self.shape)
        offset = sum(start * c for (start, _, _), c in zip(self.region, cs, strict=True))
        strides = tuple(self.region[d][1] * cs[d] if d >= 0 else 0 for d in self.vdims)
        return strides, offset

    @property
    def full(self) -> bool:
        if self.strided is not None:
            return False
        if self.rng is not None:
            return self.rng == 0 and self.children[1].size == self.size
        return all(start == 0 and step == 1 and count == n
                   for (start, step, count), n in zip(self.region, self.shape, strict=True))


TAPE = Tape()  # one per process, like the session


@functools.lru_cache(maxsize=4096)
def is_broadcast_view(src_shape: tuple[int, ...], shape: tuple[int, ...], strides: tuple[int, ...],
                      offset: int) -> bool:
    """True when the view only broadcasts ``src`` (adds stride-0 or length-1 axes): no element is moved.
    Cached: a loop builds the same views every step (a look-up is a tenth of the comparison)."""
    if offset != 0:
        return False
    kept = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1 and s != 0]
    want = [(n, s) for n, s in zip(src_shape, contiguous_strides(src_shape), strict=True) if n != 1]
    return kept == want


def is_identity_view(view: View) -> bool:
    src = view.children[0]
    return view.shape == src.shape and view.offset == 0 and \
        all(s == c or n == 1 for n, s, c in zip(view.shape, view.strides, contiguous_strides(src.shape),
                                                 strict=True))


def count_ops(node: Node, limit: int = 64) -> int:
    """Nodes in the inlined expression under ``node`` (stops at buffers and reductions; capped)."""
    seen: set[int] = set()
    stack = [node]
    while stack and len(seen) < limit:
        n = stack.pop()
        if id(n) in seen or isinstance(n, Buffer | Scalar | Reduce):
            continue
        seen.add(id(n))
        stack.extend(n.children)
    return len(seen)


def nested_view(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """True if the view is injective with nested strides, so a flat position maps back to one index."""
    dims = sorted(((abs(s), n) for n, s in zip(shape, strides, strict=True) if n != 1), reverse=True)
    inner = 0
    for stride, n in reversed(dims):
        if stride == 0 or stride <= inner:
            return False
        inner += stride * (n - 1)
    return True
