"""End-to-end tuning on PoCL: real kernels, a real SQLite file, a real process killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptune.measure.runners import shares_host_cores
from adaptune.records import DeviceInfo
from adaptune.tuning import tune
from adaptune.tuning.spec_file import load_problem

SPEC = Path(__file__).parent / "specs" / "vadd_spec.py"


def test_brute_force_tunes_every_valid_config_and_stores_them(tmp_path):
    problem = load_problem(SPEC)
    db = tmp_path / "t.db"
    report = tune(problem, "brute_force", repeats=3, db=str(db), progress=False)
    assert report.evaluated == len(problem.space)
    assert report.failed == 0
    assert report.best is not None and problem.space.is_valid(report.best)
    assert report.best_time_ms == min(r.time_ms for r in report.results)
    assert report.default == {"block_size_x": 32, "work_per_thread": 1}
    # A second run reuses every stored measurement and measures nothing new.
    again = tune(problem, "brute_force", repeats=3, db=str(db), progress=False)
    assert again.reused == again.evaluated == report.evaluated
    assert again.best == report.best


def test_on_a_cpu_opencl_device_each_configuration_compiles_just_before_its_own_runs(tmp_path):
    """PoCL's kernels run on the cores its compiler needs: nothing is compiled beside a timed run there."""
    problem = load_problem(SPEC)
    report = tune(problem, "brute_force", repeats=1, db=str(tmp_path / "c.db"), progress=False)
    assert "CPU" in report.device.properties["type"]  # pyopencl says "ALL | CPU"
    assert report.worker_stats["prefetched"] == report.worker_stats["compiled_ahead"] == 0
    assert report.worker_stats["compiles"] == len(problem.space) and report.failed == 0
    assert report.worker_stats["settle_runs"] == 0  # settling is asked for (MeasureSettings.settle)
    gpu = DeviceInfo("NVIDIA H100", "opencl:NVIDIA CUDA", properties={"type": "GPU"})
    assert shares_host_cores(report.device) and not shares_host_cores(gpu)
    assert not shares_host_cores(DeviceInfo("NVIDIA H100", "cuda"))


def test_random_respects_max_evals(tmp_path):
    problem = load_problem(SPEC)
    report = tune(problem, "random", max_evals=5, repeats=1, db=str(tmp_path / "r.db"), progress=False, seed=3)
    assert report.evaluated == 5
    assert len({tuple(r.config.values()) for r in report.results}) == 5


def test_cli_tune_json(tmp_path):
    db = tmp_path / "cli.db"
    out = subprocess.run(
        [sys.executable, "-m", "adaptune", "tune", str(SPEC), "--strategy", "random", "--max-evals", "4",
         "--repeats", "2", "--db", str(db), "--json", "--seed", "1"],
        capture_output=True, text=True, timeout=300, check=True)
    data = json.loads(out.stdout)
    assert data["evaluated"] == 4
    assert data["db"] == str(db)
    assert set(data["best"]) == {"block_size_x", "work_per_thread"}
    assert data["best_time_ms"] > 0
    assert {"failed", "wall_s"} <= data.keys()


def _count_measurements(db: Path) -> int:
    with sqlite3.connect(db) as con:
        return con.execute("select count(*) from measurements").fetchone()[0]


def test_sigkill_mid_run_then_resume_reuses_everything(tmp_path):
    """A tuning process killed with SIGKILL leaves a sound database; the rerun reuses every stored row."""
    db = tmp_path / "kill.db"
    cmd = [sys.executable, "-m", "adaptune", "tune", str(SPEC), "--repeats", "40", "--db", str(db), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    stored = 0
    while time.time() < deadline:
        time.sleep(0.5)
        if db.exists():
            try:
                stored = _count_measurements(db)
            except sqlite3.OperationalError:
                continue
            if stored >= 3:
                break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if stored < 3:
        pytest.fail("the tuning process stored fewer than 3 measurements in 240 s")
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    before = _count_measurements(db)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    data = json.loads(out.stdout)
    assert data["reused"] >= before
    assert data["evaluated"] == 19  # every valid configuration of the space
    assert _count_measurements(db) == 19


def test_racing_cuts_repeats_only_for_configurations_far_behind_the_incumbent():
    from adaptune.measure import Measurer, MeasureSettings

    problem = load_problem(SPEC)
    config = problem.space.config(0)
    settings = MeasureSettings(repeats=5, discard_factor=2.0)
    with Measurer(problem.spec, settings=settings) as measurer:
        behind = measurer.measure(config, best_ms=1e-9)  # no real run is this fast: far behind
        close = measurer.measure(config, best_ms=1e9)  # everything is faster than this: keep measuring
        alone = measurer.measure(config)  # no incumbent yet
    assert behind.ok and len(behind.samples) == 2  # a second run confirms the first (a hiccup of the host is not)
    assert close.ok and len(close.samples) == 5
    assert alone.ok and len(alone.samples) == 5
