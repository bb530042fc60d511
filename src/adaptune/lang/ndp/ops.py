"""Nested data-parallel operators (Surge, seed 001 Table 5.1), recorded lazily as an expression graph.

Why lazy: like Surge's expression templates, calling an operator only records a node; the generator
later sees the whole computation, fuses producers into consumers and enumerates schedules for it.

Sequences are flat (elements are scalars) or nested (elements are rows: ``nest``, ``split``,
``transpose``). ``map`` over nested sequences calls its Python function once with *row placeholders*
(tracing, as Surge instantiates its lambdas with sequence types); ``map`` over flat sequences and the
binary operators of ``reduce``/``scan``/``reduce_by_key`` are scalar functions translated from ``ast``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adaptune.lang.ndp.translate import ScalarFunction, TranslationError, Value, scalar_function

DTYPES = ("f32", "i32")
_ids = itertools.count()


class NdpError(ValueError):
    """A computation is malformed (wrong operand kind, mismatched nests, unsupported pattern); says which."""


# ----------------------------------------------------------------------------------- binary operators


@dataclass(frozen=True)
class BinaryOp:
    """An associative (and, for cooperative schedules, commutative) operator with C text and identities."""

    name: str
    template: str  # C expression in a and b
    identity: dict[str, str]  # per type
    lam: ScalarFunction | None = None

    def emit(self, a: str, b: str) -> str:
        return self.template.replace("{a}", a).replace("{b}", b)

    def identity_for(self, dtype: str) -> str | None:
        return self.identity.get(dtype)

    def __call__(self, *args: Any) -> Any:  # usable as a scalar function in map(ndp.mul, a, b)
        raise NdpError(f"ndp.{self.name} is an operator for map/reduce/scan, not a Python function to call")


add = BinaryOp("add", "(({a}) + ({b}))", {"f32": "0.0f", "i32": "0"})
mul = BinaryOp("mul", "(({a}) * ({b}))", {"f32": "1.0f", "i32": "1"})
maximum = BinaryOp("max", "((({b}) > ({a})) ? ({b}) : ({a}))", {"f32": "(-F32_INF)", "i32": "(-2147483647 - 1)"})
minimum = BinaryOp("min", "((({b}) < ({a})) ? ({b}) : ({a}))", {"f32": "F32_INF", "i32": "2147483647"})
OPS = {"add": add, "mul": mul, "max": maximum, "min": minimum}


def binary_op(op: BinaryOp | Callable[..., Any]) -> BinaryOp:
    """An ndp operator, or a two-parameter Python function translated once into a helper."""
    if isinstance(op, BinaryOp):
        return op
    fn = scalar_function(op)
    if fn.arity != 2:
        raise NdpError(f"a reduction/scan operator takes two arguments; {fn.name} takes {fn.arity}")
    return BinaryOp(f"fn{next(_ids)}", "", {}, fn)


# ----------------------------------------------------------------------------------- nodes


@dataclass(eq=False)
class Node:
    """A recorded sequence expression. ``nested``: elements are rows; ``level``: 0 top level, 1 inside a row."""

    id: int = field(default_factory=lambda: next(_ids), init=False)

    nested: bool = field(default=False, init=False)
    level: int = field(default=0, init=False)
    dtype: str = field(default="f32", init=False)

    @property
    def op(self) -> str:
        return type(self).__name__.lower()

    def operands(self) -> tuple[Node, ...]:
        return ()

    def __repr__(self) -> str:
        return f"{self.op}#{self.id}"


@dataclass(eq=False, repr=False)
class Input(Node):
    name: str = ""
    type: str = "f32"

    def __post_init__(self) -> None:
        if self.type not in DTYPES:
            raise NdpError(f"input {self.name!r}: dtype {self.type!r} not supported (use one of {DTYPES})")
        self.dtype = self.type


@dataclass(eq=False, repr=False)
class Buffer(Node):
    """A materialised stage output (introduced by lowering; not written by users)."""

    stage: int = 0
    type: str = "f32"

    def __post_init__(self) -> None:
        self.dtype = self.type


@dataclass(eq=False, repr=False)
class Row(Node):
    """The current row of nested operand ``index`` of a row map (a placeholder, level 1)."""

    index: int = 0
    of: Node | None = None

    def __post_init__(self) -> None:
        self.level = 1
        self.dtype = self.of.dtype if self.of is not None else "f32"

    def operands(self) -> tuple[Node, ...]:
        return ()


@dataclass(eq=False, repr=False)
class Map(Node):
    fn: ScalarFunction | None = None
    args: tuple[Node, ...] = ()
    out_type: str = "f32"
    binop: BinaryOp | None = None  # map(ndp.mul, a, b): an operator instead of a translated function

    def __post_init__(self) -> None:
        self.level = self.args[0].level
        self.dtype = self.out_type

    def operands(self) -> tuple[Node, ...]:
        return self.args


@dataclass(eq=False, repr=False)
class RowMap(Node):
    """``map`` over nested sequences: ``body`` is the traced per-row result (a row reduce or a row sequence)."""

    args: tuple[Node, ...] = ()
    body: Node | None = None

    def __post_init__(self) -> None:
        self.nested = isinstance(self.body, Node) and not isinstance(self.body, Reduce)
        self.dtype = self.body.dtype

    def operands(self) -> tuple[Node, ...]:
        return self.args


@dataclass(eq=False, repr=False)
class Reduce(Node):
    opr: BinaryOp = add
    seq: Node | None = None
    init: float | int | None = None

    def __post_init__(self) -> None:
        self.level = self.seq.level
        self.dtype = self.seq.dtype

    def operands(self) -> tuple[Node, ...]:
        return (self.seq,)


@dataclass(eq=False, repr=False)
class Scan(Node):
    opr: BinaryOp = add
    seq: Node | None = None
    init: float | int | None = None

    def __post_init__(self) -> None:
        self.dtype = self.seq.dtype

    def operands(self) -> tuple[Node, ...]:
        return (self.seq,)


@dataclass(eq=False, repr=False)
class ReduceByKey(Node):
    opr: BinaryOp = add
    values: Node | None = None
    keys: Node | None = None
    init: float | int | None = None

    def __post_init__(self) -> None:
        self.dtype = self.values.dtype

    def operands(self) -> tuple[Node, ...]:
        return (self.values, self.keys)


@dataclass(eq=False, repr=False)
class Gather(Node):
    source: Node | None = None
    index: Node | None = None

    def __post_init__(self) -> None:
        self.level = self.index.level
        self.dtype = self.source.dtype

    def operands(self) -> tuple[Node, ...]:
        return (self.source, self.index)


@dataclass(eq=False, repr=False)
class Scatter(Node):
    source: Node | None = None
    index: Node | None = None
    length: Node | int | None = None
    mask: Node | None = None
    count: Node | None = None  # set by compact(): the number of kept elements (a scan total)

    def __post_init__(self) -> None:
        self.dtype = self.source.dtype

    def operands(self) -> tuple[Node, ...]:
        extra = tuple(n for n in (self.mask, self.length if isinstance(self.length, Node) else None) if n)
        return (self.source, self.index, *extra)


@dataclass(eq=False, repr=False)
class Range(Node):
    start: int = 0
    stop: int | Node = 0
    step: int = 1

    def __post_init__(self) -> None:
        self.dtype = "i32"

    def operands(self) -> tuple[Node, ...]:
        return (self.stop,) if isinstance(self.stop, Node) else ()


@dataclass(eq=False, repr=False)
class Replicate(Node):
    value: float | int = 0
    length: int | Node = 0

    def __post_init__(self) -> None:
        self.dtype = "i32" if isinstance(self.value, int) and not isinstance(self.value, bool) else "f32"

    def operands(self) -> tuple[Node, ...]:
        return (self.length,) if isinstance(self.length, Node) else ()


@dataclass(eq=False, repr=False)
class Zip(Node):
    seqs: tuple[Node, ...] = ()

    def __post_init__(self) -> None:
        self.level = self.seqs[0].level

    def operands(self) -> tuple[Node, ...]:
        return self.seqs


@dataclass(eq=False, repr=False)
class Striding(Node):
    seq: Node | None = None
    stride: int = 1

    def __post_init__(self) -> None:
        self.dtype, self.level = self.seq.dtype, self.seq.level

    def operands(self) -> tuple[Node, ...]:
        return (self.seq,)


@dataclass(eq=False, repr=False)
class Reverse(Node):
    seq: Node | None = None

    def __post_init__(self) -> None:
        self.dtype, self.level = self.seq.dtype, self.seq.level

    def operands(self) -> tuple[Node, ...]:
        return (self.seq,)


@dataclass(eq=False, repr=False)
class Nest(Node):
    seq: Node | None = None
    offsets: Node | None = None

    def __post_init__(self) -> None:
        self.nested, self.dtype = True, self.seq.dtype

    def operands(self) -> tuple[Node, ...]:
        return (self.seq, self.offsets)


@dataclass(eq=False, repr=False)
class Split(Node):
    seq: Node | None = None
    tile: int = 1

    def __post_init__(self) -> None:
        self.nested, self.dtype = True, self.seq.dtype

    def operands(self) -> tuple[Node, ...]:
        return (self.seq,)


@dataclass(eq=False, repr=False)
class Transpose(Node):
    seq: Node | None = None  # a Split whose length is a multiple of its tile (checked at run time)

    def __post_init__(self) -> None:
        self.nested, self.dtype = True, self.seq.dtype

    def operands(self) -> tuple[Node, ...]:
        return (self.seq,)


@dataclass(eq=False, repr=False)
class Join(Node):
    seq: Node | None = None

    def __post_init__(self) -> None:
        self.dtype = self.seq.dtype

    def operands(self) -> tuple[Node, ...]:
        return (self.seq,)


@dataclass(eq=False, repr=False)
class HeadFlags(Node):
    """1 where a run of equal keys starts (lowering of reduce_by_key)."""

    keys: Node | None = None

    def __post_init__(self) -> None:
        self.dtype = "i32"

    def operands(self) -> tuple[Node, ...]:
        return (self.keys,)


# ----------------------------------------------------------------------------------- user operators


def _seq(x: Any, what: str) -> Node:
    if not isinstance(x, Node):
        raise NdpError(f"{what}: expected an ndp sequence, got {type(x).__name__}")
    return x


def _flat(x: Any, what: str) -> Node:
    n = _seq(x, what)
    if n.nested:
        raise NdpError(f"{what}: expected a flat sequence, got the nested sequence {n!r}")
    return n


def map(fn: Callable[..., Any] | BinaryOp, *seqs: Any) -> Node:  # noqa: A001 - Surge's name
    """``map(f, s1..sn)``: f over flat elements (translated), or over rows of nested sequences (traced)."""
    if not seqs:
        raise NdpError("map needs at least one sequence")
    args: list[Node] = []
    for s in seqs:
        s = _seq(s, "map")
        args.extend(s.seqs if isinstance(s, Zip) else (s,))
    if any(a.nested for a in args):
        if not all(a.nested for a in args):
            raise NdpError("map: mixing nested and flat sequences; gather from the flat one inside the function")
        if isinstance(fn, BinaryOp):
            raise NdpError("map over nested sequences needs a Python function of rows")
        rows = [Row(index=i, of=a) for i, a in enumerate(args)]
        body = fn(*rows)
        if not isinstance(body, Node) or body.level != 1:
            raise NdpError("map over nested sequences: the function must return a reduce(...) of its rows or a "
                           "row sequence (map/gather over its rows)")
        if isinstance(body, Reduce) and body.seq.nested:
            raise NdpError("map over nested sequences: reduce of a nested row is not supported")
        return RowMap(args=tuple(args), body=body)
    levels = {a.level for a in args}
    if len(levels) > 1:
        raise NdpError("map: inside a row function, map the row (or sequences derived from it, e.g. gather(x, "
                       "row)); a whole top-level sequence cannot be mapped alongside a row")
    if isinstance(fn, BinaryOp):
        if len(args) != 2:
            raise NdpError(f"map with ndp.{fn.name} needs two sequences, got {len(args)}")
        out = "f32" if "f32" in (args[0].dtype, args[1].dtype) else "i32"
        return Map(args=tuple(args), out_type=out, binop=fn)
    sfn = scalar_function(fn)
    if sfn.arity != len(args):
        raise NdpError(f"map: {sfn.name} takes {sfn.arity} argument(s) but {len(args)} sequence(s) were given")
    out = infer_type(sfn, [a.dtype for a in args])
    return Map(fn=sfn, args=tuple(args), out_type=out)


def infer_type(fn: ScalarFunction, types: list[str]) -> str:
    """The result type of a translated function for argument types (translation on placeholders)."""
    counter = itertools.count()
    _, value = fn.emit([Value(f"a{i}", t) for i, t in enumerate(types)], lambda: f"t{next(counter)}")
    return "f32" if value.type == "f32" else "i32"


def _init(op: BinaryOp, init: Any, dtype: str, what: str) -> Any:
    if init is None and op.lam is not None:
        raise NdpError(f"{what} with a Python function needs an initial value (its identity)")
    if init is not None and not isinstance(init, int | float):
        raise NdpError(f"{what}: the initial value must be a number, got {type(init).__name__}")
    return init


def reduce(op: BinaryOp | Callable[..., Any], seq: Any, init: float | int | None = None) -> Node:
    """``reduce(⊕, s, p)``: fold of a flat sequence (or of a row, inside a row function)."""
    s = _flat(seq, "reduce")
    bop = binary_op(op)
    return Reduce(opr=bop, seq=s, init=_init(bop, init, s.dtype, "reduce"))


def scan(op: BinaryOp | Callable[..., Any], seq: Any, init: float | int | None = None) -> Node:
    """``scan(⊕, s, p)``: exclusive prefix (y[0] = p, or the identity)."""
    s = _flat(seq, "scan")
    if s.level:
        raise NdpError("scan inside a row function (segmented scan) is not generated yet")
    bop = binary_op(op)
    return Scan(opr=bop, seq=s, init=_init(bop, init, s.dtype, "scan"))


def reduce_by_key(op: BinaryOp | Callable[..., Any], values: Any, keys: Any,
                  init: float | int | None = None) -> Node:
    """``reduce_by_key(⊕, s, k, p)``: one result per run of equal consecutive keys; returns (keys, values)."""
    v, k = _flat(values, "reduce_by_key values"), _flat(keys, "reduce_by_key keys")
    if v.level or k.level:
        raise NdpError("reduce_by_key inside a row function is not supported")
    bop = binary_op(op)
    return ReduceByKey(opr=bop, values=v, keys=k, init=_init(bop, init, v.dtype, "reduce_by_key"))


def gather(seq: Any, index: Any) -> Node:
    """``gather(s, idx)``: s[idx[i]]. Inside a row function s is a top-level sequence and idx a row."""
    s, i = _flat(seq, "gather source"), _flat(index, "gather index")
    if s.level:
        raise NdpError("gather: the source must be a top-level sequence (index it with a row)")
    if i.dtype != "i32":
        raise NdpError(f"gather: the index sequence must be i32, got {i.dtype}")
    return Gather(source=s, index=i)


def scatter(seq: Any, index: Any, length: int | Node | None = None, mask: Any = None) -> Node:
    """``scatter(s, idx, d)``: out[idx[i]] = s[i] (where mask[i] when given); indices outside
    [0, length) are dropped. ``length`` defaults to len(s)."""
    s, i = _flat(seq, "scatter source"), _flat(index, "scatter index")
    if s.level or i.level:
        raise NdpError("scatter inside a row function is not supported")
    if i.dtype != "i32":
        raise NdpError(f"scatter: the index sequence must be i32, got {i.dtype}")
    m = _flat(mask, "scatter mask") if mask is not None else None
    return Scatter(source=s, index=i, length=length, mask=m)


def compact(pred: Callable[..., Any], seq: Any) -> Node:
    """Stream compaction from the operators: flags = map(pred, s); pos = scan(add, flags); scatter."""
    s = _flat(seq, "compact")
    flags = map(pred, s)
    flags = Map(args=(flags,), out_type="i32", binop=_to_int)
    pos = scan(add, flags, 0)
    out = Scatter(source=s, index=pos, length=None, mask=flags)
    out.count = pos
    return out


_to_int = BinaryOp("to_int", "((i32)(({a}) != 0))", {})


def range(start: int, stop: int | Node, step: int = 1) -> Node:  # noqa: A001 - Surge's name
    """``range(s, e, [stride])``; ``stop`` may be a sequence (its length)."""
    if step <= 0:
        raise NdpError(f"range: step must be positive, got {step}")
    return Range(start=int(start), stop=stop if isinstance(stop, Node) else int(stop), step=int(step))


def replicate(value: float | int, length: int | Node) -> Node:
    """``replicate(v, len)``; ``length`` may be a sequence (its length)."""
    if not isinstance(value, int | float):
        raise NdpError(f"replicate: value must be a number, got {type(value).__name__}")
    return Replicate(value=value, length=length)


def zip(*seqs: Any) -> Node:  # noqa: A001 - Surge's name
    """``zip(s1..sn)``: consumed by map, whose function then receives one argument per sequence."""
    if len(seqs) < 2:
        raise NdpError("zip needs at least two sequences")
    return Zip(seqs=tuple(_seq(s, "zip") for s in seqs))


def split(seq: Any, tile: int) -> Node:
    """``split(s, l)``: a uniform nest of tiles of length l (the last may be shorter)."""
    if int(tile) <= 0:
        raise NdpError(f"split: tile length must be positive, got {tile}")
    return Split(seq=_flat(seq, "split"), tile=int(tile))


def join(seq: Any) -> Node:
    """``join(s)``: the elements of a nested sequence, row after row."""
    s = _seq(seq, "join")
    if not s.nested:
        raise NdpError("join: expected a nested sequence")
    return Join(seq=s)


def striding(seq: Any, stride: int) -> Node:
    """``striding(s, k)``: s[0], s[k], s[2k], ..."""
    if int(stride) <= 0:
        raise NdpError(f"striding: stride must be positive, got {stride}")
    return Striding(seq=_flat(seq, "striding"), stride=int(stride))


def reverse(seq: Any) -> Node:
    return Reverse(seq=_flat(seq, "reverse"))


def nest(seq: Any, offsets: Any) -> Node:
    """``nest(s, i)``: CSR-like rows s[i[r]:i[r+1]]."""
    s, o = _flat(seq, "nest values"), _flat(offsets, "nest offsets")
    if s.level or o.level:
        raise NdpError("nest inside a row function is not supported")
    if o.dtype != "i32":
        raise NdpError(f"nest: offsets must be i32, got {o.dtype}")
    return Nest(seq=s, offsets=o)


def transpose(seq: Any) -> Node:
    """``transpose(split(s, l))``: column c of the tiles becomes row c (length must divide by l)."""
    s = _seq(seq, "transpose")
    if not isinstance(s, Split):
        raise NdpError("transpose: only a split (uniform nest) can be transposed")
    return Transpose(seq=s)


def walk(root: Node) -> list[Node]:
    """All nodes reachable from ``root`` (row-map bodies included), operands before users."""
    seen: dict[int, Node] = {}

    def visit(n: Node) -> None:
        if n.id in seen:
            return
        for o in n.operands():
            visit(o)
        if isinstance(n, RowMap):
            visit(n.body)
        if isinstance(n, Row) and n.of is not None:
            visit(n.of)
        if isinstance(n, Scatter) and n.count is not None:
            visit(n.count)
        seen[n.id] = n

    visit(root)
    return list(seen.values())


__all__ = ["BinaryOp", "NdpError", "Node", "TranslationError", "add", "compact", "gather", "join", "map",
           "maximum", "minimum", "mul", "nest", "range", "reduce", "reduce_by_key", "replicate", "reverse",
           "scan", "scatter", "split", "striding", "transpose", "walk", "zip"]
