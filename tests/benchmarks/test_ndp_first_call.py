"""The main NDP run's first-call evaluation (benchmarks/ndp/first_call.py) on PoCL: rules fitted on the training
records, fractions of oracle of their picks over the test records, and the live protocol at the median test input,
whose landed call returns the full rule's pick of that input's own features."""

from __future__ import annotations

import numpy as np
import pytest

from adaptune.kernels import distilled, inputs
from adaptune.kernels.device import OpenCLDevice
from benchmarks.ndp import first_call
from benchmarks.ndp.run import row_sums

LABELS = {"scalar": ("independent.sequential", {"block_size": 64, "enable_unroll": 0}),
          "block": ("independent.cooperative", {"block_size": 64, "execution_resource": "block",
                                                "logical_warp_size": 32, "block_reduce_algo": "tree"})}
FAMILIES = ("constant_row", "power_law", "arrow", "uniform_random")


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


def test_evaluate_reports_the_rules_picks_and_the_landed_call_takes_the_full_rules_pick(dev):
    prog = row_sums.generate(dev)
    made = [inputs.sparse_matrix(FAMILIES[i % 4], 300 + 50 * i, 6.0, seed=i) for i in range(14)]
    arrays = [(dev.asarray(data), dev.asarray(indptr)) for indptr, _, data, _ in made]

    def record(args):  # times standing in for a device's: scalar slows down with the longest row, block does not
        vec = prog.features(*args)
        return {"features": vec, "gen_ms": {"scalar": 1.0 + vec[3], "block": 3.0}}

    result = {"names": list(LABELS), "records": {"train": [record(a) for a in arrays[:8]],
                                                 "test": [record(a) for a in arrays[8:]]}}
    out = first_call.evaluate(prog, LABELS, result, lambda i: arrays[8 + i], dev.synchronize, repeats=3)
    labels, xtr, ttr, xte, tte = first_call.matrices(result)
    fit = first_call.fit_rules(labels, xtr, ttr, prog.n_host_features)
    assert out["full_rule"] == "tree" and fit["full_cv"] >= first_call.TARGET  # the spread decides: a tree does
    chosen = [distilled.predict(fit["full"], r) for r in xte]
    assert out["mean_fraction_of_oracle_landed"] == pytest.approx(first_call.fraction(tte, labels, chosen).mean())
    med = out["median_test_index"]
    assert out["label_landed"] == distilled.predict(fit["full"], prog.features(*arrays[8 + med]))
    assert out["landed_share_of_repeats"] == 1.0 and len(out["samples"]) == 3
    assert out["run_ms_landed"] == tte[med, labels.index(out["label_landed"])]
    assert out["first_call_share_landed"] == pytest.approx(out["first_call_us_landed"]["p50"] * 1e-3 / out["run_ms_landed"])
    assert np.isfinite(out["warm_share_not_landed"]) and "control" not in out
