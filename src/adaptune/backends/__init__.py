"""Device backends: compile, hold data, launch and time kernels on one device.

``make_backend("opencl" | "cuda" | "c", device)`` gives a :class:`Backend` (``"c"``: host functions built
with a host compiler, Kernel Tuner's ``lang="C"``); ``"python"`` runs plain callables. Backend modules
import their device library lazily, so importing this package never needs PyOpenCL or CuPy.
"""

from __future__ import annotations

from typing import Any

from adaptune.backends.base import (
    Backend,
    BackendError,
    CompileError,
    DeviceArray,
    DeviceLimits,
    define_lines,
    format_define,
    inject_defines,
    name_expression,
)
from adaptune.records import DeviceInfo

BACKENDS = ("opencl", "cuda", "c", "python")


def make_backend(name: str, device: Any = None, cache_dir: str | None = None) -> Any:
    """A backend instance by name; unknown names give one clear error. ``device=None``: the backend's own
    choice (OpenCL: the preferred device that can build; CUDA: device 0)."""
    if name == "opencl":
        from adaptune.backends.opencl import OpenCLBackend

        return OpenCLBackend(device, cache_dir=cache_dir)
    if name == "cuda":
        from adaptune.backends.cuda import CUDABackend

        return CUDABackend(device, cache_dir=cache_dir)
    if name == "c":
        from adaptune.backends.host_c import HostCBackend

        return HostCBackend(device)
    if name == "python":
        from adaptune.backends.python import PythonBackend

        return PythonBackend(device)
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")


def list_devices() -> list[tuple[str, int, DeviceInfo]]:
    """(backend, index, info) for every device adaptune can use here (the host CPU included)."""
    from adaptune.backends.cuda import list_cuda_devices
    from adaptune.backends.python import PythonBackend

    out: list[tuple[str, int, DeviceInfo]] = []
    try:
        from adaptune.backends.opencl import list_opencl_devices

        out += [("opencl", i, info) for i, info in list_opencl_devices()]
    except BackendError:
        pass
    out += [("cuda", i, info) for i, info in list_cuda_devices()]
    out.append(("python", 0, PythonBackend().device_info()))
    return out


def device_name(name: str, device: Any = 0) -> str:
    """The name a backend's device reports, without opening a context (to match files recorded on it)."""
    if name == "opencl":
        from adaptune.backends.opencl import select_device

        return str(select_device(device)[1].name).strip()
    if name == "cuda":
        from adaptune.backends.cuda import cuda_device_name

        return cuda_device_name(device)
    if name == "c":
        from adaptune.backends.host_c import host_device_name

        return host_device_name()
    raise ValueError(f"no device names for backend {name!r}")


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "CompileError",
    "DeviceArray",
    "DeviceInfo",
    "DeviceLimits",
    "define_lines",
    "device_name",
    "format_define",
    "inject_defines",
    "list_devices",
    "make_backend",
    "name_expression",
]
