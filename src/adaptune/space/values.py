"""Parse Kernel Tuner T1 "Values" strings into Python lists, without ``eval``.

T1 files are shared between groups, so their value strings are untrusted. This hand-written
interpreter over :mod:`ast` accepts only the shapes such files use: a literal list or tuple,
``range(...)``, or a one-generator list comprehension over ``range(...)`` or a literal list with
an arithmetic body and optional ``if`` filters. Arithmetic is exact Python arithmetic with every
intermediate kept within 64 bits, so no text can exhaust memory or time.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from adaptune.space.errors import ConstraintError
from adaptune.space.safe_expr import MAX_LITERAL_EXPONENT, check_name, describe, forbid, parse_expression

MAX_VALUES = 10**6
_LIMIT = 2**63
_WHAT = "values"

_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}


class _Interpreter:
    def __init__(self, text: str, variable: str | None):
        self.text = text
        self.variable = variable

    def fail(self, message: str) -> ConstraintError:
        return ConstraintError(f"{message} in values {self.text!r}")

    def eval(self, node: ast.AST, env: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float, str, bool):
                raise self.fail(f"literal {node.value!r} is not allowed")
            return self._checked(node.value)
        if isinstance(node, ast.Name):
            check_name(node.id, self.text, _WHAT)
            if node.id not in env:
                raise self.fail(f"unknown name {node.id!r}")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            a, b = self.eval(node.left, env), self.eval(node.right, env)
            if isinstance(node.op, ast.Pow):
                self._check_power(a, b)
            try:
                return self._checked(_ARITH[type(node.op)](a, b))
            except ZeroDivisionError:
                raise self.fail("division by zero") from None
            except TypeError as e:
                raise self.fail(f"bad operand types ({e})") from None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
            v = self.eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return not v
            if isinstance(v, str):
                raise self.fail("unary sign on a string")
            return -v if isinstance(node.op, ast.USub) else +v
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            left = self.eval(node.left, env)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self.eval(comp, env)
                try:
                    if not _COMPARE[type(op)](left, right):
                        return False
                except TypeError as e:
                    raise self.fail(f"bad comparison ({e})") from None
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            values = (self.eval(v, env) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.IfExp):
            return self.eval(node.body if self.eval(node.test, env) else node.orelse, env)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            if node.keywords or len(node.args) < 2:
                raise self.fail(f"{node.func.id}() needs two or more positional arguments")
            args = [self.eval(a, env) for a in node.args]
            return min(args) if node.func.id == "min" else max(args)
        raise forbid(node, self.text, _WHAT)

    def _check_power(self, base: Any, exponent: Any) -> None:
        if isinstance(exponent, str) or isinstance(base, str):
            raise self.fail("power of a string")
        if abs(exponent) > MAX_LITERAL_EXPONENT:
            raise self.fail(f"exponent {exponent} exceeds the limit of {MAX_LITERAL_EXPONENT}")
        if abs(base) > 1 and exponent > 0 and exponent * math.log2(abs(base)) > 63:
            raise self.fail(f"{base}**{exponent} exceeds 64 bits")

    def _checked(self, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _LIMIT:
            raise self.fail(f"integer {value} exceeds 64 bits")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(f"non-finite number {value}")
        return value

    def range_call(self, node: ast.AST) -> range:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"):
            raise forbid(node, self.text, _WHAT)
        if node.keywords or not 1 <= len(node.args) <= 3:
            raise self.fail("range() takes one to three positional arguments")
        args = [self.eval(a, {}) for a in node.args]
        if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            raise self.fail("range() arguments must be integers")
        try:
            r = range(*args)
        except ValueError as e:
            raise self.fail(str(e)) from None
        if len(r) > MAX_VALUES:
            raise self.fail(f"range of {len(r)} items exceeds the limit of {MAX_VALUES}")
        return r

    def literal_items(self, node: ast.List | ast.Tuple) -> list[Any]:
        if len(node.elts) > MAX_VALUES:
            raise self.fail(f"more than {MAX_VALUES} items")
        return [self.eval(e, {}) for e in node.elts]


def parse_values(text: str) -> list[Any]:
    """Turn a T1 "Values" string into a list, e.g. ``"[16*i for i in range(1,9)]"``.

    Raises :class:`ConstraintError` naming the construct for anything outside the accepted shapes.
    """
    body = parse_expression(text, _WHAT).body
    interp = _Interpreter(text, None)
    if isinstance(body, ast.List | ast.Tuple):
        return interp.literal_items(body)
    if isinstance(body, ast.Call):
        return list(interp.range_call(body))
    if isinstance(body, ast.ListComp):
        return _comprehension(body, interp)
    raise ConstraintError(f"{describe(body)} is not a list, range() or list comprehension in values {text!r}")


def _comprehension(node: ast.ListComp, interp: _Interpreter) -> list[Any]:
    if len(node.generators) != 1:
        raise interp.fail("only one 'for' is allowed in a comprehension")
    gen = node.generators[0]
    if gen.is_async or not isinstance(gen.target, ast.Name):
        raise interp.fail("the comprehension target must be a single name")
    variable = gen.target.id
    check_name(variable, interp.text, _WHAT)
    source = interp.literal_items(gen.iter) if isinstance(gen.iter, ast.List | ast.Tuple) else interp.range_call(gen.iter)
    out = []
    for item in source:
        env = {variable: item}
        if all(interp.eval(cond, env) for cond in gen.ifs):
            out.append(interp.eval(node.elt, env))
    return out
