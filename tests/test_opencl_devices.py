"""Device choice on real OpenCL platforms: a platform that cannot compile is skipped, an explicit choice of it
fails with its own build error, and when none can compile there is one clear message (issue 28).

A PoCL that really cannot compile is made from PyPI's own PoCL: a copy of its library without the OpenCL
headers it reads at build time (the install is broken the way a driver too old for the CPU is: every
build fails). Each case runs in a subprocess whose ICD loader sees only the platforms the test names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pyopencl = pytest.importorskip("pyopencl")

SITE = Path(pyopencl.__file__).resolve().parents[1]
SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")


def _broken_pocl(tmp: Path) -> Path:
    """An ICD vendors folder holding one PoCL whose every build fails; returns the folder."""
    libs = sorted((SITE / "pyopencl" / ".libs").glob("libpocl*.so*"))
    dist = SITE / "pocl_binary_distribution"
    if not libs or not (dist / ".libs" / "share" / "pocl" / "include").is_dir():
        pytest.skip("needs PyPI's PoCL (pyopencl[pocl]) to make a broken copy of")
    (tmp / "pyopencl" / ".libs").mkdir(parents=True)
    shutil.copy2(libs[0], tmp / "pyopencl" / ".libs" / libs[0].name)
    shutil.copytree(dist, tmp / "pocl_binary_distribution")
    shutil.rmtree(tmp / "pocl_binary_distribution" / ".libs" / "share" / "pocl" / "include")
    vendors = tmp / "vendors"
    vendors.mkdir()
    (vendors / "broken.icd").write_text(f"{tmp / 'pyopencl' / '.libs' / libs[0].name}\n")
    return vendors


def _env(vendors: Path, tmp: Path) -> dict[str, str]:
    # fresh compiler caches: a cached binary would hide a compiler that cannot build
    return {**os.environ, "OCL_ICD_VENDORS": str(vendors), "PYOPENCL_NO_CACHE": "1",
            "POCL_CACHE_DIR": str(tmp / "pocl_cache")}


CLI = "import sys; from adaptune.cli import main; sys.exit(main())"
PROBE = r"""
import json, numpy as np
from adaptune.backends.opencl import list_opencl_devices, select_device, OpenCLBackend
from adaptune.backends.base import CompileError
states = [info.properties["state"] for _, info in list_opencl_devices()]
platform, device = select_device(None)
backend = OpenCLBackend(None)
src = "__kernel void twice(__global float *a) { int i = get_global_id(0); a[i] = 2.0f * a[i]; }"
kernel = backend.compile(src, "twice")
(buf,) = backend.allocate([np.arange(8, dtype=np.float32)])
backend.launch(kernel, (2, 1, 1), (4, 1, 1), [buf])
out = backend.copy_out(buf).tolist()
broken = next(i for i, s in enumerate(states) if s != "ok")
try:
    OpenCLBackend(broken).compile(src, "twice")
    explicit = "built"
except CompileError as exc:
    explicit = str(exc)
print(json.dumps({"states": states, "out": out, "explicit": explicit}))
"""


def test_a_platform_that_cannot_compile_is_skipped(tmp_path: Path) -> None:
    working = sorted(SYSTEM_VENDORS.glob("*.icd")) if SYSTEM_VENDORS.is_dir() else []
    if not working:
        pytest.skip("needs a second OpenCL platform in /etc/OpenCL/vendors (make test installs Debian's PoCL)")
    vendors = _broken_pocl(tmp_path)
    for icd in working:
        shutil.copy2(icd, vendors / icd.name)
    run = subprocess.run([sys.executable, "-c", PROBE], env=_env(vendors, tmp_path), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert "ok" in report["states"]
    assert any(s.startswith("cannot compile:") and "not found" in s for s in report["states"]), report
    assert report["out"] == [2.0 * i for i in range(8)]  # the kernel ran on the device that can build
    assert "not found" in report["explicit"]  # an explicit choice is honoured and fails with its own error


def test_no_device_that_can_compile_gives_one_clear_message(tmp_path: Path) -> None:
    env = _env(_broken_pocl(tmp_path), tmp_path)
    cli = subprocess.run([sys.executable, "-c", CLI, "devices", "--check"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 1
    lines = [ln for ln in cli.stderr.splitlines() if ln.startswith("adaptune")]
    assert len(lines) == 1 and "Traceback" not in cli.stderr, cli.stderr
    assert "cannot compile" in lines[0] and "pocl-opencl-icd" in lines[0]

    (tmp_path / "test_one.py").write_text("def test_nothing():\n    assert True\n")
    shutil.copy2(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                           env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert suite.returncode == 3, suite.stdout[-2000:]  # the suite fails at its start, never passes
    assert "no OpenCL device here can compile" in suite.stdout + suite.stderr
    assert "1 passed" not in suite.stdout
