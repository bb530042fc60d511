"""Restricted evaluator: what it computes, and what hostile text it refuses without side effects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptune.space import ConstraintError, parse_constraint, parse_values

COLUMNS = {"a": np.array([0, 1, 2, 3, 4, 5]), "b": np.array([2, 0, 2, 3, 0, 1]),
           "s": np.array(["x", "y", "x", "z", "y", "x"]), "f": np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5])}


def py_rows() -> list[dict]:
    return [{k: v[i].item() for k, v in COLUMNS.items()} for i in range(6)]


@pytest.mark.parametrize(("text", "reference"), [
    ("a + b * 2 - 1 > 3", lambda r: r["a"] + r["b"] * 2 - 1 > 3),
    ("a // 2 == 1", lambda r: r["a"] // 2 == 1),
    ("-a < -2", lambda r: -r["a"] < -2),
    ("a ** 2 >= 9", lambda r: r["a"] ** 2 >= 9),
    ("2 ** -b < 1", lambda r: 2 ** -r["b"] < 1),
    ("a / 2 > 1", lambda r: r["a"] / 2 > 1),
    ("0 < a <= 3 != b", lambda r: 0 < r["a"] <= 3 != r["b"]),
    ("s == 'x' and a > 1 or b == 0", lambda r: (r["s"] == "x" and r["a"] > 1) or r["b"] == 0),
    ("not s in ('x', 'z')", lambda r: r["s"] not in ("x", "z")),
    ("a not in [1, -3, 5]", lambda r: r["a"] not in [1, -3, 5]),
    ("max(a, b, 3) == 3", lambda r: max(r["a"], r["b"], 3) == 3),
    ("min(a, b) + abs(b - a) == max(a, b)", lambda r: True),
    ("int(f) == a", lambda r: int(r["f"]) == r["a"]),
    ("round(f) % 2 == 0", lambda r: round(r["f"]) % 2 == 0),
    ("round(f * 1.01, 1) > 2", lambda r: round(r["f"] * 1.01, 1) > 2),
    ("float(a) / 4 == a / 4", lambda r: True),
    ("(a if b else 10) > 4", lambda r: (r["a"] if r["b"] else 10) > 4),
    ("a % b == 1", lambda r: r["b"] != 0 and r["a"] % r["b"] == 1),
    ("b == 0 or a % b == 0", lambda r: r["b"] == 0 or r["a"] % r["b"] == 0),
    ("a", lambda r: bool(r["a"])),
    ("True", lambda r: True),
])
def test_vectorised_and_scalar_paths_agree_with_python(text, reference) -> None:
    c = parse_constraint(text, COLUMNS)
    mask = c.evaluate(COLUMNS, 6)
    expected = [bool(reference(r)) for r in py_rows()]
    assert mask.tolist() == expected
    assert [c.evaluate_one(r) for r in py_rows()] == expected


def test_names_are_reported_in_order_of_use() -> None:
    assert parse_constraint("b * a < n + b").names == ("b", "a", "n")


HOSTILE = [
    ("__import__('os').system('touch {p}')", "attribute access"),
    ("().__class__", "attribute access"),
    ("().__class__.__bases__[0].__subclasses__()", "attribute access"),
    ("__builtins__", "dunder name"),
    ("open('{p}', 'w')", "call to 'open'"),
    ("eval('1')", "call to 'eval'"),
    ("exec('x=1')", "call to 'exec'"),
    ("(lambda: 1)()", "call of a computed function"),
    ("lambda x: x", "lambda"),
    ("[x for x in (1, 2)]", "list comprehension"),
    ("{'a': 1}", "dict literal"),
    ("a[0]", "subscript"),
    ("(y := 3)", "assignment expression"),
    ("f'{a}'", "f-string"),
    ("a if b else c" * 200, "characters long"),
    ("10 ** 10 ** 10", "exponent 10000000000 exceeds"),
    ("a ** 1000", "exponent 1000 exceeds"),
    ("a << 3", "operator LShift"),
    ("a & b", "operator BitAnd"),
    ("~a", "operator Invert"),
    ("a is None", "operator Is"),
    ("min(a, key=abs)", "keyword or starred"),
    ("a in b", "literal tuple or list"),
    ("b'x' == a", "literal b'x'"),
    ("import os", "syntax error"),
    ("a = 1", "syntax error"),
    ("a\x00", "null bytes"),
    ("", "empty"),
]


@pytest.mark.parametrize(("text", "match"), HOSTILE)
def test_evaluator_refuses_hostile_text_without_side_effects(text, match, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    with pytest.raises(ConstraintError, match=match):
        parse_constraint(text.format(p=target) if "{p}" in text else text, None)
    assert not target.exists()


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(ConstraintError, match=r"unknown name 'z'.*known names: a, b"):
        parse_constraint("a + z > b", ["a", "b"])


@pytest.mark.parametrize(("text", "expected"), [
    ("[i for i in range(3,35,2)]", list(range(3, 35, 2))),
    ("[16*i for i in range(1,9)]", [16 * i for i in range(1, 9)]),
    ("[2**i for i in range(6)]", [1, 2, 4, 8, 16, 32]),
    ("[0, 1]", [0, 1]),
    ("(1, -2, 3.5)", [1, -2, 3.5]),
    ("['a', 'b']", ["a", "b"]),
    ("[True, False]", [True, False]),
    ("range(4)", [0, 1, 2, 3]),
    ("range(8, 0, -3)", [8, 5, 2]),
    ("[i for i in range(20) if i % 3 == 0 if i > 0]", [3, 6, 9, 12, 15, 18]),
    ("[x * 2 for x in [1, 5, 7]]", [2, 10, 14]),
    ("[max(i, 4) for i in range(6)]", [4, 4, 4, 4, 4, 5]),
    ("[i / 2 for i in range(3)]", [0.0, 0.5, 1.0]),
])
def test_parse_values(text, expected) -> None:
    assert parse_values(text) == expected


@pytest.mark.parametrize(("text", "match"), [
    ("__import__('os').system('touch {p}')", "attribute access"),
    ("[x.y for x in range(3)]", "attribute access"),
    ("[open('{p}') for i in range(2)]", "call to 'open'"),
    ("range(10**7)", "exceeds the limit of 1000000"),
    ("[i for i in range(2000000)]", "exceeds the limit"),
    ("[2**100]", "exponent 100 exceeds"),
    ("[3**60]", "exceeds 64 bits"),
    ("[10**10**10]", "exceeds"),
    ("[i for i in range(3) for j in range(2)]", "only one 'for'"),
    ("[i for i in sorted([1])]", "call to 'sorted'"),
    ("[__x for __x in range(3)]", "dunder name"),
    ("[1 // 0]", "division by zero"),
    ("{1, 2}", "set literal"),
    ("abs(-1)", "call to 'abs'"),
    ("range(1.5)", "must be integers"),
    ("[y for x in range(3)]", "unknown name 'y'"),
])
def test_parse_values_refuses(text, match, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    with pytest.raises(ConstraintError, match=match):
        parse_values(text.format(p=target) if "{p}" in text else text)
    assert not target.exists()
