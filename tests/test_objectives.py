"""Objectives other than time, Pareto fronts, clock choice from recorded measurements, energy export."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adaptune.adaptive.clocks import clock_param, select_clock, split_labels, with_clock
from adaptune.adaptive.objectives import (
    OBJECTIVES,
    ObjectiveError,
    best,
    cost_matrix,
    energy_vs_time,
    expression_objective,
    metrics,
    objective,
    pareto,
    pareto_front,
    values,
)
from adaptune.measure.observers import ClockControl, ClockPermissionError
from adaptune.records import Result, Status
from adaptune.store import Store, load_recorded, load_t4, write_t4

KT = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner_tests"
CLOCKS = KT / "synthetic_fp32_cache_NVIDIA_RTX_A4000.json"   # 10 SM clocks, Kernel Tuner's nvml_power
ENERGY = KT / "test_cache_time_energy.json"                   # 15 block sizes, Kernel Tuner's energy


def measured(config: dict, time_ms: float, energy_j: float | None, runs: int = 4, **obs: float) -> Result:
    observers = dict(obs)
    if energy_j is not None:
        observers["energy_j"] = energy_j
    return Result(config=config, status=Status.OK, time_ms=time_ms, samples=[time_ms] * runs, observers=observers)


def test_metrics_read_adaptune_and_kernel_tuner_names():
    r = measured({"b": 1}, 2.0, energy_j=0.8, runs=4, power_w=100.0)
    m = metrics(r)
    assert m["energy_per_call_j"] == pytest.approx(0.2) and m["b"] == 1.0
    # the counter did not advance: power x time stands in
    m0 = metrics(measured({"b": 1}, 2.0, energy_j=0.0, power_w=100.0))
    assert m0["energy_per_call_j"] == pytest.approx(0.2)
    kt = load_recorded(CLOCKS).results[0]
    mk = metrics(kt)
    assert mk["power_w"] == kt.observers["nvml_power"]
    assert mk["energy_per_call_j"] == pytest.approx(kt.observers["nvml_power"] * kt.time_ms / 1e3)
    assert metrics(load_recorded(ENERGY).results[0])["energy_per_call_j"] > 0


def test_objectives_and_their_errors():
    r = measured({"b": 1}, 2.0, energy_j=0.8, runs=4, power_w=100.0, power_peak_w=150.0)
    assert OBJECTIVES["edp"](r) == pytest.approx(0.002 * 0.2)
    assert OBJECTIVES["T/E"](r) == OBJECTIVES["edp"](r)
    assert OBJECTIVES["T/P2"](r) == pytest.approx(0.002 * 150.0 ** 2)
    assert objective("time_ms * energy_per_call_j")(r) == pytest.approx(0.4)
    assert expression_objective("energy_per_call_j / (time_ms - 2)")(r) == math.inf  # division by zero
    failed = Result.failure({"b": 2}, Status.COMPILE_ERROR, "nope")
    assert OBJECTIVES["energy"](failed) == math.inf
    with pytest.raises(ObjectiveError, match="needs power_peak_w"):
        OBJECTIVES["peak_power"](measured({"b": 1}, 1.0, None))
    with pytest.raises(ObjectiveError, match="unknown objective"):
        objective("speed")
    with pytest.raises(ObjectiveError, match="objective expression"):
        objective("__import__('os').system('true') * time_ms")


def test_pareto_front_is_the_non_dominated_set():
    rng = np.random.default_rng(3)
    pts = rng.uniform(size=(200, 2))
    pts[5] = [np.inf, 0.0]
    front = pareto_front(pts)
    assert 5 not in front and np.all(np.diff(pts[front, 0]) > 0) and np.all(np.diff(pts[front, 1]) < 0)
    for i in range(len(pts)):
        dominated = np.any(np.all(pts <= pts[i], axis=1) & np.any(pts < pts[i], axis=1))
        assert (i in front) == (not dominated and np.isfinite(pts[i]).all())


def test_energy_optimal_beside_time_optimal_on_recorded_clocks():
    results = load_recorded(CLOCKS).results
    cmp = energy_vs_time(results)
    assert cmp["time_optimal"]["config"]["nvml_gr_clock"] == 1905
    assert cmp["energy_optimal"]["config"]["nvml_gr_clock"] == 1335
    assert cmp["energy_saved_fraction"] == pytest.approx(1 - 8.0675 / 10.6871, abs=1e-3)
    assert cmp["time_cost_fraction"] > 0.25
    front = [r.config["nvml_gr_clock"] for r in pareto(results)]
    assert front == [1905, 1710, 1530, 1335]  # faster clocks cost more energy; below 1335 both get worse


def test_clock_selection_from_a_clock_column():
    results = load_recorded(CLOCKS).results
    assert clock_param(results) == "nvml_gr_clock"
    assert select_clock(results, "energy")["best"]["clock"] == 1335
    assert select_clock(results, "time")["best"]["clock"] == 1905
    assert select_clock(results, "power")["best"]["clock"] == 405
    row = select_clock(results, "energy")["per_variant"][0]
    assert row["max_clock"] == 2100 and 0.2 < row["saved_fraction"] < 0.3
    with pytest.raises(ValueError, match="no clock parameter"):
        clock_param(load_recorded(KT / "test_cache_file.json").results)
    assert with_clock({"b": [1, 2]}, [900, 1500])["nvml_gr_clock"] == [1500, 900]
    with pytest.raises(ValueError, match="already has"):
        with_clock({"nvml_gr_clock": [1]}, [900])
    assert split_labels([{"v": "merge", "nvml_gr_clock": 900}], "nvml_gr_clock") == ([{"v": "merge"}], [900])


def test_clock_control_refuses_without_the_flag():
    with pytest.raises(ClockPermissionError, match="allow_clock_changes=True"):
        ClockControl(0)
    with pytest.raises(ClockPermissionError):
        ClockControl(0, allow_clock_changes="yes")  # only True itself opts in
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        with pytest.raises(ClockPermissionError, match="root"):
            ClockControl(0, allow_clock_changes=True)


def test_cost_matrix_for_selection_by_energy():
    rows = [{"a": measured({"v": "a"}, 1.0, 0.4), "b": measured({"v": "b"}, 2.0, 0.2)},
            {"a": measured({"v": "a"}, 1.0, 0.1)}]
    c = cost_matrix(rows, ["a", "b"], "energy")
    assert c.tolist() == [[0.1, 0.05], [0.025, math.inf]]
    assert best(list(rows[0].values()), "time").config == {"v": "a"}
    assert best(list(rows[0].values()), "energy").config == {"v": "b"}


def test_energy_is_stored_exported_and_shown(tmp_path):
    results = [measured({"b": b}, t, e, runs=5, power_w=e / 5 / t * 1e3, power_peak_w=1.2 * e / 5 / t * 1e3)
               for b, t, e in [(1, 1.0, 1.0), (2, 0.8, 1.5), (4, 1.5, 0.75), (8, 2.0, 1.2)]]
    rec = load_recorded(ENERGY)
    rec.results, rec.params = results, {"b": [1, 2, 4, 8]}
    db = tmp_path / "e.db"
    store = Store(db)
    rec.to_store(store, name="energy_demo")
    store.close()
    store = Store(db)
    back = store.results()
    store.close()
    assert sorted(r.observers["energy_j"] for r in back) == [0.75, 1.0, 1.2, 1.5]
    t4 = tmp_path / "e_t4.json"
    write_t4(t4, rec)
    again = load_t4(t4)
    assert sorted(r.observers["power_peak_w"] for r in again.results) == sorted(
        r.observers["power_peak_w"] for r in results)
    assert values(again.results, "energy").tolist() == values(results, "energy").tolist()
    png = tmp_path / "front.png"
    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "adaptune", "show", "--db", str(db), "--pareto", "--plot", str(png)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "Pareto front of time vs energy" in out.stdout and "b=2" in out.stdout and "b=4" in out.stdout
    assert "b=8" not in out.stdout  # dominated by b=1
    assert "saves 50.0 % energy" in out.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_show_pareto_refuses_bad_objectives(tmp_path, capsys):
    from adaptune.cli import main

    db = tmp_path / "kt.db"
    assert main(["import", str(CLOCKS), "--db", str(db)]) == 0
    assert main(["show", "--db", str(db), "--pareto", "--objectives", "time,peak_power,edp"]) == 2
    assert "two objectives" in capsys.readouterr().err
    assert main(["show", "--db", str(db), "--pareto", "--objectives", "time,peak_power"]) == 2
    assert "needs power_peak_w" in capsys.readouterr().err  # Kernel Tuner recorded average power only
    assert main(["show", "--db", str(db), "--pareto", "--objectives", "time,power"]) == 0
    assert "nvml_gr_clock=405" in capsys.readouterr().out  # lowest power, slowest: on the front


def test_nvml_observer_reads_energy_and_peak_power_on_an_nvidia_gpu():
    pynvml = pytest.importorskip("pynvml")
    cp = pytest.importorskip("cupy")
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        pytest.skip("no NVIDIA driver")
    from adaptune.measure.observers import NVMLObserver

    obs = NVMLObserver(0)
    a = cp.ones(1 << 27, dtype=cp.float32)
    obs.start()
    for _ in range(200):
        a = a * 1.0000001
    cp.cuda.Device().synchronize()
    out = obs.stop()
    obs.close()
    assert out["power_samples"] >= 2 and out["power_peak_w"] >= out["power_mean_sampled_w"] > 0
    assert "energy_j" in out and out["observed_s"] > 0
