"""Load a Python file that is not part of a package (an example's ``problem.py``, a study's spec)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import cloudpickle

from benchmarks.harness.metadata import ROOT


def load_file_module(path: str | Path, name: str | None = None) -> ModuleType:
    """Run ``path`` as a fresh module (functions travel to worker processes by value)."""
    path = Path(path)
    name = name or f"bench_file_{path.stem}_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    cloudpickle.register_pickle_by_value(module)
    spec.loader.exec_module(module)
    return module


def example_module(name: str) -> ModuleType:
    """``examples/<name>/problem.py`` (or ``examples/<name>.py``) as a module."""
    folder = ROOT / "examples" / name / "problem.py"
    return load_file_module(folder if folder.exists() else ROOT / "examples" / f"{name}.py")
