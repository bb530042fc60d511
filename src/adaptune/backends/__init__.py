"""Device backends: compile, hold data, launch and time kernels on one device.

``make_backend("opencl" | "cuda", device)`` gives a :class:`Backend`; ``"python"`` runs plain
callables. Backend modules import their device library lazily, so importing this package never
needs PyOpenCL or CuPy.
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

BACKENDS = ("opencl", "cuda", "python")


def make_backend(name: str, device: Any = None, cache_dir: str | None = None) -> Any:
    """A backend instance by name; unknown names give one clear error. ``device=None``: the backend's own
    choice (OpenCL: the preferred device that can build; CUDA: device 0)."""
    if name == "opencl":
        from adaptune.backends.opencl import OpenCLBackend

        return OpenCLBackend(device, cache_dir=cache_dir)
    if name == "cuda":
        from adaptune.backends.cuda import CUDABackend

        return CUDABackend(device, cache_dir=cache_dir)
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


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "CompileError",
    "DeviceArray",
    "DeviceInfo",
    "DeviceLimits",
    "define_lines",
    "format_define",
    "inject_defines",
    "list_devices",
    "make_backend",
    "name_expression",
]
