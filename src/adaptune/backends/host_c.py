"""C backend: a host function compiled into a shared library and called through ctypes (Kernel Tuner's ``lang="C"``).

The function is its own measurement, as in Kernel Tuner's C backend (``kernel_tuner/backends/compiler.py``):
the source, with the configuration's ``#define`` lines, is compiled with ``-fPIC`` and linked ``-shared`` by a
host compiler (``g++`` unless told otherwise; ``nvcc`` instead when the source is CUDA host code and nvcc is
here), wrapped in ``extern "C"`` unless it says so itself, loaded with ctypes; NumPy arrays are passed as
pointers, NumPy scalars by their dtype, and the ``float`` the function returns is its time in ms. Where
adaptune differs: a negative or non-finite returned time is a failed run (``pnpoly_host.cu`` returns -1 for
"too many resources"), not a time; nvcc gets the GPU's own architecture (``-arch=sm_90``) when a GPU is here
and the sources name none, or name one this nvcc no longer builds (CUDA 13 rejects Kernel Tuner's
``-arch=sm_52``); with a GPU, the arrays live in page-locked, device-mapped host memory, as CUDA host code that
hands host pointers to kernels needs (Kernel Tuner passes the caller's own, e.g. ``cupyx.empty_pinned``, arrays).
It runs in adaptune's worker process like every backend, so a function that crashes costs that worker only.
"""

from __future__ import annotations

import ctypes
import math
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from adaptune.backends.base import Backend, BackendError, CompileError, DeviceArray, DeviceLimits, Grid
from adaptune.backends.nvcc import ARCH_OPTION
from adaptune.backends.python import cpu_name
from adaptune.records import DeviceInfo

#: Kernel Tuner's ``dtype_map``: the scalar types a C function can take.
SCALAR_TYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
                "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
                "uint64": ctypes.c_uint64, "float32": ctypes.c_float, "float64": ctypes.c_double}
#: Kernel Tuner's signs of device code (the source is then compiled as ``.cu``).
DEVICE_CODE = ("__global", "__syncthreads()", "threadIdx")
COMPILE_TIMEOUT_S = 600


@dataclass(frozen=True)
class CFunction:
    """A loaded function and the library that holds it (kept loaded: OpenMP code crashes when unloaded)."""

    library: ctypes.CDLL
    function: Any
    name: str


def host_device_name() -> str:
    """Kernel Tuner's device name for the C backend (``platform.processor()``), so caches move between the tools."""
    return platform.processor() or platform.machine() or "cpu"


def source_suffix(source: str, user_suffix: str | None) -> str:
    """Kernel Tuner's choice: ``.cu`` for device code, else the user's file suffix, else ``.cc``."""
    if any(s in source for s in DEVICE_CODE):
        return ".cu"
    return user_suffix or ".cc"


def choose_compiler(source: str, suffix: str, compiler: str) -> str:
    """nvcc for CUDA host code when the compiler is the default g++ and nvcc is here (Kernel Tuner's rule)."""
    cuda = suffix == ".cu" or "#include <cuda" in source or "cudaMemcpy" in source
    if cuda and compiler == "g++" and shutil.which("nvcc"):
        return "nvcc"
    return compiler


def extern_c(source: str, suffix: str) -> str:
    """C and C++ sources are given C linkage (the function is looked up by its plain name), as Kernel Tuner does;
    the guard keeps a plain-C compile (gcc on a ``.c`` file) valid."""
    if ".c" not in suffix or 'extern "C"' in source:
        return source
    return '#ifdef __cplusplus\nextern "C" {\n#endif\n' + source + '\n#ifdef __cplusplus\n}\n#endif\n'


@cache
def nvcc_architectures() -> frozenset[int]:
    """The ``compute_XX`` numbers this nvcc builds (empty when it cannot say)."""
    try:
        out = subprocess.run(["nvcc", "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(int(m) for m in re.findall(r"compute_(\d+)", out))


@cache
def gpu_architecture(device: int = 0) -> int | None:
    """The compute capability of this host's GPU as nvcc writes it (90 for 9.0); None without a GPU."""
    try:
        import cupy as cp

        return int(cp.cuda.Device(device).compute_capability)
    except Exception:  # noqa: BLE001 - no CuPy or no GPU: ask the driver's tool instead
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return int(float(out[device]) * 10) if len(out) > device else None


def nvcc_options(options: list[str], arch: int | None, supported: frozenset[int]) -> list[str]:
    """The options with an ``-arch`` this nvcc rejects replaced by the GPU's (or dropped without a GPU), and the
    GPU's added when none is named."""
    out, named, i = [], False, 0
    while i < len(options):
        opt = options[i]
        if ARCH_OPTION.match(opt):
            value = opt.split("=", 1)[1] if "=" in opt else (options[i + 1] if i + 1 < len(options) else "")
            i += 1 if "=" in opt else 2
            number = re.search(r"(\d+)", value)
            if number is None or not supported or int(number.group(1)) in supported:
                out.append(f"-arch={value}")
                named = True
            continue
        out.append(opt)
        i += 1
    if not named and arch is not None:
        out.append(f"-arch=sm_{arch}")
    return out


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CompileError(f"{what} took over {COMPILE_TIMEOUT_S} s: {' '.join(command)}") from None
    if done.returncode != 0:
        log = (done.stderr + done.stdout).strip()
        raise CompileError(f"{what} failed ({' '.join(command)}):\n{log}", log=log)


def _pinned_array(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    """A page-locked, device-mapped host array, or None without CuPy or a GPU."""
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            return None
        flags = cp.cuda.runtime.hostAllocPortable | cp.cuda.runtime.hostAllocMapped
        nbytes = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
        memory = cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(nbytes, flags=flags), 0)
        return np.ndarray(shape, dtype, buffer=memory)
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no GPU: ordinary host memory
        return None


class HostCBackend(Backend):
    """C/C++ (or CUDA host) functions on this host. ``device``: the compiler (``"g++"``, ``"gcc"``, ``"nvcc"``...)
    or ``(compiler, file suffix of the user's source)``; None is Kernel Tuner's default, g++."""

    name: ClassVar[str] = "c"
    lang: ClassVar[str] = "c"

    def __init__(self, device: Any = None) -> None:
        super().__init__()
        compiler, suffix = (device if isinstance(device, tuple | list) else (device, None))
        self.compiler = str(compiler or "g++")
        self.user_suffix = suffix or None
        if shutil.which(self.compiler) is None:
            raise BackendError(f"the C backend's compiler {self.compiler!r} is not on PATH")
        self._pin = None  # whether arrays go to device-mapped memory: decided at the first allocation
        self._info: DeviceInfo | None = None

    # --- compilation -------------------------------------------------------------------------
    def _build(self, source: str, expr: str, options: tuple[str, ...]) -> CFunction:
        suffix = source_suffix(source, self.user_suffix)
        compiler = choose_compiler(source, suffix, self.compiler)
        flags = ["-fPIC"]
        if compiler == "nvcc":
            flags = ["-Xcompiler=-fPIC", *nvcc_options(list(options), gpu_architecture(), nvcc_architectures())]
        else:
            flags += list(options)
        libs = ["-lOpenCL"] if "CL/cl.h" in source else []
        with tempfile.TemporaryDirectory(prefix="adaptune-c-") as tmp:
            src, obj, lib = (Path(tmp) / f"kernel{ext}" for ext in (suffix, ".o", ".so"))
            src.write_text(extern_c(source, suffix))
            _run([compiler, "-c", str(src), *flags, "-o", str(obj)], f"compiling {expr} with {compiler}")
            _run([compiler, str(obj), *flags, "-shared", "-o", str(lib), *libs], f"linking {expr} with {compiler}")
            try:
                library = ctypes.CDLL(str(lib), mode=ctypes.RTLD_LOCAL)
                function = getattr(library, expr)
            except (OSError, AttributeError) as exc:
                raise CompileError(f"loading {expr} from the compiled library failed: {exc}") from None
        function.restype = ctypes.c_float
        return CFunction(library, function, expr)

    # --- device description ------------------------------------------------------------------
    def device_info(self) -> DeviceInfo:
        if self._info is None:
            try:
                version = subprocess.run([self.compiler, "--version"], capture_output=True, text=True,
                                         timeout=60).stdout.strip().splitlines()
            except (OSError, subprocess.SubprocessError):
                version = []
            self._info = DeviceInfo(host_device_name(), "c", version[0] if version else self.compiler,
                                    {"cpu": cpu_name(), "compiler": self.compiler})
        return self._info

    def limits(self) -> DeviceLimits:
        return DeviceLimits(1024, (1024, 1024, 1024))  # Kernel Tuner's max_threads for the C backend

    # --- data --------------------------------------------------------------------------------
    def allocate(self, arguments: list[Any]) -> list[Any]:
        for i, arg in enumerate(arguments):
            if isinstance(arg, np.generic) and str(arg.dtype) not in SCALAR_TYPES:
                raise TypeError(f"argument {i} is a {arg.dtype} scalar; a C function takes "
                                f"{', '.join(SCALAR_TYPES)} scalars")
        return super().allocate(arguments)

    def _allocate_array(self, host: np.ndarray) -> DeviceArray:
        if self._pin is None:
            self._pin = _pinned_array((1,), np.dtype(np.uint8)) is not None
        held = _pinned_array(host.shape, host.dtype) if self._pin else None
        held = np.empty_like(host) if held is None else held
        np.copyto(held, host)
        return DeviceArray(held, host.dtype, host.shape)

    def copy_in(self, dst: DeviceArray, host: np.ndarray) -> None:
        np.copyto(dst.handle, host.reshape(dst.shape))

    def copy_out(self, src: DeviceArray) -> np.ndarray:
        return np.array(src.handle, copy=True)

    def copy_device(self, dst: DeviceArray, src: DeviceArray) -> None:
        np.copyto(dst.handle, src.handle)

    def fill(self, dst: DeviceArray, value: np.ndarray) -> None:
        dst.handle.fill(value.reshape(-1)[0])

    # --- execution ---------------------------------------------------------------------------
    @staticmethod
    def _c_arguments(args: list[Any]) -> list[Any]:
        return [ctypes.c_void_p(a.handle.ctypes.data) if isinstance(a, DeviceArray)
                else SCALAR_TYPES[str(a.dtype)](a) for a in args]

    def launch(self, kernel: CFunction, grid: Grid, block: Grid, args: list[Any], shared_mem: int = 0) -> None:
        kernel.function(*self._c_arguments(args))

    def time_launch(self, kernel: CFunction, grid: Grid, block: Grid, args: list[Any], shared_mem: int = 0) -> float:
        ms = float(kernel.function(*self._c_arguments(args)))
        if not math.isfinite(ms) or ms < 0:
            raise RuntimeError(f"{kernel.name} returned {ms} as its time in ms (a negative time marks a failed run)")
        return ms

    def synchronize(self) -> None:
        """A C function returns when it is done."""
