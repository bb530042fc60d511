"""Fusion: partition a flushed trace into kernels, build a launch plan, cache plans by the trace's structure.

Rules (seed 002's greedy fuser, with array contraction):
* a node is *materialised* (written to memory) only if a live array needs it, it is a reduction, it is
  read through a shifting view (a stencil would otherwise recompute it per neighbour), or several
  consumers share a large expression; everything else is inlined as registers (never allocated);
* materialised element-wise nodes of one shape whose dependencies are all pointwise share one kernel
  (so Black-Scholes' call and put come out of one kernel that computes ``d1`` once);
* each reduction is one kernel (two for ``two_pass``), with its element-wise producer inlined.

The plan cache key is the linearised DAG without data: node descriptions (op, dtype, shape, view),
edges, which leaves are the same buffer, and which nodes are roots. A steady-state loop therefore hits
the cache on every flush; the session finds most such hits from the key written while recording
(``ir.Tape``) and walks the trace (``linearise``) only on a miss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from adaptune.lang import codegen
from adaptune.lang.ir import (
    Buffer,
    Map,
    Node,
    Reduce,
    Scalar,
    Update,
    View,
    contiguous_strides,
    count_ops,
    is_identity_view,
)
from adaptune.lang.runtime import Runtime, storage_dtype

SCRATCH_POOL_BYTES = 1 << 20  # intermediates up to this size stay allocated with their plan (reused by every
# flush of it: on one in-order queue a flush's kernels run after the previous flush's); larger ones are
# allocated per flush (their kernels take long enough that an allocation does not show)
MAX_FUSED_REDUCTIONS = 4  # accumulators per reduction kernel (shared memory: one block-sized array each)
SHARED_INLINE_LIMIT = 24  # a node used by several consumers is recomputed only if it is this small


def linearise(roots: Sequence[Node]) -> tuple[list[Node], dict[int, int], tuple]:
    """Post-order of the DAG under ``roots`` and its structure key.

    The key holds, per node, its description followed by its children's positions (a node's arity follows
    from its description), and the roots' positions: the trace without its data. This runs on every flush,
    so the common case is a tight recursive walk; a trace too deep for Python's recursion limit is walked
    again iteratively.
    """
    try:
        return _linearise_recursive(roots)
    except RecursionError:
        return _linearise_iterative(roots)


def _linearise_recursive(roots: Sequence[Node]) -> tuple[list[Node], dict[int, int], tuple]:
    order: list[Node] = []
    pos: dict[int, int] = {}
    items: list[Any] = []
    append, iappend = order.append, items.append

    def visit(node: Node) -> None:
        children = node.children
        for c in children:
            if id(c) not in pos:
                visit(c)
        pos[id(node)] = len(order)
        append(node)
        k = node._key
        if k is None:
            k = node._key = node.desc()
        iappend(k)
        for c in children:
            iappend(pos[id(c)])

    for root in roots:
        if id(root) not in pos:
            visit(root)
    return order, pos, (tuple(items), tuple([pos[id(r)] for r in roots]))


def _linearise_iterative(roots: Sequence[Node]) -> tuple[list[Node], dict[int, int], tuple]:
    order: list[Node] = []
    pos: dict[int, int] = {}
    items: list[Any] = []
    for root in roots:
        if id(root) in pos:
            continue
        stack = [root]
        while stack:
            node = stack[-1]
            waiting = False
            for c in node.children:
                if id(c) not in pos:
                    stack.append(c)
                    waiting = True
            if waiting:
                continue
            stack.pop()
            if id(node) in pos:
                continue
            pos[id(node)] = len(order)
            order.append(node)
            k = node._key
            if k is None:
                k = node._key = node.desc()
            items.append(k)
            items.extend(pos[id(c)] for c in node.children)
    return order, pos, (tuple(items), tuple([pos[id(r)] for r in roots]))


@dataclass
class Step:
    """One launch: arguments are (kind, slot): 'in' = trace position, 'tmp' = plan temporary.

    ``items`` is the number of work-items the kernel needs (element-wise kernels: the output size), so
    the work-group size can be retuned without regenerating the kernel; 0 = the geometry is fixed.
    """

    launch: Callable[[int, int, Sequence[Any]], None]
    grid: int
    block: int
    args: list[tuple[str, int]]
    outputs: list[tuple[str, int, int, np.dtype]]  # (kind, slot, n elements, dtype)
    what: str
    source: str
    bytes: int
    items: int = 0
    per_item: int = 1  # elements per work-item (``codegen.elementwise``): grid = items / (block * per_item)
    fn: Any = None  # the raw launcher ``fn((grid,), (block,), args)`` (CuPy's Function on CUDA)


@dataclass
class Plan:
    steps: list[Step]
    n_tmp: int
    root_slots: list[int]
    scalar_slots: list[int]
    leaf_slots: list[int]
    kernels: int = 0
    bytes: int = 0
    reductions: list[dict[str, Any]] = field(default_factory=list)
    inplace: int = 0
    # prepared by ``prepare``: what a cache hit executes (see ``run``)
    fast: list[tuple] = field(default_factory=list)
    tmp_init: list[Any] | None = None  # the temporaries' starting values (pooled scratch, else None); None
    # until the scratch is allocated
    scratch: list[tuple[int, int, np.dtype]] = field(default_factory=list)  # (temporary, n, dtype) to pool
    root_vals: list[int] = field(default_factory=list)
    roots: Callable[[list], Sequence[Any]] = tuple  # the roots' buffers from the value list (one C call)
    launches: list[tuple] = field(default_factory=list)  # per kernel (fn, grid, block, getter)
    allocs: list[tuple[int, int, np.dtype]] = field(default_factory=list)  # (value index, n, dtype) per launch
    direct: list[tuple] | None = None  # ``launches`` where a plan has no temporaries and nothing to allocate:
    # run straight from the bound values (the in-place update of a steady loop)


def prepare(plan: Plan) -> Plan:
    """Pre-build everything a cache hit needs, so a steady-state flush allocates no Python objects beyond
    the value list, the argument tuples and the device buffers: per step the raw launcher, the (grid,) and
    (block,) tuples, an ``itemgetter`` that forms the argument tuple from the flush's value list in one C
    call, and the outputs to allocate. The value list is [leaf buffers..., scalar arguments..., temporaries...].
    Small intermediates (temporaries no root returns: reduction partials, a shared subexpression) come from
    the plan's scratch pool instead of an allocation per flush. Call again after changing a step's geometry
    (the work-group tuner does)."""
    n_leaf = len(plan.leaf_slots)
    index_in = {p: i for i, p in enumerate(plan.leaf_slots)}
    index_in.update({p: n_leaf + j for j, p in enumerate(plan.scalar_slots)})
    base = n_leaf + len(plan.scalar_slots)

    def vi(kind: str, slot: int) -> int:
        return index_in[slot] if kind == "in" else base + slot

    returned = {s for s in plan.root_slots if s >= 0}
    fast, scratch = [], []
    for step in plan.steps:
        outs = []
        for kind, slot, n, dtype in step.outputs:
            if kind != "tmp":
                continue
            if slot not in returned and n * dtype.itemsize <= SCRATCH_POOL_BYTES:
                scratch.append((slot, n, dtype))
            else:
                outs.append((vi(kind, slot), n, dtype))
        idx = [vi(k, s) for k, s in step.args] + [vi(k, s) for k, s, _, _ in step.outputs]
        getter = _args_getter(idx)
        fast.append((step.fn if step.grid else None, (int(step.grid),), (int(step.block),), getter, tuple(outs)))
    plan.fast = fast
    plan.scratch = scratch
    plan.tmp_init = None if scratch else [None] * plan.n_tmp  # scratch: allocated at the first launch
    plan.root_vals = [base + s if s >= 0 else index_in[-1 - s] for s in plan.root_slots]
    plan.roots = items_getter(plan.root_vals)
    plan.launches = [(fn, grid, block, getter) for fn, grid, block, getter, _ in fast if fn is not None]
    plan.allocs = [out for *_, outs in fast for out in outs]
    plan.direct = None if plan.n_tmp or plan.allocs else plan.launches
    return plan


def _args_getter(idx: Sequence[int]) -> Callable[[Sequence], tuple]:
    """A kernel's arguments: ``lambda vals: tuple(vals[i] for i in idx)``, as one C call where it can be."""
    if len(idx) > 1:
        return itemgetter(*idx)
    if idx:
        return _single(idx[0])
    return lambda vals: ()


def items_getter(idx: Sequence[int]) -> Callable[[Sequence], Sequence]:
    """``lambda vals: [vals[i] for i in idx]`` as one C call (an ``itemgetter``; one index: a slice of one)."""
    if len(idx) > 1:
        return itemgetter(*idx)
    if idx:
        return itemgetter(slice(idx[0], idx[0] + 1))
    return lambda vals: ()


def _single(i: int) -> Callable[[list], tuple]:
    return lambda vals: (vals[i],)


def _materialised(order: list[Node], pos: dict[int, int], roots: Sequence[Node]) -> set[int]:
    uses: dict[int, int] = {}
    shifted: set[int] = set()
    for n in order:
        for c in n.children:
            uses[id(c)] = uses.get(id(c), 0) + 1
        if isinstance(n, View) and not n.bcast and not is_identity_view(n):
            shifted.add(id(n.children[0]))
    out = {id(r) for r in roots if not isinstance(r, Buffer | Scalar)}
    for n in order:
        if isinstance(n, Buffer | Scalar):
            continue
        if isinstance(n, Reduce) or id(n) in shifted or uses.get(id(n), 0) > 1 and not isinstance(n, View) and count_ops(n) > SHARED_INLINE_LIMIT:
            out.add(id(n))
    # a view that is itself materialised (a copy of a shifted view) needs its source only as a leaf
    return out


def _deps(node: Node, mat: set[int]) -> list[tuple[Node, bool]]:
    """Materialised nodes (or buffers) read while inlining ``node``; True if reached pointwise only."""
    out: list[tuple[Node, bool]] = []
    seen: set[tuple[int, bool]] = set()
    stack: list[tuple[Node, bool]] = [(c, _pointwise(node, i)) for i, c in enumerate(node.children)]
    while stack:
        n, pw = stack.pop()
        if (id(n), pw) in seen or isinstance(n, Scalar):
            continue
        seen.add((id(n), pw))
        if id(n) in mat or isinstance(n, Buffer):
            out.append((n, pw))
            continue
        stack.extend((c, pw and _pointwise(n, i)) for i, c in enumerate(n.children))
    return out


def _pointwise(parent: Node, i: int) -> bool:
    if isinstance(parent, Map):
        return True
    if isinstance(parent, View):
        return is_identity_view(parent)
    if isinstance(parent, Update):
        return i == 0 or parent.full and parent.children[1].shape == parent.shape
    return False


def build(order: list[Node], pos: dict[int, int], roots: Sequence[Node], runtime: Runtime,
          choose: Callable[[codegen.ReduceShape, Reduce, Runtime], tuple[str, dict[str, int]]],
          coalesce: bool = True) -> Plan:
    """Partition, generate and compile; ``choose`` picks a reduction variant and its parameters;
    ``coalesce`` lets element-wise kernels over transposed operands use the tiled (coalesced) variant."""
    mat = _materialised(order, pos, roots)
    deps = {id(n): _deps(n, mat) for n in order if id(n) in mat}
    inplace = {id(n) for n in roots if isinstance(n, Update) and _inplace_candidate(n, mat)}
    level = _levels(order, mat, deps, {}, inplace)
    # reductions over one shape and axes run at the latest level any of them needs, so they share a kernel
    latest: dict[tuple, int] = {}
    for n in order:
        if isinstance(n, Reduce):
            rkey = (n.children[0].shape, n.axes)
            latest[rkey] = max(latest.get(rkey, 0), level[id(n)])
    floors = {id(n): latest[(n.children[0].shape, n.axes)] for n in order if isinstance(n, Reduce)}
    level = _levels(order, mat, deps, floors, inplace)
    while True:  # an in-place write must come after every other kernel that reads the old buffer
        late = {u for u in inplace if _read_later(u, order, mat, deps, level, inplace)}
        if not late:
            break
        inplace -= late
        level = _levels(order, mat, deps, floors, inplace)
    groups: dict[tuple, list[Node]] = {}
    for n in order:
        if id(n) not in mat:
            continue
        lv = level[id(n)]
        if id(n) in inplace:  # in-place writes over one shape share a kernel (none reads another's buffer)
            gkey = (lv, "inplace", n.children[1].shape)
        elif isinstance(n, Reduce):  # up to MAX_FUSED_REDUCTIONS accumulators per kernel
            rkey = (n.children[0].shape, n.axes)
            gkey = (lv, "reduce", (rkey, 0))
            while len(groups.get(gkey, ())) >= MAX_FUSED_REDUCTIONS:
                gkey = (lv, "reduce", (rkey, gkey[2][1] + 1))
        else:
            gkey = (lv, "map", n.shape)
        groups.setdefault(gkey, []).append(n)
    steps: list[Step] = []
    slot_of: dict[int, tuple[str, int]] = {}
    for r in order:
        if isinstance(r, Buffer | Scalar):
            slot_of[id(r)] = ("in", pos[id(r)])
    n_tmp = 0
    reductions: list[dict[str, Any]] = []
    rank = {"map": 0, "reduce": 1, "inplace": 2}  # in-place writes run last within their level
    for gkey in sorted(groups, key=lambda k: (k[0], rank[k[1]], str(k[2]))):
        nodes = groups[gkey]
        external = {i for i in mat if all(i != id(m) for m in nodes)} | \
            {id(n) for n in order if isinstance(n, Buffer)}
        if gkey[1] == "inplace":
            src, ctx = codegen.inplace(nodes, external)
            outs = []
            for node in nodes:
                old, val = node.children
                slot_of[id(node)] = ("in", pos[id(old)])
                outs.append(("in", pos[id(old)], val.size, node.dtype))
            block = min(256, runtime.max_block)
            size = nodes[0].children[1].size
            steps.append(_step(runtime, src, ctx, outs, slot_of, -(-size // block), block,
                               _describe(nodes) + " (in place)"))  # items stay 0: never re-launched by the tuner
        elif gkey[1] == "map":
            tiled = codegen.transposed_inputs(nodes, external) if coalesce else []
            if tiled:  # an operand's fastest axis is not the output's: turn it around in local memory
                src, ctx = codegen.elementwise_tiled(nodes, external, tiled)
                block = codegen.TILE * codegen.TILE_ROWS
                grid = codegen.tiled_groups(nodes[0].shape)
            else:
                per_item = items_per_work_item(nodes[0].size, runtime)
                # on a CPU device (PoCL vectorises across work-items) 4 neighbouring elements in one work-item
                # turn shifted reads into strided ones: heat 1024^2 on PoCL 0.80-0.87 ms one layout, 1.03-1.30
                # the other; Black-Scholes (every read at the element's own index) 53 -> 42 ms with vectors
                src, ctx = codegen.elementwise(nodes, external, per_item,
                                               vector_with_other_loads=runtime.kind == "cuda")
                block = min(128 if per_item > 1 else 256, runtime.max_block)  # 128: best with 4 per item on the H100
                grid = -(-nodes[0].size // (block * per_item))
            outs = []
            for node in nodes:
                slot_of[id(node)] = ("tmp", n_tmp)
                outs.append(("tmp", n_tmp, node.size, node.dtype))
                n_tmp += 1
            what = _describe(nodes) + (" (tiled transpose)" if tiled else "")
            steps.append(_step(runtime, src, ctx, outs, slot_of, grid, block, what))
            steps[-1].items = 0 if tiled else nodes[0].size  # a tiled kernel's geometry is fixed
            steps[-1].per_item = 1 if tiled else per_item
        else:
            rs = codegen.reduce_shape(nodes[0])
            variant, params = choose(rs, nodes[0], runtime)
            reductions.append({"n_out": rs.n_out, "length": rs.length, "stride": rs.stride,
                               "variant": variant, "fused": len(nodes), **params})
            n_tmp = _reduce_steps(nodes, rs, variant, params, external, runtime, steps, slot_of, n_tmp)
    root_slots = []
    for r in roots:
        kind, slot = slot_of[id(r)]
        root_slots.append(slot if kind == "tmp" else -1 - slot)
    plan = Plan(steps, n_tmp, root_slots,
                [pos[id(n)] for n in order if isinstance(n, Scalar)],
                [pos[id(n)] for n in order if isinstance(n, Buffer)], reductions=reductions)
    plan.kernels = len(steps)
    plan.bytes = sum(s.bytes for s in steps)
    plan.inplace = len(inplace)
    return prepare(plan)


def _levels(order: list[Node], mat: set[int], deps: dict[int, list[tuple[Node, bool]]],
            floors: dict[int, int], inplace: set[int] = frozenset()) -> dict[int, int]:
    """Kernel level of each materialised node: after everything it reads through a non-pointwise edge
    (an in-place write is its own kernel, so whatever reads its result runs at a later level)."""
    level: dict[int, int] = {}
    for n in order:
        if id(n) not in mat:
            continue
        lv = floors.get(id(n), 0)
        for d, pw in deps[id(n)]:
            if isinstance(d, Buffer) and id(d) not in mat:
                continue
            same = pw and not isinstance(n, Reduce) and not isinstance(d, Reduce) and d.shape == n.shape \
                and id(d) not in inplace
            lv = max(lv, level[id(d)] + (0 if same else 1))
        level[id(n)] = lv
    return level


def _norm(shape: tuple[int, ...], strides: Sequence[int], offset: int) -> tuple:
    return tuple(0 if n == 1 else s for n, s in zip(shape, strides, strict=True)), offset


def _inplace_candidate(u: Update, mat: set[int]) -> bool:
    """Can ``u`` overwrite its old buffer in place? Only if that buffer is ``owned`` and every element the
    inlined value reads from it is the element the same work-item writes (same-index reads are safe; a
    shifted or broadcast read of an element another work-item may write first is not: that needs a copy)."""
    old, val = u.children
    if not isinstance(old, Buffer) or not old.owned or val.size == 0:
        return False
    strides, offset = u.target()
    want = _norm(val.shape, strides, offset)
    stack: list[tuple[Node, bool]] = [(val, True)]  # (node, evaluated at the written element's index)
    seen: set[tuple[int, bool]] = set()
    while stack:
        n, same = stack.pop()
        if (id(n), same) in seen:
            continue
        seen.add((id(n), same))
        if n is old:  # read whole, at the value's own index
            if not (same and val.shape == old.shape and want == _norm(old.shape, contiguous_strides(old.shape), 0)):
                return False
            continue
        if isinstance(n, Buffer | Scalar) or id(n) in mat:  # materialised nodes are computed by earlier kernels
            continue
        if isinstance(n, View):
            src = n.children[0]
            if src is old:
                if not (same and n.shape == val.shape and _norm(n.shape, n.strides, n.offset) == want):
                    return False
                continue
            stack.append((src, False))
        elif isinstance(n, Map):
            stack.extend((c, same) for c in n.children)
        else:
            stack.extend((c, False) for c in n.children)
    return True


def _read_later(u_id: int, order: list[Node], mat: set[int], deps: dict[int, list[tuple[Node, bool]]],
                level: dict[int, int], inplace: set[int]) -> bool:
    """True if a kernel that runs at or after the in-place write ``u_id`` reads its old buffer."""
    u = next(n for n in order if id(n) == u_id)
    old = u.children[0]
    for n in order:
        if id(n) == u_id or id(n) not in mat:
            continue
        late = level[id(n)] > level[u_id] or (level[id(n)] == level[u_id] and id(n) in inplace)
        if late and any(d is old for d, _ in deps[id(n)]):
            return True
    return False


def _describe(nodes: Sequence[Node]) -> str:
    names: list[str] = []
    for n in nodes:
        stack, seen = [n], set()
        while stack:
            m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            if isinstance(m, Map) and m.op not in names:
                names.append(m.op)
            elif isinstance(m, Reduce) and f"{m.op}.reduce" not in names:
                names.append(f"{m.op}.reduce")
            elif isinstance(m, Update) and "setitem" not in names:
                names.append("setitem")
            if m is n or not isinstance(m, Reduce):
                stack.extend(m.children)
    return ", ".join(names) or "copy"


#: elements per work-item of a large element-wise kernel, and from how many full waves of the device on
ELEMENTS_PER_ITEM, WAVES_FOR_MORE_PER_ITEM = 4, 4


def items_per_work_item(n: int, runtime: Runtime) -> int:
    """4 elements per work-item once one per item would fill the device ``WAVES_FOR_MORE_PER_ITEM`` times over
    (2048 resident work-items per multiprocessor): enough work-groups remain to balance, and each item has
    four independent loads in flight. Smaller kernels keep one element per item (more parallelism)."""
    return ELEMENTS_PER_ITEM if n >= WAVES_FOR_MORE_PER_ITEM * ELEMENTS_PER_ITEM * 2048 * runtime.multiprocessors else 1


def _step(runtime: Runtime, src: str, ctx: codegen.Ctx, outs, slot_of, grid: int, block: int,
          what: str) -> Step:
    launch = runtime.compile(src, "at_kernel", what)
    outs = [(kind, slot, max(int(n), 1), storage_dtype(dt)) for kind, slot, n, dt in outs]
    args = [slot_of[id(n)] for n in ctx.inputs] + [slot_of[id(n)] for n in ctx.scalars]
    nbytes = sum(n.size * n.dtype.itemsize for n in ctx.inputs) + sum(k[2] * k[3].itemsize for k in outs)
    return Step(launch, grid, block, args, outs, what, src, nbytes, fn=runtime.raw(src))


def _reduce_steps(nodes: list[Reduce], rs: codegen.ReduceShape, variant: str, params: dict[str, int],
                  external: set[int], runtime: Runtime, steps: list[Step], slot_of: dict, n_tmp: int) -> int:
    block = int(params.get("block", 256))
    what = _describe(nodes)
    if variant == "column" and not codegen.column_applies(rs, block):
        variant = "two_pass"  # a model may pick it for any shape: where the mapping does not apply, the sweep
    if variant == "thread_per_output":
        src, ctx = codegen.reduction(nodes, external, variant, block)
        grid = -(-rs.n_out // block)
    elif variant == "tree":
        src, ctx = codegen.reduction(nodes, external, variant, block)
        grid = rs.n_out
    elif variant == "segmented":
        seg = int(params.get("seg", 32))
        src, ctx = codegen.reduction(nodes, external, variant, block, seg=seg)
        grid = -(-rs.n_out // (block // seg))
    else:  # two_pass, grid_stride or column: partials, then a tree kernel over them
        if variant == "column":  # every group covers all outputs: parts = groups filling the device
            rows = block // rs.n_out
            parts = int(params.get("parts", 0)) or max(1, min(runtime.multiprocessors * 2048 // block,
                                                             -(-rs.length // rows), 4096))
            src, ctx = codegen.reduction(nodes, external, variant, block, parts=parts)
        elif variant == "grid_stride":
            per_sm = int(params.get("groups_per_sm", 0)) or max(1, 2048 // block)
            parts = max(1, min(runtime.multiprocessors * per_sm // max(rs.n_out, 1), -(-rs.length // block),
                               4096))
            src, ctx = codegen.reduction(nodes, external, variant, block, parts=parts,
                                         unroll=int(params.get("unroll", 4)))
        else:
            parts = int(params.get("parts", 0)) or default_parts(rs, block, runtime)
            src, ctx = codegen.reduction(nodes, external, variant, block, parts=parts,
                                         unroll=int(params.get("unroll", 1)))
        partials = []
        for node in nodes:
            partials.append(("tmp", n_tmp, rs.n_out * parts, node.dtype))
            n_tmp += 1
        groups = parts if variant == "column" else rs.n_out * parts
        steps.append(_step(runtime, src, ctx, partials, slot_of, groups, block, what + " (pass 1)"))
        seconds = []
        for node, (_, slot, _, _) in zip(nodes, partials, strict=True):
            buf = Buffer(None, (rs.n_out, parts), node.dtype)
            slot_of[id(buf)] = ("tmp", slot)
            seconds.append(Reduce(node.op, buf, (1,), node.dtype))
        fblock = min(block, max(32, 1 << (parts - 1).bit_length()), runtime.max_block)
        src, ctx = codegen.reduction(seconds, {id(r.children[0]) for r in seconds}, "tree", fblock)
        outs = []
        for node in nodes:
            slot_of[id(node)] = ("tmp", n_tmp)
            outs.append(("tmp", n_tmp, rs.n_out, node.dtype))
            n_tmp += 1
        steps.append(_step(runtime, src, ctx, outs, slot_of, rs.n_out, fblock, what + " (pass 2)"))
        return n_tmp
    outs = []
    for node in nodes:
        slot_of[id(node)] = ("tmp", n_tmp)
        outs.append(("tmp", n_tmp, rs.n_out, node.dtype))
        n_tmp += 1
    steps.append(_step(runtime, src, ctx, outs, slot_of, grid, block, what))
    return n_tmp


def default_parts(rs: codegen.ReduceShape, block: int, runtime: Runtime) -> int:
    """Work-groups per output for ``two_pass``: enough to fill the device (about 2048 work-items per SM)."""
    want = max(1, runtime.multiprocessors * 2048 // block // max(rs.n_out, 1))
    return max(1, min(want, -(-rs.length // block), 4096))


def run(plan: Plan, order: list[Node], runtime: Runtime, record: list | None = None) -> list[Any]:
    """Launch the plan's kernels; return the device buffers of the roots (``record`` gets (step, args)).

    One value list per flush ([leaf buffers, scalars, temporaries]); each launch's arguments are one
    prepared ``itemgetter`` call; outputs written in place are leaves, so nothing is allocated for them."""
    vals = [order[i].data for i in plan.leaf_slots]  # type: ignore[attr-defined]
    if plan.scalar_slots:
        vals += [order[i].arg for i in plan.scalar_slots]  # type: ignore[attr-defined]
    if record is None:
        return launch(plan, vals, runtime)
    init = plan.tmp_init
    vals += init if init is not None else _pool(plan, runtime)
    alloc = runtime.alloc
    for step, (fn, grid, block, getter, outs) in zip(plan.steps, plan.fast, strict=True):
        for i, n, dtype in outs:
            vals[i] = alloc(n, dtype)
        args = list(getter(vals))
        if fn is not None:
            fn(grid, block, tuple(args))
        record.append((step, args))
    return [vals[i] for i in plan.root_vals]


def launch(plan: Plan, vals: list[Any], runtime: Runtime) -> list[Any]:
    """The cache-hit path: ``vals`` = [leaf buffers..., scalar arguments...] in the plan's slot order (a
    replayed trace binds them without walking a graph); allocates the temporaries, launches, returns the
    roots' buffers. ``vals`` itself is left as it came (a caller may keep it to launch again)."""
    vals = allocate(plan, vals, runtime)
    launch_allocated(plan, vals)
    return plan.roots(vals)


def allocate(plan: Plan, vals: list[Any], runtime: Runtime) -> list[Any]:
    """``vals`` and the plan's temporaries, with the outputs allocated per launch (a new list; ``vals`` itself
    where there is nothing to add: the in-place update of a steady loop)."""
    if plan.direct is not None:
        return vals
    init = plan.tmp_init
    vals = vals + (init if init is not None else _pool(plan, runtime))
    alloc = runtime.alloc
    for i, n, dtype in plan.allocs:
        vals[i] = alloc(n, dtype)
    return vals


def launch_allocated(plan: Plan, vals: list[Any]) -> None:
    """Launch the plan's kernels on values ``allocate`` completed (allocates nothing: a CUDA graph captures it)."""
    for fn, grid, block, getter in plan.launches:
        fn(grid, block, getter(vals))


def _pool(plan: Plan, runtime: Runtime) -> list[Any]:
    """Allocate the plan's scratch intermediates once; the temporaries' starting values from then on."""
    init: list[Any] = [None] * plan.n_tmp
    for slot, n, dtype in plan.scratch:
        init[slot] = runtime.alloc(n, dtype)
    plan.tmp_init = init
    return init
