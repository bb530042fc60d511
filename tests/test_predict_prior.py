"""The launch-configuration model as a prior for the ``warm`` strategy (adaptune.predict.prior)."""

import numpy as np
import pytest

from adaptune.predict import SHAPES
from adaptune.predict.prior import space_prior, work_penalty
from adaptune.search.base import make_strategy
from adaptune.space import Space


def _perf(best: tuple[int, int], second: tuple[int, int]) -> np.ndarray:
    p = np.full(len(SHAPES), 0.5)
    p[SHAPES.index(best)] = 1.0
    p[SHAPES.index(second)] = 0.9
    p[SHAPES.index((16, 16))] = max(p[SHAPES.index((16, 16))], 1.0 if best == (256, 1) else 0.5)
    return p


def test_prior_follows_the_shape_ranking_and_the_work_rule_breaks_ties():
    space = Space({"block_size_x": [32, 64, 256, 1024], "tile_size_x": [1, 2, 4, 8, 16], "use_shared": [0, 1]})
    prior = space_prior(space, _perf((256, 1), (1024, 1)), two_d=False, work_weight=0.1)
    configs = list(space.configs())
    top = configs[int(np.argmin(prior))]
    assert top["block_size_x"] == 256 and top["tile_size_x"] == 4  # geometric middle of 1..16
    by_block = {b: min(p for p, c in zip(prior, configs, strict=True) if c["block_size_x"] == b) for b in (32, 64, 256, 1024)}
    assert by_block[256] < by_block[1024] < by_block[64]
    assert np.allclose(work_penalty(Space({"block_size_x": [32, 64]})), 0.0)
    with pytest.raises(ValueError, match="block_size_x"):
        space_prior(Space({"tile": [1, 2]}), _perf((256, 1), (1024, 1)), two_d=False)


def test_two_d_prior_uses_aspect_and_warm_asks_the_top_configuration_first():
    space = Space({"block_size_x": [8, 16, 32, 64], "block_size_y": [1, 4, 8, 16]},
                  ["32 <= block_size_x * block_size_y <= 1024"])
    prior = space_prior(space, _perf((16, 16), (32, 32)), two_d=True, work_weight=0.0)
    configs = list(space.configs())
    strategy = make_strategy("warm", space, seed=1, prior=prior)
    first = configs[strategy.ask()]
    assert (first["block_size_x"], first["block_size_y"]) == (16, 16)


def test_first_pick_turns_optimisation_switches_on_but_keeps_the_block_shape_first():
    from adaptune.predict.prior import first_pick, switch_penalty

    space = Space({"block_size_x": [64, 256, 1024], "tile_size_x": [1, 2, 4, 8, 16], "use_shmem": [0, 1],
                   "read_only": [0, 1], "mode": [0, 1]})
    perf = _perf((256, 1), (1024, 1))
    top = first_pick(space, perf, two_d=False)
    assert top == {"block_size_x": 256, "tile_size_x": 4, "use_shmem": 1, "read_only": 1, "mode": 0}
    # without the switch rule the switches tie and the first enumerated value (0) wins
    plain = space.config(int(np.argmin(space_prior(space, perf, two_d=False))))
    assert plain["use_shmem"] == 0 and plain["block_size_x"] == 256
    pen = switch_penalty(space)
    assert set(np.round(pen, 3)) == {0.0, 0.5, 1.0}  # 'mode' is not an optimisation switch
    assert np.allclose(switch_penalty(Space({"block_size_x": [32, 64], "use_x": [1]})), 0.0)
