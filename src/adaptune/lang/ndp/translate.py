"""Scalar Python functions (lambdas, small ``def``s) translated to the kernel dialect by walking ``ast``.

Why ``ast`` and not tracing: element functions run per element inside generated kernels, so they must
become C text; their source is parsed (never evaluated) and only a small, typed subset is accepted.

Accepted subset (anything else is rejected with :class:`TranslationError` naming the construct):
  * a ``lambda`` or a ``def`` whose body is local assignments ``name = expr`` then ``return expr``;
  * numbers, ``True``/``False``, the parameters, earlier locals, and closure/global names bound to
    Python ``int``/``float``/``bool`` values (inlined as constants);
  * ``+ - * / // % **`` (``**`` with a small non-negative integer exponent), unary ``- + not``,
    comparisons (chained too), ``and``/``or``, ``a if c else b``;
  * calls ``abs min max float int`` and ``math.sqrt exp log sin cos tan tanh floor ceil fabs pow``.
Types are ``i32``, ``f32`` and ``bool``; ``/`` is true division (float), ``//`` and ``%`` follow
Python's floor semantics on integers.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

C_TYPES = {"i32": "i32", "f32": "float", "bool": "i32"}
MATH_FUNCS = {"sqrt": "sqrt", "exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan",
              "tanh": "tanh", "floor": "floor", "ceil": "ceil", "fabs": "fabs", "pow": "pow"}
ACCEPTED = ("accepted: lambda or def with assignments and one return; numbers, parameters, int/float closure "
            "constants; + - * / // % **, unary - + not, comparisons, and/or, a if c else b; "
            "abs/min/max/float/int and math.sqrt/exp/log/sin/cos/tan/tanh/floor/ceil/fabs/pow")

# Helpers the generated code may call (Python floor semantics for // and % on integers).
PRELUDE = """DEVICE i32 ndp_floordiv(i32 a, i32 b) { i32 q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
DEVICE i32 ndp_mod(i32 a, i32 b) { i32 r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
"""


class TranslationError(ValueError):
    """A function uses Python outside the accepted subset; the message names the construct and line."""


@dataclass(frozen=True)
class Value:
    """A translated expression: C text and its type (i32, f32 or bool)."""

    text: str
    type: str


@dataclass
class ScalarFunction:
    """A translated scalar function: parameter names, statements and a result in terms of the parameters."""

    name: str
    params: tuple[str, ...]
    node: ast.AST  # the Lambda or FunctionDef
    constants: dict[str, float | int | bool] = field(default_factory=dict)
    source_line: int = 0

    @property
    def arity(self) -> int:
        return len(self.params)

    def emit(self, args: Sequence[Value], fresh: Callable[[], str]) -> tuple[list[str], Value]:
        """C statements and result for arguments ``args`` (C expressions already typed)."""
        if len(args) != self.arity:
            raise TranslationError(f"{self.name} takes {self.arity} argument(s), the operator passes {len(args)}")
        return _Emitter(self, dict(zip(self.params, args, strict=True)), fresh).run()


def scalar_function(fn: Callable[..., object]) -> ScalarFunction:
    """Parse ``fn``'s source (no evaluation) into a :class:`ScalarFunction`."""
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TranslationError(f"{fn!r} is not a Python function; pass a lambda, a def or an ndp operator "
                               f"(ndp.add, ndp.mul, ndp.max, ndp.min)")
    node, line = _find_node(fn, code)
    params = tuple(code.co_varnames[: code.co_argcount])
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or code.co_kwonlyargcount:
        raise TranslationError(f"{_label(fn)} (line {line}): *args, **kwargs and keyword-only parameters "
                               f"are not translated; {ACCEPTED}")
    args = node.args
    if args.defaults or args.kw_defaults:
        raise TranslationError(f"{_label(fn)} (line {line}): default parameter values are not translated")
    return ScalarFunction(_label(fn), params, node, _constants(fn), line)


def _label(fn: Callable[..., object]) -> str:
    name = getattr(fn, "__name__", "function")
    return "lambda" if name == "<lambda>" else name


def _constants(fn: Callable[..., object]) -> dict[str, float | int | bool]:
    """Closure and global names the function reads, kept only if bound to plain numbers."""
    out: dict[str, float | int | bool] = {}
    code = fn.__code__
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, bool | int | float):
            out[name] = value
    globs = getattr(fn, "__globals__", {})
    for name in code.co_names:
        value = globs.get(name)
        if isinstance(value, bool | int | float) and name not in out:
            out[name] = value
    return out


def _find_node(fn: Callable[..., object], code) -> tuple[ast.AST, int]:
    """The Lambda or FunctionDef node of ``fn`` in its file, located by the code's source positions."""
    filename = code.co_filename
    lines = linecache.getlines(filename, getattr(fn, "__globals__", {}))
    if not lines:
        raise TranslationError(f"{_label(fn)}: its source is not available (defined in an interactive session "
                               f"or by exec?); define it in a file")
    try:
        tree = ast.parse("".join(lines), filename)
    except SyntaxError:  # fall back to the function's own block
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
        ast.increment_lineno(tree, code.co_firstlineno - 1)
    first = code.co_firstlineno
    positions = [(p[0], p[2]) for p in code.co_positions() if p[0] is not None and p[2] is not None]
    if code.co_name == "<lambda>":
        candidates = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno <= first
                      and (n.end_lineno or n.lineno) >= first]
        inside = [n for n in candidates if positions and all(_contains(n.body, p) for p in positions)]
        pick = inside or candidates
        pick = [n for n in pick if [a.arg for a in n.args.args] == list(code.co_varnames[: code.co_argcount])]
        if len(pick) != 1:
            raise TranslationError(f"lambda at {filename}:{first}: cannot locate its source unambiguously "
                                   f"({len(pick)} candidates); write it as a def")
        return pick[0], first
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == code.co_name
            and (n.lineno == first or (n.decorator_list and n.decorator_list[0].lineno == first))]
    if len(defs) != 1:
        raise TranslationError(f"def {code.co_name} at {filename}:{first}: source not found")
    return defs[0], first


def _contains(node: ast.AST, pos: tuple[int, int]) -> bool:
    start = (node.lineno, node.col_offset)
    end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
    return start <= pos <= end


class _Emitter:
    """Walks one function body and produces C statements; every rejection names its construct."""

    def __init__(self, fn: ScalarFunction, env: dict[str, Value], fresh: Callable[[], str]) -> None:
        self.fn, self.env, self.fresh = fn, dict(env), fresh
        self.stmts: list[str] = []

    def fail(self, node: ast.AST, what: str) -> TranslationError:
        line = getattr(node, "lineno", self.fn.source_line)
        return TranslationError(f"{self.fn.name} (line {line}): {what} is not translated to the kernel dialect; "
                                f"{ACCEPTED}")

    def run(self) -> tuple[list[str], Value]:
        node = self.fn.node
        if isinstance(node, ast.Lambda):
            return self.stmts, self.expr(node.body)
        body = list(node.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # docstring
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            raise self.fail(node, "a def without a final 'return expr'")
        for stmt in body[:-1]:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)):
                raise self.fail(stmt, f"the statement {type(stmt).__name__}")
            value = self.expr(stmt.value)
            var = self.fresh()
            self.stmts.append(f"const {C_TYPES[value.type]} {var} = {value.text};")
            self.env[stmt.targets[0].id] = Value(var, value.type)
        return self.stmts, self.expr(body[-1].value)

    def expr(self, node: ast.AST) -> Value:
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            raise self.fail(node, f"the construct {type(node).__name__}")
        return method(node)

    # -- leaves
    def e_Constant(self, node: ast.Constant) -> Value:
        return _const(node.value, lambda what: self.fail(node, what))

    def e_Name(self, node: ast.Name) -> Value:
        if node.id in self.env:
            return self.env[node.id]
        if node.id in self.fn.constants:
            return _const(self.fn.constants[node.id], lambda what: self.fail(node, what))
        raise self.fail(node, f"the name {node.id!r} (not a parameter, local, or int/float constant)")

    # -- operators
    def e_BinOp(self, node: ast.BinOp) -> Value:
        a, b = self.expr(node.left), self.expr(node.right)
        op = type(node.op).__name__
        if op == "Pow":
            return self._pow(node, a, b)
        is_int = a.type != "f32" and b.type != "f32"
        if op == "Div":
            return Value(f"((float)({a.text}) / (float)({b.text}))", "f32")
        if op == "FloorDiv":
            if is_int:
                return Value(f"ndp_floordiv({a.text}, {b.text})", "i32")
            return Value(f"floor((float)({a.text}) / (float)({b.text}))", "f32")
        if op == "Mod":
            if is_int:
                return Value(f"ndp_mod({a.text}, {b.text})", "i32")
            x, y = f"(float)({a.text})", f"(float)({b.text})"
            return Value(f"({x} - {y} * floor({x} / {y}))", "f32")
        sym = {"Add": "+", "Sub": "-", "Mult": "*"}.get(op)
        if sym is None:
            raise self.fail(node, f"the operator {op}")
        return Value(f"({a.text} {sym} {b.text})", "i32" if is_int else "f32")

    def _pow(self, node: ast.BinOp, a: Value, b: Value) -> Value:
        if isinstance(node.right, ast.Constant) and type(node.right.value) is int and 0 <= node.right.value <= 8:
            k = node.right.value
            if k == 0:
                return Value("1", "i32") if a.type != "f32" else Value("1.0f", "f32")
            var = self.fresh()
            self.stmts.append(f"const {C_TYPES[a.type]} {var} = {a.text};")
            return Value("(" + " * ".join([var] * k) + ")", "i32" if a.type != "f32" else "f32")
        return Value(f"pow((float)({a.text}), (float)({b.text}))", "f32")

    def e_UnaryOp(self, node: ast.UnaryOp) -> Value:
        v = self.expr(node.operand)
        op = type(node.op).__name__
        if op == "USub":
            return Value(f"(-{v.text})", "i32" if v.type == "bool" else v.type)
        if op == "UAdd":
            return v
        if op == "Not":
            return Value(f"(!({v.text}))", "bool")
        raise self.fail(node, f"the unary operator {op}")

    def e_BoolOp(self, node: ast.BoolOp) -> Value:
        sym = "&&" if isinstance(node.op, ast.And) else "||"
        parts = [self.expr(v) for v in node.values]
        if any(p.type != "bool" for p in parts):
            raise self.fail(node, "and/or on non-boolean operands (Python would return an operand)")
        return Value("(" + f" {sym} ".join(p.text for p in parts) + ")", "bool")

    def e_Compare(self, node: ast.Compare) -> Value:
        syms = {"Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=", "Eq": "==", "NotEq": "!="}
        left = self.expr(node.left)
        parts = []
        for op, comp in zip(node.ops, node.comparators, strict=True):
            sym = syms.get(type(op).__name__)
            if sym is None:
                raise self.fail(node, f"the comparison {type(op).__name__}")
            right = self.expr(comp)
            parts.append(f"({left.text} {sym} {right.text})")
            left = right
        return Value("(" + " && ".join(parts) + ")", "bool")

    def e_IfExp(self, node: ast.IfExp) -> Value:
        c, a, b = self.expr(node.test), self.expr(node.body), self.expr(node.orelse)
        t = "f32" if "f32" in (a.type, b.type) else ("bool" if a.type == b.type == "bool" else "i32")
        return Value(f"(({c.text}) ? ({_cast(a, t)}) : ({_cast(b, t)}))", t)

    def e_Call(self, node: ast.Call) -> Value:
        if node.keywords:
            raise self.fail(node, "keyword arguments in a call")
        args = [self.expr(a) for a in node.args]
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("abs", "min", "max", "float", "int"):
            name = f.id
            if name == "float" and len(args) == 1:
                return Value(f"((float)({args[0].text}))", "f32")
            if name == "int" and len(args) == 1:  # Python truncates toward zero, as C does
                return Value(f"((i32)({args[0].text}))", "i32")
            if name == "abs" and len(args) == 1:
                a = args[0]
                return Value(f"fabs({a.text})", "f32") if a.type == "f32" else Value(f"abs({a.text})", "i32")
            if name in ("min", "max") and len(args) >= 2:
                out = args[0]
                for b in args[1:]:
                    t = "f32" if "f32" in (out.type, b.type) else "i32"
                    cmp = "<" if name == "min" else ">"
                    x, y = self.fresh(), self.fresh()
                    self.stmts.append(f"const {C_TYPES[t]} {x} = {_cast(out, t)};")
                    self.stmts.append(f"const {C_TYPES[t]} {y} = {_cast(b, t)};")
                    out = Value(f"(({y} {cmp} {x}) ? {y} : {x})", t)
                return out
            raise self.fail(node, f"{name}() with {len(args)} argument(s)")
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math"
                and f.attr in MATH_FUNCS):
            want = 2 if f.attr == "pow" else 1
            if len(args) != want:
                raise self.fail(node, f"math.{f.attr} with {len(args)} argument(s)")
            inner = ", ".join(f"(float)({a.text})" for a in args)
            return Value(f"{MATH_FUNCS[f.attr]}({inner})", "f32")
        raise self.fail(node, f"the call {ast.unparse(f)}()")


def _const(value: object, fail: Callable[[str], TranslationError]) -> Value:
    if isinstance(value, bool):
        return Value("1" if value else "0", "bool")
    if isinstance(value, int):
        if not -(2**31) <= value < 2**31:
            raise fail(f"the integer constant {value} (outside i32)")
        return Value(str(value), "i32")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise fail(f"the constant {value}")
        return Value(f"{value!r}f" if "e" in repr(value) or "." in repr(value) else f"{value!r}.0f", "f32")
    raise fail(f"the constant {value!r}")


def _cast(v: Value, t: str) -> str:
    if v.type == t or (t == "i32" and v.type == "bool"):
        return v.text
    return f"(({C_TYPES[t]})({v.text}))"


def cast(v: Value, t: str) -> str:
    """C text of ``v`` converted to type ``t`` (used by operators storing into typed buffers)."""
    return _cast(v, t)
