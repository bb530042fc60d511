"""The store scale study's smoke profile (10^4 and 10^5 measurements, SQLite and PostgreSQL) runs as its README
says, every command succeeds and every imported row is in the store. No timing is asserted: the study
reports its targets, a test does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_store_scale_smoke_profile(tmp_path):
    pytest.importorskip("psycopg")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.store_scale.run", "--profile", "smoke", "--repeats", "1",
                           "--out", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "store_scale.json").read_text())
    assert sorted({(p["store"], p["rows"]) for p in data["points"]}) == [
        ("postgresql", 10_000), ("postgresql", 100_000), ("sqlite", 10_000), ("sqlite", 100_000)]
    for point in data["points"]:
        assert point["rows_stored"] == point["rows"]
        for step in ("import", "show --top 10", "export csv", "queries process"):
            assert point[step]["returncode"] == 0, (point["store"], point["rows"], step)
        assert "resume lookup (1000 configs)" in point["queries"] and len(point["queries"]) == 16
    assert (tmp_path / "store_scale.md").read_text().startswith("# The store at scale")
    assert (tmp_path / "store_scale.png").read_bytes()[:4] == b"\x89PNG"
