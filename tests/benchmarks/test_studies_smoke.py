"""Every study's smoke command runs as documented (``python -m benchmarks.<study>...``), writes where it is
told with the device in the file name, and leaves the committed results untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (command after "python -m", the file it must write under --out)
SMOKE = {
    "search": (["benchmarks.search.run", "--profile", "smoke"], "search_comparison.json"),
    "space_construction": (["benchmarks.space_construction.run", "--profile", "smoke"],
                           "space_construction_quick.json"),
    "vs_kernel_tuner": (["benchmarks.vs_kernel_tuner.run", "--profile", "smoke"], "vs_kernel_tuner_opencl.json"),
    "distributed": (["benchmarks.distributed.run", "replay", "--profile", "smoke"], "distributed.json"),
    "energy": (["benchmarks.energy.run", "--profile", "smoke"], "energy_pocl.json"),
    "lang": (["benchmarks.lang.run", "--profile", "smoke"], "lang_pocl.json"),
    "thresholds": (["benchmarks.thresholds.plot"], "thresholds.md"),
    "transfer": (["benchmarks.transfer.search", "--profile", "smoke"], "transfer_search.json"),
    "gpu_suite": (["benchmarks.gpu_suite.reanalysis", "--no-timing"], "gpu_suite_h100_reanalysis.json"),
    "hotpath": (["benchmarks.hotpath.run", "--profile", "smoke", "--device", "opencl"], "hotpath_pocl.json"),
    # running the examples needs a Kernel Tuner checkout (network): the smoke re-summarises the committed run
    "kt_examples": (["benchmarks.kt_examples.run", "--merge", "benchmarks/kt_examples/results/kt_examples.json"],
                    "kt_examples.json"),
    "dashboard_scale": (["benchmarks.dashboard_scale.run", "--profile", "smoke"], "dashboard_scale_10000.json"),
}


def _committed_results() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "benchmarks/*/results"],
                          capture_output=True, text=True).stdout


@pytest.mark.slow
@pytest.mark.parametrize("study", sorted(SMOKE))
def test_smoke_command_writes_only_under_out(tmp_path, study):
    command, expected = SMOKE[study]
    before = _committed_results()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), MPLBACKEND="Agg",
               ADAPTUNE_BENCH_PROFILE="regular")
    proc = subprocess.run([sys.executable, "-m", *command, "--out", str(tmp_path / "out")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{study}: {proc.stderr[-3000:]}"
    assert (tmp_path / "out" / expected).is_file(), sorted(p.name for p in (tmp_path / "out").glob("*"))
    assert _committed_results() == before


def test_every_study_has_a_readme_a_run_module_and_results():
    studies = [p.parent for p in (ROOT / "benchmarks").glob("*/run.py")]
    assert len(studies) >= 12
    for study in studies:
        assert (study / "README.md").is_file() and (study / "results").is_dir(), study.name
        assert study.name in SMOKE or study.name in ("adaptive_cpu", "ndp", "lscat", "store_scale", "triton"), (
            f"{study.name}: add its smoke command here")  # adaptive_cpu: test_adaptive_cli.py; ndp, lscat: minutes;
        # store_scale: tests/benchmarks/test_store_scale_smoke.py (checks its numbers too); triton: needs Triton's
        # tutorials (a checkout) and a GPU, its decorator runs under the interpreter in tests/integrations/
