"""Load what ``adaptune tune SPEC`` names: a Python file defining ``problem``, or a Kernel Tuner T1 file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import cloudpickle

from adaptune.tuning.problem import Problem


def load_problem(path: str | Path, backend: str = "opencl") -> Problem:
    """A ``.py`` SPEC is the user's own code and is run as such; a ``.json`` T1 file is parsed, never run."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such spec file: {path}")
    if path.suffix == ".json":
        from adaptune.tuning.t1_problem import problem_from_t1

        return problem_from_t1(path)
    if path.suffix != ".py":
        raise ValueError(f"{path}: a SPEC is a T1 .json file or a .py file that defines `problem`")
    module_name = f"adaptune_spec_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # The worker cannot import this module by its made-up name: its functions travel by value.
    cloudpickle.register_pickle_by_value(module)
    spec.loader.exec_module(module)
    name = "problem_cuda" if backend == "cuda" and hasattr(module, "problem_cuda") else "problem"
    problem = getattr(module, name, None)
    if callable(problem) and not isinstance(problem, Problem):
        problem = problem()
    if not isinstance(problem, Problem):
        raise ValueError(f"{path}: defines no `{name}` (an adaptune.tuning.Problem)")
    return problem
