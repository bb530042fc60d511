"""The core commands as a user runs them: real files in, real files out."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from adaptune.store import load_kt_cache, load_t4

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner_tests"


def adaptune(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adaptune", *args], capture_output=True, text=True,
                          timeout=300, check=check)


@pytest.fixture
def imported(tmp_path):
    db = tmp_path / "cli.db"
    out = adaptune("import", str(DATA / "test_cache_file.json"), "--db", str(db))
    assert "imported 15 measurements" in out.stdout
    return db


def test_show_lists_the_best_first(imported):
    out = adaptune("show", "--db", str(imported), "--top", "2").stdout
    cache = load_kt_cache(DATA / "test_cache_file.json")
    best = min((r for r in cache.results if r.ok), key=lambda r: r.time_ms)
    assert "vector_add" in out and f"block_size_x={best.config['block_size_x']}" in out


@pytest.mark.parametrize("fmt", ["kt", "t4", "csv"])
def test_export_round_trips_every_measurement(imported, tmp_path, fmt):
    target = tmp_path / f"out.{fmt}"
    adaptune("export", "--db", str(imported), "--problem", "vector_add", "--format", fmt, "-o", str(target))
    original = {r.config["block_size_x"]: r.time_ms for r in load_kt_cache(DATA / "test_cache_file.json").results}
    if fmt == "kt":
        back = {r.config["block_size_x"]: r.time_ms for r in load_kt_cache(target).results}
    elif fmt == "t4":
        back = {r.config["block_size_x"]: r.time_ms for r in load_t4(target).results}
    else:
        with open(target) as f:
            back = {int(row["block_size_x"]): float(row["time_ms"]) for row in csv.DictReader(f)}
    assert back.keys() == original.keys()
    for key, value in original.items():
        assert back[key] == pytest.approx(value, rel=1e-9)


def test_plot_writes_a_png(imported, tmp_path):
    png = tmp_path / "run.png"
    adaptune("plot", "--db", str(imported), "-o", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_devices_lists_pocl():
    out = adaptune("devices").stdout
    assert "opencl" in out


def test_errors_are_one_clear_line(tmp_path):
    missing = adaptune("show", "--db", str(tmp_path / "nope.db"), check=False)
    assert missing.returncode == 2 and "no such database" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cache": {"1": "x"}}))
    out = adaptune("import", str(bad), "--db", str(tmp_path / "x.db"), check=False)
    assert out.returncode == 2 and str(bad) in out.stderr and "Traceback" not in out.stderr
    spec = tmp_path / "spec.txt"
    spec.write_text("nothing")
    out = adaptune("tune", str(spec), check=False)
    assert out.returncode == 2 and "T1 .json file or a .py file" in out.stderr


def test_cli_strategy_help_names_every_registered_strategy():
    """The CLI lists strategy names without importing the search layer; the list must not drift."""
    from adaptune.cli.search import STRATEGY_NAMES
    from adaptune.search import STRATEGIES

    assert sorted(STRATEGY_NAMES) == sorted(STRATEGIES)


def test_cli_model_choices_are_every_model_kind():
    from adaptune.adaptive import MODEL_KINDS
    from adaptune.cli.adaptive import MODEL_NAMES

    assert sorted(MODEL_NAMES) == sorted(MODEL_KINDS)
