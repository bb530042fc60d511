"""launch_config and its Space hooks (adaptune.predict.predictor), on the committed H100 table."""

from pathlib import Path

import numpy as np
import pytest

from adaptune.predict import SHAPES, CorpusError, first_config, launch_config, with_predicted_default
from adaptune.predict.corpus import params_from_source
from adaptune.predict.predictor import PredictDataError
from adaptune.space import Space

ROOT = Path(__file__).resolve().parents[1]
VECTOR_ADD = (ROOT / "examples" / "vector_add" / "kernel.cu").read_text()
MATMUL = (ROOT / "examples" / "matmul" / "kernel.cu").read_text()


def test_params_from_source_reads_launch_bounds_signatures():
    params = params_from_source(VECTOR_ADD, "vector_add")
    assert [p.name for p in params] == ["c", "a", "b", "n"]
    assert [p.pointer for p in params] == [True, True, True, False]
    with pytest.raises(CorpusError, match="no __global__"):
        params_from_source(VECTOR_ADD, "missing")


def test_first_config_picks_the_nearest_thread_count_and_keeps_other_params():
    space = Space({"block_size_x": [8, 16, 32, 64], "block_size_y": [1, 2, 4, 8], "tile": [1, 2]},
                  ["block_size_x * block_size_y >= 32"], defaults={"block_size_x": 16, "block_size_y": 4, "tile": 2})
    assert first_config(space, (256, 1)) == {"block_size_x": 64, "block_size_y": 4, "tile": 2}
    assert first_config(space, (16, 16)) == {"block_size_x": 32, "block_size_y": 8, "tile": 2}
    seeded = with_predicted_default(space, (64, 1))
    assert seeded.default_config() == {"block_size_x": 64, "block_size_y": 1, "tile": 2}
    with pytest.raises(ValueError, match="block-size"):
        first_config(Space({"tile": [1, 2]}), (64, 1))


def test_launch_config_predicts_an_ls_cat_shape_from_source():
    shape = launch_config(VECTOR_ADD, "vector_add", size=1000, use_ptx=False)
    assert shape[1] == 1 and shape[0] % 64 == 0 and 64 <= shape[0] <= 1024  # 1-D kernel: (threads, 1)
    shape2 = launch_config(MATMUL, "matmul_kernel", size=512, use_ptx=False)
    assert shape2 in SHAPES


def test_launch_config_without_data_names_the_missing_file(tmp_path):
    with pytest.raises(PredictDataError, match="features.csv.gz"):
        launch_config(VECTOR_ADD, "vector_add", data_dir=tmp_path, use_ptx=False)


def test_launch_prior_ranks_a_space_for_warm():
    from adaptune.predict import launch_prior
    from adaptune.search.base import make_strategy

    space = Space({"block_size_x": [32, 64, 128, 256, 512, 1024], "tile_size_x": [1, 2, 4, 8]})
    prior = launch_prior(space, VECTOR_ADD, "vector_add", size=1000, use_ptx=False)
    assert prior.shape == (len(space),) and np.isfinite(prior).all()
    first = make_strategy("warm", space, seed=0, prior=prior).ask()
    assert first == int(np.argmin(prior))
    assert space.config(first)["tile_size_x"] in (2, 4)  # the work rule: the middle of 1..8
