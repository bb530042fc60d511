"""The benchmark harness: timer summaries, metadata, result files, charts, study options."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks.harness import (
    device_tag,
    example_module,
    finish_study,
    markdown_table,
    output_stem,
    paired_summary,
    parse_study_args,
    plot_bars,
    plot_lines,
    run_metadata,
    study_meta,
    study_parser,
    summarize,
    time_device,
    time_host,
    write_results,
)

ROOT = Path(__file__).resolve().parents[2]


def test_time_host_counts_calls_and_orders_percentiles():
    calls = []
    result = time_host(lambda: calls.append(1), warmup=2, repeats=5, number=3)
    assert len(calls) == (2 + 5) * 3
    assert len(result["samples"]) == 5
    assert result["min"] <= result["p10"] <= result["p50"] <= result["p90"] <= result["max"]
    assert result["min"] > 0


def test_time_host_runs_sync_inside_each_sample():
    synced = []
    time_host(lambda: None, warmup=0, repeats=4, sync=lambda: synced.append(1))
    assert len(synced) == 4


def test_time_host_budget_stops_after_three_samples():
    calls = []
    result = time_host(lambda: calls.append(1), warmup=0, repeats=50, budget_s=0.0)
    assert len(result["samples"]) == 3 and len(calls) == 3


def test_time_host_setup_runs_before_every_sample_outside_the_clock():
    events = []
    time_host(lambda: events.append("call"), warmup=1, repeats=3, setup=lambda: events.append("setup"))
    assert events == ["setup", "call"] * 4


def test_time_host_rejects_zero_repeats():
    with pytest.raises(ValueError, match="at least 1"):
        time_host(lambda: None, repeats=0)


def test_summarize_percentiles():
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s["p50"], s["min"], s["max"]) == (3.0, 1.0, 5.0)
    with pytest.raises(ValueError):
        summarize([])


def test_time_device_uses_cuda_events():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    x = cupy.ones(1 << 20, dtype=cupy.float32)
    result = time_device(lambda: x * 2, repeats=3)
    assert len(result["samples"]) == 3 and result["p50"] > 0


def test_run_metadata_names_commit_and_device(monkeypatch):
    monkeypatch.delenv("ADAPTUNE_COMMIT", raising=False)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    meta = run_metadata(device="pocl-cpu")
    assert meta["commit"] == head
    assert meta["device"] == "pocl-cpu"
    assert meta["packages"]["numpy"]
    assert isinstance(meta["dirty"], bool)
    monkeypatch.setenv("ADAPTUNE_COMMIT", "abc1234")
    assert run_metadata()["commit"] == "abc1234" and run_metadata()["dirty"] is None


def test_write_results_writes_json_and_table(tmp_path):
    rows = [{"name": "a|b", "ms": 1.23456}, {"name": "c", "ms": None}]
    path = write_results(tmp_path / "new", "demo_cpu", {"rows": rows}, table=rows, title="Demo", notes="n.")
    doc = json.loads(path.read_text())
    assert path.name == "demo_cpu.json"
    assert doc["rows"] == rows and doc["metadata"]["commit"]
    md = (tmp_path / "new" / "demo_cpu.md").read_text()
    assert md.startswith("# Demo")
    assert "| a\\|b | 1.235 |" in md and "| c |  |" in md and md.rstrip().endswith("n.")


def test_write_results_keeps_given_metadata(tmp_path):
    path = write_results(tmp_path, "x", {"v": 1}, metadata={"commit": "c0ffee", "device": "h100"})
    assert json.loads(path.read_text())["metadata"] == {"commit": "c0ffee", "device": "h100"}
    assert "device h100" in (tmp_path / "x.md").read_text()


def test_markdown_table_picks_columns():
    text = markdown_table([{"a": 1, "b": 2}], ["b"])
    assert text.splitlines() == ["| b |", "|---|", "| 2 |"]
    assert markdown_table([]) == ""


def test_plots_write_png(tmp_path):
    bars = plot_bars(tmp_path / "b.png", ["x", "y"], [1.0, 2.0], errors=[0.1, 0.2], log=True)
    lines = plot_lines(tmp_path / "l.png", {"s": ([1, 2], [3, 4])}, logx=True)
    for png in (bars, lines):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_study_parser_defaults_outside_results(monkeypatch):
    monkeypatch.delenv("ADAPTUNE_BENCH_PROFILE", raising=False)
    args = study_parser("search").parse_args([])
    assert (args.out, args.profile) == ("out/search", "regular")
    monkeypatch.setenv("ADAPTUNE_BENCH_PROFILE", "smoke")
    assert study_parser("search").parse_args([]).profile == "smoke"


def test_output_stem_names_device():
    assert output_stem("gpu_suite", "NVIDIA H100 80GB HBM3") == "gpu_suite_nvidia_h100_80gb_hbm3"
    assert output_stem("gpu_suite", "pocl-cpu") == "gpu_suite_pocl_cpu"


def test_write_results_keeps_a_finished_report_title(tmp_path):
    write_results(tmp_path, "r", {"v": 1}, table="# My study\n\n| a |\n|---|\n| 1 |\n",
                  metadata={"commit": "c0ffee"})
    lines = (tmp_path / "r.md").read_text().splitlines()
    assert lines[0] == "# My study" and lines[2].startswith("Commit c0ffee") and "| 1 |" in lines


def test_smoke_profile_overrides_only_defaults():
    parser = study_parser("s")
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--cap", type=int, default=400)
    args = parse_study_args(parser, ["--profile", "smoke", "--cap", "7"], smoke={"repeats": 2, "cap": 10})
    assert (args.repeats, args.cap) == (2, 7)
    assert parse_study_args(parser, [], smoke={"repeats": 2}).repeats in (2, 25)  # env may pick smoke
    assert parse_study_args(parser, ["--profile", "regular"], smoke={"repeats": 2}).repeats == 25


def test_device_tag_names_the_device_not_the_study():
    assert device_tag("NVIDIA H100 80GB HBM3") == "h100"
    assert device_tag("NVIDIA H200") == "h200"
    assert device_tag("pthread-AMD EPYC 7B13") == "pocl"
    assert device_tag("opencl") == "pocl"
    assert device_tag("Radeon Pro X") == "radeon_pro_x"


def test_finish_study_writes_report_chart_and_prints(tmp_path, capsys):
    drawn = []
    data = {"score": 0.9}
    path = finish_study(tmp_path, "s_pocl", data, markdown=lambda d: f"# S\n\nscore {d['score']}\n",
                        plot=lambda d, png: drawn.append(png.name), meta=study_meta("benchmarks.s.run", 0.0, []))
    assert path == tmp_path / "s_pocl.json" and drawn == ["s_pocl.png"]
    assert data["meta"]["command"] == "python -m benchmarks.s.run " and data["meta"]["seconds"] > 0
    assert "score 0.9" in capsys.readouterr().out


def test_example_module_loads_an_examples_problem_file():
    module = example_module("vector_add")
    assert module.problem_small.name.startswith("vector_add")


def test_paired_summary_pairs_each_call_with_the_baseline_call_of_its_repeat():
    samples = {"baseline": [[2.0, 4.0], [8.0]], "now": [[1.0, 4.0], [2.0]]}
    rows = {r["side"]: r for r in paired_summary(samples)}
    assert rows["now"]["paired_ratio_p50"] == 0.5  # 0.5, 1.0, 0.25
    assert rows["now"]["ratio_of_p50s"] == 2.0 / 4.0 and rows["now"]["calls"] == 3
    assert rows["now"]["p50_per_round"] == "2.50 / 2.00" and rows["baseline"]["paired_ratio_p50"] == 1.0
