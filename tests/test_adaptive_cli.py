"""`adaptune train` / `adaptune evaluate` on a SPEC file, and the CPU benchmark's fast mode end to end."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adaptune.cli import main

ROOT = Path(__file__).resolve().parents[1]

SPEC = '''
import numpy as np
from adaptune.adaptive import CodeVariant

variant = CodeVariant("cli_toy", objective="work", metrics=lambda run: {"work": run()[1]},
                      verify=lambda ref, out: ref[0] == out[0])

@variant.variant(default=True)
def linear(n):
    return (n, 10.0 + n)

@variant.variant
def quadratic(n):
    return (n, 1.0 + n * n / 50.0)

variant.feature(lambda n: float(n), name="n")

def training_inputs():
    return [(f"n{n}", (n,)) for n in range(1, 100, 9)]

def test_inputs():
    return [(f"t{n}", (n,)) for n in range(2, 100, 4)]
'''


def test_train_then_evaluate_reuses_labels_and_prints_json(tmp_path, capsys):
    spec = tmp_path / "toy_spec.py"
    spec.write_text(SPEC)
    db, model = str(tmp_path / "a.db"), str(tmp_path / "toy.json")
    assert main(["train", str(spec), "--db", db, "--model-file", model, "--repeats", "1", "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["model"] == "svm" and trained["labels_used"] == 11 and trained["measured"] == 22
    png = tmp_path / "eval.png"
    assert main(["evaluate", str(spec), "--db", db, "--model-file", model, "--repeats", "1", "--json",
                 "--plot", str(png)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"mean_fraction_of_oracle", "buckets", "fixed_variants", "labels_used", "model"} <= set(report)
    assert report["labels_used"] == 11 and report["model"] == "svm"
    assert report["mean_fraction_of_oracle"] > max(report["fixed_variants"].values())
    assert png.stat().st_size > 0
    # retraining with another model measures nothing new
    assert main(["train", str(spec), "--db", db, "--model-file", model, "--model", "tree", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["measured"] == 0


def test_bad_spec_is_one_clear_error(tmp_path, capsys):
    spec = tmp_path / "empty_spec.py"
    spec.write_text("x = 1\n")
    assert main(["train", str(spec), "--db", str(tmp_path / "b.db")]) == 2
    assert "must define variant, training_inputs, test_inputs" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "missing.py")]) == 2


@pytest.mark.slow
def test_cpu_benchmark_fast_mode_runs_end_to_end(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchmarks.adaptive_cpu.run", "--fast", "--no-progress",
                          "--repeats", "1", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((tmp_path / "adaptive_cpu_fast.json").read_text())
    assert [r["spec"] for r in doc["results"]] == ["sort", "spmv", "histogram"]
    for r in doc["results"]:
        assert 0 < r["mean_fraction_of_oracle"] <= 1
        assert len(r["fixed_variants"]) >= 3
        assert r["dispatch_svm"]["model_query_p50_us"] > 0
        assert set(r["learning_curves"]) == {"bvsb", "random"}
        assert r["train_inputs"] <= 0.25 * r["test_inputs"]  # the rule, fast mode included
        assert set(r["dispatch_by_kind"]) == set(doc["models"])
    assert (tmp_path / "adaptive_cpu_fast.png").stat().st_size > 0
