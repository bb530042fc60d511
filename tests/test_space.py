"""Space layer: enumeration against a brute-force reference, lookups, neighbours, encodings, errors."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest

from adaptune.space import ConstraintError, Param, Space

# Constraint texts paired with the plain-Python reference they must agree with.
CONSTRAINT_POOL = [
    ("a * b <= 64", lambda c: c["a"] * c["b"] <= 64),
    ("a % b == 0", lambda c: c["b"] != 0 and c["a"] % c["b"] == 0),
    ("b // c >= 1 or d == 'x'", lambda c: (c["c"] != 0 and c["b"] // c["c"] >= 1) or c["d"] == "x"),
    ("not (a > 8 and e)", lambda c: not (c["a"] > 8 and c["e"])),
    ("min(a, b) < max(c, 2) if d != 'y' else a + c > 4",
     lambda c: min(c["a"], c["b"]) < max(c["c"], 2) if c["d"] != "y" else c["a"] + c["c"] > 4),
    ("2 <= b < 8", lambda c: 2 <= c["b"] < 8),
    ("d in ('x', 'z') or a in (1, 16)", lambda c: c["d"] in ("x", "z") or c["a"] in (1, 16)),
    ("abs(a - 4 * c) <= n", lambda c: abs(c["a"] - 4 * c["c"]) <= 12),
    ("a ** 2 / (b + 1) < 100", lambda c: c["a"] ** 2 / (c["b"] + 1) < 100),
    ("(a + b) % (c - 1) != 1", lambda c: c["c"] - 1 != 0 and (c["a"] + c["b"]) % (c["c"] - 1) != 1),
]


def random_space(rng: np.random.Generator) -> tuple[dict[str, list], list[int]]:
    params = {
        "a": sorted(rng.choice([1, 2, 3, 4, 6, 8, 12, 16], size=rng.integers(1, 6), replace=False).tolist()),
        "b": rng.permutation([0, 1, 2, 4, 5, 8])[: rng.integers(1, 6)].tolist(),
        "c": rng.choice([0, 1, 2, 3, 4], size=rng.integers(1, 5), replace=False).tolist(),
        "d": ["x", "y", "z"][: rng.integers(1, 4)],
        "e": [False, True][: rng.integers(1, 3)],
    }
    order = [str(k) for k in rng.permutation(list(params))]
    picked = sorted(rng.choice(len(CONSTRAINT_POOL), size=rng.integers(0, 5), replace=False).tolist())
    return {k: params[k] for k in order}, picked


def reference(params: dict[str, list], checks) -> list[dict]:
    out = []
    for combo in itertools.product(*params.values()):
        config = dict(zip(params, combo, strict=True))
        if all(check(config) for check in checks):
            out.append(config)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_enumeration_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    params, picked = random_space(rng)
    texts = [CONSTRAINT_POOL[i][0] for i in picked]
    checks = [CONSTRAINT_POOL[i][1] for i in picked]
    expected = reference(params, checks)
    if not expected:
        with pytest.raises(ConstraintError, match="no valid configuration"):
            Space(params, texts, constants={"n": 12}, chunk_rows=int(rng.integers(1, 50)))
        return
    space = Space(params, texts, constants={"n": 12}, chunk_rows=int(rng.integers(1, 50)))
    assert list(space.configs()) == expected
    assert len(space) == len(expected)
    for i, config in enumerate(expected):
        assert space.index(config) == i
        assert space.is_valid(config)
    for combo in itertools.product(*params.values()):
        config = dict(zip(params, combo, strict=True))
        assert space.is_valid(config) == (config in expected)


def test_callable_constraints_mix_with_text() -> None:
    params = {"x": list(range(1, 13)), "y": [1, 2, 3, 4]}
    space = Space(params, ["x * y <= 24", lambda c: (c["x"] + c["y"]) % 3 != 0])
    expected = reference(params, [lambda c: c["x"] * c["y"] <= 24, lambda c: (c["x"] + c["y"]) % 3 != 0])
    assert list(space.configs()) == expected
    assert not space.is_valid({"x": 2, "y": 1})
    assert space.is_valid({"x": 2, "y": 2})


def test_division_by_zero_is_false_not_a_crash() -> None:
    space = Space({"a": [0, 1, 2, 4], "b": [0, 2]}, ["a % b == 0", "b // a >= 0 or a == 0", "b / a < 3"])
    # a=0: "b / a < 3" is unknown, hence False; "or a == 0" rescues the floor division
    assert [tuple(c.values()) for c in space.configs()] == [(2, 2), (4, 2)]
    assert Space({"a": [0, 1], "b": [0, 3]}, ["b // a >= 0 or a == 0"]).cartesian_size == 4
    assert len(Space({"a": [0, 1], "b": [0, 3]}, ["b // a >= 0 or a == 0"])) == 4
    with pytest.raises(ConstraintError, match="removed every"):  # not(unknown) stays unknown -> False
        Space({"a": [0, 1], "b": [0, 3]}, ["not (b // a >= 0)"])
    assert not space.is_valid({"a": 2, "b": 0})
    # a guarded division in an unreached branch does not count
    guarded = Space({"a": [0, 1, 2]}, ["a != 0 and 4 % a == 0", "(8 // a if a else 1) > 0"])
    assert [c["a"] for c in guarded.configs()] == [1, 2]


def test_index_config_round_trip_and_find() -> None:
    space = Space({"bx": [16, 32, 64, 128, 256], "by": [1, 2, 4, 8, 16], "tile": [1, 2, 4], "kind": ["v", "s"]},
                  ["bx * by <= 256", "tile <= by"])
    for i in range(len(space)):
        assert space.index(space.config(i)) == i
    assert space.find({"bx": 256, "by": 16, "tile": 1, "kind": "v"}) is None
    assert space.find({"bx": 3, "by": 1, "tile": 1, "kind": "v"}) is None
    with pytest.raises(KeyError, match="not a valid configuration"):
        space.index({"bx": 256, "by": 16, "tile": 1, "kind": "v"})
    with pytest.raises(KeyError, match="lacks parameter 'kind'"):
        space.index({"bx": 16, "by": 1, "tile": 1})
    assert space.find({"bx": 16, "by": 1, "tile": 1, "kind": "v", "extra": 9}) == 0
    assert space.key(space.config(0)) == "16,1,1,v"
    assert {"bx": 16, "by": 1, "tile": 1, "kind": "s"} in space
    np.testing.assert_array_equal(space.column("bx"), [c["bx"] for c in space.configs()])
    with pytest.raises(IndexError):
        space.config(len(space))


def test_bool_and_float_params() -> None:
    space = Space({"use_shared": [False, True], "ratio": [0.5, 1, 2.0]}, ["use_shared or ratio > 0.75"])
    got = [tuple(c.values()) for c in space.configs()]
    assert got == [(False, 1), (False, 2.0), (True, 0.5), (True, 1), (True, 2.0)]
    assert space.find({"use_shared": 1, "ratio": 1}) is None  # 1 is not a bool
    assert space.column("use_shared").dtype == bool


def naive_neighbours(space: Space, i: int, method: str) -> list[int]:
    me = space.table[i].astype(int)
    out = []
    for j, row in enumerate(space.table.astype(int)):
        diff = np.abs(row - me)
        if method == "hamming":
            ok = np.count_nonzero(diff) == 1
        elif method == "adjacent":
            ok = diff.max() <= 1 and diff.any()
        else:
            ok = diff.sum() == 1
        if ok:
            out.append(j)
    return out


@pytest.mark.parametrize("method", ["hamming", "adjacent", "strictly-adjacent", "Hamming"])
def test_neighbours_match_naive(method: str) -> None:
    rng = np.random.default_rng(7)
    small = Space({"a": [1, 2, 4, 8], "b": [1, 2, 3], "c": ["p", "q"]}, ["a * b <= 12"])
    big = Space({"a": list(range(20)), "b": list(range(15)), "c": list(range(10)), "d": [0, 1, 2]},
                ["(a + b + c) % 3 != 0", "a >= d"])
    for space in (small, big):  # small uses the table scan, big the candidate lookup
        for i in rng.choice(len(space), size=12, replace=False):
            got = space.neighbours(int(i), method)
            assert got.tolist() == naive_neighbours(space, int(i), method.lower())
    with pytest.raises(ValueError, match="unknown neighbour method"):
        small.neighbours(0, "diagonal")


def test_encode_shapes_and_ranges() -> None:
    space = Space({"x": [1, 2, 4, 8, 16], "s": ["a", "b", "c"], "one": [7], "f": [True, False]})
    enc = space.encode()
    assert enc.shape == (len(space), 1 + 3 + 1 + 1)
    assert enc.min() >= 0.0 and enc.max() <= 1.0
    assert space.encoding_labels() == ["x", "s=a", "s=b", "s=c", "one", "f"]
    np.testing.assert_allclose(enc[:, 1:4].sum(axis=1), 1.0)
    np.testing.assert_allclose(np.unique(enc[:, 0]), [0, 0.25, 0.5, 0.75, 1.0])
    assert space.encode([3]).shape == (1, 6)
    np.testing.assert_array_equal(space.encode(np.array([2, 5])), enc[[2, 5]])


def test_sample_distinct_and_reproducible() -> None:
    space = Space({"x": list(range(50)), "y": list(range(40))}, ["x + y < 60"])
    s1 = space.sample(np.random.default_rng(3), 100)
    assert len(set(s1.tolist())) == 100 and s1.max() < len(space)
    np.testing.assert_array_equal(s1, space.sample(3, 100))
    assert sorted(space.sample(0, 10 * len(space)).tolist()) == list(range(len(space)))
    with pytest.raises(ValueError):
        space.sample(0, -1)


def test_defaults() -> None:
    space = Space([Param("bx", [32, 64, 128], default=64), Param("t", [1, 2, 4])], ["bx * t <= 256"],
                  defaults={"t": 4})
    assert space.default_index() == space.index({"bx": 64, "t": 4})
    assert Space({"bx": [32, 64]}).default_index() is None
    invalid_default = Space({"bx": [32, 64, 128], "t": [1, 4]}, ["bx * t <= 256"], defaults={"bx": 128, "t": 4})
    assert invalid_default.default_index() is None


def test_to_dict_round_trip() -> None:
    space = Space({"bx": [32, 64], "s": ["a", "b"]}, ["bx < n or s == 'a'"], defaults={"bx": 32}, constants={"n": 50})
    again = Space.from_dict(space.to_dict())
    assert list(again.configs()) == list(space.configs())
    assert again.to_dict() == space.to_dict()


@pytest.mark.parametrize(("params", "kwargs", "match"), [
    ({"x": []}, {}, "empty value list"),
    ({"x": [1, 2, 1]}, {}, "lists value 1 twice"),
    ({"x": [1, "a"]}, {}, "mixes value kinds"),
    ({"x": [1, True]}, {}, "mixes value kinds"),
    ({"x": [1, None]}, {}, "unsupported type NoneType"),
    ({"x": [1.0, float("nan")]}, {}, "not finite"),
    ({"x": [1, 2]}, {"defaults": {"x": 3}}, "default 3 of parameter 'x' is not one of its values"),
    ({"x": [1, 2]}, {"defaults": {"y": 3}}, "defaults name unknown parameters"),
    ({"x": [1, 2]}, {"constants": {"x": 3}}, "same name as a parameter"),
    ({"x": [1, 2]}, {"constants": {"n": "big"}}, "must be an int or float"),
    ({"not valid": [1]}, {}, "must be a Python identifier"),
    ({}, {}, "at least one parameter"),
    ({"x": list(range(2**16)), "y": list(range(2**16)), "z": list(range(2**16)), "w": list(range(2**16))},
     {}, "does not fit in 64 bits"),
])
def test_bad_params_give_one_clear_error(params, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        Space(params, **kwargs)


@pytest.mark.parametrize(("constraint", "match"), [
    ("x * y < 4", r"unknown name 'y'.*known names: n, s, x"),
    ("x <", "syntax error"),
    ("x.real > 0", "attribute access"),
    ("x[0] > 0", "subscript"),
    ("s * 2 == 'aa'", "cannot be evaluated"),
    (42, "must be a string or a callable"),
])
def test_bad_constraints_give_one_clear_error(constraint, match) -> None:
    with pytest.raises(ConstraintError, match=match):
        Space({"x": [1, 2], "s": ["a", "b"]}, [constraint], constants={"n": 3})


def test_empty_space_names_the_constraint() -> None:
    with pytest.raises(ConstraintError, match=r"constraint 'x > 10' removed every remaining one"):
        Space({"x": [1, 2, 3], "y": [1, 2]}, ["x + y > 2", "x > 10"])
    with pytest.raises(ConstraintError, match=r"constraint 'n < 0' removed"):
        Space({"x": [1, 2]}, ["n < 0"], constants={"n": 1})
    with pytest.raises(ConstraintError, match="removed every remaining one"):
        Space({"x": [1, 2]}, [operator.not_])  # callable: not {...} is False for every config


def test_failing_callable_names_itself() -> None:
    def broken(config):
        return 1 // 0

    with pytest.raises(ConstraintError, match="broken raised ZeroDivisionError"):
        Space({"x": [1, 2]}, [broken])


def test_big_space_is_memory_bounded_and_exact() -> None:
    params = {"bx": [16, 32, 64, 128, 256, 512, 1024], "by": [1, 2, 4, 8, 16, 32], "tx": list(range(1, 17)),
              "ty": list(range(1, 17)), "sh": [0, 1]}
    constraints = ["bx * by <= 1024", "bx * by >= 64", "(bx * tx) % 64 == 0", "sh == 0 or bx * tx * by * ty * 4 <= 48 * 1024"]
    space = Space(params, constraints, chunk_rows=4096)
    checks = [lambda c: c["bx"] * c["by"] <= 1024, lambda c: c["bx"] * c["by"] >= 64,
              lambda c: (c["bx"] * c["tx"]) % 64 == 0,
              lambda c: c["sh"] == 0 or c["bx"] * c["tx"] * c["by"] * c["ty"] * 4 <= 48 * 1024]
    expected = reference(params, checks)
    assert len(space) == len(expected)
    assert space.config(len(space) // 2) == expected[len(expected) // 2]
    assert space.config(-1) == expected[-1]


def test_code_sorting_paths_agree() -> None:
    from adaptune.space.enumeration import decode_codes, sorted_codes

    rng = np.random.default_rng(1)
    codes = rng.choice(10**6, size=5000, replace=False).astype(np.int64)
    expected = np.sort(codes)
    np.testing.assert_array_equal(sorted_codes(codes, 10**6), expected)  # bitmap path
    np.testing.assert_array_equal(sorted_codes(codes, 2**40), expected)  # comparison-sort path
    sizes = [10, 100, 1000]
    table = decode_codes(expected, sizes)
    np.testing.assert_array_equal(np.ravel_multi_index(table.T, sizes), expected)


def test_compiled_expressions_accept_python_scalars() -> None:
    from adaptune.space.safe_expr import compile_vector

    fn, names = compile_vector("(n + block_size_x - 1) // block_size_x", None, "grid_div expression")
    value, bad = fn({"n": 1000, "block_size_x": 64})
    assert int(value) == 16 and bad is None and names == ["n", "block_size_x"]
    _, bad = fn({"n": 1000, "block_size_x": 0})
    assert bool(bad)


@pytest.mark.parametrize("method", ["hamming", "adjacent", "strictly-adjacent"])
def test_neighbour_scan_and_candidate_lookup_agree(method: str) -> None:
    from adaptune.space import neighbours as nb

    space = Space({"a": list(range(12)), "b": [1, 2, 4, 8, 16], "c": ["u", "v", "w"], "d": [0, 1, 2]},
                  ["(a * b) % 3 != 1", "c != 'w' or d > 0"])
    sizes = np.array([len(p) for p in space.params])
    strides = np.array([3 * 3 * 5, 3 * 3, 3, 1])
    for i in np.random.default_rng(2).choice(len(space), size=15, replace=False):
        via_scan = nb.scan(method, space.table, int(i))
        cand = nb.candidates(method, space.table[int(i)].astype(np.int64), sizes)
        via_lookup = nb.lookup(space.codes, np.sort(cand @ strides))
        assert via_scan.tolist() == via_lookup.tolist() == naive_neighbours(space, int(i), method)
