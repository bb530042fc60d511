"""Where and when a result was measured: commit, host, CPU, package versions, device."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Packages whose version changes a measurement; those not installed are left out.
KEY_PACKAGES = ("adaptune", "numpy", "scipy", "scikit-learn", "pyopencl", "cupy-cuda12x", "cupy-cuda13x",
                "torch", "triton", "jax", "numba-cuda", "kernel_tuner", "ray")


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit() -> str:
    """Short commit of the checkout; ``ADAPTUNE_COMMIT`` overrides it (a GPU machine gets no ``.git``)."""
    return os.environ.get("ADAPTUNE_COMMIT") or _git("rev-parse", "--short", "HEAD") or "unknown"


def _dirty() -> bool | None:
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions() -> dict[str, str]:
    found = {}
    for name in KEY_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def run_metadata(device: str | None = None) -> dict:
    """The record every result file carries, so a number can be traced to its run."""
    return {
        "commit": git_commit(),
        "dirty": _dirty(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "packages": _versions(),
        "device": device,
    }
