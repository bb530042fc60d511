"""One small runtime over CuPy (CUDA, NVRTC) and PyOpenCL, so the kernel wrappers are written once.

Why not the `backends` layer: that layer measures one configuration of one kernel in a worker process;
the variants here are called in-process, many times, and chain several launches (merge passes, bitonic
stages), so they need a direct array-and-launch interface. Sources are the portable dialect
(`dialect.h` prepended), so the OpenCL device (PoCL in CI) runs exactly the text that the GPU runs.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import weakref
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Protocol

import numpy as np

from adaptune.backends.opencl import select_device

KERNEL_SOURCES = ("spmv_kernels.c", "histogram_kernels.c", "sort_kernels.c", "bfs_kernels.c", "proxy_kernels.c")


class KernelSourceError(ValueError):
    """A kernel source or define is unknown or does not compile; the message names which."""


@functools.cache
def source_text(name: str) -> str:
    """The dialect header followed by the named kernel file."""
    if name not in KERNEL_SOURCES:
        raise KernelSourceError(f"unknown kernel source {name!r}; known: {', '.join(KERNEL_SOURCES)}")
    root = resources.files("adaptune.kernels")
    return root.joinpath("dialect.h").read_text() + "\n" + root.joinpath(name).read_text()


def with_defines(source: str, defines: Mapping[str, Any]) -> str:
    """Prepend `#define` lines; values must be plain identifiers or numbers (no macro injection)."""
    lines = []
    for key, value in sorted(defines.items()):
        text = str(value)
        if not key.isidentifier() or not all(ch.isalnum() or ch in "._()-+" for ch in text):
            raise KernelSourceError(f"define {key}={text!r} is not a plain identifier or number")
        lines.append(f"#define {key} {text}")
    return "\n".join(lines) + "\n" + source


class Device(Protocol):
    """What the kernel wrappers need from a device: arrays, launches, sync."""

    name: str
    xp: Any  # numpy-like array module used for small host-visible helpers (cupy or numpy)

    def asarray(self, host: np.ndarray) -> Any: ...
    def empty(self, shape: int | tuple[int, ...], dtype: Any) -> Any: ...
    def zeros(self, shape: int | tuple[int, ...], dtype: Any) -> Any: ...
    def fill_zero(self, array: Any) -> None: ...
    def to_host(self, array: Any) -> np.ndarray: ...
    def copy(self, src: Any, dst: Any) -> None: ...
    def kernel(self, source: str, name: str, defines: Mapping[str, Any]) -> Kernel: ...
    def kernel_text(self, code: str, name: str, what: str = "", options: tuple[str, ...] = ()) -> Kernel: ...
    def synchronize(self) -> None: ...
    @property
    def multiprocessors(self) -> int: ...


class Kernel(Protocol):
    def __call__(self, grid: int, block: int, args: Sequence[Any]) -> None: ...


class CupyDevice:
    """CUDA through CuPy: modules compiled by NVRTC once per (source, defines) and cached."""

    def __init__(self, device_id: int = 0) -> None:
        import cupy

        self.cp = cupy
        self.xp = cupy
        self._dev = cupy.cuda.Device(device_id)
        self._dev.use()
        props = cupy.cuda.runtime.getDeviceProperties(device_id)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self._sms = int(props["multiProcessorCount"])
        self._modules: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._launchers: dict[tuple[Any, ...], Kernel] = {}
        self.compiles = 0

    @property
    def multiprocessors(self) -> int:
        return self._sms

    def asarray(self, host: np.ndarray) -> Any:
        return self.cp.asarray(host)

    def empty(self, shape, dtype) -> Any:
        return self.cp.empty(shape, dtype=dtype)

    def zeros(self, shape, dtype) -> Any:
        return self.cp.zeros(shape, dtype=dtype)

    def fill_zero(self, array: Any) -> None:
        array.fill(0)

    def to_host(self, array: Any) -> np.ndarray:
        return self.cp.asnumpy(array)

    def copy(self, src: Any, dst: Any) -> None:
        dst[...] = src

    def kernel(self, source: str, name: str, defines: Mapping[str, Any]) -> Kernel:
        return _kept_launcher(self, source, name, defines)

    def kernel_text(self, code: str, name: str, what: str = "", options: tuple[str, ...] = ()) -> Kernel:
        """Launcher for kernel ``name`` of complete source ``code`` (generated kernels too), compiled once
        per (code, NVRTC ``options``)."""
        function = self.function(code, name, what, options)

        def launch(grid: int, block: int, args: Sequence[Any]) -> None:
            function((int(grid),), (int(block),), tuple(args))

        return launch

    def function(self, code: str, name: str, what: str = "", options: tuple[str, ...] = ()) -> Any:
        """CuPy's ``Function`` for ``name`` (the fastest launcher: ``fn((grid,), (block,), args)``)."""
        module = self._modules.get((code, options))
        if module is None:
            try:
                module = self.cp.RawModule(code=code, options=("--std=c++17", *options))
                module.compile()
            except Exception as exc:  # CuPy raises CompileException with the NVRTC log
                raise KernelSourceError(f"{what or name} does not compile: {exc}") from exc
            self._modules[(code, options)] = module
            self.compiles += 1
        return module.get_function(name)

    def synchronize(self) -> None:
        self.cp.cuda.Device().synchronize()


class OpenCLDevice:
    """OpenCL through PyOpenCL (PoCL in CI): CUDA-style (grid, block) launches map to global = grid * block."""

    def __init__(self, context: Any = None) -> None:
        import pyopencl as cl
        import pyopencl.array as cla

        self.cl, self.cla = cl, cla
        self.ctx = context if context is not None else _default_context(cl)
        self.queue = cl.CommandQueue(self.ctx)
        # Why: a program that ends with work still queued (a flush is asynchronous) can leave PoCL's driver
        # thread compiling inside LLVM while the process's exit runs LLVM's global destructors: a SIGSEGV after
        # the last line (CI's run of docs/lang.md's first block; gdb showed that thread in LLVM's code generator
        # and the main thread in _dl_fini). On a cold PoCL cache with two busy cores beside it, that block
        # crashed 9 of 40 times without this and 0 of 40 with it. Python's exit handlers run before the C
        # library's, so the queue is drained first (it waits for what is queued).
        atexit.register(_drain, weakref.ref(self))
        self.name = self.ctx.devices[0].name
        self.xp = np
        self._programs: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._functions: dict[tuple[str, tuple[str, ...], str], Any] = {}
        self._launchers: dict[tuple[Any, ...], Kernel] = {}
        self.compiles = 0

    @property
    def multiprocessors(self) -> int:
        return int(self.ctx.devices[0].max_compute_units)

    def asarray(self, host: np.ndarray) -> Any:
        return self.cla.to_device(self.queue, np.ascontiguousarray(host))

    def empty(self, shape, dtype) -> Any:
        return self.cla.empty(self.queue, shape, dtype=dtype)

    def zeros(self, shape, dtype) -> Any:
        return self.cla.zeros(self.queue, shape, dtype=dtype)

    def fill_zero(self, array: Any) -> None:
        array.fill(0)

    def to_host(self, array: Any) -> np.ndarray:
        return array.get()

    def copy(self, src: Any, dst: Any) -> None:
        self.cl.enqueue_copy(self.queue, dst.data, src.data, byte_count=src.nbytes)

    def kernel(self, source: str, name: str, defines: Mapping[str, Any]) -> Kernel:
        return _kept_launcher(self, source, name, defines)

    def kernel_text(self, code: str, name: str, what: str = "", options: tuple[str, ...] = ()) -> Kernel:
        """Launcher for kernel ``name`` of complete source ``code`` (generated kernels too), built once per
        (code, build ``options``)."""
        program = self._programs.get((code, options))
        if program is None:
            try:
                program = self.cl.Program(self.ctx, code).build(options=list(options))
            except self.cl.Error as exc:
                raise KernelSourceError(f"{what or name} does not compile: {exc}") from exc
            self._programs[(code, options)] = program
            self.compiles += 1
        function = self._functions.get((code, options, name))
        if function is None:
            function = self._functions[(code, options, name)] = self.cl.Kernel(program, name)
        queue, array_type = self.queue, self.cla.Array

        def launch(grid: int, block: int, args: Sequence[Any]) -> None:
            raw = [a.data if isinstance(a, array_type) else a for a in args]
            function(queue, (int(grid) * int(block),), (int(block),), *raw)

        return launch

    def synchronize(self) -> None:
        self.queue.finish()


def _drain(device: weakref.ref) -> None:
    """Wait for a device's queued work at exit (see ``OpenCLDevice``); one already gone or broken is left alone."""
    dev = device()
    if dev is not None:
        with contextlib.suppress(Exception):
            dev.queue.finish()


def _kept_launcher(dev: Any, source: str, name: str, defines: Mapping[str, Any]) -> Kernel:
    """The launcher of a named kernel file's kernel, kept per (source, name, defines). Why: building the
    source text with its defines and hashing it to find the compiled module cost ~9 us of host time on
    every launch (measured on a 2-core CPU host), inside the CUDA-event window of every timed variant and in
    every first-call feature computation; a key of a few short items costs well under 1 us."""
    key = (source, name, *sorted((k, str(v)) for k, v in defines.items()))  # the text the defines make
    launch = dev._launchers.get(key)
    if launch is None:
        launch = dev.kernel_text(with_defines(source_text(source), defines), name, f"{source} with {dict(defines)}")
        dev._launchers[key] = launch
    return launch


def _default_context(cl: Any) -> Any:
    """The preferred OpenCL device that can build a kernel (``select_device``'s choice; PoCL in CI)."""
    _, device = select_device(None)
    return cl.Context(devices=[device])
