"""Where and when a result was measured: commit, host, CPU, package versions, device."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from adaptune.adaptive.device_features import cpu_device

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
    """Whether the tracked files differ from the commit; None where ``ADAPTUNE_COMMIT`` names the commit (a GPU
    machine's copy may hold an older ``.git`` than its files: its status says nothing about that commit)."""
    if os.environ.get("ADAPTUNE_COMMIT"):
        return None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


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
        "cpu": cpu_device().name,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "packages": _versions(),
        "device": device,
    }


def study_meta(module: str, started: float, argv: list[str] | None = None) -> dict:
    """The short provenance a study's report prints: date, commit, host, Python, seconds since ``started``
    (``time.perf_counter()``), the load at the end and the command that reproduces it."""
    args = sys.argv[1:] if argv is None else argv
    return {"date": dt.date.today().isoformat(), "commit": git_commit(),
            "host": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} CPUs",
            "python": platform.python_version(), "seconds": round(time.perf_counter() - started, 1),
            "load_end": round(os.getloadavg()[0], 2), "command": f"python -m {module} " + " ".join(args)}
