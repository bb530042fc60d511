"""Proxy micro-benchmarks (P-DFS's measured device features) on a real OpenCL device (PoCL)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adaptune.kernels.proxies import PROXY_NAMES, cached_proxies, device_key, measure_proxies

cl = pytest.importorskip("pyopencl")


@pytest.fixture(scope="module")
def dev():
    from adaptune.kernels.device import OpenCLDevice

    return OpenCLDevice()


def test_proxies_measure_positive_rates(dev):
    rates = measure_proxies(dev, repeats=1)
    assert set(rates) == set(PROXY_NAMES)
    assert all(np.isfinite(v) and v > 0 for v in rates.values())
    assert rates["launch_us"] < 1e6
    with pytest.raises(ValueError, match="size must be"):
        measure_proxies(dev, size="huge")


def test_cached_proxies_measure_once_and_distrust_damage(dev, tmp_path):
    path = tmp_path / "proxies.json"
    first = cached_proxies(dev, path)
    stored = json.loads(path.read_text())
    assert device_key(dev).startswith("opencl:") and set(stored[device_key(dev)]) == set(PROXY_NAMES)
    stored[device_key(dev)]["copy_gbs"] = 123.0  # a cached number is used as it is, not re-measured
    path.write_text(json.dumps(stored))
    assert cached_proxies(dev, path)["copy_gbs"] == 123.0
    assert cached_proxies(dev, path)["launch_us"] == first["launch_us"]
    path.write_text("{not json")
    again = cached_proxies(dev, path)  # damaged: measured again and rewritten
    assert set(again) == set(PROXY_NAMES) and json.loads(path.read_text())[device_key(dev)]
