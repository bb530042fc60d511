"""Lowering with fusion: the expression graph becomes a short list of stages (one generated kernel each).

Fusion rule (seed 001 §5): a producer whose iterations are independent (map, gather, range, replicate,
striding, reverse, join of a view, zip) is inlined into its consumer as an element expression, so it
needs no temporary (SpMV: gather and map fuse into the row reduce). Producers that are not independent
(reduce, scan, scatter, reduce_by_key, a map over rows) become stages that write a buffer, and their
consumers read that buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adaptune.lang.ndp import ops
from adaptune.lang.ndp.ops import (
    Buffer,
    Gather,
    HeadFlags,
    Input,
    Join,
    Map,
    NdpError,
    Nest,
    Node,
    Range,
    Reduce,
    ReduceByKey,
    Replicate,
    Reverse,
    Row,
    RowMap,
    Scan,
    Scatter,
    Split,
    Striding,
    Transpose,
)

FUSABLE = (Input, Buffer, Map, Gather, Range, Replicate, Striding, Reverse, HeadFlags, Join, Row)
OP_SEQUENCES = {"map": ("map",), "reduce": ("reduce",), "scan": ("scan",), "scatter": ("scatter",),
                "segreduce": ("map", "reduce"), "segmap": ("map", "map")}


@dataclass(eq=False)
class Stage:
    """One kernel pattern: ``kind`` in map, reduce, scan, scatter, segreduce, segmap."""

    index: int
    kind: str
    out: Buffer
    expr: Node | None = None  # flat element expression (map, reduce, scan, scatter source) or row body
    length: Node | None = None  # node whose length is the iteration count (flat stages)
    opr: ops.BinaryOp | None = None
    init: float | int | None = None
    nested: tuple[Node, ...] = ()  # segreduce/segmap: the nested operands (rows bound to Row placeholders)
    index_expr: Node | None = None  # scatter
    mask: Node | None = None  # scatter
    out_length: Node | int | None = None  # scatter: destination length (node = its length)
    count_stage: int | None = None  # scatter after a scan: the scan's total is the destination length
    tail: bool = False  # scatter building offsets: also write out[count] = iteration count
    fixed: bool = False  # internal stage: always run with its strongest schedule and default policy
    fused: list[str] = field(default_factory=list)
    total: Buffer | None = None  # scan: the reduction of all elements (a one-element buffer)
    label: str = ""

    @property
    def op_sequence(self) -> tuple[str, ...]:
        return OP_SEQUENCES[self.kind]


@dataclass
class Lowered:
    stages: list[Stage]
    outputs: list[tuple[Buffer, int | None]]  # (buffer, stage whose scan total is its length, if any)


class _Lowerer:
    def __init__(self) -> None:
        self.stages: list[Stage] = []
        self.done: dict[int, Buffer] = {}

    def new_stage(self, kind: str, out_type: str, **kw) -> Stage:
        out = Buffer(stage=len(self.stages), type=out_type)
        st = Stage(index=len(self.stages), kind=kind, out=out, **kw)
        self.stages.append(st)
        return st

    # -- expressions usable inline (fusion), with non-fusable producers materialised
    def inline(self, node: Node) -> Node:
        """The node with every non-independent producer below it replaced by its buffer."""
        if isinstance(node, Input | Buffer | Row | Range | Replicate):
            if isinstance(node, Range) and isinstance(node.stop, Node):
                return Range(start=node.start, stop=self.inline(node.stop), step=node.step)
            if isinstance(node, Replicate) and isinstance(node.length, Node):
                return Replicate(value=node.value, length=self.inline(node.length))
            return node
        if isinstance(node, Map):
            return Map(fn=node.fn, args=tuple(self.inline(a) for a in node.args), out_type=node.out_type,
                       binop=node.binop)
        if isinstance(node, Gather):
            return Gather(source=self.inline(node.source), index=self.inline(node.index))
        if isinstance(node, Striding):
            return Striding(seq=self.inline(node.seq), stride=node.stride)
        if isinstance(node, Reverse):
            return Reverse(seq=self.inline(node.seq))
        if isinstance(node, HeadFlags):
            return HeadFlags(keys=self.inline(node.keys))
        if isinstance(node, Join):
            inner = node.seq
            if isinstance(inner, Nest | Split | Transpose):
                return Join(seq=self.view(inner))
            return self.materialise(inner)  # join of a row map: its joined buffer
        if isinstance(node, Reduce | Scan | Scatter | ReduceByKey | RowMap):
            return self.materialise(node)
        raise NdpError(f"{node.op} cannot be used as an element sequence here")

    def view(self, nested: Node) -> Node:
        if isinstance(nested, Nest):
            return Nest(seq=self.inline(nested.seq), offsets=self.inline(nested.offsets))
        if isinstance(nested, Split):
            return Split(seq=self.inline(nested.seq), tile=nested.tile)
        if isinstance(nested, Transpose):
            return Transpose(seq=self.view(nested.seq))
        raise NdpError(f"{nested.op} is not a nested view (nest, split or transpose)")

    def materialise(self, node: Node) -> Buffer:
        if node.id in self.done:
            return self.done[node.id]
        buf = self._materialise(node)
        self.done[node.id] = buf
        return buf

    def _materialise(self, node: Node) -> Buffer:
        if isinstance(node, Reduce):
            if node.level:
                raise NdpError("reduce of a row outside a map over rows")
            e = self.inline(node.seq)
            st = self.new_stage("reduce", node.dtype, expr=e, length=e, opr=node.opr, init=node.init,
                                fused=_fused(e))
            return st.out
        if isinstance(node, Scan):
            e = self.inline(node.seq)
            st = self.new_stage("scan", node.dtype, expr=e, length=e, opr=node.opr, init=node.init,
                                fused=_fused(e))
            st.total = Buffer(stage=st.index, type=node.dtype)
            return st.out
        if isinstance(node, Scatter):
            count_stage = None
            if node.count is not None:
                self.materialise(node.count)
                count_stage = self.done[node.count.id].stage
            src, idx = self.inline(node.source), self.inline(node.index)
            mask = self.inline(node.mask) if node.mask is not None else None
            length = self.inline(node.length) if isinstance(node.length, Node) else node.length
            st = self.new_stage("scatter", node.dtype, expr=src, length=src, index_expr=idx, mask=mask,
                                out_length=length, count_stage=count_stage,
                                fused=_fused(src) + _fused(idx) + (_fused(mask) if mask is not None else []))
            return st.out
        if isinstance(node, RowMap):
            nested = tuple(self.view(a) for a in node.args)
            _check_same_shape(nested)
            body = node.body
            if isinstance(body, Reduce):
                e = self.inline_row(body.seq)
                st = self.new_stage("segreduce", body.dtype, expr=e, opr=body.opr, init=body.init,
                                    nested=nested, fused=_fused(e))
            else:
                e = self.inline_row(body)
                st = self.new_stage("segmap", body.dtype, expr=e, nested=nested, fused=_fused(e))
            return st.out
        if isinstance(node, ReduceByKey):
            raise NdpError("reduce_by_key returns (keys, values): return it directly from the computation")
        return self.materialise_map(node)

    def inline_row(self, node: Node) -> Node:
        """Row-level expressions: rows, maps and gathers of them; top-level sources are inlined."""
        if isinstance(node, Row):
            return node
        if isinstance(node, Map):
            return Map(fn=node.fn, args=tuple(self.inline_row(a) for a in node.args), out_type=node.out_type,
                       binop=node.binop)
        if isinstance(node, Gather):
            return Gather(source=self.inline(node.source), index=self.inline_row(node.index))
        if isinstance(node, Striding | Reverse):
            raise NdpError(f"{node.op} of a row is not generated yet")
        raise NdpError(f"{node.op} inside a row function is not supported (use map, gather, reduce on rows)")

    def materialise_map(self, node: Node) -> Buffer:
        e = self.inline(node)
        st = self.new_stage("map", node.dtype, expr=e, length=e, fused=_fused(e))
        return st.out

    def reduce_by_key(self, node: ReduceByKey) -> tuple[Buffer, Buffer]:
        keys = self.inline(node.keys)
        flags = HeadFlags(keys=keys)
        scan = self.new_stage("scan", "i32", expr=flags, length=flags, opr=ops.add, init=0, fixed=True,
                              fused=["head_flags"], label="reduce_by_key: run heads")
        scan.total = Buffer(stage=scan.index, type="i32")
        pos = scan.out
        offsets = self.new_stage("scatter", "i32", expr=Range(start=0, stop=keys), length=keys, index_expr=pos,
                                 mask=flags, count_stage=scan.index, tail=True, fixed=True,
                                 fused=["range", "head_flags"], label="reduce_by_key: run offsets")
        ukeys = self.new_stage("scatter", keys.dtype, expr=keys, length=keys, index_expr=pos, mask=flags,
                               count_stage=scan.index, fixed=True, fused=["head_flags"],
                               label="reduce_by_key: run keys")
        values = self.inline(node.values)
        nested = (Nest(seq=values, offsets=offsets.out),)
        row = Row(index=0, of=nested[0])
        seg = self.new_stage("segreduce", node.dtype, expr=row, opr=node.opr, init=node.init, nested=nested,
                             fused=_fused(values), label="reduce_by_key: segment reduce")
        seg.count_stage = scan.index
        return ukeys.out, seg.out


def _fused(e: Node) -> list[str]:
    """Names of the producers inlined into an element expression (for explain)."""
    names = []
    for n in ops.walk(e):
        if isinstance(n, Input | Buffer | Row):
            continue
        names.append(n.op if not isinstance(n, Map) or n.binop is None else f"map({n.binop.name})")
    return names


def _check_same_shape(nested: tuple[Node, ...]) -> None:
    first = nested[0]
    for other in nested[1:]:
        if not _same_shape(first, other):
            raise NdpError(f"map over rows: {first.op} and {other.op} operands must share their row structure "
                           f"(the same offsets sequence, or the same tile length)")


def _same_shape(a: Node, b: Node) -> bool:
    if isinstance(a, Nest) and isinstance(b, Nest):
        return _same_source(a.offsets, b.offsets)
    if isinstance(a, Split) and isinstance(b, Split):
        return a.tile == b.tile
    if isinstance(a, Transpose) and isinstance(b, Transpose):
        return _same_shape(a.seq, b.seq)
    return False


def _same_source(a: Node, b: Node) -> bool:
    if isinstance(a, Input) and isinstance(b, Input):
        return a.name == b.name
    if isinstance(a, Buffer) and isinstance(b, Buffer):
        return a.stage == b.stage
    return a is b


def lower(roots: list[Node]) -> Lowered:
    """Stages for the computation's results, in execution order."""
    lw = _Lowerer()
    outputs: list[tuple[Buffer, int | None]] = []
    for root in roots:
        if not isinstance(root, Node):
            raise NdpError(f"a computation must return ndp sequences, got {type(root).__name__}")
        if isinstance(root, ReduceByKey):
            k, v = lw.reduce_by_key(root)
            outputs += [(k, lw.stages[k.stage].count_stage), (v, lw.stages[v.stage].count_stage)]
            continue
        if root.nested:
            if isinstance(root, RowMap):
                buf = lw.materialise(root)
            else:
                raise NdpError(f"the result {root.op} is a nested view; return join(...) or map over its rows")
        elif isinstance(root, FUSABLE):
            buf = lw.materialise_map(root)
        else:
            buf = lw.materialise(root)
        st = lw.stages[buf.stage]
        count = st.count_stage if st.kind == "scatter" and st.mask is not None and st.out_length is None else None
        outputs.append((buf, count))
    return Lowered(lw.stages, outputs)
