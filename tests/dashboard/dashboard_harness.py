"""Helpers of the dashboard tests: real tuning runs (``adaptune tune`` on PoCL) and the real server process.

Chromium is Debian's (``apt-get install chromium``, done by the Makefile and .ci/run) driven through
Playwright; Playwright's own browser download cannot reach the internet and is never used.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
HOSTILE = "<script>alert(1)</script>"
REFUSED_TILE = 8
SPEC = '''
from pathlib import Path

import numpy as np

from adaptune.measure import KernelSpec
from adaptune.space import Space
from adaptune.tuning import Problem

n = {n}
rng = np.random.default_rng(0)
a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
spec = KernelSpec(Path(__file__).with_name("kernel.cl"), "vector_add", [np.zeros(n, np.float32), a, b, np.int32(n)],
                  problem_size=n, grid_div=(["block_size_x", "tile_size_x"],), answer=[a + b, None, None, None],
                  atol=0.0, rtol=0.0, lang="opencl")
space = Space({params!r}, defaults={defaults!r})
problem = Problem({name!r}, spec, space, input_name={input_name!r})
'''


def write_spec(folder: Path, stem: str, *, name: str, n: int, input_name: str = "default",
               params: dict | None = None) -> Path:
    """A spec file for ``adaptune tune``: vector add on PoCL whose kernel refuses to compile tile 8."""
    kernel = (ROOT / "examples" / "vector_add" / "kernel.cl").read_text()
    refuse = f"#if tile_size_x == {REFUSED_TILE}\n#error tile_size_x {REFUSED_TILE} is refused by this kernel\n#endif\n"
    marker = "__kernel void"
    (folder / "kernel.cl").write_text(kernel.replace(marker, refuse + marker, 1))
    params = params or {"block_size_x": [16, 32, 64, 128, 256], "tile_size_x": [1, 2, 4, REFUSED_TILE]}
    path = folder / f"{stem}.py"
    path.write_text(SPEC.format(n=n, params=params, defaults={k: v[0] for k, v in params.items()},
                                name=name, input_name=input_name))
    return path


def tune(spec: Path, db: Path, *extra: str, wait: bool = True) -> subprocess.Popen | None:
    """``adaptune tune`` in its own process, as a user runs it."""
    cmd = [sys.executable, "-m", "adaptune", "tune", str(spec), "--db", str(db), "--repeats", "1", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    if not wait:
        return proc
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``adaptune dashboard`` in its own process, on a free local port."""

    def __init__(self, target: str, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "adaptune", "dashboard", target, "--port", str(self.port),
                                      *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the dashboard exited: {self.proc.stdout.read()}")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise AssertionError("the dashboard did not answer within 60 s")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out or ""


def screenshot(pg, name: str) -> None:
    """Save the page under $ADAPTUNE_SCREENSHOTS (how docs/dashboard/ is made; 256 colours keep the files
    small); nothing otherwise."""
    folder = os.environ.get("ADAPTUNE_SCREENSHOTS")
    if folder:
        path = Path(folder) / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(path), full_page=True)
        Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)
