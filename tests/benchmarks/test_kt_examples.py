"""kt_examples changes only the import lines of a Kernel Tuner example, and judges the best on Kernel Tuner's clock
(in the run, and by a referee that re-times both bests side by side)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptune.records import DeviceInfo, Result, Status
from adaptune.store import Store
from benchmarks.kt_examples.referee import TOOLS, narrowed, replay_call, verdict
from benchmarks.kt_examples.run import (
    _stored_text,
    _summarise,
    compare,
    merged_examples,
    plot_ratios,
    run_tool,
    swap_imports,
    write,
)
from benchmarks.kt_examples.store_gaps import gaps, summary

OPENCL_ADD = """__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
    if (i < n) { c[i] = a[i] + b[i]; }
}"""

SCRIPT = """import numpy
import kernel_tuner
import kernel_tuner as kt
from kernel_tuner import tune_kernel, run_kernel
from kernel_tuner import util
from kernel_tuner.file_utils import store_output_file
    import kernel_tuner
x = kernel_tuner.tune_kernel  # import kernel_tuner in a comment stays
"""


def test_only_entry_point_imports_change():
    text, changed = swap_imports(SCRIPT)
    assert changed == 4
    assert text.splitlines() == [
        "import numpy", "import adaptune as kernel_tuner", "import adaptune as kt",
        "from adaptune import tune_kernel, run_kernel", "from kernel_tuner import util",
        "from kernel_tuner.file_utils import store_output_file", "    import adaptune as kernel_tuner",
        "x = kernel_tuner.tune_kernel  # import kernel_tuner in a comment stays"]


def call(best, times):
    return {"best": best, "best_time_ms": min(times.values()), "times_ms": times, "wall_s": 1.0}


def test_the_best_is_judged_on_kernel_tuners_clock():
    kt = {"status": "ok", "wall_s": 2.0, "calls": [call({"b": 64}, {"32": 1.02, "64": 1.0})]}
    close = {"status": "ok", "wall_s": 1.0, "calls": [call({"b": 32}, {"32": 0.5, "64": 0.9})]}
    far = {"status": "ok", "wall_s": 1.0, "calls": [call({"b": 32}, {"32": 0.5, "64": 0.9})]}
    kt_far = {"status": "ok", "wall_s": 2.0, "calls": [call({"b": 64}, {"32": 1.2, "64": 1.0})]}
    assert compare(close, kt)["same_or_within_3pct"] is True
    assert compare(far, kt_far)["same_or_within_3pct"] is False
    assert compare(close, kt)["tune_wall_ratio"] == 1.0
    assert compare({"status": "time_limit", "calls": []}, kt) == {"both_complete": False}


def test_per_configuration_times_are_kept_only_where_both_tools_completed(tmp_path):
    kt = {"status": "ok", "wall_s": 2.0, "calls": [call({"b": 64}, {"32": 1.02, "64": 1.0})]}
    ours = {"status": "ok", "wall_s": 1.0, "calls": [call({"b": 32}, {"32": 0.5, "64": 0.9})]}
    alone = {"status": "ok", "wall_s": 1.0, "calls": [call({"b": 32}, {"32": 0.5, "64": 0.9, "128": 0.7})]}
    report = {"kernel_tuner_commit": "abc", "runs": [], "examples": {"cuda/both.py": {"kernel_tuner": kt, "adaptune": ours},
                           "cuda/alone.py": {"kernel_tuner": {"status": "time_limit", "calls": []}, "adaptune": alone}}}
    write(tmp_path, report, {})
    assert "times_ms" in report["examples"]["cuda/both.py"]["adaptune"]["calls"][0]
    assert report["examples"]["cuda/alone.py"]["adaptune"]["calls"][0]["configs_timed"] == 3
    assert "times_ms" not in report["examples"]["cuda/alone.py"]["adaptune"]["calls"][0]
    # a later run of the other tool alone, merged beside the slimmed one, is judged without them
    assert compare({**ours, "calls": [{k: v for k, v in ours["calls"][0].items() if k != "times_ms"}]},
                   kt)["both_complete"] is True


def test_a_later_batch_replaces_results_but_not_with_an_example_it_did_not_run():
    first = {"examples": {"cuda/a.py": {"adaptune": {"status": "error"}}, "cuda/b.py": {"adaptune": {"status": "ok"}}}}
    later = {"examples": {"cuda/a.py": {"adaptune": {"status": "ok"}}, "cuda/b.py": {"not_run": "deadline"},
                          "cuda/c.py": {"not_run": "deadline"}}}
    merged = merged_examples([first, later])
    assert merged["cuda/a.py"]["adaptune"]["status"] == "ok"
    assert merged["cuda/b.py"]["adaptune"]["status"] == "ok"
    assert merged["cuda/c.py"] == {"not_run": "deadline"}


def refereed(*rounds):
    return {"status": "ok", "calls": [{"replayed": True, **verdict([dict(zip(TOOLS, r, strict=True)) for r in rounds],
                                                                   higher=False)}]}


def test_the_referees_medians_decide_where_it_replayed_the_call():
    kt = {"status": "ok", "wall_s": 2.0, "calls": [call({"b": 64}, {"32": 1.2, "64": 1.0})]}
    ours = {"status": "ok", "wall_s": 1.0, "calls": [call({"b": 32}, {"32": 0.5, "64": 0.9})]}
    # in its own run Kernel Tuner timed our best 20 % slower; re-timed side by side it is 1 % slower
    judged = compare(ours, kt, refereed((1.0, 1.01), (1.02, 1.0), (1.0, 1.01)))
    assert judged["same_or_within_3pct"] is True and judged["judged_by"] == ["referee"]
    assert judged["in_run_same_or_within_3pct"] is False
    assert compare(ours, kt, refereed((1.0, 1.10), (1.0, 1.08), (1.0, 1.09)))["same_or_within_3pct"] is False
    # a call the referee could not replay is judged in the run, as in result files from before the referee
    assert compare(ours, kt, {"calls": [{"replayed": False, "why": "simulation_mode"}]})["judged_by"] == ["in_run"]


def test_verdict_follows_the_objectives_direction_and_reports_failures():
    rounds = [{"kernel_tuner": 100.0, "adaptune": 98.0}, {"kernel_tuner": 101.0, "adaptune": 99.0}]
    assert verdict(rounds, higher=True)["within_3pct"] is True  # GFLOP/s: 98 of 100 is within 3 %
    assert verdict(rounds, higher=False)["within_3pct"] is True
    assert verdict([{"kernel_tuner": 100.0, "adaptune": 90.0}], higher=True)["within_3pct"] is False
    noisy = verdict([{"kernel_tuner": 1.0, "adaptune": 0.9}, {"kernel_tuner": 1.0, "adaptune": 1.2}], higher=False)
    assert noisy["rounds_agree"] is False
    failed = verdict([{"kernel_tuner": 1.0, "adaptune": "InvalidConfig"}], higher=False)
    assert failed["replayed"] is False and "adaptune's best: InvalidConfig" in failed["why"]


def test_narrowing_finds_the_scripts_own_values_and_refuses_others():
    params = {"block_size_x": [32, 64], "vendor": ["a", "b"]}
    assert narrowed(params, {"block_size_x": 64, "vendor": "b"}) == {"block_size_x": [64], "vendor": ["b"]}
    with pytest.raises(LookupError, match="block_size_x=48"):
        narrowed(params, {"block_size_x": 48, "vendor": "a"})


def test_an_example_listed_as_needing_something_keeps_its_earlier_run_aside():
    merged = merged_examples([{"examples": {"cuda/texture.py": {"adaptune": {"status": "error"}}}}])
    assert merged["cuda/texture.py"]["skipped"].startswith("needs CUDA texture references")
    assert merged["cuda/texture.py"]["earlier_run"] == {"adaptune": {"status": "error"}}


@pytest.mark.slow
def test_the_referee_replays_a_call_with_kernel_tuner_on_pocl():
    kernel_tuner = pytest.importorskip("kernel_tuner")
    size = 4096
    a, b = np.arange(size, dtype=np.float32), np.ones(size, dtype=np.float32)
    call = {"kernel_name": "vector_add", "kernel_source": OPENCL_ADD, "problem_size": size,
            "arguments": [np.zeros_like(a), a, b, np.int32(size)], "tune_params": {"block_size_x": [32, 64, 128]},
            "lang": "OpenCL", "iterations": 3, "cache": "must_not_be_read.json"}
    pair = {"kernel": "vector_add", "kernel_tuner": {"block_size_x": 64}, "adaptune": {"block_size_x": 128}}
    record, (results, _) = replay_call(kernel_tuner.tune_kernel, call, pair, 2, ("time", False))
    assert record["replayed"] is True and len(record["rounds"]) == 2
    assert list(record["rounds"][1]) == ["adaptune", "kernel_tuner"]  # order alternates
    assert all(v > 0 for r in record["rounds"] for v in r.values())
    assert sorted(r["block_size_x"] for r in results) == [64, 128]  # the script gets both configurations back


def test_an_example_stopped_at_the_limit_ran_but_did_not_complete_and_an_error_did_neither():
    examples = {"cuda/a.py": {"adaptune": {"status": "ok"}, "kernel_tuner": {"status": "error"}, "compare": {}},
                "cuda/b.py": {"adaptune": {"status": "time_limit"}, "kernel_tuner": {"status": "time_limit"},
                              "compare": {}},
                "cuda/c.py": {"adaptune": {"status": "error"}, "kernel_tuner": {"status": "ok"}, "compare": {}},
                "cuda/d.py": {"skipped": "needs a Jetson"}}
    report = {"examples": examples}
    _summarise(report)
    s = report["summary"]["cuda"]
    assert s["runnable"] == 3
    assert s["examples_ok_share"] == pytest.approx(1 / 3) and s["examples_ran_share"] == pytest.approx(2 / 3)
    assert s["kernel_tuner_ok_share"] == pytest.approx(1 / 3) and s["kernel_tuner_ran_share"] == pytest.approx(2 / 3)


def test_the_ratio_plot_shows_each_example_both_tools_complete_and_none_without(tmp_path):
    report = {"examples": {"cuda/a.py": {"compare": {"tune_wall_ratio": 0.4}},
                           "cuda/b.py": {"compare": {"both_complete": False}},
                           "cuda/c.py": {"skipped": "needs a Jetson"}}}
    assert plot_ratios(tmp_path / "r.png", report)
    assert (tmp_path / "r.png").read_bytes().startswith(b"\x89PNG")
    assert not plot_ratios(tmp_path / "none.png", {"examples": {"cuda/b.py": {"compare": {}}}})
    assert not (tmp_path / "none.png").exists()


def test_a_kept_store_lets_the_next_run_of_an_example_resume(tmp_path):
    # --store-dir: an example too long for one device call goes on in the next from what the first stored
    pytest.importorskip("pyopencl")
    script = tmp_path / "example" / "add.py"
    script.parent.mkdir()
    script.write_text(f'''import numpy
import kernel_tuner
KERNEL = """{OPENCL_ADD}"""
n = 4096
a, b = numpy.arange(n, dtype=numpy.float32), numpy.ones(n, dtype=numpy.float32)
kernel_tuner.tune_kernel("vector_add", KERNEL, n, [numpy.zeros_like(a), a, b, numpy.int32(n)],
                         {{"block_size_x": [32, 64, 128, 256]}}, lang="OpenCL", iterations=3)
''')
    stores = tmp_path / "stores"
    first = run_tool("adaptune", script, tmp_path / "run1", 120, store_dir=stores)
    second = run_tool("adaptune", script, tmp_path / "run2", 120, store_dir=stores)
    assert first["status"] == second["status"] == "ok", (first["why"], second["why"])
    assert "resumed_from" not in first and second["resumed_from"] == 4
    assert [c["results"] for c in second["calls"]] == [4]  # all four rows come back, none measured again
    assert first["calls"][0]["timings_ms"]["worker_stats"]["measured"] == 4
    assert second["calls"][0]["timings_ms"].get("worker_stats", {}).get("measured", 0) == 0
    assert "resumed from 4 results" in _stored_text(second)


def test_a_call_of_one_tool_alone_keeps_the_other_tools_earlier_run_and_says_so():
    run = {"lang": "cuda", "time_limit_s": 60, "device": "H100", "commit": "abc1234", "date": "d", "host": "h"}
    earlier = {"runs": [run], "examples": {
        "cuda/a.py": {"kernel_tuner": {"status": "error", "why": "CompileException"},
                      "adaptune": {"status": "time_limit", "why": "stopped at the 60 s limit"}}}}
    later = {"runs": [{**run, "commit": "def5678", "time_limit_s": 500}], "examples": {
        "cuda/a.py": {"adaptune": {"status": "ok", "why": ""}}}}
    merged = merged_examples([earlier, later])["cuda/a.py"]
    assert merged["adaptune"]["status"] == "ok"
    assert merged["kernel_tuner"]["status"] == "error"
    assert merged["kernel_tuner"]["why"] == ("CompileException (an earlier run: abc1234 on H100, 60 s; this call ran "
                                             "the other tool alone)")
    again = merged_examples([{"runs": [run, run], "examples": {"cuda/a.py": merged}}, later])["cuda/a.py"]
    assert again["kernel_tuner"]["why"].count("an earlier run") == 1  # said once, however often it is merged


def test_the_gaps_between_stored_results_say_what_held_a_run_up(tmp_path):
    store = Store(str(tmp_path / "a.db"))
    ids = store.device(DeviceInfo("GPU", "cuda", "1")), store.problem("k", "h")
    ids = (*ids, store.input(ids[1], "n"))
    for i, (at, status) in enumerate([(100.0, "ok"), (100.3, "ok"), (130.3, "compile_error"), (130.5, "ok")]):
        result = Result({"b": i}, time_ms=1.0) if status == "ok" else Result.failure({"b": i}, Status(status),
                                                                                   "ptxas error : too much\nmore")
        result.timestamp = at
        store.put(*ids, result)
    store.close()
    report = summary(gaps(str(tmp_path / "a.db")), top=1)
    assert report["results"] == 4 and report["span_s"] == pytest.approx(30.5)
    assert report["by_status"]["compile_error"]["waits"] == 1
    assert report["by_status"]["compile_error"]["wait_s"] == pytest.approx(30.0)
    assert report["by_status"]["ok"]["waits"] == 0  # 0.3 and 0.2 s: the run's pace, not waits
    assert report["longest"][0]["error"] == "ptxas error : too much" and report["longest"][0]["config"] == {"b": 2}
