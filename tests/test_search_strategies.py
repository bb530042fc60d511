"""Every strategy through the ask/tell protocol on real Spaces and recorded Kernel Tuner caches."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from adaptune.search import STRATEGIES, Budget, Replay, make_strategy
from adaptune.space import Space

DATA = Path(__file__).resolve().parents[1] / "data"
ALL = sorted(STRATEGIES)


def mostly_failing_replay(small: bool = False) -> Replay:
    """A constrained space where ~80 % of the valid configurations fail (inf), with a smooth objective."""
    bx, by = ([1, 2, 4, 8, 16], [1, 2, 4]) if small else ([1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8, 16])
    space = Space({"bx": bx, "by": by, "t": [1, 2, 3, 4], "mode": ["a", "b", "c"]},
                  constraints=["bx * by <= 256"])
    values = np.empty(len(space))
    for i, c in enumerate(space.configs()):
        fails = (c["bx"] * c["t"]) % 3 != 0 and c["mode"] != "b"
        values[i] = math.inf if fails or (i % 7 in (1, 2, 3, 4)) else (
            1.0 + abs(math.log2(c["bx"] * c["by"]) - 6) + 0.3 * c["t"] + {"a": 0.0, "b": 0.5, "c": 1.0}[c["mode"]])
    return Replay(space, values, cost_seconds=np.full(len(space), 0.5), name="mostly_failing")


@pytest.fixture(scope="module")
def failing() -> Replay:
    return mostly_failing_replay()


@pytest.fixture(scope="module")
def failing_small() -> Replay:
    return mostly_failing_replay(small=True)


@pytest.fixture(scope="module")
def kt_small() -> Replay:
    return Replay.from_file(DATA / "kernel_tuner_tests" / "test_cache_file.json")


def test_mostly_failing_fixture_is_mostly_failing(failing: Replay, failing_small: Replay) -> None:
    assert np.mean(~np.isfinite(failing.values)) > 0.75
    assert np.mean(~np.isfinite(failing_small.values)) > 0.7


@pytest.mark.parametrize("name", ALL)
def test_proposes_only_valid_distinct_configurations_until_exhausted(name: str, failing_small: Replay) -> None:
    space = failing_small.space
    tr = failing_small.run(name, Budget(), seed=3)
    assert len(tr) == len(space)  # the whole space, once each, failures and all
    assert len(set(tr.indices.tolist())) == len(space)
    for i in tr.indices:
        assert space.is_valid(space.config(int(i)))
    assert tr.best == failing_small.optimum
    assert make_strategy(name, space, seed=3).ask() is not None  # a fresh strategy starts again


@pytest.mark.parametrize("name", ALL)
def test_is_reproducible_with_a_seed(name: str, failing: Replay) -> None:
    a = failing.run(name, Budget(max_evals=40), seed=11)
    b = failing.run(name, Budget(max_evals=40), seed=11)
    np.testing.assert_array_equal(a.indices, b.indices)


@pytest.mark.parametrize("name", ALL)
def test_respects_each_budget_kind(name: str, failing: Replay) -> None:
    assert len(failing.run(name, Budget(max_evals=17), seed=1)) == 17
    tr = failing.run(name, Budget(max_sim_seconds=10.0), seed=1)  # every evaluation costs 0.5 s
    assert len(tr) == 20 and tr.sim_seconds[-1] == pytest.approx(10.0)
    assert len(failing.run(name, Budget(max_seconds=0.0), seed=1)) == 0


@pytest.mark.parametrize("name", ALL)
def test_asks_ahead_without_repeating(name: str, failing: Replay) -> None:
    """The tuner asks several configurations before telling any (compile-ahead)."""
    s = make_strategy(name, failing.space, seed=5)
    seen: set[int] = set()
    for _ in range(12):
        batch = [s.ask() for _ in range(4)]
        assert None not in batch and not seen & set(batch) and len(set(batch)) == 4
        seen |= set(batch)
        for i in batch:
            s.tell(i, failing.values[i])


@pytest.mark.parametrize("name", ALL)
def test_small_recorded_cache(name: str, kt_small: Replay) -> None:
    tr = kt_small.run(name, Budget(max_evals=100), seed=0)
    assert len(tr) == len(kt_small.space) == 15 and tr.best == kt_small.optimum


def test_bad_input_gets_one_clear_error(failing: Replay) -> None:
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        make_strategy("nope", failing.space)
    with pytest.raises(ValueError, match="no option"):
        make_strategy("random", failing.space, colour="red")
    with pytest.raises(ValueError, match="max_evals"):
        Budget(max_evals=-1)
    s = make_strategy("random", failing.space, seed=0)
    with pytest.raises(ValueError, match="never asked"):
        s.tell(0, 1.0)


def test_model_based_strategies_beat_random_on_a_smooth_space() -> None:
    """A real signal, not a formality: on a smooth 2-D bowl the surrogates find the optimum fast."""
    space = Space({"x": list(range(30)), "y": list(range(30))})
    values = np.array([1.0 + (c["x"] - 21) ** 2 + 0.5 * (c["y"] - 7) ** 2 for c in space.configs()])
    rp = Replay(space, values, name="bowl")
    random_mean = np.mean([rp.run("random", Budget(max_evals=50), seed=s).best for s in range(20)])
    assert random_mean > 3.0
    for name in ("bayes", "forest", "auto", "greedy_ils"):
        found = [rp.run(name, Budget(max_evals=50), seed=s).best for s in range(2)]
        assert np.mean(found) < 2.0, (name, found, random_mean)


def test_auto_value_features_and_modes_describe_the_space() -> None:
    from adaptune.search.auto import mode_labels, value_features

    space = Space({"bx": [16, 32, 48, 64], "shmem": [0, 1], "ro": [0, 1], "name": ["a", "b", "c"]},
                  constraints=["not (shmem == 1 and ro == 1)"])
    feats = value_features(space)  # only bx qualifies: log2, power of two, alignment
    bx = np.asarray([c["bx"] for c in space.configs()])
    assert feats.shape == (len(space), 3)
    np.testing.assert_array_equal(feats[:, 1], np.isin(bx, [16, 32, 64]))
    np.testing.assert_array_equal(feats[:, 2], np.select([bx == 48, bx == 32, bx == 64], [4, 5, 6], 4))
    modes = mode_labels(space)  # three valid combinations of the two switches
    pairs = {(c["shmem"], c["ro"]) for c in space.configs()}
    assert sorted(set(modes.tolist())) == [0, 1, 2] and len(pairs) == 3
    for m in range(3):
        assert len({(c["shmem"], c["ro"]) for c, k in zip(space.configs(), modes, strict=True) if k == m}) == 1


def test_auto_stratified_global_asks_visit_every_mode_in_turn() -> None:
    from adaptune.search.auto import mode_labels

    space = Space({"x": list(range(12)), "y": list(range(8)), "a": [0, 1], "b": [0, 1]})
    t = np.asarray([[c["x"], c["y"], c["a"], c["b"]] for c in space.configs()], dtype=float)
    values = 1.0 + np.abs(t[:, 0] - 3) + np.abs(t[:, 1] - 5) + 20.0 * t[:, 2]  # mode a=1 looks hopeless
    strategy = make_strategy("auto", space, seed=3, local_every=0, stratify_every=1, n_initial=6)
    modes = mode_labels(space)
    asked = []
    for _ in range(6 + 8):
        i = strategy.ask()
        strategy.tell(i, float(values[i]))
        asked.append(int(modes[i]))
    after_design = asked[6:]
    assert all(len(set(after_design[k:k + 4])) == 4 for k in (0, 4))  # each run of 4 asks covers 4 modes


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_strategy_that_says_it_is_not_adaptive_proposes_the_same_when_asked_far_ahead(name: str) -> None:
    """The tuner asks a non-adaptive strategy many configurations ahead (to compile them early): that must not
    change what it proposes; an adaptive one may change, so asking it ahead stays bounded."""
    space = Space({"x": list(range(12)), "y": list(range(12))})
    value = lambda i: float((i * 7919) % 97)  # noqa: E731 - a fixed objective per index

    def interleaved() -> list[int]:
        s, out = make_strategy(name, space, seed=3), []
        while len(out) < 40 and (i := s.ask()) is not None:
            s.tell(i, value(i))
            out.append(i)
        return out

    def ahead() -> list[int]:
        s, out = make_strategy(name, space, seed=3), []
        while len(out) < 40 and (i := s.ask()) is not None:
            out.append(i)
        for i in out:
            s.tell(i, value(i))
        return out

    if not STRATEGIES[name].adaptive:
        assert ahead() == interleaved()
    assert len(set(ahead())) == len(ahead())  # never a repeat either way
