"""Where generated kernels run: the in-process CuPy (NVRTC) or PyOpenCL (PoCL in CI) device of
``adaptune.kernels.device``, plus compiling *generated* text (that module compiles only its named files).

Buffers are flat, contiguous device arrays (CuPy ndarrays or ``pyopencl.array.Array``); bool data is
stored as one byte per element. Compiled programs are cached by their full source text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np

from adaptune.kernels.device import CupyDevice, KernelSourceError, OpenCLDevice
from adaptune.lang.ops import prelude


class KernelCompileError(KernelSourceError):
    """A generated kernel did not compile; the message names the operations it held."""


def storage_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.uint8) if dtype == np.bool_ else dtype


def header() -> str:
    return resources.files("adaptune.kernels").joinpath("dialect.h").read_text() + "\n" + prelude()


FAST_MATH_OPTION = {"cuda": "--use_fast_math", "opencl": "-cl-fast-relaxed-math"}


class Runtime:
    """One device: allocate, upload, download, compile generated text, launch 1-D (grid, block)."""

    def __init__(self, kind: str | None = None, device: Any = None, fast_math: bool = False) -> None:
        """``fast_math``: compile generated kernels with the compiler's relaxed floating point (CUDA
        ``--use_fast_math``, OpenCL ``-cl-fast-relaxed-math``: approximate division, square root and
        transcendentals, denormals flushed). Off by default: results then follow NumPy's IEEE arithmetic."""
        kind = kind or os.environ.get("ADAPTUNE_LANG_DEVICE") or ("cuda" if _cuda_available() else "opencl")
        if kind not in ("cuda", "opencl"):
            raise ValueError(f"ADAPTUNE_LANG_DEVICE must be 'cuda' or 'opencl', not {kind!r}")
        self.kind = kind
        self.fast_math = fast_math
        self.options: tuple[str, ...] = ((FAST_MATH_OPTION[kind],) if fast_math else ())
        self.device = device or (CupyDevice() if kind == "cuda" else OpenCLDevice())
        self.name = self.device.name
        self.xp = self.device.xp
        self._header = header()
        # alloc(n, storage dtype): the hot path of a flush, bound straight to the array module
        self.alloc = self.device.cp.empty if kind == "cuda" else self.device.empty
        self.compile_count = 0
        self.compile_s = 0.0

    @property
    def multiprocessors(self) -> int:
        return self.device.multiprocessors

    @property
    def max_block(self) -> int:
        if self.kind == "cuda":
            return 1024
        return int(self.device.ctx.devices[0].max_work_group_size)

    # ---------------------------------------------------------------------------- memory

    def empty(self, n: int, dtype: np.dtype) -> Any:
        return self.device.empty(max(int(n), 1), storage_dtype(dtype))

    def upload(self, host: np.ndarray) -> Any:
        flat = np.ascontiguousarray(host).reshape(-1)
        if flat.dtype == np.bool_:
            flat = flat.view(np.uint8)
        if flat.size == 0:
            flat = np.zeros(1, flat.dtype)
        return self.device.asarray(flat)

    def from_xp(self, array: Any) -> Any:
        """A flat device buffer from a device array of this runtime's array module (CuPy) or NumPy."""
        if self.kind == "cuda":
            cp = self.device.cp
            flat = cp.ascontiguousarray(cp.asarray(array)).reshape(-1)
            if flat.dtype == np.bool_:
                flat = flat.view(np.uint8)
            return flat if flat.size else cp.zeros(1, flat.dtype)
        return self.upload(np.asarray(array))

    def download(self, data: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        host = self.device.to_host(data)
        n = int(np.prod(shape))
        host = host[:n]
        if dtype == np.bool_:
            host = host.view(np.bool_)
        return host.reshape(shape)

    def as_xp(self, data: Any, shape: tuple[int, ...], strides: Sequence[int], offset: int,
              dtype: np.dtype) -> Any:
        """An array-module view (CuPy on CUDA, NumPy copy on OpenCL) of a flat buffer, for eager fallbacks."""
        if self.kind == "cuda":
            cp = self.device.cp
            flat = data.view(np.bool_) if dtype == np.bool_ else data
            item = flat.dtype.itemsize
            return cp.lib.stride_tricks.as_strided(flat[offset:] if flat.size > offset else flat, shape,
                                                   tuple(s * item for s in strides))
        host = self.device.to_host(data)
        if dtype == np.bool_:
            host = host.view(np.bool_)
        item = host.dtype.itemsize
        return np.lib.stride_tricks.as_strided(host[offset:], shape, tuple(s * item for s in strides)).copy()

    # ---------------------------------------------------------------------------- kernels

    def compile(self, source: str, name: str, what: str = "") -> Any:
        """Compile generated dialect text (cached by text on the device) and return ``launch(grid, block, args)``."""
        before, t0 = self.device.compiles, time.perf_counter()
        try:
            launch = self.device.kernel_text(self._header + source, name, f"kernel for {what or name}", self.options)
        except KernelSourceError as exc:
            raise KernelCompileError(str(exc)) from exc
        if self.device.compiles != before:
            self.compile_count += 1
            self.compile_s += time.perf_counter() - t0
        return launch

    def raw(self, source: str, name: str = "at_kernel") -> Any:
        """The fastest way to launch an already compiled kernel: ``fn((grid,), (block,), args_tuple)``.

        On CUDA it is CuPy's ``Function`` itself (no wrapper, no per-call conversions: a cached plan calls it
        with prepared tuples); on OpenCL a thin wrapper that unwraps ``pyopencl`` arrays.
        """
        launch = self.compile(source, name)
        if self.kind == "cuda":
            return self.device.function(self._header + source, name, options=self.options)  # compiled: cached
        return _Tupled(launch)

    def synchronize(self) -> None:
        self.device.synchronize()

    # ---------------------------------------------------------------------------- CUDA graphs

    @property
    def graphs(self) -> bool:
        """Whether launches can be captured into a graph and replayed (CUDA)."""
        return self.kind == "cuda"

    @staticmethod
    def address(data: Any) -> int:
        """A device buffer's address (a graph replays its kernels on the addresses it captured)."""
        return data.data.ptr

    def capture(self, launches: Any) -> Any:
        """Record the kernels ``launches()`` issues into a CUDA graph (captured on a side stream, not run)."""
        cp = self.device.cp
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            try:
                launches()
            finally:
                graph = stream.end_capture()
        return graph

    @staticmethod
    def launch_graph(graph: Any) -> None:
        """Run a captured graph on the current stream (after the work already queued there): CuPy's
        ``Graph.launch()`` without a stream takes the current one's handle in C, without building the
        Python ``Stream`` object ``cupy.cuda.get_current_stream()`` returns."""
        graph.launch()


class _Tupled:
    """Adapts a ``launch(grid, block, args)`` closure to the ``fn((grid,), (block,), args)`` calling form."""

    __slots__ = ("launch",)

    def __init__(self, launch: Any) -> None:
        self.launch = launch

    def __call__(self, grid: tuple[int], block: tuple[int], args: Sequence[Any]) -> None:
        self.launch(grid[0], block[0], args)


def _cuda_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no GPU: use OpenCL
        return False
