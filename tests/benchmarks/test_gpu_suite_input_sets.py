"""More training inputs leave a benchmark's test inputs as they were (a relabelled run is judged on the same ones)."""

from __future__ import annotations

import pytest

from benchmarks.gpu_suite.run import SETS, input_sets


@pytest.mark.parametrize("name", sorted(SETS))
def test_train_scale_adds_training_inputs_and_keeps_the_test_inputs(name):
    train, test = input_sets(name, 1.0, 2024)
    more_train, same_test = input_sets(name, 1.0, 2024, train_scale=3.0)
    assert same_test == test
    assert len(more_train) == round(3 * len(train))
    assert not set(more_train) & set(test)
