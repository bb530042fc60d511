"""Device features: a numeric description of a GPU/CPU that a model can concatenate to its input features.

Nitro (seed 001, ch. 3) describes each architecture by 13 device features (deviceQuery, published peaks,
atomic micro-benchmarks) and appends them to every training row (multitask learning by feature
concatenation). Here the features come from two places:

- a table of published specifications (``data/devices/device_features.json``, sources named per device)
  for the GPUs behind the recorded spaces and the GPUs the project measures on;
- what a backend reports live (``DeviceInfo.properties``: compute units, clock, memory sizes, work-group
  limit, vendor), plus a measured memory bandwidth the caller may pass in (measured once, cached).

Numbers that span orders of magnitude are used as log2 by ``device_vector``; ``vendor_nvidia`` is 0/1.
"""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from adaptune.records import DeviceInfo

TABLE_PATH = Path(__file__).resolve().parents[3] / "data" / "devices" / "device_features.json"

DEVICE_FEATURES: tuple[str, ...] = (
    "vendor_nvidia", "compute_units", "cores", "clock_mhz", "mem_bandwidth_gbs", "global_mem_gb", "l2_kb",
    "last_level_cache_mb", "local_mem_kb", "simd_width", "peak_gflops_sp", "max_work_group",
)
"""Every feature name a device vector may use (a model picks a subset: CV-DFS)."""

LINEAR_FEATURES = frozenset({"vendor_nvidia"})
"""Features used as they are; all others enter a model as log2 (ratios between devices matter)."""


def cpu_device() -> DeviceInfo:
    """This machine's CPU as a device record (labels are only valid on the device that measured them)."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return DeviceInfo(name=name, platform="cpu", driver=platform.python_version(),
                      properties={"cores": os.cpu_count() or 0})


class DeviceFeatureError(KeyError):
    """A device or a feature is not known; the message names which and what is known."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is meant to be read
        return str(self.args[0]) if self.args else ""


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"device feature table {p} does not exist")
    data = json.loads(p.read_text())
    devices = data.get("devices")
    if not isinstance(devices, dict) or not devices:
        raise ValueError(f"device feature table {p} has no 'devices' object")
    return devices


def load_device_table(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The published-specification table: ``{short name: {feature: value, "aliases": [...]}}``."""
    return dict(_load(str(path or TABLE_PATH)))


def find_device(name: str, table: Mapping[str, Mapping[str, Any]] | None = None) -> str | None:
    """The table entry whose short name or an alias occurs in ``name`` (case-insensitive), else None.

    ``"NVIDIA A100-PCIE-40GB"`` finds ``A100``; the longest matching alias wins.
    """
    table = table if table is not None else load_device_table()
    low = name.lower()
    best, best_len = None, 0
    for short, entry in table.items():
        for alias in [short, *entry.get("aliases", [])]:
            a = str(alias).lower()
            if a and a in low and len(a) > best_len:
                best, best_len = short, len(a)
    return best


def table_features(name: str, table: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, float]:
    """Features of a device of the table, found by name (``DeviceFeatureError`` when not there)."""
    table = table if table is not None else load_device_table()
    short = find_device(name, table)
    if short is None:
        raise DeviceFeatureError(f"device {name!r} is not in the device feature table "
                                 f"(known: {', '.join(sorted(table))})")
    return {k: float(v) for k, v in table[short].items() if k in DEVICE_FEATURES}


def features_from_info(info: DeviceInfo, *, bandwidth_gbs: float | None = None,
                       table: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, float]:
    """Features of a live device: what its backend reports, over the table's values when the name is known.

    ``bandwidth_gbs`` (a measured copy bandwidth) replaces the published peak when given: a measured
    number describes this machine, a datasheet only its model.
    """
    table = table if table is not None else load_device_table()
    short = find_device(info.name, table)
    out: dict[str, float] = table_features(info.name, table) if short else {}
    p = info.properties or {}
    vendor = str(p.get("vendor", "")).lower()
    if info.platform == "cuda" or "nvidia" in vendor:
        out["vendor_nvidia"] = 1.0
    elif vendor:
        out["vendor_nvidia"] = 0.0
    reported = {
        "compute_units": p.get("compute_units", p.get("multiprocessors")),
        "clock_mhz": p.get("max_clock_mhz"),
        "global_mem_gb": p["global_mem_bytes"] / 2**30 if p.get("global_mem_bytes") else None,
        "local_mem_kb": (p.get("local_mem_bytes") or p.get("shared_mem_per_block") or 0) / 1024 or None,
        "max_work_group": p.get("max_work_group_size", p.get("max_threads_per_block")),
    }
    for k, v in reported.items():
        if v is not None and k not in out:  # the table's figures are the documented ones; fill gaps only
            out[k] = float(v)
    if bandwidth_gbs is not None:
        out["mem_bandwidth_gbs"] = float(bandwidth_gbs)
    return out


PROXY_TABLE_PATH = TABLE_PATH.with_name("proxy_features.json")


def measured_features(name: str, path: str | Path | None = None) -> dict[str, float]:
    """A device's measured proxy rates (``adaptune.kernels.proxies``) from ``data/devices/proxy_features.json``,
    found by exact device name (as the backend reports it); ``DeviceFeatureError`` when not measured."""
    p = Path(path or PROXY_TABLE_PATH)
    if not p.exists():
        raise FileNotFoundError(f"proxy feature table {p} does not exist")
    devices = json.loads(p.read_text()).get("devices", {})
    if name not in devices:
        raise DeviceFeatureError(f"no measured proxies for device {name!r} in {p} (measured: {', '.join(sorted(devices))})")
    return {k: float(v) for k, v in devices[name]["proxies"].items()}


def device_vector(features: Mapping[str, float], names: Sequence[str]) -> list[float]:
    """The model's view of a device: the named features, log2 except ``LINEAR_FEATURES``."""
    missing = [n for n in names if n not in features]
    if missing:
        raise DeviceFeatureError(f"device features {', '.join(missing)} are not known for this device "
                                 f"(known: {', '.join(sorted(features))})")
    out = []
    for n in names:
        v = float(features[n])
        out.append(v if n in LINEAR_FEATURES else math.log2(max(v, 1e-9)))
    return out


def cached_bandwidth(key: str, measure: Any, cache: str | Path | None = None) -> float:
    """A device's measured bandwidth in GB/s, measured once per ``key`` (e.g. device name + driver) and
    kept in a small JSON file (default ``~/.cache/adaptune/bandwidth.json``); ``measure()`` returns GB/s."""
    path = Path(cache) if cache else Path.home() / ".cache" / "adaptune" / "bandwidth.json"
    known: dict[str, float] = {}
    if path.exists():
        try:
            known = {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
        except (ValueError, AttributeError):
            known = {}  # a damaged cache is re-measured, not trusted
    if key not in known:
        value = float(measure())
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"bandwidth measurement for {key!r} returned {value}")
        known[key] = value
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=1, sort_keys=True))
    return known[key]


def copy_bandwidth_gbs(backend: str = "opencl", device: int | str = 0, nbytes: int = 64 << 20,
                       repeats: int = 5) -> float:
    """Device-to-device copy bandwidth in GB/s, bytes read plus written (median of ``repeats``), through
    the backend's own runtime; pass the result to ``features_from_info(..., bandwidth_gbs=)``, or measure
    it once per device with ``cached_bandwidth(key, lambda: copy_bandwidth_gbs(...))``."""
    import statistics

    times: list[float] = []
    if backend == "cuda":
        import cupy as cp

        with cp.cuda.Device(int(device)):
            a = cp.ones(nbytes // 4, dtype=cp.float32)
            b = cp.empty_like(a)
            for _ in range(repeats + 1):
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                cp.copyto(b, a)
                end.record()
                end.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    elif backend == "opencl":
        import pyopencl as cl

        from adaptune.backends.opencl import select_device

        _, dev = select_device(device)
        ctx = cl.Context([dev])
        queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        mf = cl.mem_flags
        a = cl.Buffer(ctx, mf.READ_WRITE, nbytes)
        b = cl.Buffer(ctx, mf.READ_WRITE, nbytes)
        cl.enqueue_fill_buffer(queue, a, b"\x01", 0, nbytes).wait()
        for _ in range(repeats + 1):
            ev = cl.enqueue_copy(queue, b, a, byte_count=nbytes)
            ev.wait()
            times.append((ev.profile.end - ev.profile.start) / 1e9)
    else:
        raise ValueError(f"copy_bandwidth_gbs: backend must be 'cuda' or 'opencl', got {backend!r}")
    seconds = statistics.median(times[1:])  # the first copy pays first-touch costs
    return 2 * nbytes / seconds / 1e9
