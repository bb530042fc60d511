"""The seed's launch-configuration score and its baselines (adaptune.predict.metric)."""

import numpy as np
import pytest

from adaptune.predict import metric
from adaptune.predict.corpus import SHAPE_1024, SHAPES


def test_thesis_figure_4_7_worked_example_scores_0_948():
    # Fig. 4.7 of the LS-CAT thesis: columns diff_13 (896) and diff_15 (1024); output 1 picks 1024.
    perf = np.array([[0.94, 0.99], [0.96, 0.92], [0.95, 0.94], [0.93, 0.98], [0.92, 0.89]])
    output = np.array([1, 0, 1, 0, 0])
    target = np.array([1, 0, 0, 1, 0])
    assert (output == target).mean() == pytest.approx(0.6)  # "accuracy of the model ... 60 percent"
    assert metric.score(perf, output) == pytest.approx(0.948)
    assert metric.score(perf, metric.always(perf, 1)) == pytest.approx(0.944)


def test_relative_performance_and_failures():
    times = np.array([[2.0, 1.0, np.nan], [4.0, 8.0, 2.0]])
    perf = metric.relative_performance(times)
    np.testing.assert_allclose(perf, [[0.5, 1.0, 0.0], [0.5, 0.25, 1.0]])
    assert metric.score(perf, [1, 2]) == 1.0           # oracle
    assert metric.score(perf, [2, 0]) == pytest.approx(0.25)  # a failed shape scores 0
    assert metric.random_score(perf) == pytest.approx(perf.mean())
    assert metric.geomean_ratio(perf, [0, 0]) == pytest.approx(0.5)
    assert metric.geomean_ratio(perf, [2, 0]) == 0.0
    assert metric.most_common_best(perf) == 1 or metric.most_common_best(perf) == 2


def test_score_rejects_misaligned_choices():
    with pytest.raises(ValueError, match="samples"):
        metric.score(np.ones((3, 2)), [0, 1])


def test_occupancy_block_maps_to_the_ls_cat_shape_below():
    assert SHAPES[metric.shape_for_block_size(1024)] == (1024, 1)
    assert SHAPES[metric.shape_for_block_size(672)] == (640, 1)
    assert SHAPES[metric.shape_for_block_size(32)] == (64, 1)
    assert metric.shape_for_block_size(None) == SHAPE_1024
    assert len(SHAPES) == 20 and SHAPES[:4] == ((8, 8), (16, 16), (24, 24), (32, 32))
