"""Multi-versioned programs on PoCL, value collection, path timings, tuners, Futhark files (seed 003)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adaptune.thresholds import deep, matmul
from adaptune.thresholds.futhark import (
    TuningFileError,
    flows_from_comparisons,
    format_tuning,
    parse_comparisons,
    parse_tuning,
    read_tuning_file,
    size_options,
    write_tuning_file,
)
from adaptune.thresholds.model import ThresholdModel, dedup, enumerate_exact, enumerate_seed
from adaptune.thresholds.program import ThresholdProgram, ThresholdUsageError
from adaptune.thresholds.timing import PathNotRecorded, PathTimes, live_measure
from adaptune.thresholds.tree import DEFAULT_THRESHOLD, build_forest, parse_print_sizes
from adaptune.thresholds.tuners import (
    exhaustive,
    hillclimb,
    oracle,
    path_exhaustive,
    strategy_search,
    untuned,
)


@pytest.fixture(scope="module")
def device():
    pytest.importorskip("pyopencl")
    from adaptune.kernels.device import OpenCLDevice

    return OpenCLDevice()


def test_matmul_versions_agree_with_numpy(device) -> None:
    prog = matmul.program()
    for n, m, p in [(37, 300, 5), (5, 700, 3), (9, 2, 70)]:
        d = matmul.make_data(device, n, m, p, seed=1)
        ref = device.to_host(d.a).reshape(n, m).astype(np.float64) @ device.to_host(d.b).reshape(m, p)
        for v in matmul.VERSIONS:
            run = prog.run(d, matmul.forcing(v))
            device.synchronize()
            assert run.versions == [f"0:{v}"]
            np.testing.assert_allclose(d.result(), ref, rtol=1e-4, atol=1e-4)


def test_untuned_matmul_takes_the_large_input_versions() -> None:
    prog = matmul.program()
    pick = {s: prog.run(matmul.make_data(None, *s), {}, dry=True).versions[0][2:]
            for s in [(40000, 4, 4), (4, 4, 40000), (200, 4, 200), (8, 40000, 8), (8, 8, 8)]}
    assert list(pick.values()) == ["V0", "V1", "V2", "V3", "V4"]


def test_collected_values_are_the_seed_example() -> None:
    prog = matmul.program()
    assert prog.collect(matmul.make_data(None, 20, 50, 30)) == [
        {matmul.T0: 20, matmul.T1: 30, matmul.T2: 600, matmul.T3: 50}]
    assert parse_print_sizes(prog.print_sizes()) == prog.decls


def test_loop_values_change_per_iteration_and_model_matches_runs(device) -> None:
    prog = deep.program()
    flows = prog.collect(deep.make_data(None, 8, (40, 70, 9, 300)))
    assert len(flows) == 3  # one pass per layer; the head is in pass 0
    assert [f["layer.suff_intra_par_1"] for f in flows] == [70, 9, 300]
    assert [f["layer.suff_intra_par_3"] for f in flows] == [40, 70, 9]
    assert "head.suff_outer_par_0" in flows[0] and "head.suff_outer_par_0" not in flows[1]
    model = prog.model({"x": deep.make_data(None, 8, (40, 70, 9, 300)), "y": deep.make_data(None, 300, (9, 3))})
    data = {"x": deep.make_data(device, 8, (40, 70, 9, 300), seed=3), "y": deep.make_data(device, 300, (9, 3))}
    combos = enumerate_exact(model)
    assert len(combos) == len(dedup(model, enumerate_seed(model.forest, model.candidates())))
    for a in combos[:: max(1, len(combos) // 25)]:  # the model predicts the path the real program takes
        for name, d in data.items():
            run = prog.run(d, model.complete(a))
            device.synchronize()
            predicted = model.dataset_signature(name, a)
            assert len(predicted) == len({p for p, *_ in run.events})
            for p, nm, _, outcome in run.events:
                assert predicted[p][model.names.index(nm)] == (1 if outcome else 2)
            np.testing.assert_allclose(device.to_host(d.head.c), deep.reference(d), rtol=1e-3, atol=1e-3)


def test_program_refuses_misuse() -> None:
    prog = ThresholdProgram("p")
    prog.threshold("a")
    with pytest.raises(ThresholdUsageError, match="not declared"):
        prog.threshold("b", after={"zz": True})
    with pytest.raises(ThresholdUsageError, match="twice"):
        prog.threshold("a")
    prog.threshold("b", after={"a": True})
    bad = ThresholdProgram("q", body=lambda run, d: run.compare("b", 5))
    bad.threshold("a")
    bad.threshold("b", after={"a": True})
    with pytest.raises(ThresholdUsageError, match="dependency 'a'"):
        bad.run(None)
    with pytest.raises(ThresholdUsageError, match="not declared"):
        ThresholdProgram("r", body=lambda run, d: run.compare("x", 1)).run(None)


def _matmul_times(device, repeats: int = 2):
    prog = matmul.program()
    sizes = {"tall": (3000, 4, 4), "small": (8, 8, 8), "deep": (2, 4096, 2)}
    model = prog.model({k: matmul.make_data(None, *v) for k, v in sizes.items()})
    data = {k: matmul.make_data(device, *v) for k, v in sizes.items()}
    return model, PathTimes(model, live_measure(prog, data, device.synchronize, repeats=repeats, warmup=0))


def test_tuners_on_live_pocl_timings_and_replay(device, tmp_path) -> None:
    model, times = _matmul_times(device)
    assert times.record_every_path() == 15  # 5 versions x 3 datasets, each run once
    ex = exhaustive(model, times, repeats=2, early_termination=False)
    early = exhaustive(model, times, repeats=2)
    paths = path_exhaustive(model, times, repeats=2)
    # the exhaustive optimum: the best combination of per-dataset paths the thresholds allow
    assert ex.best_total_ms == pytest.approx(paths.best_total_ms)
    assert early.best_total_ms == pytest.approx(ex.best_total_ms)
    assert early.tuning_s <= ex.tuning_s and early.runs <= ex.runs
    assert paths.runs <= 15 * 2 < ex.runs
    best = min(sum(times.mean(d, a) for d in model.datasets) for a in enumerate_seed(model.forest,
                                                                                      model.candidates()))
    assert ex.best_total_ms == pytest.approx(best)
    un = untuned(model, times)
    orc = oracle(model, times)
    for d in model.datasets:
        assert orc[d] <= ex.per_dataset_ms[d] + 1e-12 and orc[d] <= un[d] + 1e-12
    assert ex.best_total_ms <= sum(un.values()) + 1e-12
    pe_early = path_exhaustive(model, times, repeats=2, early_termination=True)
    assert pe_early.best_total_ms == pytest.approx(ex.best_total_ms) and pe_early.runs <= paths.runs
    ordered = exhaustive(model, times, repeats=2, order="incumbent")
    assert ordered.best_total_ms == pytest.approx(ex.best_total_ms) and ordered.runs <= ex.runs
    safe = path_exhaustive(model, times, repeats=2, no_regression=True)
    for d in model.datasets:  # never slower than the defaults on any training dataset
        assert safe.per_dataset_ms[d] <= un[d] + 1e-12
    assert paths.best_total_ms - 1e-12 <= safe.best_total_ms <= sum(un.values()) + 1e-12
    hc = hillclimb(model, times, repeats=2, max_evals=30, seed=1)
    assert hc.best_total_ms >= ex.best_total_ms - 1e-12 and hc.evaluations <= 30
    few = strategy_search(model, times, "random", repeats=2, max_evals=8, seed=3)
    rec = strategy_search(model, times, "random", repeats=2, max_evals=8, seed=3, recombine=True)
    assert rec.best_total_ms <= few.best_total_ms + 1e-12 and rec.tuning_s == pytest.approx(few.tuning_s)
    st = strategy_search(model, times, "random", repeats=2, max_evals=500, seed=0)
    assert st.best_total_ms == pytest.approx(ex.best_total_ms)  # the whole space, so the optimum
    # replay from JSON reproduces every number without running anything
    path = tmp_path / "t.json"
    times.save(path)
    replayed = PathTimes.from_json(model, json.loads(path.read_text()))
    again = exhaustive(model, replayed, repeats=2, early_termination=False)
    assert again.best == ex.best and again.tuning_s == pytest.approx(ex.tuning_s)
    replayed.table.clear()
    with pytest.raises(PathNotRecorded):
        replayed.samples("tall", {})


def test_tuning_file_round_trip_and_errors(tmp_path) -> None:
    a = {"main.suff_outer_par_0": 20, "main.suff_intra_par_1": 31}
    f = write_tuning_file(tmp_path / "matmul.fut.tuning", a)
    assert f.read_text() == "main.suff_intra_par_1=31\nmain.suff_outer_par_0=20\n"
    assert read_tuning_file(f) == a
    hand = "main.suff_outer_par_4=2000\n\nmain.suff_intra_par_5=-1\n"
    assert parse_tuning(hand) == {"main.suff_outer_par_4": 2000, "main.suff_intra_par_5": -1}
    for bad in ["x=1.5", "x = 1", "x=1\nx=2", "import os", "=3"]:
        with pytest.raises(TuningFileError):
            parse_tuning(bad, "t")
    with pytest.raises(TuningFileError):
        format_tuning({"a b": 1})
    assert size_options({"b": 2, "a": 1}, 32768) == ["--default-threshold", "32768", "--size=a=1", "--size=b=2"]


RECORDED_PRINT_SIZES = """\
main.suff_outer_par_0 (threshold ())
main.suff_intra_par_1 (threshold (!main.suff_outer_par_0))
main.tile_size_2 (tile_size)
main.suff_outer_par_3 (threshold (!main.suff_outer_par_0 !main.suff_intra_par_1))
main.group_size_4 (group_size)
main.suff_intra_par_5 (threshold (!main.suff_outer_par_0 !main.suff_intra_par_1 !main.suff_outer_par_3))
"""

RECORDED_LOG = """\
Compared main.suff_outer_par_0 <= 20.
Compared main.suff_intra_par_1 <= 30.
Compared main.suff_outer_par_3 <= 600.
Compared main.suff_intra_par_5 <= 50.
Peak memory usage for space 'device': 12000 bytes.
Compared main.suff_outer_par_0 <= 20.
Compared main.suff_intra_par_1 <= 7.
"""


def test_recorded_futhark_text_drives_the_tuner() -> None:
    decls = parse_print_sizes(RECORDED_PRINT_SIZES)
    assert [d.name for d in decls][2] == "main.suff_outer_par_3"
    pairs = parse_comparisons(RECORDED_LOG)
    assert pairs[3] == ("main.suff_intra_par_5", 50) and len(pairs) == 6
    flows = flows_from_comparisons(pairs)
    assert flows == [{"main.suff_outer_par_0": 20, "main.suff_intra_par_1": 30, "main.suff_outer_par_3": 600,
                      "main.suff_intra_par_5": 50}, {"main.suff_outer_par_0": 20, "main.suff_intra_par_1": 7}]
    model = ThresholdModel(decls, {"log": flows})
    assert model.candidates()["main.suff_intra_par_1"] == [7, 30, 31]
    combos = enumerate_exact(model)
    assert len(combos) == len(dedup(model, enumerate_seed(build_forest(decls), model.candidates())))
    assert model.complete({})["main.suff_outer_par_0"] == DEFAULT_THRESHOLD
