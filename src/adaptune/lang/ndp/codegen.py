"""Kernel text for one stage under one schedule and policy, in the portable dialect (``kernels/dialect.h``).

Each (stage kind, schedule) has one template (Surge's nested computation kernels):

  map / scatter   independent: grid-stride loop        sequential: one thread
  reduce          cooperative: block partials + 1 block sequential: one thread
  scan            cooperative: tile sums, scan of sums, tile scan (3 kernels)   sequential: one thread
  map.reduce      independent.cooperative (a logical warp or a work-group per row), independent.sequential
                  (a thread per row), sequential.cooperative (one work-group, rows in turn), sequential.sequential
  map.map         independent.independent, independent.sequential, sequential.independent, sequential.sequential

Policies only change numbers and small code paths (block size, logical warp size, grain, the block
reduction or scan algorithm, unrolling). ``shuffle`` reductions exist only under ``ADAPTUNE_CUDA`` (the
portable tree path is compiled elsewhere), and the policy space allows them only on CUDA devices.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adaptune.lang.ndp.lower import Stage
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
    Replicate,
    Reverse,
    Row,
    Split,
    Striding,
    Transpose,
)
from adaptune.lang.ndp.translate import C_TYPES, PRELUDE, Value, cast

MAX_GRID = 1 << 20


@dataclass(frozen=True)
class Arg:
    """A kernel argument: ``kind`` in buf (a node's array), out (a stage buffer), total (a scan total),
    len (a node's length), rows (a nested node's row count), scratch (named temporary), count (scan total
    read as the iteration bound on the device)."""

    kind: str
    ref: Any = None


@dataclass
class LaunchSpec:
    kernel: str
    args: list[Arg]
    grid: Callable[[Callable[[Arg], int]], int]  # from a length resolver
    block: int


@dataclass
class StageCode:
    text: str
    launches: list[LaunchSpec]
    scratch: dict[str, tuple[str, Callable[[Callable[[Arg], int]], int]]] = field(default_factory=dict)


class Kernel:
    """Builds one kernel: parameters, shared declarations, statement scopes with memoised expressions."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.params: dict[str, tuple[str, Arg]] = {}
        self.shared: list[str] = []
        self.lines: list[str] = []
        self.scopes: list[dict[str, str]] = [{}]
        self.rows: dict[int, tuple[Node, str, str]] = {}  # Row index -> (base node, start, stride)
        self._n = itertools.count()
        self._depth = 1

    def fresh(self, prefix: str = "t") -> str:
        return f"{prefix}{next(self._n)}"

    def param(self, cname: str, decl: str, arg: Arg) -> str:
        if cname not in self.params:
            self.params[cname] = (decl, arg)
        return cname

    def buf(self, node: Node) -> str:
        if isinstance(node, Input):
            cname = f"in_{node.name}"
            return self.param(cname, f"const GLOBAL {C_TYPES[node.dtype]} *RESTRICT {cname}", Arg("buf", node))
        if isinstance(node, Buffer):
            cname = f"buf{node.stage}"
            return self.param(cname, f"const GLOBAL {C_TYPES[node.dtype]} *RESTRICT {cname}", Arg("buf", node))
        raise NdpError(f"internal: {node.op} is not an array")

    def length(self, node: Node) -> str:
        return self.param(f"len{node.id}", f"const i32 len{node.id}", Arg("len", node))

    def rows_of(self, nested: Node) -> str:
        return self.param(f"rows{nested.id}", f"const i32 rows{nested.id}", Arg("rows", nested))

    def line(self, text: str) -> None:
        if text.startswith("}"):
            self._depth -= 1
        self.lines.append("    " * max(self._depth - 1, 0) + text)
        if text.endswith("{"):
            self._depth += 1

    def bind(self, text: str, typ: str) -> str:
        for scope in reversed(self.scopes):
            if text in scope:
                return scope[text]
        var = self.fresh()
        self.line(f"const {C_TYPES[typ]} {var} = {text};")
        self.scopes[-1][text] = var
        return var

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def emit(self, node: Node, idx: str) -> Value:
        """C value of element ``idx`` of a fusable expression (producers inlined: fusion)."""
        if isinstance(node, Input | Buffer):
            return Value(self.bind(f"{self.buf(node)}[{idx}]", node.dtype), node.dtype)
        if isinstance(node, Gather):
            i = self.emit(node.index, idx)
            return self.emit_load_ro(node.source, i.text)
        if isinstance(node, Map):
            args = [self.emit(a, idx) for a in node.args]
            if node.binop is not None:
                b = args[1].text if len(args) > 1 else ""
                return Value(self.bind(node.binop.emit(args[0].text, b), node.out_type), node.out_type)
            stmts, value = node.fn.emit(args, self.fresh)
            for s in stmts:
                self.line(s)
            return Value(self.bind(cast(value, node.out_type), node.out_type), node.out_type)
        if isinstance(node, Range):
            return Value(f"({node.start} + ({idx}) * {node.step})", "i32")
        if isinstance(node, Replicate):
            v = node.value
            return Value(repr(float(v)) + "f" if isinstance(v, float) else str(int(v)), node.dtype)
        if isinstance(node, Striding):
            return self.emit(node.seq, f"({idx}) * {node.stride}")
        if isinstance(node, Reverse):
            return self.emit(node.seq, f"({self.length(node.seq)} - 1 - ({idx}))")
        if isinstance(node, HeadFlags):
            cur = self.emit(node.keys, idx)
            prev = self.emit(node.keys, f"(({idx}) > 0 ? ({idx}) - 1 : 0)")
            return Value(self.bind(f"((({idx}) == 0 || {cur.text} != {prev.text}) ? 1 : 0)", "i32"), "i32")
        if isinstance(node, Join):
            inner = node.seq
            if isinstance(inner, Nest | Split):
                return self.emit(inner.seq, idx)
            if isinstance(inner, Transpose):
                split = inner.seq
                r = self.rows_of(split)
                return self.emit(split.seq, f"((({idx}) % {r}) * {split.tile} + ({idx}) / {r})")
        if isinstance(node, Row):
            base, start, stride = self.rows[node.index]
            if start == "0":
                pos = idx if stride == "1" else f"({idx}) * {stride}"
            else:
                pos = f"{start} + ({idx})" if stride == "1" else f"{start} + ({idx}) * {stride}"
            return self.emit(base, pos)
        raise NdpError(f"internal: cannot emit {node.op} as an element expression")

    def emit_load_ro(self, node: Node, idx: str) -> Value:
        """Gather sources are read through the read-only path (as the hand-written SpMV reads x)."""
        if isinstance(node, Input | Buffer):
            return Value(self.bind(f"LOAD_RO({self.buf(node)}[{idx}])", node.dtype), node.dtype)
        return self.emit(node, idx)

    def row_setup(self, k: int, nested: Node, r: str, want_out_start: bool = False) -> tuple[str, str | None]:
        """Bind row ``r`` of nested operand ``k``; returns (length variable, output start or None)."""
        if isinstance(nested, Nest):
            s = self.emit(nested.offsets, r).text
            e = self.emit(nested.offsets, f"({r}) + 1").text
            self.rows[k] = (nested.seq, s, "1")
            n = self.bind(f"({e} - {s})", "i32")
            out = self.bind(f"({s} - {self.emit(nested.offsets, '0').text})", "i32") if want_out_start else None
            return n, out
        if isinstance(nested, Split):
            start = self.bind(f"({r}) * {nested.tile}", "i32")
            total = self.length(nested.seq)
            n = self.bind(f"(({total} - {start}) < {nested.tile} ? ({total} - {start}) : {nested.tile})", "i32")
            self.rows[k] = (nested.seq, start, "1")
            return n, start
        if isinstance(nested, Transpose):
            split = nested.seq
            big = self.rows_of(split)
            self.rows[k] = (split.seq, f"({r})", str(split.tile))
            return big, self.bind(f"({r}) * {big}", "i32")
        raise NdpError(f"internal: {nested.op} is not nested")

    def text(self) -> str:
        params = ",\n    ".join(decl for decl, _ in self.params.values())
        body = "\n".join("    " + ln for ln in self.shared + self.lines)
        return f"KERNEL {self.name}(\n    {params}) {{\n{body}\n}}\n"

    def args(self) -> list[Arg]:
        return [a for _, a in self.params.values()]


# --------------------------------------------------------------------------------------- snippets


def _op(stage: Stage) -> tuple[Callable[[str, str], str], str, str | None]:
    """(combine(a, b) C text, identity, init to fold in at the end or None), for the stage's operator."""
    op, dtype = stage.opr, stage.out.dtype
    if op.lam is not None:
        ident = _num(stage.init, dtype)
        fname = f"ndp_op{stage.index}"
        return (lambda a, b: f"{fname}({a}, {b})"), ident, None
    ident = op.identity_for(dtype)
    init = _num(stage.init, dtype) if stage.init is not None else None
    return (lambda a, b: op.emit(a, b)), ident, init


def _op_helper(stage: Stage) -> str:
    op, dtype = stage.opr, stage.out.dtype
    if op is None or op.lam is None:
        return ""
    counter = itertools.count()
    t = C_TYPES[dtype]
    stmts, value = op.lam.emit([Value("a", dtype), Value("b", dtype)], lambda: f"u{next(counter)}")
    body = " ".join(stmts)
    return f"DEVICE {t} ndp_op{stage.index}({t} a, {t} b) {{ {body} return {cast(value, dtype)}; }}\n"


def _num(v: Any, dtype: str) -> str:
    if dtype == "f32":
        return f"{float(v)!r}f"
    return str(int(v))


def group_reduce(k: Kernel, acc: str, t: str, combine: Callable[[str, str], str], ident: str, block: int,
                 width: int, algo: str) -> str:
    """Reduce ``acc`` over groups of ``width`` consecutive threads; the result is valid in each group's lane 0.
    Every thread of the block must reach this code (it contains barriers)."""
    ct = C_TYPES[t]
    sh = k.fresh("sh")
    k.shared.append(f"SHARED {ct} {sh}[{block}];")
    res = k.fresh("red")
    lane = f"(LID() % {width})" if width < block else "LID()"
    tree = [f"{sh}[LID()] = {acc};", "BARRIER();",
            f"for (u32 s = {width // 2}; s > 0; s >>= 1) {{",
            f"if ({lane} < s) {sh}[LID()] = {combine(f'{sh}[LID()]', f'{sh}[LID() + s]')};",
            "BARRIER();", "}",
            f"{ct} {res} = {sh}[LID()];", "BARRIER();"]
    if algo != "shuffle":
        for ln in tree:
            k.line(ln)
        return res
    # CUDA: warp shuffles within the group (width <= 32), shared memory across warps of a work-group.
    cuda: list[str] = [f"{ct} {res} = {acc};"]
    w = min(width, 32)
    cuda.append(f"for (int o = {w // 2}; o > 0; o >>= 1) {res} = "
                f"{combine(res, f'__shfl_down_sync(0xffffffffu, {res}, o, {w})')};")
    if width > 32:
        shw = k.fresh("shw")
        k.shared.append(f"SHARED {ct} {shw}[{block // 32}];")
        cuda += [f"if ((LID() & 31) == 0) {shw}[LID() >> 5] = {res};", "BARRIER();",
                 f"{res} = (LID() < {block // 32}) ? {shw}[LID()] : {ident};",
                 "if (LID() < 32) {",
                 f"for (int o = 16; o > 0; o >>= 1) {res} = "
                 f"{combine(res, f'__shfl_down_sync(0xffffffffu, {res}, o)')};",
                 "}", "BARRIER();"]
    for ln in ["#if defined(ADAPTUNE_CUDA)", *cuda, "#else", *tree, "#endif"]:
        k.line(ln)
    return res


def block_scan(k: Kernel, v: str, t: str, combine: Callable[[str, str], str], ident: str, block: int,
               algo: str) -> tuple[str, str]:
    """Exclusive scan of ``v`` over the work-group: (exclusive value, block total), both valid in every thread."""
    ct = C_TYPES[t]
    ex, tot = k.fresh("ex"), k.fresh("tot")
    sh = k.fresh("ss")
    if algo == "hillis_steele":  # log2(B) steps, double-buffered, O(B log B) work
        k.shared.append(f"SHARED {ct} {sh}[{2 * block}];")
        p = k.fresh("p")
        lines = [f"u32 {p} = 0;", f"{sh}[LID()] = {v};", "BARRIER();",
                    f"for (u32 off = 1; off < {block}; off <<= 1) {{",
                    f"{p} = 1 - {p};",
                    f"{ct} x = {sh}[(1 - {p}) * {block} + LID()];",
                    f"if (LID() >= off) x = {combine(f'{sh}[(1 - {p}) * {block} + LID() - off]', 'x')};",
                    f"{sh}[{p} * {block} + LID()] = x;", "BARRIER();", "}",
                    f"const {ct} {ex} = (LID() > 0) ? {sh}[{p} * {block} + LID() - 1] : {ident};",
                    f"const {ct} {tot} = {sh}[{p} * {block} + {block - 1}];", "BARRIER();"]
        for ln in lines:
            k.line(ln)
        return ex, tot
    # blelloch: work-efficient up-sweep / down-sweep
    st = k.fresh("st")
    k.shared.append(f"SHARED {ct} {sh}[{block}];")
    k.shared.append(f"SHARED {ct} {st}[1];")
    lines = [f"{sh}[LID()] = {v};", "BARRIER();",
                f"for (u32 d = 1; d < {block}; d <<= 1) {{",
                "const u32 q = (LID() + 1) * 2 * d - 1;",
                f"if (q < {block}) {sh}[q] = {combine(f'{sh}[q - d]', f'{sh}[q]')};",
                "BARRIER();", "}",
                f"if (LID() == 0) {{ {st}[0] = {sh}[{block - 1}]; {sh}[{block - 1}] = {ident}; }}", "BARRIER();",
                f"for (u32 d = {block // 2}; d > 0; d >>= 1) {{",
                "const u32 q = (LID() + 1) * 2 * d - 1;",
                f"if (q < {block}) {{ const {ct} y = {sh}[q - d]; {sh}[q - d] = {sh}[q]; "
                f"{sh}[q] = {combine(f'{sh}[q]', 'y')}; }}",
                "BARRIER();", "}",
                f"const {ct} {ex} = {sh}[LID()];", f"const {ct} {tot} = {st}[0];", "BARRIER();"]
    for ln in lines:
        k.line(ln)
    return ex, tot


def _out(k: Kernel, buf: Buffer) -> str:
    cname = f"out{buf.stage}"
    return k.param(cname, f"GLOBAL {C_TYPES[buf.dtype]} *RESTRICT {cname}", Arg("out", buf))


def _total(k: Kernel, stage: Stage) -> str:
    cname = f"tot{stage.index}"
    return k.param(cname, f"GLOBAL {C_TYPES[stage.total.dtype]} *RESTRICT {cname}", Arg("total", stage))


def _tiles(arg: Arg, tile: int) -> Callable[[Callable[[Arg], int]], int]:
    return lambda resolve: _ceil(resolve(arg), tile)


def _one(resolve: Callable[[Arg], int]) -> int:
    return 1


def _ceil(a: int, b: int) -> int:
    return max(1, -(-a // b))


def _unroll(policy: dict[str, Any]) -> str:
    return "#pragma unroll 4" if policy.get("enable_unroll") else ""


# --------------------------------------------------------------------------------------- templates


def generate(stage: Stage, schedule: tuple[str, ...], policy: dict[str, Any], tag: str) -> StageCode:
    """Kernel text and launches of one stage (``tag`` makes kernel names unique in a program)."""
    fn = {"map": _map, "scatter": _scatter, "reduce": _reduce, "scan": _scan, "segreduce": _segreduce,
          "segmap": _segmap}[stage.kind]
    code = fn(stage, schedule, policy, f"ndp_{tag}_s{stage.index}")
    code.text = _op_helper(stage) + code.text
    return code


def _flat_loop(k: Kernel, sequential: bool, n: str) -> str:
    i = "i"
    if sequential:
        k.line("if (GROUP_ID() == 0 && LID() == 0) {")
        k.line(f"for (i32 {i} = 0; {i} < {n}; ++{i}) {{")
    else:
        k.line("{")
        k.line("const i32 stride = (i32)(NUM_GROUPS() * GROUP_SIZE());")
        k.line(f"for (i32 {i} = (i32)(GROUP_ID() * GROUP_SIZE() + LID()); {i} < {n}; {i} += stride) {{")
    return i


def _fold(k: Kernel, stage: Stage, sequential: bool, n: str, start: str, combine: Callable) -> None:
    """``acc`` = ``start`` combined with the stage's element at every index of a flat loop (the loop is
    closed; the block ``_flat_loop`` opened around it is left open for what follows)."""
    t = stage.out.dtype
    k.line(f"{C_TYPES[t]} acc = {start};")
    i = _flat_loop(k, sequential, n)
    k.push()
    v = k.emit(stage.expr, i)
    k.line(f"acc = {combine('acc', cast(v, t))};")
    k.pop()
    k.line("}")


def _flat_grid(stage_len: Arg, block: int, grain: int) -> Callable[[Callable[[Arg], int]], int]:
    return lambda resolve: min(MAX_GRID, _ceil(resolve(stage_len), block * grain))


def _map(stage: Stage, schedule, policy, name) -> StageCode:
    k = Kernel(name)
    seq = schedule[0] == "sequential"
    n = k.length(stage.length)
    out = _out(k, stage.out)
    i = _flat_loop(k, seq, n)
    k.push()
    v = k.emit(stage.expr, i)
    k.line(f"{out}[{i}] = {cast(v, stage.out.dtype)};")
    k.pop()
    k.line("}")
    k.line("}")
    block = 1 if seq else policy["block_size"]
    grid = (lambda r: 1) if seq else _flat_grid(Arg("len", stage.length), block, policy["grain_size"])
    return StageCode(k.text(), [LaunchSpec(name, k.args(), grid, block)])


def _scatter(stage: Stage, schedule, policy, name) -> StageCode:
    k = Kernel(name)
    seq = schedule[0] == "sequential"
    n = k.length(stage.length)
    out = _out(k, stage.out)
    dest = k.param(f"dest{stage.index}", f"const i32 dest{stage.index}", Arg("dest", stage))
    i = _flat_loop(k, seq, n)
    k.push()
    cond = []
    if stage.mask is not None:
        cond.append(f"{k.emit(stage.mask, i).text} != 0")
    j = k.emit(stage.index_expr, i).text
    cond += [f"{j} >= 0", f"{j} < {dest}"]
    k.line(f"if ({' && '.join(cond)}) {{")
    v = k.emit(stage.expr, i)
    k.line(f"{out}[{j}] = {cast(v, stage.out.dtype)};")
    k.line("}")
    k.pop()
    k.line("}")
    k.line("}")
    if stage.tail:  # offsets of runs: close the last run with the element count
        tot = k.param(f"tot{stage.count_stage}", f"const GLOBAL i32 *RESTRICT tot{stage.count_stage}",
                      Arg("total_in", stage.count_stage))
        k.line(f"if (GROUP_ID() == 0 && LID() == 0) {out}[{tot}[0]] = {n};")
    block = 1 if seq else policy["block_size"]
    grid = (lambda r: 1) if seq else _flat_grid(Arg("len", stage.length), block, policy["grain_size"])
    return StageCode(k.text(), [LaunchSpec(name, k.args(), grid, block)])


def _reduce(stage: Stage, schedule, policy, name) -> StageCode:
    t = stage.out.dtype
    ct = C_TYPES[t]
    combine, ident, init = _op(stage)
    fin = (lambda x: combine(init, x)) if init is not None else (lambda x: x)
    if schedule[0] == "sequential":
        k = Kernel(name)
        n = k.length(stage.length)
        out = _out(k, stage.out)
        _fold(k, stage, True, n, ident, combine)
        k.line(f"{out}[0] = {fin('acc')};")
        k.line("}")
        return StageCode(k.text(), [LaunchSpec(name, k.args(), lambda r: 1, 1)])
    block, grain, algo = policy["block_size"], policy["grain_size"], policy["block_reduce_algo"]
    part = f"part{stage.index}"
    k1 = Kernel(name + "_p1")
    n = k1.length(stage.length)
    p = k1.param(part, f"GLOBAL {ct} *RESTRICT {part}", Arg("scratch", part))
    _fold(k1, stage, False, n, ident, combine)
    k1.line("}")
    res = group_reduce(k1, "acc", t, combine, ident, block, block, algo)
    k1.line(f"if (LID() == 0) {p}[GROUP_ID()] = {res};")
    k2 = Kernel(name + "_p2")
    p2 = k2.param(part, f"const GLOBAL {ct} *RESTRICT {part}", Arg("scratch", part))
    k2.param("n_parts", "const i32 n_parts", Arg("grid_of", 0))
    out = _out(k2, stage.out)
    k2.line(f"{ct} acc = {ident};")
    k2.line(f"for (i32 i = (i32)LID(); i < n_parts; i += {block}) acc = {combine('acc', f'{p2}[i]')};")
    res2 = group_reduce(k2, "acc", t, combine, ident, block, block, algo)
    k2.line(f"if (LID() == 0) {out}[0] = {fin(res2)};")
    grid1 = _flat_grid(Arg("len", stage.length), block, grain)
    code = StageCode(k1.text() + k2.text(), [LaunchSpec(k1.name, k1.args(), grid1, block),
                                             LaunchSpec(k2.name, k2.args(), lambda r: 1, block)])
    code.scratch[part] = (t, grid1)
    return code


def _scan(stage: Stage, schedule, policy, name) -> StageCode:
    t = stage.out.dtype
    ct = C_TYPES[t]
    combine, ident, init = _op(stage)
    start = init if init is not None else ident
    if schedule[0] == "sequential":
        k = Kernel(name)
        n = k.length(stage.length)
        out = _out(k, stage.out)
        tot = _total(k, stage)
        k.line(f"{ct} acc = {start};")
        i = _flat_loop(k, True, n)
        k.push()
        v = k.emit(stage.expr, i)
        k.line(f"{out}[{i}] = acc;")
        k.line(f"acc = {combine('acc', cast(v, t))};")
        k.pop()
        k.line("}")
        k.line(f"{tot}[0] = acc;")
        k.line("}")
        return StageCode(k.text(), [LaunchSpec(name, k.args(), lambda r: 1, 1)])
    block, grain, algo = policy["block_size"], policy["grain_size"], policy["block_scan_algo"]
    tile = block * grain
    sums = f"sums{stage.index}"
    # 1: per-tile reduction
    k1 = Kernel(name + "_t1")
    n = k1.length(stage.length)
    s1 = k1.param(sums, f"GLOBAL {ct} *RESTRICT {sums}", Arg("scratch", sums))
    k1.line(f"{ct} acc = {ident};")
    k1.line(f"const i32 base = (i32)GROUP_ID() * {tile};")
    k1.line(f"for (i32 g = 0; g < {grain}; ++g) {{")
    k1.line(f"const i32 i = base + g * {block} + (i32)LID();")
    k1.line(f"if (i < {n}) {{")
    k1.push()
    v = k1.emit(stage.expr, "i")
    k1.line(f"acc = {combine('acc', cast(v, t))};")
    k1.pop()
    k1.line("}")
    k1.line("}")
    res = group_reduce(k1, "acc", t, combine, ident, block, block, "tree")
    k1.line(f"if (LID() == 0) {s1}[GROUP_ID()] = {res};")
    # 2: one work-group scans the tile sums (exclusive, init folded in) and writes the total
    k2 = Kernel(name + "_t2")
    s2 = k2.param(sums, f"GLOBAL {ct} *RESTRICT {sums}", Arg("scratch", sums))
    nt = k2.param("n_tiles", "const i32 n_tiles", Arg("grid_of", 0))
    tot = _total(k2, stage)
    k2.line(f"{ct} carry = {start};")
    k2.line(f"for (i32 b0 = 0; b0 < {nt}; b0 += {block}) {{")
    k2.line("const i32 b = b0 + (i32)LID();")
    k2.line(f"const {ct} v = (b < {nt}) ? {s2}[b] : {ident};")
    ex, btot = block_scan(k2, "v", t, combine, ident, block, algo)
    k2.line(f"if (b < {nt}) {s2}[b] = {combine('carry', ex)};")
    k2.line(f"carry = {combine('carry', btot)};")
    k2.line("}")
    k2.line(f"if (LID() == 0) {tot}[0] = carry;")
    # 3: tile scan: coalesced load to local memory, per-thread serial scan of `grain` items, block scan
    k3 = Kernel(name + "_t3")
    n3 = k3.length(stage.length)
    s3 = k3.param(sums, f"const GLOBAL {ct} *RESTRICT {sums}", Arg("scratch", sums))
    out = _out(k3, stage.out)
    sht = k3.fresh("tile")
    k3.shared.append(f"SHARED {ct} {sht}[{tile}];")
    k3.line(f"const i32 base = (i32)GROUP_ID() * {tile};")
    k3.line(f"for (i32 g = 0; g < {grain}; ++g) {{")
    k3.line(f"const i32 i = base + g * {block} + (i32)LID();")
    k3.line(f"{ct} x = {ident};")
    k3.line(f"if (i < {n3}) {{")
    k3.push()
    v3 = k3.emit(stage.expr, "i")
    k3.line(f"x = {cast(v3, t)};")
    k3.pop()
    k3.line("}")
    k3.line(f"{sht}[g * {block} + LID()] = x;")
    k3.line("}")
    k3.line("BARRIER();")
    k3.line(f"{ct} run = {ident};")
    k3.line(f"for (i32 g = 0; g < {grain}; ++g) run = {combine('run', f'{sht}[LID() * {grain} + g]')};")
    ex3, _ = block_scan(k3, "run", t, combine, ident, block, algo)
    k3.line(f"{ct} pre = {combine(f'{s3}[GROUP_ID()]', ex3)};")
    k3.line(f"for (i32 g = 0; g < {grain}; ++g) {{")
    k3.line(f"const {ct} y = {sht}[LID() * {grain} + g];")
    k3.line(f"{sht}[LID() * {grain} + g] = pre;")
    k3.line(f"pre = {combine('pre', 'y')};")
    k3.line("}")
    k3.line("BARRIER();")
    k3.line(f"for (i32 g = 0; g < {grain}; ++g) {{")
    k3.line(f"const i32 i = base + g * {block} + (i32)LID();")
    k3.line(f"if (i < {n3}) {out}[i] = {sht}[g * {block} + LID()];")
    k3.line("}")
    n_tiles = _tiles(Arg("len", stage.length), tile)  # one work-group per tile: never capped
    code = StageCode(k1.text() + k2.text() + k3.text(),
                     [LaunchSpec(k1.name, k1.args(), n_tiles, block), LaunchSpec(k2.name, k2.args(), lambda r: 1, block),
                      LaunchSpec(k3.name, k3.args(), n_tiles, block)])
    code.scratch[sums] = (t, n_tiles)
    return code


def _rows_param(k: Kernel, stage: Stage) -> str:
    if stage.count_stage is not None:  # rows of reduce_by_key: the number of runs (a scan total)
        return k.param("n_rows", "const i32 n_rows", Arg("count", stage.count_stage))
    return k.param("n_rows", "const i32 n_rows", Arg("rows", stage.nested[0]))


def _row_body(k: Kernel, stage: Stage, r: str, jloop: tuple[str, str], acc: str | None,
              combine: Callable[[str, str], str] | None, unroll: str, out: str | None) -> None:
    """Row setup and the loop over its elements: accumulate (segreduce) or store (segmap)."""
    length, ostart = None, None
    for idx, nested in enumerate(stage.nested):
        n_k, o_k = k.row_setup(idx, nested, r, want_out_start=(out is not None and idx == 0))
        if idx == 0:
            length, ostart = n_k, o_k
    j0, step = jloop
    bound, shift = length, ostart
    starts = {k.rows[i][1] for i in range(len(stage.nested))}
    if len(starts) == 1 and all(k.rows[i][2] == "1" for i in range(len(stage.nested))):
        # contiguous rows sharing one start: loop over absolute positions (the hand-written CSR form)
        start = starts.pop()
        bound = k.bind(f"({start} + {length})", "i32")
        j0 = f"{start} + {j0}" if j0 != "0" else start
        for i in range(len(stage.nested)):
            k.rows[i] = (k.rows[i][0], "0", "1")
        if ostart is not None:
            shift = k.bind(f"({ostart} - {start})", "i32")
    if unroll:
        k.line(unroll)
    k.line(f"for (i32 j = {j0}; j < {bound}; j += {step}) {{")
    k.push()
    v = k.emit(stage.expr, "j")
    if acc is not None:
        k.line(f"{acc} = {combine(acc, cast(v, stage.out.dtype))};")
    else:
        k.line(f"{out}[{shift} + j] = {cast(v, stage.out.dtype)};")
    k.pop()
    k.line("}")


def _segreduce(stage: Stage, schedule, policy, name) -> StageCode:
    t = stage.out.dtype
    ct = C_TYPES[t]
    combine, ident, init = _op(stage)
    fin = (lambda x: combine(init, x)) if init is not None else (lambda x: x)
    k = Kernel(name)
    rows = _rows_param(k, stage)
    out = _out(k, stage.out)
    outer, inner = schedule
    unroll = _unroll(policy)
    if inner == "sequential":
        if outer == "sequential":
            k.line("if (GROUP_ID() == 0 && LID() == 0) {")
            k.line(f"for (i32 r = 0; r < {rows}; ++r) {{")
            block = 1
            grid = _one
        else:
            block = policy["block_size"]
            k.line("{")
            k.line("const i32 stride = (i32)(NUM_GROUPS() * GROUP_SIZE());")
            k.line(f"for (i32 r = (i32)(GROUP_ID() * GROUP_SIZE() + LID()); r < {rows}; r += stride) {{")
            grid = _rows_grid(stage, block)
        k.push()
        k.line(f"{ct} acc = {ident};")
        _row_body(k, stage, "r", ("0", "1"), "acc", combine, unroll, None)
        k.line(f"{out}[r] = {fin('acc')};")
        k.pop()
        k.line("}")
        k.line("}")
        return StageCode(k.text(), [LaunchSpec(name, k.args(), grid, block)])
    # cooperative inner level: a logical warp of W lanes, or the whole work-group, per row
    block = policy["block_size"]
    algo = policy["block_reduce_algo"]
    if outer == "sequential" or policy.get("execution_resource") == "block":
        width = block
    else:
        width = policy["logical_warp_size"]
    per_block = block // width
    lane = f"(i32)(LID() % {width})" if width < block else "(i32)LID()"
    k.line(f"const i32 lane = {lane};")
    if outer == "sequential":
        k.line(f"for (i32 r = 0; r < {rows}; ++r) {{")
        grid = _one
    else:
        k.line(f"for (i32 r0 = (i32)GROUP_ID() * {per_block}; r0 < {rows}; r0 += (i32)NUM_GROUPS() * {per_block}) {{")
        k.line(f"const i32 r = r0 + (i32)(LID() / {width});" if per_block > 1 else "const i32 r = r0;")
        grid = _rows_grid(stage, per_block)
    k.line(f"{ct} acc = {ident};")
    k.line(f"if (r < {rows}) {{")
    k.push()
    _row_body(k, stage, "r", ("lane", str(width)), "acc", combine, "", None)
    k.pop()
    k.line("}")
    res = group_reduce(k, "acc", t, combine, ident, block, width, algo)
    k.line(f"if (lane == 0 && r < {rows}) {out}[r] = {fin(res)};")
    k.line("}")
    return StageCode(k.text(), [LaunchSpec(name, k.args(), grid, block)])


def _rows_grid(stage: Stage, per_block: int) -> Callable[[Callable[[Arg], int]], int]:
    arg = Arg("count", stage.count_stage) if stage.count_stage is not None else Arg("rows", stage.nested[0])
    return lambda r: min(MAX_GRID, _ceil(r(arg), per_block))


def _segmap(stage: Stage, schedule, policy, name) -> StageCode:
    k = Kernel(name)
    rows = _rows_param(k, stage)
    out = _out(k, stage.out)
    outer, inner = schedule
    unroll = _unroll(policy)
    if outer == "sequential" and inner == "sequential":
        k.line("if (GROUP_ID() == 0 && LID() == 0) {")
        k.line(f"for (i32 r = 0; r < {rows}; ++r) {{")
        k.push()
        _row_body(k, stage, "r", ("0", "1"), None, None, unroll, out)
        k.pop()
        k.line("}")
        k.line("}")
        return StageCode(k.text(), [LaunchSpec(name, k.args(), lambda r: 1, 1)])
    block = policy["block_size"]
    if outer == "sequential":  # rows in turn, the whole grid over each row's elements
        k.line("const i32 tid = (i32)(GROUP_ID() * GROUP_SIZE() + LID());")
        k.line("const i32 nth = (i32)(NUM_GROUPS() * GROUP_SIZE());")
        k.line(f"for (i32 r = 0; r < {rows}; ++r) {{")
        k.push()
        _row_body(k, stage, "r", ("tid", "nth"), None, None, "", out)
        k.pop()
        k.line("}")
        grain = policy["grain_size"]
        arg = Arg("len", stage.nested[0].seq if not isinstance(stage.nested[0], Transpose)
                  else stage.nested[0].seq.seq)
        return StageCode(k.text(), [LaunchSpec(name, k.args(),
                                               lambda r: min(MAX_GRID, _ceil(r(arg), block * grain * 16)), block)])
    if inner == "sequential":
        k.line("const i32 stride = (i32)(NUM_GROUPS() * GROUP_SIZE());")
        k.line(f"for (i32 r = (i32)(GROUP_ID() * GROUP_SIZE() + LID()); r < {rows}; r += stride) {{")
        k.push()
        _row_body(k, stage, "r", ("0", "1"), None, None, unroll, out)
        k.pop()
        k.line("}")
        return StageCode(k.text(), [LaunchSpec(name, k.args(), _rows_grid(stage, block), block)])
    width = block if policy.get("execution_resource") == "block" else policy["logical_warp_size"]
    per_block = block // width
    k.line(f"const i32 lane = (i32)(LID() % {width});")
    k.line(f"for (i32 r = (i32)(GROUP_ID() * {per_block} + LID() / {width}); r < {rows}; "
           f"r += (i32)NUM_GROUPS() * {per_block}) {{")
    k.push()
    _row_body(k, stage, "r", ("lane", str(width)), None, None, "", out)
    k.pop()
    k.line("}")
    return StageCode(k.text(), [LaunchSpec(name, k.args(), _rows_grid(stage, per_block), block)])


@functools.lru_cache(maxsize=4096)
def _with_prelude(text: str) -> str:
    return PRELUDE + text


def program_text(codes: list[StageCode]) -> str:
    """One compilation unit: the helpers followed by the stages' kernels."""
    return _with_prelude("".join(c.text for c in codes))
