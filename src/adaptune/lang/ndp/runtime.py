"""Compile generated kernel text on a ``kernels.device`` Device and launch it.

Why here and not ``Device.kernel``: that method takes the name of one of the shipped kernel files; the
generator produces new text per (schedule, policy). This module prepends the same dialect header and
uses the device's own context (CuPy RawModule through NVRTC, or a PyOpenCL program on the device's
context and queue), so the text runs exactly as the shipped kernels do. Programs are cached by text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import numpy as np

from adaptune.kernels.device import CupyDevice, OpenCLDevice

Launch = Callable[[int, int, Sequence[Any]], None]


def dialect() -> str:
    return resources.files("adaptune.kernels").joinpath("dialect.h").read_text()


class Compiler:
    """Per-device cache of compiled generated programs; ``kernel(text, name)`` returns a launcher."""

    _shared: dict[int, tuple[Any, Compiler]] = {}

    @classmethod
    def for_device(cls, device: Any) -> Compiler:
        """One compiler (and program cache) per device object, shared by every generated computation."""
        entry = cls._shared.get(id(device))
        if entry is None or entry[0] is not device:
            entry = cls._shared[id(device)] = (device, cls(device))
        return entry[1]

    def __init__(self, device: Any) -> None:
        self.device = device
        self._launchers: dict[tuple[str, str], Launch] = {}
        self.header = dialect()

    @property
    def is_cuda(self) -> bool:
        return isinstance(self.device, CupyDevice)

    def limits(self) -> dict[str, int]:
        """Device limits used as Space constants: max work-group size, local memory bytes, CUDA or not."""
        dev = self.device
        if isinstance(dev, CupyDevice):
            props = dev.cp.cuda.runtime.getDeviceProperties(dev.cp.cuda.Device().id)
            return {"max_wg": int(props["maxThreadsPerBlock"]), "local_mem": int(props["sharedMemPerBlock"]),
                    "cuda": 1}
        if isinstance(dev, OpenCLDevice):
            d = dev.ctx.devices[0]
            return {"max_wg": int(d.max_work_group_size), "local_mem": int(d.local_mem_size), "cuda": 0}
        raise TypeError(f"unsupported device {type(dev).__name__}: use CupyDevice or OpenCLDevice")

    def kernel(self, text: str, name: str) -> Launch:
        key = (text, name)
        launcher = self._launchers.get(key)
        if launcher is None:
            launcher = self._launchers[key] = self._build(text, name)
        return launcher

    def _build(self, text: str, name: str) -> Launch:
        return self.device.kernel_text(self.header + "\n" + text, name, f"generated kernel {name}")


def np_dtype(dtype: str) -> Any:
    return np.float32 if dtype == "f32" else np.int32


def device_dtype(array: Any) -> str:
    kind = np.dtype(array.dtype)
    if kind == np.float32:
        return "f32"
    if kind == np.int32:
        return "i32"
    return str(kind)
