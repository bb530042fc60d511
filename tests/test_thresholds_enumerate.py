"""Threshold trees, the enumerators and the brute-force oracle (seed 003, §3.1-3.4)."""

from __future__ import annotations

import math
import random

import pytest

from adaptune.thresholds.model import (
    ThresholdModel,
    count_seed,
    dedup,
    enumerate_exact,
    enumerate_seed,
    naive_space_size,
    oracle_signatures,
)
from adaptune.thresholds.tree import (
    MultiParentError,
    ThresholdDecl,
    ThresholdSyntaxError,
    build_forest,
    format_print_sizes,
    parse_print_sizes,
    render_tree,
)

SEED_LISTING = """\
main.suff_intra_par_5 (threshold (!main.suff_outer_par_4))
main.suff_outer_par_4 (threshold ())
main.suff_outer_par_6 (threshold (!main.suff_outer_par_4 !main.suff_intra_par_5))
"""

MATMUL = [ThresholdDecl("t0"), ThresholdDecl("t1", (("t0", False),)),
          ThresholdDecl("t2", (("t0", False), ("t1", False))),
          ThresholdDecl("t3", (("t0", False), ("t1", False), ("t2", False)))]


def matmul_flow(n: int, m: int, p: int) -> dict[str, int]:
    return {"t0": n, "t1": p, "t2": n * p, "t3": m}


def test_parse_seed_listing_builds_the_chain() -> None:
    decls = parse_print_sizes(SEED_LISTING + "main.group_size_7 (group_size)\n")
    assert [d.name for d in decls] == ["main.suff_intra_par_5", "main.suff_outer_par_4", "main.suff_outer_par_6"]
    assert decls[2].deps == (("main.suff_outer_par_4", False), ("main.suff_intra_par_5", False))
    root = build_forest(decls)
    (top,) = root.children
    assert top.name == "main.suff_outer_par_4" and top.outcome is None
    (mid,) = top.children
    assert (mid.name, mid.outcome) == ("main.suff_intra_par_5", False)
    (low,) = mid.children
    assert (low.name, low.outcome) == ("main.suff_outer_par_6", False)
    text = render_tree(root)
    assert text.splitlines()[0] == "nullroot" and "[F] main.suff_outer_par_6" in text
    assert parse_print_sizes(format_print_sizes(decls)) == decls


@pytest.mark.parametrize("bad", ["main.x (threshold (main.y)", "main.x threshold ()", "main.x (threshold (!))",
                                 "x (threshold ())\nx (threshold ())", "x (threshold (x))"])
def test_parse_rejects_bad_lines(bad: str) -> None:
    with pytest.raises(ThresholdSyntaxError):
        parse_print_sizes(bad)


def test_undeclared_dependency_and_cycle_are_refused() -> None:
    with pytest.raises(ThresholdSyntaxError, match="undeclared"):
        build_forest(parse_print_sizes("a (threshold (b))"))
    with pytest.raises(ThresholdSyntaxError, match="cycle"):
        build_forest(parse_print_sizes("a (threshold (b))\nb (threshold (a))"))


def test_multi_parent_refused_or_duplicated() -> None:
    decls = parse_print_sizes("a (threshold ())\nb (threshold ())\nc (threshold (a !b))\nd (threshold (a !b c))")
    with pytest.raises(MultiParentError, match="several direct parents"):
        build_forest(decls)
    root = build_forest(decls, multi_parent="duplicate")
    copies = [n for n in root.walk() if n.name == "c"]
    assert {(n.outcome) for n in copies} == {True, False} and len(copies) == 2
    assert all([ch.name for ch in n.children] == ["d"] for n in copies)


def test_seed_worked_example() -> None:
    """t = [10,20,30,40], n = 20, p = 30, m = 50: t0 <= n is true, and t0 = 11 behaves the same."""
    model = ThresholdModel(MATMUL, {"d": [matmul_flow(20, 50, 30)]})
    base = {"t0": 10, "t1": 20, "t2": 30, "t3": 40}
    sig = model.signature(base)
    assert sig == (((1, 0, 0, 0),),)  # only t0 compared, true: V0
    assert model.signature({**base, "t0": 11}) == sig
    assert model.signature({**base, "t0": 21}) != sig  # 21 > n: false, t1 = 20 <= p = 30: V1
    assert model.signature({**base, "t0": 21})[0][0][:2] == (2, 1)
    assert model.candidates() == {"t0": [20, 21], "t1": [30, 31], "t2": [600, 601], "t3": [50, 51]}
    combos = enumerate_seed(model.forest, model.candidates())
    assert len(combos) == count_seed(model.forest, model.candidates()) == 5  # V0..V4
    assert len({model.signature(c) for c in combos}) == 5


def test_naive_space_arithmetic() -> None:
    assert naive_space_size(4) == 2**60 == 1152921504606846976
    assert f"{naive_space_size(4):.3e}" == "1.153e+18"


def _random_decls(rng: random.Random, n: int) -> list[ThresholdDecl]:
    decls: list[ThresholdDecl] = []
    for i in range(n):
        if not decls or rng.random() < 0.25:
            decls.append(ThresholdDecl(f"t{i}"))
            continue
        parent = rng.choice(decls)
        decls.append(ThresholdDecl(f"t{i}", (*parent.deps, (parent.name, rng.random() < 0.5))))
    return decls


def _random_model(rng: random.Random) -> ThresholdModel:
    decls = _random_decls(rng, rng.randint(1, 6))
    datasets = {}
    for d in range(rng.randint(1, 3)):
        flows = []
        for _ in range(rng.choice([1, 1, 2, 3])):  # more than one pass: a loop with changing values
            flows.append({x.name: rng.randint(1, 7) for x in decls if rng.random() < 0.9})
        datasets[f"d{d}"] = flows
    return ThresholdModel(decls, datasets)


def test_enumerators_match_oracle_on_random_forests() -> None:
    rng = random.Random(11)
    checked = multi_child = loops = 0
    while checked < 1000:
        model = _random_model(rng)
        cands = model.candidates()
        if math.prod(len(v) for v in cands.values()) > 1500:
            continue  # keep the brute force fast; small grids still hold every tree shape
        truth = oracle_signatures(model)
        seed = enumerate_seed(model.forest, cands)
        assert len(seed) == count_seed(model.forest, cands)
        assert {model.signature(a) for a in seed} == truth  # every behaviour reached, nothing foreign
        exact = enumerate_exact(model)
        exact_sigs = [model.signature(a) for a in exact]
        assert len(exact_sigs) == len(set(exact_sigs)) == len(truth)  # nothing duplicated
        assert set(exact_sigs) == truth
        assert len(dedup(model, seed)) == len(truth)
        for a in exact:  # every value is one of the global candidates
            assert all(v in cands[k] for k, v in a.items())
        checked += 1
        multi_child += any(len(n.child_groups()[0]) > 1 or len(n.child_groups()[1]) > 1
                           for n in model.forest.walk()) or len(model.forest.children) > 1
        loops += any(len(f) > 1 for f in model.datasets.values())
    assert multi_child > 200 and loops > 200


def test_duplicated_subtree_still_covers_every_behaviour() -> None:
    rng = random.Random(3)
    for _ in range(150):
        decls = [ThresholdDecl("a"), ThresholdDecl("b"), ThresholdDecl("x", (("b", False),)),
                 ThresholdDecl("c", (("a", rng.random() < 0.5), ("b", rng.random() < 0.5))),
                 ThresholdDecl("e", (("a", True),))]
        decls.append(ThresholdDecl("d", (*decls[3].deps, ("c", rng.random() < 0.5))))
        datasets = {f"d{i}": [{x.name: rng.randint(1, 4) for x in decls}] for i in range(rng.randint(1, 3))}
        model = ThresholdModel(decls, datasets, multi_parent="duplicate")
        truth = oracle_signatures(model)
        seed = enumerate_seed(model.forest, model.candidates())
        assert {model.signature(a) for a in seed} == truth
        assert len(dedup(model, seed)) == len(truth)


def test_candidate_space_is_the_seed_enumeration() -> None:
    """adaptune's strategies search a Space whose valid configurations are the seed's combinations."""
    from adaptune.thresholds.tuners import candidate_space

    rng = random.Random(5)
    done = 0
    while done < 60:
        model = _random_model(rng)
        cands = model.candidates()
        if math.prod(len(v) for v in cands.values()) > 1500:
            continue
        space, alias = candidate_space(model)
        back = {v: k for k, v in alias.items()}
        assert len(space) == count_seed(model.forest, cands)
        sigs = {model.signature({back[k]: v for k, v in c.items()}) for c in space.configs()}
        assert sigs == oracle_signatures(model)
        done += 1
