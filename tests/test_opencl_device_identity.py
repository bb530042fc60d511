"""A CPU OpenCL device's identity carries its compute units: one store opened by processes whose PoCL was given
different numbers of cores keeps their devices (and so their times) apart, and the same count finds the same
device again (real PoCL, fresh interpreters, one SQLite store)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyopencl")

from adaptune.backends.binary import binary_target_of  # noqa: E402
from adaptune.backends.opencl import OpenCLBackend, device_driver  # noqa: E402

REGISTER = """
import sys
from adaptune.backends.opencl import OpenCLBackend
from adaptune.store import open_store
info = OpenCLBackend().device_info()
with open_store(sys.argv[1]) as store:
    print(store.device(info), info.properties["compute_units"], info.driver, sep="|")
"""


def _register(store: Path, compute_units: int) -> tuple[int, int, str]:
    env = {**os.environ, "POCL_CPU_MAX_CU_COUNT": str(compute_units),  # PoCL's name for it since 4.0
           "POCL_MAX_PTHREAD_COUNT": str(compute_units)}  # and before (PoCL 3.1 here)
    out = subprocess.run([sys.executable, "-c", REGISTER, str(store)], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip().splitlines()[-1]
    device_id, units, driver = out.split("|", 2)
    return int(device_id), int(units), driver


def test_cpu_devices_with_other_core_counts_are_other_devices(tmp_path: Path) -> None:
    store = tmp_path / "results.db"
    one = _register(store, 1)
    if one[1] != 1:
        pytest.skip(f"this OpenCL CPU device ignores PoCL's core count ({one[1]} compute units)")
    two = _register(store, 2)
    assert two[1] == 2
    assert one[0] != two[0]
    assert one[2].endswith("(1 compute units)") and two[2].endswith("(2 compute units)")
    assert _register(store, 1)[0] == one[0]  # the same configuration finds its device again


def test_a_gpu_driver_is_its_version_alone() -> None:
    assert device_driver("580.159.04", 132, cpu=False) == "580.159.04"
    assert device_driver("3.1+debian", 32, cpu=True) == "3.1+debian (32 compute units)"


def test_binaries_stay_matched_to_the_driver_alone() -> None:
    """A compiled program is valid for the driver whatever cores it was given: the target a ``DeviceInfo``
    names (what the compile processes build for) is the backend's own."""
    backend = OpenCLBackend()
    assert binary_target_of(backend.device_info()) == backend.binary_target()
