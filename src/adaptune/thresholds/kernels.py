"""Compile this package's dialect kernels on a `kernels.device` Device (CuPy or PyOpenCL), cached.

``Device.kernel`` only knows the kernel files of the `kernels` package; the threshold programs keep their
own sources here and reuse the device's context, queue and launch convention (global = grid * block).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from adaptune.kernels.device import Device, KernelSourceError, with_defines

SOURCES = ("matmul_kernels.c",)
_CACHE: dict[tuple[int, str, tuple], Any] = {}


@functools.cache
def source_text(name: str) -> str:
    if name not in SOURCES:
        raise KernelSourceError(f"unknown threshold kernel source {name!r}; known: {', '.join(SOURCES)}")
    dialect = resources.files("adaptune.kernels").joinpath("dialect.h").read_text()
    return dialect + "\n" + resources.files("adaptune.thresholds").joinpath(name).read_text()


def kernel(device: Device, source: str, name: str, defines: Mapping[str, Any]):
    """A launcher ``k(grid, block, args)`` for kernel ``name`` of ``source`` built with ``defines``."""
    key = (id(device), source, tuple(sorted((k, str(v)) for k, v in defines.items())))
    module = _CACHE.get(key)
    if module is None:
        code = with_defines(source_text(source), defines)
        try:
            if hasattr(device, "cp"):
                module = device.cp.RawModule(code=code, options=("--std=c++17",))
                module.compile()
            else:
                module = device.cl.Program(device.ctx, code).build()
        except Exception as exc:  # NVRTC / OpenCL build errors carry the compiler log
            raise KernelSourceError(f"{source} with {dict(defines)} does not compile: {exc}") from exc
        _CACHE[key] = module
    if hasattr(device, "cp"):
        function = module.get_function(name)

        def launch_cuda(grid: int, block: int, args: Sequence[Any]) -> None:
            function((int(grid),), (int(block),), tuple(args))

        return launch_cuda
    fkey = (*key, name)
    function = _CACHE.get(fkey)
    if function is None:
        function = _CACHE[fkey] = device.cl.Kernel(module, name)
    cla = device.cla

    def launch_cl(grid: int, block: int, args: Sequence[Any]) -> None:
        raw = [x.data if isinstance(x, cla.Array) else x for x in args]
        function(device.queue, (int(grid) * int(block),), (int(block),), *raw)

    return launch_cl
