"""Every example tuned end to end on PoCL: real kernels, verified against NumPy, stored in SQLite."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from adaptune.store import Store
from adaptune.tuning import tune
from adaptune.tuning.spec_file import load_problem

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _small_problem(name: str):
    path = EXAMPLES / name / "problem.py"
    spec = importlib.util.spec_from_file_location(f"adaptune_example_test_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.problem_small


@pytest.mark.parametrize("name", ["vector_add", "matmul", "convolution", "reduction"])
def test_example_tunes_and_every_result_verifies(name, tmp_path):
    problem = _small_problem(name)
    budget = min(len(problem.space), 12)
    report = tune(problem, "random", max_evals=budget, repeats=2, db=str(tmp_path / "ex.db"),
                  progress=False, seed=0)
    assert report.evaluated == budget
    statuses = {str(r.status) for r in report.results}
    # Every example kernel is correct for every valid configuration: no wrong results, no crashes.
    assert statuses == {"ok"}, [(r.config, r.status, r.error) for r in report.results if not r.ok]
    assert report.best is not None and problem.space.is_valid(report.best)
    with Store(tmp_path / "ex.db") as store:
        assert len(store.results()) >= budget


@pytest.mark.parametrize("name", ["matmul", "convolution"])
def test_t1_file_tunes_like_its_python_twin(name, tmp_path):
    t1 = load_problem(EXAMPLES / name / "t1.json")
    twin = load_problem(EXAMPLES / name / "problem.py")
    twin_names = [p.name for p in twin.space.params]
    assert [p.name for p in t1.space.params][: len(twin_names)] == twin_names
    # T1 files may pin problem constants (e.g. the filter size) as one-valued parameters.
    assert all(len(p.values) == 1 for p in t1.space.params[len(twin_names):])
    assert len(t1.space) == len(twin.space)
    report = tune(t1, "random", max_evals=3, repeats=1, db=str(tmp_path / "t1.db"), progress=False, seed=1)
    assert report.evaluated == 3
    assert report.best is not None
