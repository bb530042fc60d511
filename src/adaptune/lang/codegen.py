"""Code generation: a fused group of IR nodes -> one kernel in the portable dialect (CUDA and OpenCL C).

Every node is evaluated at an *index* (flat, or one expression per dimension) into a local variable;
a (node, index) pair is emitted once (common subexpressions are shared), so a Black-Scholes kernel
computes ``d1`` once for both outputs and a stencil loads each shifted view once. Shapes, strides and
offsets are compile-time constants (the compile cache is keyed by them anyway), which turns index
division into multiply-shift and lets the compiler fold the address arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.lang import ops
from adaptune.lang.ir import Buffer, Map, Node, Reduce, Scalar, Update, View, contiguous_strides, ctype

INT32_LIMIT = 2**31 - 1
MAX_GROUP_SPAN = 1024  # the largest work-group size any backend launches


@dataclass(frozen=True)
class Index:
    """Where a node is evaluated: ``flat`` (C-order over ``shape``) and/or ``multi`` (one per dim)."""

    shape: tuple[int, ...]
    flat: str | None = None
    multi: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        return f"f{self.flat}" if self.flat is not None else "m" + ",".join(self.multi or ())


@dataclass
class Ctx:
    """Statement buffer with lexical scopes (for common-subexpression reuse) and the kernel's arguments."""

    external: set[int]  # ids of nodes read from memory (buffers and nodes materialised by earlier kernels)
    idx_t: str = "idx_t"  # typedef'd per kernel to i32, or i64 when an extent exceeds 2**31 - 1
    lines: list[str] = field(default_factory=list)
    scopes: list[dict[Any, str]] = field(default_factory=lambda: [{}])
    inputs: list[Node] = field(default_factory=list)  # external nodes, in argument order
    scalars: list[Node] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    counter: int = 0
    indent: int = 1
    # the flat index whose loads the kernel issues itself, ahead of the arithmetic (``_streamed_kernel``);
    # each such load is recorded in ``streams`` as (variable, buffer, C type) instead of being emitted
    stream_at: str | None = None
    streams: list[tuple[str, str, str]] = field(default_factory=list)
    other_loads: int = 0  # loads emitted where they are (another index, or inside a branch)

    def tmp(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def lookup(self, key: Any) -> str | None:
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    def remember(self, key: Any, value: str) -> str:
        self.scopes[-1][key] = value
        return value

    def push(self) -> None:
        self.scopes.append({})
        self.indent += 1

    def pop(self) -> None:
        self.scopes.pop()
        self.indent -= 1

    def load(self, ctype_: str, buf: str, addr: str) -> str:
        """A variable holding ``buf[addr]``: a stream when it is read at ``stream_at`` outside any branch."""
        var = self.tmp()
        if addr == self.stream_at and len(self.scopes) == 1:
            self.streams.append((var, buf, ctype_))
        else:
            self.other_loads += 1
            self.emit(f"const {ctype_} {var} = {buf}[{addr}];")
        return var

    def arg(self, node: Node) -> str:
        name = self.names.get(id(node))
        if name is None:
            if isinstance(node, Scalar):
                name = f"s{len(self.scalars)}"
                self.scalars.append(node)
            else:
                name = f"b{len(self.inputs)}"
                self.inputs.append(node)
            self.names[id(node)] = name
        return name

    # ------------------------------------------------------------------------- indices

    def flat(self, idx: Index) -> str:
        if idx.flat is not None:
            return idx.flat
        terms = [f"{m} * {s}" if s != 1 else m
                 for m, n, s in zip(idx.multi or (), idx.shape, contiguous_strides(idx.shape), strict=True)
                 if n != 1]
        return "(" + " + ".join(terms) + ")" if terms else "0"

    def multi(self, idx: Index) -> tuple[str, ...]:
        if idx.multi is not None:
            return idx.multi
        key = ("unravel", idx.key)
        hit = self.lookup(key)
        if hit is not None:
            return tuple(hit.split("|"))
        out: list[str] = []
        rest = idx.flat or "0"
        names = []
        for d in range(len(idx.shape) - 1, -1, -1):
            n = idx.shape[d]
            if n == 1:
                out.append("0")
                continue
            name = self.tmp("i")
            if d == 0 or all(m == 1 for m in idx.shape[:d]):
                self.emit(f"const {self.idx_t} {name} = {rest};")
            else:
                self.emit(f"const {self.idx_t} {name} = ({rest}) % {n};")
                nxt = self.tmp("q")
                self.emit(f"const {self.idx_t} {nxt} = ({rest}) / {n};")
                rest = nxt
            out.append(name)
            names.append(name)
        result = tuple(reversed(out))
        self.remember(key, "|".join(result))
        return result


def convert(expr: str, dtype: np.dtype) -> str:
    """C conversion with NumPy's meaning (anything non-zero is True)."""
    if dtype == np.bool_:
        return f"(u8)(({expr}) != 0)"
    return f"({ctype(dtype)})({expr})"


def address(ctx: Ctx, view: View, idx: Index) -> str:
    """Element offset of ``view`` at ``idx`` in its source's flat layout."""
    if view.strides == contiguous_strides(view.shape) and idx.flat is not None:
        return f"({view.offset} + {idx.flat})" if view.offset else idx.flat
    multi = ctx.multi(idx)
    terms = [str(view.offset)] if view.offset else []
    for m, n, s in zip(multi, view.shape, view.strides, strict=True):
        if n == 1 or s == 0:
            continue
        terms.append(m if s == 1 else f"{m} * {s}" if s > 0 else f"{m} * ({s})")
    return "(" + " + ".join(terms) + ")" if terms else "0"


def value(ctx: Ctx, node: Node, idx: Index) -> str:
    """Emit the statements computing ``node`` at ``idx``; return the variable (or argument) holding it."""
    if isinstance(node, Scalar):
        return ctx.arg(node)
    key = (id(node), idx.key)
    hit = ctx.lookup(key)
    if hit is not None:
        return hit
    t = ctype(node.dtype)
    if id(node) in ctx.external:
        return ctx.remember(key, ctx.load(t, ctx.arg(node), ctx.flat(idx)))
    if isinstance(node, View):
        src = node.children[0]
        if isinstance(src, Scalar):
            return ctx.arg(src)
        addr = address(ctx, node, idx)
        if id(src) in ctx.external:
            akey = (id(src), "@" + addr)
            hit = ctx.lookup(akey)
            if hit is None:
                hit = ctx.remember(akey, ctx.load(t, ctx.arg(src), addr))
            return ctx.remember(key, hit)
        return ctx.remember(key, value(ctx, src, Index(src.shape, flat=addr)))
    if isinstance(node, Map):
        name = ops.BOOL_OPS.get(node.op, node.op) if node.compute == np.bool_ else node.op
        _, template, _ = ops.UFUNCS[name]
        cdt = node.compute
        args = []
        for i, child in enumerate(node.children):
            v = value(ctx, child, idx)
            want = np.dtype(np.bool_) if (node.op == "where" and i == 0) else cdt
            args.append(v if child.dtype == want else convert(v, want))
        expr = template(args, cdt)
        var = ctx.tmp()
        ctx.emit(f"const {t} {var} = {convert(expr, node.dtype)};")
        return ctx.remember(key, var)
    if isinstance(node, Update):
        return ctx.remember(key, _update(ctx, node, idx))
    if isinstance(node, Buffer | Reduce):
        raise AssertionError(f"{type(node).__name__} must be materialised before it is read")
    raise TypeError(f"cannot generate code for {type(node).__name__}")


def _update(ctx: Ctx, node: Update, idx: Index) -> str:
    old, val = node.children
    t = ctype(node.dtype)
    var = ctx.tmp("u")
    if node.full:
        if node.rng is not None:
            vidx = Index(val.shape, flat=ctx.flat(idx))
        else:
            vidx = Index(val.shape, flat=idx.flat, multi=_value_multi(ctx, node, idx))
        v = value(ctx, val, vidx)
        ctx.emit(f"const {t} {var} = {v if val.dtype == node.dtype else convert(v, node.dtype)};")
        return var
    if node.strided is not None:
        return _update_strided(ctx, node, idx, var)
    if node.rng is not None:
        f = ctx.flat(idx)
        ctx.emit(f"{t} {var};")
        ctx.emit(f"if ({f} >= {node.rng} && {f} < {node.rng + val.size}) {{")
        ctx.push()
        v = value(ctx, val, Index(val.shape, flat=f"({f} - {node.rng})"))
        ctx.emit(f"{var} = {v if val.dtype == node.dtype else convert(v, node.dtype)};")
        ctx.pop()
        ctx.emit("} else {")
        ctx.push()
        ctx.emit(f"{var} = {value(ctx, old, idx)};")
        ctx.pop()
        ctx.emit("}")
        return var
    multi = ctx.multi(idx)
    conds, rel = [], []
    for m, (start, step, count) in zip(multi, node.region, strict=True):
        if m == "0":  # a dimension of length 1: decide here, not in the kernel
            if start != 0 or count < 1:
                conds.append("0")
            rel.append("0")
            continue
        if step == 1:
            r = f"({m} - {start})" if start else m
            if start:
                conds.append(f"{m} >= {start}")
            conds.append(f"{m} < {start + count}")
        else:
            sgn = 1 if step > 0 else -1
            d = f"(({m} - {start}) * {sgn})" if sgn > 0 else f"({start} - {m})"
            conds.append(f"{d} >= 0")
            conds.append(f"{d} % {abs(step)} == 0")
            conds.append(f"{d} / {abs(step)} < {count}")
            r = f"({d} / {abs(step)})"
        rel.append(r)
    vmulti = tuple(rel[d] if d >= 0 else "0" for d in node.vdims)
    ctx.emit(f"{t} {var};")
    ctx.emit(f"if ({' && '.join(conds) or '1'}) {{")
    ctx.push()
    v = value(ctx, val, Index(val.shape, multi=vmulti))
    ctx.emit(f"{var} = {v if val.dtype == node.dtype else convert(v, node.dtype)};")
    ctx.pop()
    ctx.emit("} else {")
    ctx.push()
    o = value(ctx, old, idx)
    ctx.emit(f"{var} = {o};")
    ctx.pop()
    ctx.emit("}")
    return var


def _update_strided(ctx: Ctx, node: Update, idx: Index, var: str) -> str:
    """Update through any injective view: invert flat -> view index by nested division."""
    old, val = node.children
    strides, offset = node.strided
    t = ctype(node.dtype)
    base = offset + sum((n - 1) * s for n, s in zip(val.shape, strides, strict=True) if s < 0)
    dims = sorted((d for d, n in enumerate(val.shape) if n != 1), key=lambda d: -abs(strides[d]))
    rel = ctx.tmp("r")
    ctx.emit(f"{ctx.idx_t} {rel} = {ctx.flat(idx)} - {base};")
    inside = ctx.tmp("ok")
    ctx.emit(f"const i32 {inside} = {rel} >= 0;")
    conds = [inside]
    multi = ["0"] * len(val.shape)
    for d in dims:
        s, n = strides[d], val.shape[d]
        i = ctx.tmp("j")
        ctx.emit(f"const {ctx.idx_t} {i} = {rel} / {abs(s)};")
        ctx.emit(f"{rel} -= {i} * {abs(s)};")
        conds.append(f"{i} < {n}")
        multi[d] = i if s > 0 else f"({n - 1} - {i})"
    conds.append(f"{rel} == 0")
    ctx.emit(f"{t} {var};")
    ctx.emit(f"if ({' && '.join(conds)}) {{")
    ctx.push()
    v = value(ctx, val, Index(val.shape, multi=tuple(multi)))
    ctx.emit(f"{var} = {v if val.dtype == node.dtype else convert(v, node.dtype)};")
    ctx.pop()
    ctx.emit("} else {")
    ctx.push()
    ctx.emit(f"{var} = {value(ctx, old, idx)};")
    ctx.pop()
    ctx.emit("}")
    return var


def _value_multi(ctx: Ctx, node: Update, idx: Index) -> tuple[str, ...] | None:
    if node.vdims == tuple(range(len(node.shape))) and idx.flat is not None:
        return None
    multi = ctx.multi(idx)
    return tuple(multi[d] if d >= 0 else "0" for d in node.vdims)


def index_type(*sizes: int) -> str:
    return "i32" if max(sizes, default=0) <= INT32_LIMIT else "i64"


def signature(ctx: Ctx, outputs: list[tuple[str, np.dtype]]) -> str:
    params = [f"GLOBAL const {ctype(n.dtype)}* RESTRICT {ctx.names[id(n)]}" for n in ctx.inputs]
    params += [f"const {'u8' if n.dtype == np.bool_ else ctype(n.dtype)} {ctx.names[id(n)]}" for n in ctx.scalars]
    params += [f"GLOBAL {ctype(dt)}* RESTRICT {name}" for name, dt in outputs]
    return ", ".join(params)


def _sizes(ctx: Ctx) -> list[int]:
    return [n.size for n in ctx.inputs]



def _flat_kernel(ctx: Ctx, idx_t: str, n: int, out_dtypes: list[np.dtype], stores: list[str]) -> str:
    """Source of a kernel over flat indices ``gid`` < ``n``, one per work-item: the context's lines, then
    ``stores``."""
    body = "\n".join(ctx.lines)
    sig = signature(ctx, [(f"o{k}", dtype) for k, dtype in enumerate(out_dtypes)])
    stores_text = "".join(f"    {st}\n" for st in stores)
    return (f"typedef {idx_t} idx_t;\nKERNEL at_kernel({sig}) {{\n"
            "    const idx_t gid = (idx_t)GROUP_ID() * (idx_t)GROUP_SIZE() + (idx_t)LID();\n"
            f"    if (gid >= {n}) return;\n{body}\n" + stores_text + "}\n")


VECTOR4 = {"float": "float4", "i32": "int4", "u32": "uint4"}  # 16-byte vectors of the 4-byte C types
LANES = 4


def _streamed_kernel(ctx: Ctx, idx_t: str, n: int, outputs: list[tuple[np.dtype, str]], per_item: int,
                     vector_with_other_loads: bool = True) -> str:
    """Source of a kernel whose work-items take ``per_item`` flat indices each, with every load first.

    A work-group wholly inside ``n`` first loads each part's inputs read at its own index (``ctx.streams``),
    then computes the parts one after another. Where the inputs and outputs are all 4-byte types and
    ``per_item`` is a multiple of 4, a work-item's parts are runs of 4 neighbouring elements, loaded and
    stored as 16-byte vectors (runs one work-group width apart, so a warp's accesses stay contiguous);
    otherwise its parts are single elements one work-group width apart. ``vector_with_other_loads=False``
    keeps that second layout for a kernel that also loads elsewhere (shifted or broadcast reads). The last work-group (and, on CUDA,
    a buffer not 16-byte aligned) takes the plain path: one part at a time, each behind its bounds check.

    Why: with the check and the arithmetic of each part between its loads, a work-item had only one part's
    loads in flight. Black-Scholes on an H100 (2^26 options): 0.531 ms that way, 0.452 ms with the loads
    first, 0.449 ms with 16-byte vectors against ``jax.jit``'s 0.456 ms, bit for bit the same results
    (``benchmarks/hotpath/results/bs_loads_h100.md``).
    """
    types = [ctype(dt) for dt, _ in outputs]
    vector = per_item % LANES == 0 and all(t in VECTOR4 for t in types) and \
        all(t in VECTOR4 for _, _, t in ctx.streams) and (vector_with_other_loads or not ctx.other_loads)
    lanes = LANES if vector else 1
    sig = signature(ctx, [(f"o{k}", dt) for k, (dt, _) in enumerate(outputs)])
    lines = [ln.strip() for ln in ctx.lines]  # re-indented below: in a part's block, or in the plain loop
    body = [f"            {ln}" for ln in lines]
    span = f"(idx_t)(GROUP_SIZE() * {per_item}u)"
    run = f"(idx_t)(GROUP_SIZE() * {lanes}u)"  # from one of a work-item's runs to its next
    text = [f"typedef {idx_t} idx_t;", f"KERNEL at_kernel({sig}) {{",
            f"    const idx_t first = (idx_t)GROUP_ID() * {span} + (idx_t)LID() * {lanes};"]
    whole = f"((idx_t)GROUP_ID() + 1) * {span} <= {n}"
    if vector:
        whole += "".join(f" && ALIGNED16({buf})" for _, buf, _ in ctx.streams)
        whole += "".join(f" && ALIGNED16(o{k})" for k in range(len(outputs)))
    text.append(f"    if ({whole}) {{")
    for r in range(per_item // lanes):
        at = f"first + {r} * {run}"
        for var, buf, t in ctx.streams:
            text.append(f"        const {VECTOR4[t]} {var}_r{r} = VLOAD4({VECTOR4[t]}, {buf}, {at});" if vector
                        else f"        const {t} {var}_r{r} = {buf}[{at}];")
    for r in range(per_item // lanes):
        if vector:
            text += [f"        {t} res{k}_r{r}[{lanes}];" for k, t in enumerate(types)]
        for lane in range(lanes):
            text += ["        {", f"            const idx_t gid = first + {r} * {run} + {lane};"]
            text += [f"            const {t} {var} = {var}_r{r}{'.' + 'xyzw'[lane] if vector else ''};"
                     for var, _, t in ctx.streams]
            text += body
            text += [f"            res{k}_r{r}[{lane}] = {var};" if vector else f"            o{k}[gid] = {var};"
                     for k, (_, var) in enumerate(outputs)]
            text.append("        }")
        if vector:
            text += [f"        VSTORE4({VECTOR4[t]}, o{k}, first + {r} * {run}, "
                     + ", ".join(f"res{k}_r{r}[{lane}]" for lane in range(lanes)) + ");" for k, t in enumerate(types)]
    text += ["        return;", "    }",
             f"    for (int part = 0; part < {per_item}; ++part) {{",
             f"        const idx_t gid = first + (idx_t)(part / {lanes}) * {run} + (idx_t)(part % {lanes});",
             f"        if (gid >= {n}) continue;"]
    text += [f"        const {t} {var} = {buf}[gid];" for var, buf, t in ctx.streams]
    text += [f"        {ln}" for ln in lines] + [f"        o{k}[gid] = {var};" for k, (_, var) in enumerate(outputs)]
    text += ["    }", "}"]
    return "\n".join(text) + "\n"


def elementwise(outputs: list[Node], external: set[int], per_item: int = 1,
                vector_with_other_loads: bool = True) -> tuple[str, Ctx]:
    """One kernel computing every node of ``outputs`` (same shape) at each flat index ``gid``
    (``per_item`` > 1: that many indices per work-item, :func:`_streamed_kernel`)."""
    shape = outputs[0].shape
    n = int(np.prod(shape))
    ctx = Ctx(external=external, stream_at="gid" if per_item > 1 else None)
    idx = Index(shape, flat="gid")
    values = [value(ctx, node, idx) for node in outputs]
    # the last work-group's indices may pass n by up to a group's span: the index type must hold them
    idx_t = index_type(n + MAX_GROUP_SPAN * per_item, *_sizes(ctx))
    if per_item > 1:
        return _streamed_kernel(ctx, idx_t, n, [(nd.dtype, v) for nd, v in zip(outputs, values, strict=True)],
                                per_item, vector_with_other_loads), ctx
    return _flat_kernel(ctx, idx_t, n, [nd.dtype for nd in outputs],
                        [f"o{k}[gid] = {v};" for k, v in enumerate(values)]), ctx


TILE, TILE_ROWS = 32, 8  # the tiled element-wise kernel: 32 x 32 tiles, a work-group of 32 x 8 work-items
MAX_TILED_INPUTS = 4


def transposed_inputs(outputs: list[Node], external: set[int]) -> list[View]:
    """Views read at the outputs' own index whose fastest-varying axis is not the outputs' last one.

    Such a view (``x.T`` in ``x.T * 2``) is read with stride 1 along the outputs' second-to-last axis and
    a large stride along the last: the direct kernel's neighbouring work-items then touch addresses far
    apart. Only views of memory (buffers, materialised nodes) reached through element-wise operations
    qualify: those are the loads a tile in local memory can turn around."""
    shape = outputs[0].shape
    if len(shape) < 2 or shape[-1] < 2 or shape[-2] < 2:
        return []
    found: list[View] = []
    seen: set[int] = set()
    stack = list(outputs)
    while stack:
        n = stack.pop()
        if id(n) in seen or id(n) in external:
            continue
        seen.add(id(n))
        if isinstance(n, Map):
            stack.extend(n.children)
        elif isinstance(n, View) and n.shape == shape and id(n.children[0]) in external and \
                abs(n.strides[-1]) != 1 and n.strides[-1] != 0 and abs(n.strides[-2]) == 1:
            found.append(n)
    return found[:MAX_TILED_INPUTS]


def elementwise_tiled(outputs: list[Node], external: set[int], tiled: list[View]) -> tuple[str, Ctx]:
    """The coalesced variant of ``elementwise``: each work-group owns a 32 x 32 tile of the outputs'
    last two axes. It first loads every transposed input's tile along that input's contiguous direction
    into local memory (coalesced), then computes the outputs row by row (coalesced stores), taking the
    transposed inputs from the tile: seed 002's transpose through local memory."""
    shape = outputs[0].shape
    m, n = shape[-2], shape[-1]
    lead = shape[:-2]
    tm, tn = -(-m // TILE), -(-n // TILE)
    ctx = Ctx(external=external)
    i = ctx.idx_t
    ctx.emit("const u32 lid = LID();")
    ctx.emit(f"const u32 tx = lid % {TILE};")
    ctx.emit(f"const u32 ty = lid / {TILE};")
    ctx.emit(f"const {i} g = ({i})GROUP_ID();")
    ctx.emit(f"const {i} j0 = (g % {tn}) * {TILE};")
    ctx.emit(f"const {i} i0 = ((g / {tn}) % {tm}) * {TILE};")
    ctx.emit(f"const {i} bt = g / {tn * tm};")
    lead_multi = ctx.multi(Index(lead, flat="bt")) if lead else ()
    heads = [f"SHARED {ctype(v.dtype)} tile{t}[{TILE}][{TILE + 1}];" for t, v in enumerate(tiled)]
    for k in range(TILE // TILE_ROWS):  # load: work-item (tx, ty) reads element (i0 + tx, j0 + ty + 8k)
        ctx.emit(f"if (i0 + tx < {m} && j0 + ty + {k * TILE_ROWS} < {n}) {{")
        idx = Index(shape, multi=(*lead_multi, "(i0 + tx)", f"(j0 + ty + {k * TILE_ROWS})"))
        for t, v in enumerate(tiled):
            ctx.emit(f"    tile{t}[ty + {k * TILE_ROWS}][tx] = {ctx.arg(v.children[0])}[{address(ctx, v, idx)}];")
        ctx.emit("}")
    ctx.emit("BARRIER();")
    for k in range(TILE // TILE_ROWS):  # compute: work-item (tx, ty) owns element (i0 + ty + 8k, j0 + tx)
        row, col = ctx.tmp("row"), ctx.tmp("col")
        ctx.emit(f"const {i} {row} = i0 + ty + {k * TILE_ROWS};")
        ctx.emit(f"const {i} {col} = j0 + tx;")
        ctx.emit(f"if ({row} < {m} && {col} < {n}) {{")
        ctx.push()
        idx = Index(shape, multi=(*lead_multi, row, col))
        for t, v in enumerate(tiled):
            var = ctx.tmp("t")
            ctx.emit(f"const {ctype(v.dtype)} {var} = tile{t}[tx][ty + {k * TILE_ROWS}];")
            ctx.remember((id(v), idx.key), var)
        flat = f"(bt * {m * n} + {row} * {n} + {col})" if lead else f"({row} * {n} + {col})"
        for o, node in enumerate(outputs):
            ctx.emit(f"o{o}[{flat}] = {value(ctx, node, idx)};")
        ctx.pop()
        ctx.emit("}")
    total = int(np.prod(shape))
    idx_t = index_type(total + TILE * max(m, n), *_sizes(ctx))
    sig = signature(ctx, [(f"o{k}", node.dtype) for k, node in enumerate(outputs)])
    body = "".join(f"    {h}\n" for h in heads) + "\n".join(ctx.lines)
    src = f"typedef {idx_t} idx_t;\nKERNEL at_kernel({sig}) {{\n{body}\n}}\n"
    return src, ctx


def tiled_groups(shape: tuple[int, ...]) -> int:
    lead = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return lead * -(-shape[-2] // TILE) * -(-shape[-1] // TILE)


def inplace(nodes: list[Update], external: set[int]) -> tuple[str, Ctx]:
    """One work-item per element of the written regions (all of one shape): compute each value there and
    store it into its old buffer itself (``o<k>``). Reads of an old buffer go through that same pointer
    (the fuser allowed only reads of the element the work-item writes and no reads of another member's
    buffer, so there is no race and no aliasing behind RESTRICT)."""
    shape = nodes[0].children[1].shape
    n = int(np.prod(shape))
    ctx = Ctx(external=external)
    for k, node in enumerate(nodes):
        ctx.names[id(node.children[0])] = f"o{k}"
    idx = Index(shape, flat="gid")
    stores = []
    for k, node in enumerate(nodes):
        old, val = node.children
        strides, offset = node.target()
        v = value(ctx, val, idx)
        if val.dtype != node.dtype:
            v = convert(v, node.dtype)
        stores.append(f"o{k}[{address(ctx, View(old, shape, strides, offset), idx)}] = {v};")
    idx_t = index_type(n, *(node.size for node in nodes), *_sizes(ctx))
    return _flat_kernel(ctx, idx_t, n, [node.dtype for node in nodes], stores), ctx


# ----------------------------------------------------------------------------------- reductions

REDUCE_VARIANTS = ("thread_per_output", "tree", "segmented", "two_pass", "grid_stride", "column")


@dataclass(frozen=True)
class ReduceShape:
    """A reduction reordered as (outputs x length): the features the variant choice depends on."""

    n_out: int
    length: int
    stride: int  # distance in the source's flat layout between consecutive reduced elements (innermost)
    kept: tuple[int, ...]
    axes: tuple[int, ...]
    src_shape: tuple[int, ...]


def reduce_shape(node: Reduce) -> ReduceShape:
    src = node.children[0]
    axes = tuple(sorted(node.axes))
    kept = tuple(d for d in range(len(src.shape)) if d not in axes)
    cs = contiguous_strides(src.shape)
    real_axes = [a for a in axes if src.shape[a] != 1]
    stride = cs[real_axes[-1]] if real_axes else 1
    return ReduceShape(node.size, node.length, stride, kept, axes, src.shape)


def column_applies(rs: ReduceShape, block: int) -> bool:
    """``column`` needs the reduced axes leading (element (r, o) at r * n_out + o) and n_out dividing the
    work-group with at least two rows a step."""
    return (rs.n_out > 1 and rs.axes == tuple(range(len(rs.axes))) and 2 * rs.n_out <= block
            and block % rs.n_out == 0)


def _reduce_index(ctx: Ctx, rs: ReduceShape, o: str, r: str, o_multi: tuple[str, ...] | None) -> Index:
    """The source index of (output o, reduced position r)."""
    nd = len(rs.src_shape)
    if rs.n_out == 1 and all(rs.src_shape[d] == 1 for d in rs.kept):
        return Index(rs.src_shape, flat=r)
    if rs.axes == tuple(range(nd - len(rs.axes), nd)):
        return Index(rs.src_shape, flat=f"({o} * {rs.length} + {r})")
    if rs.axes == tuple(range(len(rs.axes))):
        return Index(rs.src_shape, flat=f"({r} * {rs.n_out} + {o})")
    red_shape = tuple(rs.src_shape[a] for a in rs.axes)
    r_multi = ctx.multi(Index(red_shape, flat=r))
    multi = [""] * nd
    for d, m in zip(rs.kept, o_multi or (), strict=True):
        multi[d] = m
    for d, m in zip(rs.axes, r_multi, strict=True):
        multi[d] = m
    return Index(rs.src_shape, multi=tuple(multi))


def _o_multi(ctx: Ctx, rs: ReduceShape, o: str) -> tuple[str, ...] | None:
    nd = len(rs.src_shape)
    if rs.n_out == 1 or rs.axes == tuple(range(nd - len(rs.axes), nd)) or rs.axes == tuple(range(len(rs.axes))):
        return None
    return ctx.multi(Index(tuple(rs.src_shape[d] for d in rs.kept), flat=o))


def _accumulate(ctx: Ctx, nodes: list[Reduce], rs: ReduceShape, o: str, r: str, o_multi, suffix: str = "") -> None:
    """One loop body: every reduction's producer at (o, r), inlined once (shared subexpressions computed once)."""
    ctx.push()
    index = _reduce_index(ctx, rs, o, r, o_multi)
    for k, node in enumerate(nodes):
        src = node.children[0]
        v = value(ctx, src, index)
        if src.dtype != node.dtype:
            v = convert(v, node.dtype)
        acc = f"acc{k}{suffix}"
        ctx.emit(f"{acc} = {ops.combine(node.op, acc, v, node.dtype)};")
    ctx.pop()


def _tree(ctx: Ctx, nodes: list[Reduce], lanes: str, lane: str, base: str, spacing: str = "") -> None:
    """Compact tree in shared memory over ``lanes`` slots starting at ``base`` (uniform barriers): consecutive
    slots, or with ``spacing`` the slots ``base + lane * spacing`` (``column``: one tree per output)."""
    slot = f"{base} + {lane} * {spacing}" if spacing else f"{base} + {lane}"
    step = f"s * {spacing}" if spacing else "s"
    ctx.emit(f"for (u32 s = {lanes} / 2; s > 0; s >>= 1) {{")
    ctx.emit(f"    if ({lane} < s) {{")
    for k, node in enumerate(nodes):
        a, b = f"sm{k}[{slot}]", f"sm{k}[{slot} + {step}]"
        ctx.emit(f"        {a} = {ops.combine(node.op, a, b, node.dtype)};")
    ctx.emit("    }")
    ctx.emit("    BARRIER();")
    ctx.emit("}")


def reduction(nodes: Reduce | list[Reduce], external: set[int], variant: str, block: int, seg: int = 32,
              parts: int = 1, unroll: int = 4) -> tuple[str, Ctx]:
    """Source of one reduction kernel (for ``two_pass``, the first pass: ``parts`` partials per output).

    ``nodes``: one reduction, or several over the same shape and axes (one kernel, one accumulator and one
    output each, their producers sharing common subexpressions: n-body's three force components).
    Variants (seed 002, ch. 3 and 6): ``thread_per_output`` (a sequential loop per work-item; coalesced
    when the reduced axis is not the innermost), ``tree`` (a work-group per output, strided loads then a
    shared-memory tree), ``segmented`` (``seg`` work-items per output, several outputs per group) and
    ``two_pass`` (``parts`` work-groups per output write partials; a second tree kernel finishes) and
    ``grid_stride`` (the same two passes, but the ``parts`` groups of an output sweep it together, each
    work-item stepping by ``parts * block`` with ``unroll`` independent accumulators, so every load of a
    step is coalesced across the whole grid and ``unroll`` loads are in flight per work-item: CUB's
    device-wide reduction without vector types, which the portable dialect lacks). ``two_pass`` takes
    ``unroll`` too (default 1); its groups keep contiguous chunks, which a CPU's caches prefer.
    ``column`` (the coalesced mapping for few outputs over a strided leading axis, e.g. a (4 Mi, 16) array
    summed over axis 0): a work-group reads ``block / n_out`` whole rows a step, work-item ``t`` adding up
    output ``t % n_out``, so every load is contiguous across the group; partial sums per output then go
    through a tree in shared memory over the rows, and ``parts`` groups' partials through a second pass.
    """
    if variant not in REDUCE_VARIANTS:
        raise ValueError(f"unknown reduction variant {variant!r}; known: {', '.join(REDUCE_VARIANTS)}")
    nodes = [nodes] if isinstance(nodes, Reduce) else list(nodes)
    rs = reduce_shape(nodes[0])
    ctx = Ctx(external=external)
    i = ctx.idx_t
    head: list[str] = []
    inits = [f"{ctype(n.dtype)} acc{k} = {ops.identity(n.op, n.dtype)};" for k, n in enumerate(nodes)]
    if variant == "column":
        if not column_applies(rs, block):
            raise ValueError(f"the column reduction needs the reduced axes leading and {rs.n_out} outputs "
                             f"dividing the work-group of {block} at least twice")
        rows = block // rs.n_out
        chunk = -(-rs.length // parts)
        head = [f"SHARED {ctype(n.dtype)} sm{k}[{block}];" for k, n in enumerate(nodes)]
        head += ["const u32 lid = LID();", f"const {i} o = ({i})(lid % {rs.n_out});",
                 f"const {i} lo = ({i})GROUP_ID() * {chunk};"]
        ctx.lines = []
        for line in inits:
            ctx.emit(line)
        ctx.emit(f"const {i} hi = lo + {chunk} < {rs.length} ? lo + {chunk} : {rs.length};")
        ctx.emit(f"for ({i} r = lo + ({i})(lid / {rs.n_out}); r < hi; r += {rows}) {{")
        _accumulate(ctx, nodes, rs, "o", "r", None)
        ctx.emit("}")
        for k in range(len(nodes)):
            ctx.emit(f"sm{k}[lid] = acc{k};")
        ctx.emit("BARRIER();")
        # one tree per output over its rows (rows is a power of two: n_out divides the work-group)
        _tree(ctx, nodes, str(rows), f"(lid / {rs.n_out})", "o", str(rs.n_out))
        ctx.emit(f"if (lid < {rs.n_out}) {{")
        for k in range(len(nodes)):
            ctx.emit(f"    out{k}[o * {parts} + ({i})GROUP_ID()] = sm{k}[lid];")
        ctx.emit("}")
    elif variant == "thread_per_output":
        head = [f"const {i} o = ({i})GROUP_ID() * ({i})GROUP_SIZE() + ({i})LID();",
                f"if (o >= {rs.n_out}) return;"]
        ctx.lines = []
        o_multi = _o_multi(ctx, rs, "o")
        for line in inits:
            ctx.emit(line)
        ctx.emit(f"for ({i} r = 0; r < {rs.length}; ++r) {{")
        _accumulate(ctx, nodes, rs, "o", "r", o_multi)
        ctx.emit("}")
        for k in range(len(nodes)):
            ctx.emit(f"out{k}[o] = acc{k};")
    else:
        if variant == "tree":
            lanes, lane, base, o_expr, lo, hi, step = str(block), "lid", "0", f"({i})GROUP_ID()", "lid", \
                str(rs.length), str(block)
        elif variant == "segmented":
            lanes, lane, base = str(seg), "lane", "(lid - lane)"
            o_expr = f"({i})GROUP_ID() * {block // seg} + ({i})(lid / {seg})"
            lo, hi, step = "lane", str(rs.length), str(seg)
        elif variant == "grid_stride":
            lanes, lane, base = str(block), "lid", "0"
            o_expr = f"({i})(GROUP_ID() / {parts})"
            lo = f"({i})(GROUP_ID() % {parts}) * {block} + lid"
            hi, step = str(rs.length), str(parts * block)
        else:  # two_pass, first pass
            chunk = -(-rs.length // parts)
            lanes, lane, base = str(block), "lid", "0"
            o_expr = f"({i})(GROUP_ID() / {parts})"
            lo = f"({i})(GROUP_ID() % {parts}) * {chunk} + lid"
            hi = f"(({i})(GROUP_ID() % {parts}) * {chunk} + {chunk} < {rs.length} ? " \
                 f"({i})(GROUP_ID() % {parts}) * {chunk} + {chunk} : {rs.length})"
            step = str(block)
        head = [f"SHARED {ctype(n.dtype)} sm{k}[{block}];" for k, n in enumerate(nodes)]
        head.append("const u32 lid = LID();")
        if variant == "segmented":
            head.append(f"const u32 lane = lid % {seg};")
        head.append(f"const {i} o = {o_expr};")
        ctx.lines = []
        for line in inits:
            ctx.emit(line)
        ctx.emit(f"if (o < {rs.n_out}) {{")
        ctx.push()
        o_multi = _o_multi(ctx, rs, "o")
        ctx.emit(f"const {i} hi = {hi};")
        if variant in ("grid_stride", "two_pass") and unroll > 1:
            for u in range(1, unroll):
                for k, n in enumerate(nodes):
                    ctx.emit(f"{ctype(n.dtype)} acc{k}_{u} = {ops.identity(n.op, n.dtype)};")
            ctx.emit(f"{i} r = {lo};")
            ctx.emit(f"for (; r + {(unroll - 1) * int(step)} < hi; r += {unroll * int(step)}) {{")
            ctx.push()
            for u in range(unroll):
                _accumulate(ctx, nodes, rs, "o", f"(r + {u * int(step)})" if u else "r", o_multi,
                            suffix=f"_{u}" if u else "")
            ctx.pop()
            ctx.emit("}")
            ctx.emit(f"for (; r < hi; r += {step}) {{")
            _accumulate(ctx, nodes, rs, "o", "r", o_multi)
            ctx.emit("}")
            for u in range(1, unroll):
                for k, n in enumerate(nodes):
                    ctx.emit(f"acc{k} = {ops.combine(n.op, f'acc{k}', f'acc{k}_{u}', n.dtype)};")
        else:
            ctx.emit(f"for ({i} r = {lo}; r < hi; r += {step}) {{")
            _accumulate(ctx, nodes, rs, "o", "r", o_multi)
            ctx.emit("}")
        ctx.pop()
        ctx.emit("}")
        for k in range(len(nodes)):
            ctx.emit(f"sm{k}[lid] = acc{k};")
        ctx.emit("BARRIER();")
        _tree(ctx, nodes, lanes, lane, base)
        target = "GROUP_ID()" if variant in ("two_pass", "grid_stride") else "o"
        ctx.emit(f"if ({lane} == 0 && o < {rs.n_out}) {{")
        for k in range(len(nodes)):
            ctx.emit(f"    out{k}[{target}] = sm{k}[{base}];")
        ctx.emit("}")
    sig = signature(ctx, [(f"out{k}", n.dtype) for k, n in enumerate(nodes)])
    body = "\n".join(ctx.lines)
    idx_t = index_type(rs.n_out * rs.length * max(parts, 1) + parts * block * max(unroll, 1), *_sizes(ctx))
    src = f"typedef {idx_t} idx_t;\nKERNEL at_kernel({sig}) {{\n" + "".join(f"    {h}\n" for h in head) + body + "\n}\n"
    return src, ctx
