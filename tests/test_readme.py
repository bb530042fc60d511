"""The README stays true: every ```python block of README.md, and every block of docs/*.md fenced as
plain ```python (API sketches are fenced ```python sketch), runs as a standalone script in a fresh
interpreter on PoCL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, block in enumerate(FENCE.findall(path.read_text())):
            found.append((f"{path.relative_to(ROOT)}#{i}", block))
    return found


BLOCKS = _blocks()


def test_the_readme_has_runnable_examples():
    assert sum(name.startswith("README.md") for name, _ in BLOCKS) >= 2


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_block_runs_as_a_script(tmp_path, name, code):
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=600)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stderr[-3000:]}"
