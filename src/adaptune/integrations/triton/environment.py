"""What the Triton drop-in asks of its surroundings: the device timings belong to, a timer for Triton's
interpreter (no GPU driver), a CUDA stream for background measurement, private copies of arguments."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import triton
from triton.runtime.driver import driver

from adaptune.backends.python import cpu_name
from adaptune.measure.timing import time_callable
from adaptune.records import DeviceInfo


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def host_bench(fn: Callable[[], Any], quantiles: Sequence[float] | None = None) -> list[float]:
    """``do_bench`` for Triton's interpreter (no GPU driver): wall-clock ms, at the requested quantiles."""
    samples = time_callable(fn, repeats=5, warmup=1)
    return [float(np.quantile(samples, q)) for q in (quantiles or (0.5,))]


def private_copy(value: Any) -> Any:
    """A private copy of a tensor argument for background measurement (the caller keeps using its own)."""
    clone = getattr(value, "clone", None)
    return clone() if callable(clone) and hasattr(value, "dtype") else value


def side_stream() -> Any:
    """A CUDA stream of its own for the background thread (a no-op context on the CPU)."""
    try:
        import torch
    except ImportError:
        return contextlib.nullcontext()
    if interpreting() or not torch.cuda.is_available():
        return contextlib.nullcontext()
    return torch.cuda.stream(torch.cuda.Stream())


def device_info() -> DeviceInfo:
    """The device timings belong to: the GPU Triton targets, or the CPU under Triton's interpreter."""
    version = f"triton {triton.__version__}"
    if interpreting():
        return DeviceInfo(cpu_name(), "triton-interpreter", version)
    target = driver.active.get_current_target()
    name = str(target.arch)
    try:
        import torch

        name = torch.cuda.get_device_name()
    except Exception:  # noqa: BLE001 - the arch alone still separates devices
        pass
    return DeviceInfo(name, str(target.backend), version, {"arch": str(target.arch)})
