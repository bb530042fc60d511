"""The comparison methodology: baselines, scores, the package cross-check, the CLI and KT side by side."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from adaptune.cli import main
from adaptune.search import Budget, Replay
from adaptune.search.methodology import package_baseline, random_baseline, score
from adaptune.space import Space

DATA = Path(__file__).resolve().parents[1] / "data"
SMALL = DATA / "kernel_tuner_tests" / "test_cache_file.json"


def synthetic() -> Replay:
    space = Space({"a": list(range(20)), "b": list(range(10))})
    rng = np.random.default_rng(4)
    values = rng.lognormal(0.0, 0.7, len(space))
    values[rng.choice(len(space), 30, replace=False)] = np.inf
    return Replay(space, values, name="synthetic")


def test_exact_baseline_matches_monte_carlo() -> None:
    rp = synthetic()
    evals = np.arange(1, 41)
    worst = rp.values[np.isfinite(rp.values)].max()
    rng = np.random.default_rng(0)
    sims = np.stack([np.minimum.accumulate(np.where(np.isfinite(v := rp.values[rng.permutation(200)[:40]]), v, worst))
                     for _ in range(4000)])
    np.testing.assert_allclose(random_baseline(rp.values, evals), sims.mean(axis=0), rtol=0.02)


def test_random_scores_about_zero_and_an_oracle_scores_one() -> None:
    rp = synthetic()
    traces = [rp.run("random", Budget(max_evals=40), seed=s).values for s in range(400)]
    assert abs(score(traces, rp.values, (1, 40), baseline="exact")) < 0.05
    oracle = np.sort(rp.values)[:40]  # best first
    assert score([oracle], rp.values, (1, 40), baseline="exact") == pytest.approx(1.0)
    assert score([oracle], rp.values, (1, 40), baseline="paper") == pytest.approx(1.0)


def test_paper_baseline_and_score_match_the_autotuning_methodology_package(tmp_path: Path) -> None:
    pytest.importorskip("autotuning_methodology")
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline
    from autotuning_methodology.searchspace_statistics import SearchspaceStatistics

    t4 = tmp_path / "A100_T4.json"
    t4.write_bytes(gzip.decompress((DATA / "benchmark_hub" / "convolution_milo" / "A100_T4.json.gz").read_bytes()))
    stats = SearchspaceStatistics("convolution", "A100", True, ["compilation", "framework"], ["time"], t4,
                                  full_validate=False)
    theirs = RandomSearchCalculatedBaseline(stats)
    rp = Replay.from_file(DATA / "benchmark_hub" / "convolution_milo" / "A100.json.gz")
    evals = np.arange(1, 101)
    np.testing.assert_allclose(package_baseline(rp.values, evals), theirs.get_curve_over_fevals(evals))
    traces = [rp.run("greedy_ils", Budget(max_evals=100), seed=s).values for s in range(5)]
    worst = rp.values[np.isfinite(rp.values)].max()
    mean_curve = np.mean([np.minimum.accumulate(np.where(np.isfinite(t), t, worst)) for t in traces], axis=0)
    ours = score(traces, rp.values, (1, 100), baseline="paper")
    assert ours == pytest.approx(float(np.mean(theirs.get_standardised_curve(evals, mean_curve, "fevals"))))


def test_cli_replay_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(SMALL), "--strategy", "greedy_ils", "--max-evals", "5", "--repeats", "3",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["strategy"] == "greedy_ils" and out["repeats"] == 3
    assert out["optimum"] <= out["mean_best"] and 0 < out["mean_fraction_of_optimum"] <= 1


def test_cli_replay_bad_strategy_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(SMALL), "--strategy", "nope"]) == 2
    assert "unknown strategy 'nope'" in capsys.readouterr().err


def test_cli_compare_runs_kernel_tuner_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("kernel_tuner")
    png = tmp_path / "curves.png"
    assert main(["compare", str(SMALL), "--strategies", "random,greedy_ils", "--kernel-tuner", "random_sample",
                 "--repeats", "2", "--max-evals", "8", "--jobs", "1", "--json", "--plot", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["summary"]) == {"random", "greedy_ils", "kt:random_sample"}
    for cell in out["cells"]:
        assert cell["repeats"] == 2 and len(cell["mean_curve"]) == 8
        assert 0 < cell["mean_fraction_of_optimum"] <= 1
    assert png.stat().st_size > 10_000
