"""Upper bounds of a corpus kernel's array indices, read from its source, for sizing its buffers.

Most of the harness's crashes (out-of-bounds reads under a fixed buffer rule) come from indices that
multiply several size scalars (``i * size + j`` with ``i < n``, ``n = size = X*Y``). This module reads
every subscript ``p[expr]`` of a pointer parameter ``p`` and bounds ``expr`` from above by interval
arithmetic, with every value assumed non-negative:

- scalars take LS-CAT's values (:func:`adaptune.predict.corpus.scalar_value`), ``#define`` constants
  their value;
- thread indices take the launch's ranges (``blockIdx.x * blockDim.x`` is bounded by the grid's total
  threads, not by the product of the two maxima);
- a local variable is bounded by the largest of its assignments, and by any comparison ``v < e`` /
  ``v <= e`` in the kernel (loop conditions, guards such as ``if (i < n)``, ``if (i >= n) return``) —
  flow-insensitive, so a comparison anywhere counts as a guard everywhere (optimistic);
- an index read from memory (``a[b[i]]``), an unknown function or a pointer that is offset or copied
  gives no bound (``None``).

It is a heuristic over text, not a C front end: the bounds are what the next H100 run's ``index`` buffer
rule uses, and ``benchmarks/lscat/indexbound.py`` checks them against the crashes already recorded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from adaptune.predict import corpus
from adaptune.predict.corpus import INDEX_RULE_CAP

__all__ = ["INDEX_RULE_CAP", "kernel_body", "pointer_bounds", "upper_bound"]

_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[uUlLfF]*"
                    r"|([A-Za-z_]\w*(?:\s*\.\s*[xyz]\b)?)|(<<|>>|<=|>=|==|!=|&&|\|\||->|[-+*/%()?:,<>!~&|^\[\]]))")
_TYPES = r"(?:unsigned|signed|const|long|short|int|size_t|uint|ushort|ulong|char|float|double|bool|auto|" \
         r"u?int(?:8|16|32|64)_t|register|volatile)"
_ASSIGN = re.compile(r"(?:^|[;{}()\s,])(?:" + _TYPES + r"\s+)*([A-Za-z_]\w*)\s*=(?!=)([^;]*);", re.M)
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+\(?\s*(\d+)[uUlL]*\s*\)?\s*(?://.*)?$", re.M)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


class _Unknown(Exception):
    """The expression has no upper bound we can read."""


@dataclass(frozen=True)
class Launch:
    """Upper bounds of the thread-index built-ins for one matrix size and the LS-CAT shapes."""

    values: dict[str, int]

    @classmethod
    def for_size(cls, x: int, y: int, two_d: bool) -> Launch:
        """Largest values over LS-CAT's 20 shapes (corpus.launch_geometry)."""
        v: dict[str, int] = {"threadIdx.z": 0, "blockIdx.z": 0, "blockDim.z": 1, "gridDim.z": 1}
        gx = gy = tx = ty = bdx = bdy = grx = gry = ox = oy = 0
        for shape in corpus.SHAPES:
            grid, block = corpus.launch_geometry(shape, x, y, two_d)
            gx, gy = max(gx, grid[0] * block[0]), max(gy, grid[1] * block[1])
            ox, oy = max(ox, (grid[0] - 1) * block[0]), max(oy, (grid[1] - 1) * block[1])  # blockIdx * blockDim
            tx, ty = max(tx, block[0] - 1), max(ty, block[1] - 1)
            bdx, bdy = max(bdx, block[0]), max(bdy, block[1])
            grx, gry = max(grx, grid[0]), max(gry, grid[1])
        v.update({"threadIdx.x": tx, "threadIdx.y": ty, "blockDim.x": bdx, "blockDim.y": bdy,
                  "blockIdx.x": grx - 1, "blockIdx.y": gry - 1, "gridDim.x": grx, "gridDim.y": gry,
                  "__G_x": ox, "__G_y": oy, "__T_x": gx, "__T_y": gy})
        return cls(v)


_COMPOUND = [(re.compile(r"\bblockIdx\s*\.\s*([xyz])\s*\*\s*blockDim\s*\.\s*\1\b"), r"__G_\1"),
             (re.compile(r"\bblockDim\s*\.\s*([xyz])\s*\*\s*blockIdx\s*\.\s*\1\b"), r"__G_\1"),
             (re.compile(r"\bgridDim\s*\.\s*([xyz])\s*\*\s*blockDim\s*\.\s*\1\b"), r"__T_\1"),
             (re.compile(r"\bblockDim\s*\.\s*([xyz])\s*\*\s*gridDim\s*\.\s*\1\b"), r"__T_\1")]


def kernel_body(source: str, name: str) -> str | None:
    """The text between the braces of ``__global__ ... name(...) { ... }`` (comments removed)."""
    text = _COMMENT.sub(" ", source)
    m = re.search(r"__global__[^;{]*?\b" + re.escape(name) + r"\s*\(", text)
    if not m:
        return None
    i, depth = m.end(), 1
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    j = text.find("{", i)
    if j < 0:
        return None
    k, depth = j + 1, 1
    while k < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        k += 1
    return text[j + 1:k - 1]


def _tokens(expr: str) -> list[str]:
    out, pos = [], 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise _Unknown(expr[pos:pos + 20])
        out.append(re.sub(r"\s+", "", m.group(0)))
        pos = m.end()
        while pos < len(expr) and expr[pos].isspace():
            pos += 1
    return out


class _Parser:
    """Recursive descent over a C expression, returning its upper bound (values assumed >= 0)."""

    def __init__(self, tokens: list[str], env: dict[str, int]) -> None:
        self.t, self.i, self.env = tokens, 0, env

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise _Unknown(f"expected {want}, got {tok}")
        self.i += 1
        return tok

    def parse(self) -> int:
        v = self.ternary()
        if self.peek() is not None:
            raise _Unknown(f"trailing {self.peek()}")
        return v

    def ternary(self) -> int:
        c = self.logical()
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            self.take(":")
            b = self.ternary()
            return max(a, b)
        return c

    def logical(self) -> int:
        v = self.bitor()
        while self.peek() in ("&&", "||", "<", ">", "<=", ">=", "==", "!="):
            self.take()
            self.bitor()
            v = 1
        return v

    def bitor(self) -> int:
        v = self.shift()
        while self.peek() in ("&", "|", "^"):
            op = self.take()
            w = self.shift()
            v = min(v, w) if op == "&" else (1 << max(v, w, 1).bit_length()) - 1
        return v

    def shift(self) -> int:
        v = self.additive()
        while self.peek() in ("<<", ">>"):
            op = self.take()
            w = self.additive()
            v = v << min(w, 62) if op == "<<" else v
        return v

    def additive(self) -> int:
        v = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            w = self.term()
            v = v + w if op == "+" else v  # a - b <= a for b >= 0
        return v

    def term(self) -> int:
        v = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.take()
            lit = self.peek()
            w = self.unary()
            if op == "*":
                v = v * w
            elif op == "/":
                v = v // w if lit is not None and lit.isdigit() and w > 0 else v
            else:
                v = min(v, max(w - 1, 0))
        return v

    def unary(self) -> int:
        tok = self.peek()
        if tok in ("+",):
            self.take()
            return self.unary()
        if tok in ("-", "!", "~"):
            self.take()
            self.unary()
            return 1 if tok == "!" else 0
        if tok == "(" and self.i + 2 < len(self.t) and re.fullmatch(_TYPES, self.t[self.i + 1]):
            j = self.i + 1
            while j < len(self.t) and (re.fullmatch(_TYPES, self.t[j]) or self.t[j] == "*"):
                j += 1
            if j < len(self.t) and self.t[j] == ")":  # a cast
                self.i = j + 1
                return self.unary()
        return self.primary()

    def primary(self) -> int:
        tok = self.take()
        if tok == "(":
            v = self.ternary()
            self.take(")")
            return v
        if tok[0].isdigit() or tok[0] == ".":
            return _number(tok)
        if re.match(r"[A-Za-z_]", tok):
            if self.peek() == "(":  # a call: min/max/__mul24 and friends
                self.take("(")
                args = [self.ternary()]
                while self.peek() == ",":
                    self.take()
                    args.append(self.ternary())
                self.take(")")
                low = tok.lower()
                if low in ("min", "fminf", "fmin", "umin", "imin"):
                    return min(args)
                if low in ("max", "fmaxf", "fmax", "umax", "imax"):
                    return max(args)
                if low in ("__mul24", "__umul24") and len(args) == 2:
                    return args[0] * args[1]
                if low in ("abs", "floor", "floorf", "ceil", "ceilf") and len(args) == 1:
                    return args[0]
                raise _Unknown(f"call {tok}")
            if self.peek() == "[":
                raise _Unknown(f"index read from memory {tok}[...]")
            if tok in self.env:
                return self.env[tok]
            raise _Unknown(f"unknown {tok}")
        raise _Unknown(f"token {tok}")


def _number(tok: str) -> int:
    t = tok.rstrip("uUlLfF")
    try:
        return int(t, 16) if t.lower().startswith("0x") else math.ceil(float(t))
    except ValueError as exc:
        raise _Unknown(tok) from exc


def upper_bound(expr: str, env: dict[str, int]) -> int | None:
    """Upper bound of C expression ``expr`` under the bounds ``env``; None when it cannot be read."""
    try:
        return _Parser(_tokens(expr), env).parse()
    except (_Unknown, RecursionError):
        return None


def _until_terminator(text: str, start: int) -> str:
    """The expression from ``start`` up to a depth-0 ``&& || ; ? , )`` or ``{``."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (c in ";?,{" or text.startswith("&&", i) or text.startswith("||", i)):
            break
        i += 1
    return text[start:i]


def _comparisons(body: str) -> list[tuple[str, str, bool]]:
    """(variable, bound expression, strict) for ``v < e``, ``v <= e`` and ``if (v >= e) return``."""
    out = []
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*(<=|<(?![<=]))\s*", body):
        if body[max(0, m.start() - 1)] in "<>.":  # part of << or a member
            continue
        out.append((m.group(1), _until_terminator(body, m.end()), m.group(2) == "<"))
    for m in re.finditer(r"\bif\s*\(\s*([A-Za-z_]\w*)\s*(>=|>)\s*", body):
        rest = _until_terminator(body, m.end())
        after = body[m.end() + len(rest):m.end() + len(rest) + 20]
        if re.match(r"\)\s*\{?\s*return\b", after):
            out.append((m.group(1), rest, m.group(2) == ">="))
    return out


def pointer_bounds(source: str, name: str, params: Sequence[corpus.Param], x: int, y: int,
                   two_d: bool | None = None) -> dict[str, int | None]:
    """Highest index read or written through each pointer parameter (None: not bounded), at size (x, y)."""
    body = kernel_body(source, name)
    pointers = [p.name for p in params if p.pointer]
    if body is None:
        return dict.fromkeys(pointers)
    for pat, rep in _COMPOUND:
        body = pat.sub(rep, body)
    two_d = corpus.is_2d(source) if two_d is None else two_d
    base: dict[str, int] = {k: int(v) for k, v in _DEFINE.findall(_COMMENT.sub(" ", source))}
    base.update(Launch.for_size(x, y, two_d).values)
    base.update({p.name: corpus.scalar_value(p.name, x, y) for p in params if not p.pointer})
    base.update({"true": 1, "false": 0, "warpSize": 32})
    assigns: dict[str, list[str]] = {}
    for m in _ASSIGN.finditer(body):
        if m.group(1) not in base and m.group(1) not in pointers:
            assigns.setdefault(m.group(1), []).append(m.group(2))
    comps = [(v, e, strict) for v, e, strict in _comparisons(body) if v not in pointers]
    grows = {v for v in assigns if re.search(r"(\+\+|--)\s*" + re.escape(v) + r"\b|\b" + re.escape(v)
                                              + r"\s*(\+\+|--|[-+*/<>|&^]{1,2}=)", body)
             or any(re.search(r"\b" + re.escape(v) + r"\b", e) for e in assigns[v])}
    env = dict(base)
    for _ in range(6):  # a few rounds: variables defined from variables
        changed = False
        for var in set(assigns) | {v for v, _, _ in comps}:
            if var in base:
                continue
            cands = [b for b in (upper_bound(e, env) for e in assigns.get(var, [])) if b is not None]
            got = max(cands) if cands and len(cands) == len(assigns.get(var, [])) and var not in grows else None
            guards = [b - (1 if strict else 0) for b, strict in ((upper_bound(e, env), st) for v, e, st in comps
                                                                 if v == var) if b is not None]
            if guards:
                got = min(guards) if got is None else min(got, min(guards))
            if got is not None and env.get(var) != got:
                env[var] = got
                changed = True
        if not changed:
            break
    out: dict[str, int | None] = {}
    for p in pointers:
        if re.search(r"\b" + re.escape(p) + r"\s*(\+\+|--|[-+]=|=(?!=))", body) or re.search(
                r"=\s*\(?[^;=]*?\b" + re.escape(p) + r"\s*[-+]", body) or re.search(
                r"[=(,]\s*&\s*" + re.escape(p) + r"\s*\[", body):
            out[p] = None  # moved, offset or aliased: the subscripts below do not tell the whole story
            continue
        bounds: list[int | None] = []
        for m in re.finditer(r"\b" + re.escape(p) + r"\s*\[", body):
            depth, i = 1, m.end()
            while i < len(body) and depth:
                depth += {"[": 1, "]": -1}.get(body[i], 0)
                i += 1
            bounds.append(upper_bound(body[m.end():i - 1], env))
        if not bounds and not re.search(r"\b" + re.escape(p) + r"\b", body):
            out[p] = 0  # never used
        elif not bounds or any(b is None for b in bounds):
            out[p] = None
        else:
            out[p] = max(b for b in bounds if b is not None)
    return out

