"""TunablePrecision arguments and AccuracyObserver (Kernel Tuner's kernel_tuner.accuracy, and adaptune's spelling)."""

from __future__ import annotations

import numpy as np
import pytest

import adaptune
from adaptune.accuracy import AccuracyObserver, Tunable, TunablePrecision, error_metric_from_name
from adaptune.integrations.kernel_tuner import run_kernel, tune_kernel
from adaptune.integrations.kt_args import tunable_argument

# the precision is a tuning parameter: float_type is #defined to float or double
VECTOR_ADD_T = """
__kernel void vector_add(int n, __global const float_type *left, __global const float_type *right,
                         __global float_type *output) {
    int i = get_global_id(0);
    if (i < n) {
        output[i] = left[i] + right[i];
    }
}
"""


def precision_args(cls, size=4000):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(size), rng.standard_normal(size)
    args = [np.int32(size), cls("float_type", a, ["float", "double"]), cls("float_type", b, ["float", "double"]),
            cls("float_type", np.zeros(size), ["float", "double"])]
    return size, args, [None, None, None, a + b]


def tune_precisions(size, args, answer, observers):
    results, _ = tune_kernel("vector_add", VECTOR_ADD_T, size, args,
                             {"block_size_x": [32, 64], "float_type": ["float", "double"]},
                             answer=answer, observers=observers, iterations=2, quiet=True)
    return {(r["block_size_x"], r["float_type"]): r for r in results}


def test_each_configuration_runs_in_its_precision_and_reports_its_error(kt_env):
    size, args, answer = precision_args(TunablePrecision)
    rows = tune_precisions(size, args, answer, [AccuracyObserver("RMSE", "error_rmse"),
                                                AccuracyObserver("MRE", "error_relative")])
    a, b = args[1].array, args[2].array
    in_float = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float64)
    for block in (32, 64):
        single, double = rows[block, "float"], rows[block, "double"]
        assert "__error__" not in single and "__error__" not in double  # observed, not checked against atol
        assert single["error_rmse"] == pytest.approx(np.sqrt(np.mean((answer[3] - in_float) ** 2)), rel=1e-6)
        assert single["error_relative"] > 0 and double["error_rmse"] == 0 and double["error_relative"] == 0


def test_kernel_tuners_own_classes_are_recognised_by_their_shape(kt_env):
    accuracy = pytest.importorskip("kernel_tuner.accuracy")
    size, args, answer = precision_args(accuracy.TunablePrecision)
    choice = tunable_argument(args[1], 1)
    assert choice.options is None and choice.base.dtype == np.float64  # only the widest travels; casts where used
    rows = tune_precisions(size, args, answer, [accuracy.AccuracyObserver("max abs", "worst")])
    assert rows[32, "float"]["worst"] > 0 and rows[32, "double"]["worst"] == 0


def test_a_tunable_picks_its_array_and_run_kernel_uses_it(kt_env):
    x = np.arange(8, dtype=np.float32)
    layouts = Tunable("scale_by", {1: x, 2: 2 * x})
    out = run_kernel("vector_add", VECTOR_ADD_T.replace("float_type", "float"), 8,
                     [np.int32(8), layouts, layouts, np.zeros(8, np.float32)], {"block_size_x": 8, "scale_by": 2},
                     lang="OpenCL")
    np.testing.assert_allclose(out[3], 4 * x)
    by_expression = tunable_argument(Tunable("scale_by * 2", {2: x, 4: 2 * x}), 0)  # parsed, never eval-ed
    assert by_expression.pick({"scale_by": 2}) == 4
    with pytest.raises(KeyError, match="should be one of: 2, 4"):
        by_expression.pick({"scale_by": 3})
    assert adaptune.accuracy.TunablePrecision is TunablePrecision  # import adaptune as kernel_tuner: kernel_tuner.accuracy


def test_error_metric_names_as_kernel_tuner_reads_them():
    a, b = np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 5.0])
    assert error_metric_from_name("RMSE")(a, b) == pytest.approx(np.sqrt(2 / 3))
    assert error_metric_from_name("mean relative error")(a, b) == pytest.approx((0.5 + 0.25) / 3)
    assert error_metric_from_name("max_abs")(a, b) == 1.0 and error_metric_from_name("max rel")(a, b) == 0.5
    with pytest.raises(ValueError, match="invalid error metric provided: nonsense"):
        error_metric_from_name("nonsense")
