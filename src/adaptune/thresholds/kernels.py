"""Compile this package's dialect kernels on a `kernels.device` Device (CuPy or PyOpenCL), cached.

``Device.kernel`` only knows the kernel files of the `kernels` package; the threshold programs keep their
own sources here and reuse the device's context, queue and launch convention (global = grid * block).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

from adaptune.kernels.device import Device, KernelSourceError, with_defines

SOURCES = ("matmul_kernels.c",)


@functools.cache
def source_text(name: str) -> str:
    if name not in SOURCES:
        raise KernelSourceError(f"unknown threshold kernel source {name!r}; known: {', '.join(SOURCES)}")
    dialect = resources.files("adaptune.kernels").joinpath("dialect.h").read_text()
    return dialect + "\n" + resources.files("adaptune.thresholds").joinpath(name).read_text()


def kernel(device: Device, source: str, name: str, defines: Mapping[str, Any]):
    """A launcher ``k(grid, block, args)`` for kernel ``name`` of ``source`` built with ``defines``."""
    return device.kernel_text(with_defines(source_text(source), defines), name, f"{source} with {dict(defines)}")
