"""Every capability example in examples/ runs as a user runs it: ``python examples/<name>/<script>.py`` in a
fresh interpreter and an empty folder, on PoCL / the CPU, and exits 0 (each one checks its own result)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# script -> modules it needs beyond the core
SCRIPTS = {
    "tune_kernel/tune_vector_add.py": (),
    "choose_per_input/sort_per_input.py": (),
    "numpy_frontend/heat.py": (),
    "ndp/spmv.py": (),
    "thresholds/two_versions.py": (),
    "launch_config/block_size.py": (),
    "ray_postgres/tune_on_ray.py": ("ray", "pgserver"),
}
SLOW = {"launch_config/block_size.py",  # fits the LS-CAT forest on first use (about 20 s)
        "ray_postgres/tune_on_ray.py"}  # starts a Ray cluster and a PostgreSQL server


def test_every_example_folder_is_run_here():
    folders = {p.parent.name for p in EXAMPLES.glob("*/README.md")}
    kernels = {p.parent.name for p in EXAMPLES.glob("*/problem.py")}  # run by test_examples_kernels.py
    assert folders - kernels == {s.split("/")[0] for s in SCRIPTS}


@pytest.mark.parametrize("script", [
    pytest.param(s, marks=pytest.mark.slow) if s in SLOW else s for s in SCRIPTS])
def test_example_runs(tmp_path, script):
    missing = [m for m in SCRIPTS[script] if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}: pip install 'adaptune[distributed]'")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"{script} printed nothing"
