"""Restricted expression language for constraints, compiled to vectorised NumPy closures.

Hand-written on top of :mod:`ast` on purpose: constraint text comes from users, T1 files and
shared caches, so it must never reach ``eval``/``exec``. The text is parsed, every node is checked
against a small whitelist, and the tree is turned into nested Python closures that call NumPy
ufuncs. Nothing in the text can name a builtin, an attribute or a module, and all arithmetic is
fixed-width NumPy arithmetic, so there is no big-integer or memory bomb either.

A compiled expression takes ``env`` (name -> 1-D array or scalar) and returns ``(value, bad)``.
``bad`` marks rows whose value is unknown because a division, modulo or power hit a zero
divisor. Unknown follows SQL's three-valued logic: ``b != 0 and a % b == 0`` and
``a % b == 0 or b == 0`` are decided by their other operand, ``not`` keeps unknown unknown, an
``x if c else y`` takes the unknown-ness of the branch it picks, and a constraint that ends
unknown is False, never a crash.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from adaptune.space.errors import ConstraintError

MAX_TEXT_LENGTH = 2000
MAX_LITERAL_EXPONENT = 64
FUNCTIONS = frozenset({"min", "max", "abs", "int", "float", "round"})

Evaluated = tuple[Any, np.ndarray | None]
Compiled = Callable[[Mapping[str, Any]], Evaluated]

_CONSTRUCT_NAMES: dict[type, str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscript",
    ast.Lambda: "lambda",
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
    ast.Dict: "dict literal",
    ast.Set: "set literal",
    ast.Starred: "starred expression",
    ast.NamedExpr: "assignment expression (:=)",
    ast.JoinedStr: "f-string",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slice",
}


def describe(node: ast.AST) -> str:
    """Human name of a syntax construct, for error messages."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return f"call to {func.id!r}"
        if isinstance(func, ast.Attribute):
            return f"attribute access (call to method {func.attr!r})"
        return "call of a computed function"
    name = _CONSTRUCT_NAMES.get(type(node))
    if name:
        return name
    if isinstance(node, ast.BinOp | ast.UnaryOp | ast.Compare | ast.BoolOp):
        op = getattr(node, "op", None) or node.ops[0]  # type: ignore[attr-defined]
        return f"operator {type(op).__name__}"
    return type(node).__name__


def parse_expression(text: str, what: str = "constraint") -> ast.Expression:
    """Parse ``text`` as one Python expression, refusing oversized or non-string input."""
    if not isinstance(text, str):
        raise ConstraintError(f"{what} must be a string, got {type(text).__name__}: {text!r}")
    if len(text) > MAX_TEXT_LENGTH:
        raise ConstraintError(f"{what} is {len(text)} characters long; the limit is {MAX_TEXT_LENGTH}")
    if not text.strip():
        raise ConstraintError(f"{what} is empty")
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ConstraintError(f"syntax error in {what} {text!r}: {e.msg}") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise ConstraintError(f"cannot parse {what} {text!r}: {type(e).__name__}") from None


def forbid(node: ast.AST, text: str, what: str = "constraint") -> ConstraintError:
    return ConstraintError(f"{describe(node)} is not allowed in {what} {text!r}")


def check_name(name: str, text: str, what: str = "constraint") -> None:
    if name.startswith("__") or name.endswith("__"):
        raise ConstraintError(f"dunder name {name!r} is not allowed in {what} {text!r}")


def literal_number(node: ast.AST) -> Any:
    """Value of a numeric literal, also with a leading sign; ``None`` if it is not one."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = literal_number(node.operand)
        if inner is None:
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _any(*masks: np.ndarray | None) -> np.ndarray | None:
    out = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else (out | m)
    return out


def truthy(value: Any) -> Any:
    """Python truthiness, elementwise."""
    arr = np.asarray(value)
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind in "US":
        return np.char.str_len(arr) > 0
    return arr != 0


def _zero_mask(b: Any) -> np.ndarray | None:
    zero = np.asarray(b) == 0
    return zero if zero.any() else None


def _div(a: Any, b: Any) -> Evaluated:
    with np.errstate(all="ignore"):  # zero divisors are reported through the mask instead
        value = np.true_divide(a, b)
    return value, _zero_mask(b)


def _floordiv(a: Any, b: Any) -> Evaluated:
    with np.errstate(all="ignore"):  # zero divisors are reported through the mask instead
        value = np.floor_divide(a, b)
    return value, _zero_mask(b)


def _mod(a: Any, b: Any) -> Evaluated:
    with np.errstate(all="ignore"):  # zero divisors are reported through the mask instead
        value = np.remainder(a, b)
    return value, _zero_mask(b)


def _pow(a: Any, b: Any) -> Evaluated:
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if a_arr.dtype.kind in "iub" and b_arr.dtype.kind in "iub" and (b_arr < 0).any():
        # Python gives a float for a negative integer exponent; NumPy would refuse.
        a = a_arr.astype(np.float64)
    zero_to_negative = (np.asarray(a) == 0) & (b_arr < 0)
    with np.errstate(all="ignore"):
        value = np.power(a, b)
    return value, (zero_to_negative if zero_to_negative.any() else None)


def _plain(ufunc: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Evaluated]:
    return lambda a, b: (ufunc(a, b), None)


_BINOPS: dict[type, Callable[[Any, Any], Evaluated]] = {
    ast.Add: _plain(np.add),
    ast.Sub: _plain(np.subtract),
    ast.Mult: _plain(np.multiply),
    ast.Div: _div,
    ast.FloorDiv: _floordiv,
    ast.Mod: _mod,
    ast.Pow: _pow,
}

_COMPARES: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}


def _to_int(x: Any) -> Any:
    arr = np.asarray(x)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    return np.trunc(arr).astype(np.int64)


def _round(x: Any, ndigits: Any = None) -> Any:
    if ndigits is None:
        arr = np.asarray(x)
        return arr.astype(np.int64) if arr.dtype.kind in "iub" else np.round(arr).astype(np.int64)
    return np.round(x, int(ndigits))


class VectorCompiler:
    """Check an expression tree against the whitelist and compile it to NumPy closures."""

    def __init__(self, text: str, known: Collection[str] | None, what: str = "constraint"):
        self.text = text
        self.known = known
        self.what = what
        self.used: list[str] = []

    def compile(self, tree: ast.Expression) -> Compiled:
        return self.visit(tree.body)

    def error(self, node: ast.AST) -> ConstraintError:
        return forbid(node, self.text, self.what)

    def visit(self, node: ast.AST) -> Compiled:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            raise self.error(node)
        return method(node)

    def visit_Constant(self, node: ast.Constant) -> Compiled:
        v = node.value
        if isinstance(v, bool):
            value: Any = np.bool_(v)
        elif isinstance(v, int):
            if not -(2**63) <= v < 2**63:
                raise ConstraintError(f"integer literal {v} is out of the 64-bit range in {self.what} {self.text!r}")
            value = np.int64(v)
        elif isinstance(v, float):
            value = np.float64(v)
        elif isinstance(v, str):
            value = np.str_(v)
        else:
            raise ConstraintError(f"literal {v!r} of type {type(v).__name__} is not allowed in {self.what} {self.text!r}")
        return lambda env: (value, None)

    def visit_Name(self, node: ast.Name) -> Compiled:
        name = node.id
        check_name(name, self.text, self.what)
        if self.known is not None and name not in self.known:
            known = ", ".join(sorted(self.known)) or "(none)"
            raise ConstraintError(f"unknown name {name!r} in {self.what} {self.text!r}; known names: {known}")
        if name not in self.used:
            self.used.append(name)
        return lambda env: (env[name], None)

    def visit_BinOp(self, node: ast.BinOp) -> Compiled:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node)
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Pow) and not any(isinstance(n, ast.Name) for n in ast.walk(node.right)):
            with np.errstate(all="ignore"):
                exponent = np.asarray(right({})[0])
            if exponent.dtype.kind in "iuf" and abs(exponent) > MAX_LITERAL_EXPONENT:
                raise ConstraintError(f"exponent {exponent} exceeds the limit of {MAX_LITERAL_EXPONENT} "
                                      f"in {self.what} {self.text!r}")

        def binop(env: Mapping[str, Any]) -> Evaluated:
            a, bad_a = left(env)
            b, bad_b = right(env)
            value, bad = op(a, b)
            return value, _any(bad_a, bad_b, bad)

        return binop

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Compiled:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return lambda env: (lambda v: (np.negative(v[0]), v[1]))(operand(env))
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Not):
            return lambda env: (lambda v: (np.logical_not(truthy(v[0])), v[1]))(operand(env))
        raise self.error(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> Compiled:
        parts = [self.visit(v) for v in node.values]
        is_and = isinstance(node.op, ast.And)

        def boolop(env: Mapping[str, Any]) -> Evaluated:
            # Kleene logic: a zero division makes its operand unknown (like SQL NULL). An
            # operand that is definitely False (and) or True (or) decides the result anyway.
            decided: Any = False
            unknown: Any = False
            for part in parts:
                v, bad = part(env)
                t = truthy(v)
                if bad is None:
                    decided = decided | (np.logical_not(t) if is_and else t)
                else:
                    known = np.logical_not(bad)
                    decided = decided | ((np.logical_not(t) if is_and else t) & known)
                    unknown = unknown | bad
            unknown = np.asarray(unknown & np.logical_not(decided))
            value = np.logical_not(decided) if is_and else decided
            return value, (unknown if unknown.any() else None)

        return boolop

    def visit_Compare(self, node: ast.Compare) -> Compiled:
        if len(node.ops) > 1 and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            raise ConstraintError(f"chained comparison with 'in' is not allowed in {self.what} {self.text!r}")
        left = self.visit(node.left)
        steps: list[tuple[Callable[[Any, Any], Any], Compiled]] = []
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.In | ast.NotIn):
                steps.append(self._membership(op, comparator))
                continue
            fn = _COMPARES.get(type(op))
            if fn is None:
                raise ConstraintError(f"operator {type(op).__name__} is not allowed in {self.what} {self.text!r}")
            steps.append((fn, self.visit(comparator)))

        def compare(env: Mapping[str, Any]) -> Evaluated:
            a, bad = left(env)
            result: Any = None
            for fn, right in steps:
                b, bad_b = right(env)
                r = fn(a, b)
                result = r if result is None else (result & r)
                bad = _any(bad, bad_b)
                a = b
            return result, bad

        return compare

    def _membership(self, op: ast.cmpop, node: ast.AST) -> tuple[Callable[[Any, Any], Any], Compiled]:
        if not isinstance(node, ast.Tuple | ast.List):
            raise ConstraintError(f"'in' needs a literal tuple or list on its right in {self.what} {self.text!r}")
        items = []
        for elt in node.elts:
            number = literal_number(elt)
            if number is not None:
                items.append(number)
            elif isinstance(elt, ast.Constant) and isinstance(elt.value, str | bool):
                items.append(elt.value)
            else:
                raise ConstraintError(f"'in' needs literal items, found {describe(elt)} in {self.what} {self.text!r}")
        options = np.array(items)
        negate = isinstance(op, ast.NotIn)

        def member(a: Any, _: Any) -> Any:
            found = np.isin(a, options)
            return np.logical_not(found) if negate else found

        return member, lambda env: (None, None)

    def visit_IfExp(self, node: ast.IfExp) -> Compiled:
        test, body, orelse = self.visit(node.test), self.visit(node.body), self.visit(node.orelse)

        def ifexp(env: Mapping[str, Any]) -> Evaluated:
            c, bad_c = test(env)
            cond = truthy(c)
            a, bad_a = body(env)
            b, bad_b = orelse(env)
            bad = _any(bad_c, None if bad_a is None else (bad_a & cond),
                       None if bad_b is None else (bad_b & np.logical_not(cond)))
            return np.where(cond, a, b), bad

        return ifexp

    def visit_Call(self, node: ast.Call) -> Compiled:
        func = node.func
        if not isinstance(func, ast.Name) or func.id not in FUNCTIONS:
            raise self.error(node)
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ConstraintError(f"keyword or starred arguments are not allowed in {self.what} {self.text!r}")
        name, n = func.id, len(node.args)
        arity_ok = {"min": n >= 2, "max": n >= 2, "abs": n == 1, "int": n == 1, "float": n == 1,
                    "round": n in (1, 2)}[name]
        if not arity_ok:
            raise ConstraintError(f"{name}() called with {n} arguments in {self.what} {self.text!r}")
        if name == "round" and n == 2 and not isinstance(literal_number(node.args[1]), int):
            raise ConstraintError(f"round() needs a literal integer for ndigits in {self.what} {self.text!r}")
        args = [self.visit(a) for a in node.args]
        fn: Callable[..., Any] = {
            "min": lambda *xs: _reduce(np.minimum, xs),
            "max": lambda *xs: _reduce(np.maximum, xs),
            "abs": np.abs,
            "int": _to_int,
            "float": lambda x: np.asarray(x, dtype=np.float64),
            "round": _round,
        }[name]

        def call(env: Mapping[str, Any]) -> Evaluated:
            values, bads = zip(*(a(env) for a in args), strict=True)
            return fn(*values), _any(*bads)

        return call


def _reduce(ufunc: Any, xs: tuple[Any, ...]) -> Any:
    out = xs[0]
    for x in xs[1:]:
        out = ufunc(out, x)
    return out


def compile_vector(text: str, known: Collection[str] | None, what: str = "constraint") -> tuple[Compiled, list[str]]:
    """Parse and compile ``text``; return the closure and the names it reads, in order of use."""
    tree = parse_expression(text, what)
    compiler = VectorCompiler(text, known, what)
    compiled = compiler.compile(tree)
    return compiled, compiler.used
