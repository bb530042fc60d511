"""Labels from several rounds: every working variant of an input is timed each round, its label is the median,
and a variant that fails its check stays unlabelled (real sort kernels on PoCL, a small input)."""

from __future__ import annotations

import statistics

import pytest

pytest.importorskip("pyopencl")

from adaptune.kernels import inputs  # noqa: E402
from benchmarks.gpu_suite.run import BENCHES, SETS, Runtime, measure_input, shrink  # noqa: E402


def test_three_rounds_give_each_variant_the_median_of_its_rounds():
    rt = Runtime("opencl")
    bench = BENCHES["sort"](rt)
    make, _, _ = SETS["sort"]
    train, _ = inputs.train_test(make, 1, 1, 7)
    spec = shrink(train, 0.01)[0]
    record = measure_input(bench, spec, rt.timer(3), rounds=3)
    rounds = record["times_ms_by_round"]
    working = [v for v, s in record["status"].items() if s == "ok"]
    assert len(rounds) == 3 and working
    for v in working:
        assert record["times_ms"][v] == statistics.median(r[v] for r in rounds)
    for v, s in record["status"].items():
        if s != "ok":
            assert record["times_ms"][v] is None and all(v not in r for r in rounds)
    assert "times_ms_by_round" not in measure_input(bench, spec, rt.timer(3))
