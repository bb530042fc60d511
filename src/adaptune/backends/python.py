"""Python backend: plain callables (NumPy, SciPy, CuPy, PyTorch code) as tunable variants.

A variant is ``fn(config, *arguments) -> outputs``. Host code is timed with ``perf_counter_ns``;
when the outputs live on a GPU (CuPy arrays, CUDA PyTorch tensors) the call is bracketed with
CUDA events on the current stream and synchronised, so asynchronous launches are timed fully.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from adaptune.records import DeviceInfo

Timer = Callable[[Callable[[], Any]], tuple[Any, float]]


def as_output_list(outputs: Any) -> list[Any]:
    """A callable may return one array, a tuple/list of them, or None."""
    if outputs is None:
        return []
    if isinstance(outputs, tuple | list):
        return list(outputs)
    return [outputs]


def array_kind(obj: Any) -> str:
    """"cupy", "torch-cuda" or "host" for one output."""
    module = type(obj).__module__
    if module.startswith("cupy"):
        return "cupy"
    if module.startswith("torch") and getattr(obj, "is_cuda", False):
        return "torch-cuda"
    return "host"


def to_host(obj: Any) -> Any:
    """NumPy view of a CuPy array / PyTorch tensor; other values unchanged."""
    kind = array_kind(obj)
    if kind == "cupy":
        return obj.get()
    if type(obj).__module__.startswith("torch"):
        return obj.detach().cpu().numpy()
    return obj


def host_timer(call: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter_ns()
    out = call()
    return out, (time.perf_counter_ns() - t0) * 1e-6


def cupy_timer(call: Callable[[], Any]) -> tuple[Any, float]:
    import cupy as cp

    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    out = call()
    end.record()
    end.synchronize()
    return out, float(cp.cuda.get_elapsed_time(start, end))


def torch_timer(call: Callable[[], Any]) -> tuple[Any, float]:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = call()
    end.record()
    end.synchronize()
    return out, float(start.elapsed_time(end))


def timer_for(outputs: Sequence[Any]) -> Timer:
    """Device events when any output is on a GPU, else the host clock."""
    kinds = {array_kind(o) for o in outputs}
    if "cupy" in kinds:
        return cupy_timer
    if "torch-cuda" in kinds:
        return torch_timer
    return host_timer


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def gpu_info(kind: str, device: int) -> DeviceInfo:
    """The GPU that CuPy / PyTorch variants run on, named as the cuda backend names it."""
    if kind == "cupy":
        import cupy as cp

        raw = cp.cuda.runtime.getDeviceProperties(device)["name"]
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        v = cp.cuda.runtime.driverGetVersion()
        return DeviceInfo(name, "cuda", f"{v // 1000}.{v % 1000 // 10}", {"index": device, "via": "cupy"})
    import torch

    return DeviceInfo(torch.cuda.get_device_name(device), "cuda", str(torch.version.cuda),
                      {"index": device, "via": "torch"})


class PythonBackend:
    """Runs callables in this process; its device is the GPU when the arguments live on one
    (CuPy arrays, CUDA tensors), else the host CPU."""

    name = "python"
    lang = "python"

    def __init__(self, device: int | str | None = 0, arguments: Sequence[Any] = ()) -> None:
        self.device = device
        kinds = {array_kind(a) for a in arguments} - {"host"}
        self.gpu_kind = sorted(kinds)[0] if kinds else None

    def device_info(self) -> DeviceInfo:
        if self.gpu_kind is not None:
            return gpu_info(self.gpu_kind, self.device if isinstance(self.device, int) else 0)
        return DeviceInfo(
            name=cpu_name(),
            platform="cpu",
            driver=f"python {sys.version.split()[0]}, numpy {np.__version__}",
            properties={"cpu_count": os.cpu_count() or 1, "machine": platform.machine()},
        )

    @staticmethod
    def call(fn: Callable[..., Any], config: dict[str, Any], args: Sequence[Any]) -> list[Any]:
        return as_output_list(fn(config, *args))
