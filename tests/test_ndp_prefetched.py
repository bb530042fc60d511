"""First-call selection of an NDP program on PoCL with its features prefetched at fix time: the features
land on the host (an OpenCL event callback) with the full rule's pick, the gate takes that pick once it is
there and the host rule over sizes before; the outputs are the same either way."""

import time

import numpy as np
import pytest

from adaptune.adaptive.models import fit_model
from adaptune.kernels import distilled, inputs
from adaptune.kernels.device import OpenCLDevice
from adaptune.lang import ndp
from adaptune.lang.ndp.prefetched import PrefetchedSelector
from adaptune.lang.ndp.program import SAMPLE_ROWS, _spread_of_offsets, _spread_of_sample
from benchmarks.ndp.run import exclusive_scan, row_sums  # the benchmark's computations (row sums, a scan)

LABELS = {"scalar": ("independent.sequential", {"block_size": 64, "enable_unroll": 0}),
          "block": ("independent.cooperative", {"block_size": 64, "execution_resource": "block",
                                                "logical_warp_size": 32, "block_reduce_algo": "tree"})}
# host rule: sizes only, always "scalar"; full rule: split on the longest row (feature 3) -> "block"
HOST = {"leaf": "scalar"}
FULL = {"feature": 3, "threshold": 2.0, "low": {"leaf": "scalar"}, "high": {"leaf": "block"}}


@pytest.fixture(scope="module")
def dev():
    return OpenCLDevice()


def _ragged(dev, family, seed):
    indptr, _, data, _ = inputs.sparse_matrix(family, 600, 8.0, seed=seed)
    return (dev.asarray(data), dev.asarray(indptr)), np.add.reduceat(data, indptr[:-1]) * (np.diff(indptr) > 0)


def _wait(pending):
    t0 = time.monotonic()
    while pending.value is None and time.monotonic() - t0 < 10:
        time.sleep(0.001)
    return pending.value


def test_the_gate_takes_the_prefetched_pick_once_it_landed_and_the_host_rule_before(dev):
    prog = row_sums.generate(dev)
    sel = PrefetchedSelector(prog, LABELS, HOST, FULL)
    args, ref = _ragged(dev, "arrow", 3)
    assert not sel.used_features(*args) and sel.select(*args) == "scalar"  # nothing fixed: sizes only
    host_out = dev.to_host(sel(*args))
    pending = sel.fix(*args)
    assert _wait(pending) == "block"  # finished on the host by the event's callback, the pick included
    assert sel.used_features(*args) and sel.select(*args) == "block"
    vec = prog.features(*args)
    assert vec[3] > 2.0  # the rule's reason, from the same features computed without prefetching
    np.testing.assert_allclose(dev.to_host(sel(*args)), host_out, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(host_out, ref, rtol=1e-4, atol=1e-3)
    # other arrays with the same sizes are not the fixed ones: the host rule again; forget drops the pick
    other, _ = _ragged(dev, "arrow", 3)
    assert not sel.used_features(*other) and sel.select(*other) == "scalar"
    sel.forget(*args)
    assert sel.select(*args) == "scalar"


def test_prefetched_features_equal_the_computed_ones_and_a_model_rule_picks_at_finish(dev):
    prog = row_sums.generate(dev)
    cases = [_ragged(dev, f, s)[0] for f, s in (("constant_row", 1), ("power_law", 2), ("arrow", 3))]
    for args in cases:
        assert _wait(prog.prefetch_features(*args)) == pytest.approx(prog.features(*args))
    # a fitted model as the full rule: its pick is made when the features land, equal to the model's own
    x = np.array([prog.features(*a) for a in cases] * 2)
    costs = np.array([[1.0, 2.0], [2.0, 1.0], [3.0, 1.0]] * 2)
    model = fit_model("knn", x, costs)
    sel = PrefetchedSelector(prog, LABELS, HOST, model.params)
    for args, row in zip(cases, x, strict=False):
        assert _wait(sel.fix(*args)) == list(LABELS)[int(model.predict(row[None])[0])]


def test_sizes_only_programs_pick_at_fix_time_and_bad_rules_are_refused(dev):
    prog = exclusive_scan.generate(dev)
    variant = prog.default_variant
    small = {"block_size": 64, "grain_size": 2, "block_scan_algo": "blelloch"}
    labels = {"a": (variant, small), "b": (variant, dict(small, block_size=128))}
    tree = {"feature": 0, "threshold": 10.0, "low": {"leaf": "a"}, "high": {"leaf": "b"}}
    sel = PrefetchedSelector(prog, labels, tree, tree)
    x = dev.asarray(np.arange(5000, dtype=np.int32) % 3)
    assert prog.n_host_features == 1 and sel.select(x) == "b"  # log2(5001) > 10: from the size alone
    assert sel.fix(x).value == "b"  # nothing on the device to wait for
    np.testing.assert_array_equal(dev.to_host(sel(x))[1:], np.cumsum(np.arange(5000) % 3)[:-1])
    with pytest.raises(ndp.NdpError, match="splits on feature 3"):
        PrefetchedSelector(prog, labels, tree, FULL)
    with pytest.raises(ndp.NdpError, match="not given: block"):
        PrefetchedSelector(row_sums.generate(dev), {"scalar": LABELS["scalar"]}, HOST, FULL)


def test_a_pick_that_lands_after_forget_is_not_taken(dev):
    prog = row_sums.generate(dev)
    sel = PrefetchedSelector(prog, LABELS, HOST, FULL)
    args, _ = _ragged(dev, "arrow", 4)
    pending = sel.fix(*args)
    sel.forget(*args)  # before or after the callback: either way the pick must not come back
    assert _wait(pending) == "block"  # the callback still ran and made its pick
    assert not sel.used_features(*args) and sel.select(*args) == "scalar"
    assert _wait(sel.fix(*args)) == "block" and sel.select(*args) == "block"  # fixed again: taken


def test_the_cost_models_student_picks_as_the_model_at_landing_and_the_outputs_are_equal(dev):
    prog = row_sums.generate(dev)
    cases = [_ragged(dev, f, s) for f, s in (("constant_row", 1), ("arrow", 3), ("power_law", 2))]
    x = np.array([prog.features(*a) for a, _ in cases])
    assert (x[:, 3] > 2.0).any() and (x[:, 3] <= 2.0).any()  # both labels win somewhere
    rng = np.random.default_rng(0)  # training rows around them: "block" wins where the longest row is long
    xt = np.repeat(x, 8, axis=0) + rng.normal(0, 0.05, (24, x.shape[1]))
    costs = np.where(xt[:, 3:] > 2.0, [[3.0, 1.0]], [[1.0, 3.0]])
    model = fit_model("cost", xt, costs)
    student = distilled.student_tree(model.params, xt, list(LABELS), resampled=1000)
    by_model, by_student = (PrefetchedSelector(prog, LABELS, HOST, rule) for rule in (model.params, student))
    for (args, ref), row in zip(cases, x, strict=True):
        want = "block" if row[3] > 2.0 else "scalar"
        assert _wait(by_model.fix(*args)) == _wait(by_student.fix(*args)) == want
        assert by_model.select(*args) == by_student.select(*args) == want
        np.testing.assert_allclose(dev.to_host(by_student(*args)), dev.to_host(by_model(*args)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(dev.to_host(by_student(*args)), ref, rtol=1e-4, atol=1e-3)


def test_the_row_spread_has_the_bits_of_numpys_std_on_both_paths():
    rng = np.random.default_rng(3)
    for _ in range(200):
        rows = int(rng.integers(1, 3000))
        offsets = np.concatenate([[0], np.cumsum(rng.integers(0, rng.integers(1, 500), rows))]).astype(np.int32)
        avg = offsets[-1] / rows
        lengths = np.diff(offsets)
        sample = lengths[:: max(1, rows // SAMPLE_ROWS)].astype(np.float64)
        mean = sample.mean()
        want = [float(sample.std() / mean) if mean > 0 else 0.0, float(np.log2((1 + lengths.max()) / (1 + avg)))]
        assert _spread_of_offsets(offsets, rows, avg) == pytest.approx(want, rel=1e-15, abs=0)
        assert _spread_of_offsets(offsets, rows, avg)[0] == want[0]  # the same bits: trees split on them
        device = np.concatenate([[lengths.max()], lengths[:: max(1, rows // SAMPLE_ROWS)]]).astype(np.int32)
        assert _spread_of_sample(device, avg) == _spread_of_offsets(offsets, rows, avg)


def test_the_gate_picks_what_the_rules_pick_for_the_latest_and_earlier_fixed_inputs(dev):
    # the gate recognises the input fixed last by identity and the others through their ids: either way it must
    # return the full rule's pick on the features of that very input once landed, and the host rule's before
    prog = row_sums.generate(dev)
    sel = PrefetchedSelector(prog, LABELS, HOST, FULL)
    cases = [_ragged(dev, f, s)[0] for f, s in (("constant_row", 1), ("arrow", 3), ("power_law", 2), ("arrow", 5))]
    want = [sel.pick_full(prog.features(*a)) for a in cases]
    assert set(want) == {"scalar", "block"}  # both labels, so a mix-up would show
    for args in cases:
        assert sel.select(*args) == sel.pick_host(prog.host_features(*args))  # nothing fixed yet
        assert _wait(sel.fix(*args)) is not None
    for args, label in zip(cases, want, strict=True):  # the last through the identity, the others by id
        assert sel.used_features(*args) and sel.select(*args) == label and sel.select(*args) in LABELS
    same_sizes = _ragged(dev, "arrow", 5)[0]  # equal sizes and values, not the fixed arrays: the host rule
    assert sel.select(*same_sizes) == "scalar" and not sel.used_features(*same_sizes)
    sel.forget(*cases[-1])  # the latest forgotten: its pick is gone, the earlier ones stay
    assert sel.select(*cases[-1]) == "scalar" and not sel.used_features(*cases[-1])
    assert [sel.select(*a) for a in cases[:-1]] == want[:-1]
    sel.forget(*cases[1])  # an earlier one forgotten: the latest slot is untouched
    assert _wait(sel.fix(*cases[-1])) == want[-1] and sel.select(*cases[-1]) == want[-1]
    assert sel.select(*cases[1]) == "scalar" and sel.select(*cases[0]) == want[0]
