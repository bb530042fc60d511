"""Triton's tutorial kernels, loaded from a checkout: the definitions unchanged, only the decorator's import swapped.

``prepare`` copies each tutorial's definitions (everything before its unit-test / benchmark section, which
would run at import) into two files: ``<name>.triton.py`` as written and ``<name>.adaptune.py`` where
``@triton.autotune(`` reads ``@adaptune.triton.autotune(`` (plus ``import adaptune.triton``).
Triton's interpreter runs them on the CPU for a pilot only with NumPy < 2.4 (its loops over a tensor bound
convert a 1-element array to ``int``, which NumPy 2.4 refuses). The repository
never holds these copies: they go to a git-ignored folder (``.carry/triton_tutorials``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TUTORIALS = {  # file -> the first line of the part that runs tests or benchmarks at import
    "softmax": ("02-fused-softmax.py", "# Unit Test"),
    "matmul": ("03-matrix-multiplication.py", "# Unit Test"),
    "layernorm": ("05-layer-norm.py", "# Benchmark"),
    "attention": ("06-fused-attention.py", "TORCH_HAS_FP8 = "),
}


def definitions(text: str, marker: str) -> str:
    """The tutorial up to the ``# %%`` cell (or line) where ``marker`` starts; an ``import pytest`` that only
    the cut-off tests used goes too (a GPU machine need not have pytest)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(marker):
            start = i - 1 if i > 0 and lines[i - 1].startswith("# %%") else i
            body = "".join(lines[:start])
            return body.replace("import pytest\n", "", 1) if "pytest." not in body else body
    raise ValueError(f"marker {marker!r} not found: is this the tutorial of Triton 3.6?")


def swap_import(text: str) -> str:
    """The same module with ``adaptune.triton.autotune`` in place of ``triton.autotune``."""
    if "import triton\n" not in text:
        raise ValueError("no 'import triton' line to follow")
    return text.replace("import triton\n", "import triton\nimport adaptune.triton\n", 1).replace(
        "@triton.autotune(", "@adaptune.triton.autotune(")


def prepare(checkout: Path, folder: Path) -> list[Path]:
    """Write both copies of every tutorial from ``checkout`` (``python/tutorials`` of Triton's repository)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (file, marker) in TUTORIALS.items():
        body = definitions((checkout / file).read_text(), marker)
        for flavour, text in (("triton", body), ("adaptune", swap_import(body))):
            path = folder / f"{name}.{flavour}.py"
            path.write_text(text)
            written.append(path)
    return written


def load(folder: Path, name: str, flavour: str, tag: str) -> ModuleType:
    """A fresh module from ``<name>.<flavour>.py`` (``tag`` keeps several copies apart)."""
    path = folder / f"{name}.{flavour}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: run `python -m benchmarks.triton.run prepare --checkout ...` first")
    module_name = f"tutorial_{name}_{flavour}_{tag}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
