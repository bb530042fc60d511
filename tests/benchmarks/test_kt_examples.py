"""kt_examples changes only the import lines of a Kernel Tuner example, and judges the best on Kernel Tuner's clock."""

from __future__ import annotations

from benchmarks.kt_examples.run import compare, merged_examples, swap_imports

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


def test_a_later_batch_replaces_results_but_not_with_an_example_it_did_not_run():
    first = {"examples": {"cuda/a.py": {"adaptune": {"status": "error"}}, "cuda/b.py": {"adaptune": {"status": "ok"}}}}
    later = {"examples": {"cuda/a.py": {"adaptune": {"status": "ok"}}, "cuda/b.py": {"not_run": "deadline"},
                          "cuda/c.py": {"not_run": "deadline"}}}
    merged = merged_examples([first, later])
    assert merged["cuda/a.py"]["adaptune"]["status"] == "ok"
    assert merged["cuda/b.py"]["adaptune"]["status"] == "ok"
    assert merged["cuda/c.py"] == {"not_run": "deadline"}
