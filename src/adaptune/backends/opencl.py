"""OpenCL backend (PyOpenCL): any OpenCL device, including PoCL on a plain CPU.

Binaries are cached in memory by :class:`Backend` and on disk by PyOpenCL's own program cache
(keyed by source, options and device), so a second process compiling the same variant is cheap.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptune.backends.base import Backend, BackendError, CompileError, DeviceArray, DeviceLimits, Grid
from adaptune.records import DeviceInfo

# PoCL 3 aborts the whole process ("Final linking of kernel ... failed") when two programs are built
# at once from different threads, so builds are serialised; they still overlap with measurement.
_BUILD_LOCK = threading.Lock()


def _cl() -> Any:
    try:
        import pyopencl as cl
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise BackendError("the opencl backend needs PyOpenCL: install adaptune[opencl]") from exc
    return cl


_PROBE_SOURCE = "__kernel void adaptune_probe(__global int *a) { a[get_global_id(0)] = 7; }"
_POCL_VERSION = re.compile(r"PoCL (\d+)\.(\d+)")
#: What to do when no OpenCL device can build: the cause is nearly always an OpenCL compiler older than the CPU
#: (PyPI's PoCL 3.0 ships LLVM 14, which does not know AMD's family 26 or newer CPUs).
NO_DEVICE_FIX = ("install an OpenCL driver whose compiler knows this CPU, e.g. Debian's PoCL "
                 "(as root: apt-get update && apt-get install -y pocl-opencl-icd), then run `adaptune devices`")


class NoUsableDeviceError(BackendError):
    """No OpenCL device here can build a kernel: one message naming each device, its cause and the fix."""


def _pocl_version(platform: Any) -> tuple[int, int]:
    """(major, minor) of a PoCL platform, (0, 0) for any other driver."""
    match = _POCL_VERSION.search(f"{platform.version} {platform.name}")
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def opencl_devices() -> list[tuple[Any, Any]]:
    """All (platform, device) pairs in preference order: GPUs first, then the rest, the newest PoCL first
    among those (a newer PoCL carries a newer LLVM that knows newer CPUs), each group in platform order."""
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD installed -> no platforms
        platforms = []
    pairs = [(p, d) for p in platforms for d in p.get_devices()]
    gpus = [pd for pd in pairs if pd[1].type & cl.device_type.GPU]
    rest = [pd for pd in pairs if not pd[1].type & cl.device_type.GPU]
    return gpus + sorted(rest, key=lambda pd: _pocl_version(pd[0]), reverse=True)  # sorted() is stable


def opencl_device_key(platform: Any, device: Any) -> str:
    """What an OpenCL binary is valid for (and what a probe result is cached under): platform, device name
    and driver version."""
    return f"{platform.name.strip()}|{device.name.strip()}|{device.driver_version.strip()}"


_probe_results: dict[str, str | None] = {}


def probe_device(platform: Any, device: Any) -> str | None:
    """Build and run a trivial kernel on the device: None if it works, else the first line of the cause.

    Probed once per process and device: a device whose compiler cannot build for this CPU (LLVM older
    than the CPU) fails every kernel, so it is skipped rather than reported hundreds of times."""
    key = opencl_device_key(platform, device)
    if key not in _probe_results:
        _probe_results[key] = _probe(device)
    return _probe_results[key]


def _probe(device: Any) -> str | None:
    cl = _cl()
    try:
        ctx = cl.Context([device])
        queue = cl.CommandQueue(ctx)
        with _BUILD_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = cl.Program(ctx, _PROBE_SOURCE).build()
        out = np.zeros(4, np.int32)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, out.nbytes)
        program.adaptune_probe(queue, (4,), None, buf)
        cl.enqueue_copy(queue, out, buf, is_blocking=True)
    except cl.Error as exc:
        return _first_line(_build_log(str(exc)))
    if not (out == 7).all():
        return f"the probe kernel ran but returned {out.tolist()} instead of [7, 7, 7, 7]"
    return None


def _first_line(log: str) -> str:
    """The first informative line of a build log (PoCL prefixes some with blank or 'error:'-less lines)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["build failed with an empty log"])[0]


def device_label(platform: Any, device: Any) -> str:
    """``"Portable Computing Language 3.0-rc2 / pthread-AMD EPYC ..."``: which driver, which device."""
    return f"{platform.name.strip()} {device.driver_version.strip()} / {device.name.strip()}"


def select_device(device: int | str | tuple[int, int] | None = None) -> tuple[Any, Any]:
    """Pick a device.

    ``None``: the first device in :func:`opencl_devices` order that can build a kernel (devices that
    cannot are skipped; when none can, :class:`NoUsableDeviceError` says why and how to fix it). An explicit
    choice is honoured as given, and a device that cannot build then fails with its own build error: an
    index into :func:`opencl_devices` (what ``adaptune devices`` lists), a case-insensitive substring of
    "platform device" names, or (platform index, device index)."""
    cl = _cl()
    pairs = opencl_devices()
    names = [f"{p.name.strip()} / {d.name.strip()}" for p, d in pairs]
    if not pairs:
        raise NoUsableDeviceError(f"no OpenCL device found: {NO_DEVICE_FIX}")
    if device is None:
        problems = [(pd, probe_device(*pd)) for pd in pairs]
        for pd, problem in problems:
            if problem is None:
                return pd
        causes = "; ".join(f"{device_label(p, d)}: cannot compile: {why}" for (p, d), why in problems)
        raise NoUsableDeviceError(f"no OpenCL device here can compile a kernel ({causes}). Fix: {NO_DEVICE_FIX}")
    if isinstance(device, str) and device.strip().isdigit():
        device = int(device)
    if isinstance(device, tuple):
        plat_i, dev_i = device
        try:
            plat = cl.get_platforms()[plat_i]
            return plat, plat.get_devices()[dev_i]
        except IndexError:
            raise BackendError(f"no OpenCL device {device}; available: {names}") from None
    if isinstance(device, int):
        if not 0 <= device < len(pairs):
            raise BackendError(f"no OpenCL device {device}; available: {names}")
        return pairs[device]
    matches = [pd for pd, n in zip(pairs, names, strict=True) if device.lower() in n.lower()]
    if not matches:
        raise BackendError(f"no OpenCL device matches {device!r}; available: {names}")
    return matches[0]


def device_driver(version: str, compute_units: int, cpu: bool) -> str:
    """The driver part of a device's identity (the store keys devices by name, platform and driver).

    A CPU device's timings depend on how many of the host's cores its driver was given (PoCL: the host's cores,
    ``POCL_CPU_MAX_CU_COUNT``, before PoCL 4 ``POCL_MAX_PTHREAD_COUNT``), while its name does not change. So a
    CPU driver's identity carries its compute units: a store resumed on a host with other cores keeps the two
    hosts' times apart. A GPU's compute units are fixed by its name. The name stays the device's own, which
    Kernel Tuner's cache files match on; the version alone is ``properties["driver_version"]``.
    """
    return f"{version} ({compute_units} compute units)" if cpu else version


class OpenCLBackend(Backend):
    name = "opencl"
    lang = "opencl"
    warm_up_source = "__kernel void adaptune_warm_up(void) {}"

    def __init__(self, device: int | str | tuple[int, int] | None = None, cache_dir: str | None = None) -> None:
        super().__init__()
        cl = self._cl = _cl()
        self.platform, self.device = select_device(device)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.cache_dir = cache_dir
        version = self.device.driver_version.strip()
        compute_units = int(self.device.max_compute_units)
        self._info = DeviceInfo(
            name=self.device.name.strip(),
            platform=f"opencl:{self.platform.name.strip()}",
            driver=device_driver(version, compute_units, bool(self.device.type & cl.device_type.CPU)),
            properties={
                "driver_version": version,
                "vendor": self.device.vendor.strip(),
                "version": self.device.version.strip(),
                "type": cl.device_type.to_string(self.device.type),
                "compute_units": compute_units,
                "max_work_group_size": int(self.device.max_work_group_size),
                "max_work_item_sizes": [int(s) for s in self.device.max_work_item_sizes],
                "global_mem_bytes": int(self.device.global_mem_size),
                "local_mem_bytes": int(self.device.local_mem_size),
                "max_clock_mhz": int(self.device.max_clock_frequency),
            },
        )

    def device_info(self) -> DeviceInfo:
        return self._info

    def limits(self) -> DeviceLimits:
        sizes = [int(s) for s in self.device.max_work_item_sizes] + [1, 1, 1]
        return DeviceLimits(int(self.device.max_work_group_size), (sizes[0], sizes[1], sizes[2]))

    def _build(self, source: str, expr: str, options: tuple[str, ...]) -> Any:
        cl = self._cl
        try:
            with _BUILD_LOCK, warnings.catch_warnings():
                warnings.simplefilter("ignore")  # build-log warnings are not failures
                program = cl.Program(self.context, source).build(options=list(options), cache_dir=self.cache_dir)
        except cl.RuntimeError as exc:
            log = _build_log(str(exc))
            raise CompileError(f"OpenCL build failed:\n{log}", log=log) from None
        try:
            return cl.Kernel(program, expr)
        except cl.Error as exc:
            raise CompileError(f"kernel {expr!r} not found in the program ({exc})") from None

    def binary_target(self) -> str | None:
        return opencl_device_key(self.platform, self.device)

    def _load_binary(self, binary: Any) -> Any:
        cl = self._cl
        with _BUILD_LOCK:
            program = cl.Program(self.context, [self.device], [binary.image]).build()
        return cl.Kernel(program, binary.symbol)

    def kernel_max_threads(self, kernel: Any) -> int | None:
        """Work-items per work-group this kernel can run with on this device."""
        info = self._cl.kernel_work_group_info.WORK_GROUP_SIZE
        return int(kernel.get_work_group_info(info, self.device))

    def _allocate_array(self, host: np.ndarray) -> DeviceArray:
        cl = self._cl
        if host.size == 0:  # OpenCL has no empty buffers: one element the kernel is never told it has
            return DeviceArray(cl.Buffer(self.context, cl.mem_flags.READ_WRITE, host.dtype.itemsize), host.dtype,
                               host.shape)
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        buf = cl.Buffer(self.context, flags, hostbuf=host)
        return DeviceArray(buf, host.dtype, host.shape)

    def wrap_host(self, host: np.ndarray) -> DeviceArray:
        """A buffer over ``host`` itself (``CL_MEM_USE_HOST_PTR``; a CPU device uses the memory in place, no
        copy), for a launch whose outputs nobody reads (``measure.cache_warm``)."""
        if host.size == 0 or not host.flags.c_contiguous:
            return self._allocate_array(np.ascontiguousarray(host))
        flags = self._cl.mem_flags.READ_WRITE | self._cl.mem_flags.USE_HOST_PTR
        return DeviceArray(self._cl.Buffer(self.context, flags, hostbuf=host), host.dtype, host.shape)

    def copy_in(self, dst: DeviceArray, host: np.ndarray) -> None:
        if dst.nbytes:
            self._cl.enqueue_copy(self.queue, dst.handle, np.ascontiguousarray(host, dtype=dst.dtype))

    def copy_out(self, src: DeviceArray) -> np.ndarray:
        host = np.empty(src.shape, src.dtype)
        if src.nbytes:
            self._cl.enqueue_copy(self.queue, host, src.handle, is_blocking=True)
        return host

    def copy_device(self, dst: DeviceArray, src: DeviceArray) -> None:
        if src.nbytes:
            self._cl.enqueue_copy(self.queue, dst.handle, src.handle, byte_count=src.nbytes)

    def fill(self, dst: DeviceArray, value: np.ndarray) -> None:
        if not dst.nbytes:
            return
        pattern = np.ascontiguousarray(value, dtype=dst.dtype).reshape(1)
        if pattern.nbytes in (1, 2, 4, 8, 16, 32, 64, 128):
            self._cl.enqueue_fill_buffer(self.queue, dst.handle, pattern, 0, dst.nbytes)
        else:  # OpenCL fill patterns must be a power of two bytes: go through the host
            self.copy_in(dst, np.full(dst.shape, pattern[0], dst.dtype))

    @staticmethod
    def _global(grid: Grid, block: Grid) -> tuple[int, int, int]:
        return (grid[0] * block[0], grid[1] * block[1], grid[2] * block[2])

    def _enqueue(self, kernel: Any, grid: Grid, block: Grid, args: Sequence[Any], shared_mem: int = 0) -> Any:
        if shared_mem:
            raise ValueError("dynamic shared memory is a CUDA launch option; in OpenCL size __local arrays "
                             "with #defines")
        kernel.set_args(*[a.handle if isinstance(a, DeviceArray) else a for a in args])
        return self._cl.enqueue_nd_range_kernel(self.queue, kernel, self._global(grid, block), block)

    def launch(self, kernel: Any, grid: Grid, block: Grid, args: Sequence[Any], shared_mem: int = 0) -> None:
        self._enqueue(kernel, grid, block, args, shared_mem)

    def time_launch(self, kernel: Any, grid: Grid, block: Grid, args: Sequence[Any], shared_mem: int = 0) -> float:
        event = self._enqueue(kernel, grid, block, args, shared_mem)
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-6

    def synchronize(self) -> None:
        self.queue.finish()

    def close(self) -> None:
        self.queue.finish()


def _build_log(message: str) -> str:
    """The compiler's own lines from PyOpenCL's error text (it repeats a generic header first)."""
    marker = message.find("Build on ")
    if marker < 0:
        return message.strip()
    body = message[marker:].split("\n", 1)
    return body[1].strip() if len(body) > 1 else message.strip()


def list_opencl_devices() -> list[tuple[int, DeviceInfo]]:
    """(index, info) for every OpenCL device, in :func:`select_device` order; ``info.properties["state"]``
    is ``"ok"`` or ``"cannot compile: <first line of the build log>"``."""
    cl = _cl()
    out = []
    for i, (p, d) in enumerate(opencl_devices()):
        problem = probe_device(p, d)
        out.append((i, DeviceInfo(d.name.strip(), f"opencl:{p.name.strip()}", d.driver_version.strip(),
                                  {"type": cl.device_type.to_string(d.type),
                                   "state": "ok" if problem is None else f"cannot compile: {problem}"})))
    return out
