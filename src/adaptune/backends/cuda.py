"""CUDA backend: CuPy ``RawModule`` compiled by NVRTC, launched on one stream, timed with events.

CuPy is imported lazily so that the rest of adaptune works without it. Binaries are cached in
memory by :class:`Backend` and on disk by CuPy's kernel cache (``CUPY_CACHE_DIR``). Kernels are
always looked up through ``name_expressions`` (as Kernel Tuner does), so plain ``extern "C"``
kernels and C++ templates (``name<128,float>``) both work.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from adaptune import _cuda_driver
from adaptune.backends.base import Backend, BackendError, CompileError, DeviceArray, DeviceLimits, Grid
from adaptune.backends.binary import KernelBinary, cuda_target
from adaptune.backends.nvcc import nvcc_cubin, refused_before, refuses_host_code, remember_refusal
from adaptune.records import DeviceInfo

#: Host time from the start event to the end event above which a timed launch counts as held up: the stream is idle
#: when the start event is recorded, so the events also time a host that stalls before the launch is enqueued
#: (another thread of the worker, compiling ahead, holding the interpreter: up to its 5 ms switch interval).
#: An unhindered record-launch-record takes 10-30 us of host time.
HELD_UP_S = 2e-4
#: Before a timed launch of a kernel whose last timed run took under :data:`HOLD_BELOW_MS`, one thread spins on the
#: stream for this long (the device's global timer), so the start event fires only after the launch is enqueued:
#: the events time the kernel, not also the 5-30 us the host takes to enqueue it (more while the worker's compile
#: threads run, which put 10-20 % on a 50 us kernel on an H100 and scrambled a tune's ranking). It is as long as
#: :data:`HELD_UP_S`, so any launch not counted as held up was enqueued before the hold ended. nvbench holds the
#: stream the same way, with a kernel that waits for the host's signal.
HOLD_NS = int(HELD_UP_S * 1e9)
#: Kernels whose last timed run took this long or more start their timed window on an idle stream: the host's
#: enqueue is under 1.5 % of them, and the hold's 0.2 ms per run would cost more than it corrects.
HOLD_BELOW_MS = 2.0
#: The hold kernel: one thread spinning on the device's global timer for ``ns`` nanoseconds.
HOLD_SOURCE = r'''
extern "C" __global__ void adaptune_warm_up(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
'''


def _cupy() -> Any:
    try:
        import cupy  # optional (adaptune[cuda]): imported where the backend is made, not with adaptune
    except ImportError as exc:
        raise BackendError("the cuda backend needs CuPy: install adaptune[cuda] "
                           "(pip install 'adaptune[cuda]')") from exc
    _cuda_driver.wait()  # a driver started beside the import (the worker's) is up before CuPy's first call
    return cupy


class CUDABackend(Backend):
    name = "cuda"
    lang = "cuda"
    #: the warm-up build is the hold kernel (:data:`HOLD_NS`): loading the compiler also makes it
    warm_up_source = HOLD_SOURCE
    # An illegal address or a trap poisons the whole CUDA context: restart the worker after any
    # launch failure rather than trust the next measurement.
    restart_after_launch_error = True

    def __init__(self, device: int | str | None = 0, cache_dir: str | None = None) -> None:
        super().__init__()
        cp = self._cp = _cupy()
        n = cp.cuda.runtime.getDeviceCount()
        index = _device_index(device, n, cp)
        self.device = cp.cuda.Device(index)
        self.device.use()
        # A blocking stream: it stays ordered with work other code puts on the legacy default stream.
        self.stream = cp.cuda.Stream(non_blocking=False)
        self._modules: dict[int, tuple[Any, Any]] = {}  # id(kernel) -> (kernel, its module): constant memory
        self._start = cp.cuda.Event()
        self._end = cp.cuda.Event()
        self._last_ms: dict[int, float] = {}  # id(kernel) -> its last timed run
        if cache_dir:
            os.environ["CUPY_CACHE_DIR"] = str(cache_dir)
        props = cp.cuda.runtime.getDeviceProperties(index)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        runtime = cp.cuda.runtime.runtimeGetVersion()
        self._limits = DeviceLimits(int(props["maxThreadsPerBlock"]),
                                    tuple(int(v) for v in props["maxThreadsDim"]),  # type: ignore[arg-type]
                                    int(props.get("sharedMemPerBlockOptin", props["sharedMemPerBlock"])))
        self._info = DeviceInfo(
            name=name,
            platform="cuda",
            driver=_version(cp.cuda.runtime.driverGetVersion()),
            properties={
                "index": index,
                "pci_bus_id": self.device.pci_bus_id,
                "compute_capability": f"{props['major']}.{props['minor']}",
                "multiprocessors": int(props["multiProcessorCount"]),
                "global_mem_bytes": int(props["totalGlobalMem"]),
                "shared_mem_per_block": int(props["sharedMemPerBlock"]),
                "max_threads_per_block": int(props["maxThreadsPerBlock"]),
                "cuda_runtime": _version(runtime),
                "cupy": cp.__version__,
            },
        )

    def device_info(self) -> DeviceInfo:
        return self._info

    def limits(self) -> DeviceLimits:
        return self._limits

    def _build(self, source: str, expr: str, options: tuple[str, ...]) -> Any:
        cp = self._cp
        if refused_before(source, expr, options):  # its headers hold host code in every configuration: nvcc
            return self._load_binary(KernelBinary("cuda", self.binary_target(), *nvcc_cubin(
                self.binary_target(), source, expr, options)))
        try:
            with self.device:  # compile threads need the device current too
                module = cp.RawModule(code=source, options=options, name_expressions=[expr])
                kernel = module.get_function(expr)
                _ = kernel.max_threads_per_block  # forces module load now, not at first launch
                self._modules[id(kernel)] = (kernel, module)
        except cp.cuda.compiler.CompileException as exc:
            if not refuses_host_code(str(exc)):
                raise CompileError(f"NVRTC compilation failed: {exc}", log=str(exc)) from None
            remember_refusal(source, expr, options)  # Kernel Tuner's lang="CUDA" builds it with nvcc: so do we
            return self._build(source, expr, options)
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as exc:
            raise CompileError(f"loading the compiled module failed: {exc}") from None
        return kernel

    def binary_target(self) -> str | None:
        return cuda_target(self._info.properties["compute_capability"])

    def _load_binary(self, binary: Any) -> Any:
        fd, path = tempfile.mkstemp(suffix=".cubin")  # RawModule loads a cubin from a file (public API)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(binary.image)
            with self.device:
                module = self._cp.RawModule(path=path)
                kernel = module.get_function(binary.symbol)
                _ = kernel.max_threads_per_block  # load now, not at the first launch
                self._modules[id(kernel)] = (kernel, module)
        finally:
            os.unlink(path)
        return kernel

    def set_constants(self, kernel: Any, constants: Mapping[str, np.ndarray]) -> None:
        """Fill the ``__constant__`` symbols of the kernel's module (Kernel Tuner's ``cmem_args``)."""
        module = self._modules[id(kernel)][1]
        with self.device:
            for name, value in constants.items():
                host = np.ascontiguousarray(value)
                try:
                    pointer = module.get_global(name)
                except Exception as exc:  # noqa: BLE001 - CuPy raises driver errors for unknown symbols
                    raise BackendError(f"constant memory symbol {name!r} is not in the kernel: {exc}") from None
                pointer.copy_from_host(host.ctypes.data, host.nbytes)

    def kernel_max_threads(self, kernel: Any) -> int | None:
        """Threads per block this kernel can run with (registers and shared memory limit it)."""
        return int(kernel.max_threads_per_block)

    def _allocate_array(self, host: np.ndarray) -> DeviceArray:
        # Upload on our stream and wait: a pageable upload on another stream may still be landing
        # when the first device-to-device copy (the pristine snapshot) reads the buffer.
        with self.device, self.stream:
            arr = self._cp.asarray(host)
        self.stream.synchronize()
        return DeviceArray(arr, host.dtype, host.shape)

    def copy_in(self, dst: DeviceArray, host: np.ndarray) -> None:
        with self.device:
            dst.handle.set(np.ascontiguousarray(host, dtype=dst.dtype), stream=self.stream)

    def copy_out(self, src: DeviceArray) -> np.ndarray:
        with self.device:
            host = src.handle.get(stream=self.stream)
            self.stream.synchronize()
        return host

    def copy_device(self, dst: DeviceArray, src: DeviceArray) -> None:
        with self.device:
            dst.handle.data.copy_from_device_async(src.handle.data, src.nbytes, stream=self.stream)

    def fill(self, dst: DeviceArray, value: np.ndarray) -> None:
        if not dst.nbytes:
            return
        pattern = np.ascontiguousarray(value, dtype=dst.dtype).reshape(1)
        raw = pattern.tobytes()
        with self.device:
            if len(set(raw)) == 1:  # one repeated byte (0x7f.. ints): a memset
                dst.handle.data.memset_async(raw[0], dst.nbytes, stream=self.stream)
            else:
                with self.stream:
                    dst.handle.fill(pattern[0])

    @staticmethod
    def _args(args: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(a.handle if isinstance(a, DeviceArray) else a for a in args)

    @staticmethod
    def _allow_shared(kernel: Any, shared_mem: int) -> None:
        """Above 48 KiB a kernel must opt in to dynamic shared memory (a kernel attribute)."""
        if shared_mem > 48 * 1024 and kernel.max_dynamic_shared_size_bytes < shared_mem:
            kernel.max_dynamic_shared_size_bytes = shared_mem

    def launch(self, kernel: Any, grid: Grid, block: Grid, args: Sequence[Any], shared_mem: int = 0) -> None:
        self._allow_shared(kernel, shared_mem)
        with self.device, self.stream:
            kernel(grid, block, self._args(args), shared_mem=shared_mem)

    def time_launch(self, kernel: Any, grid: Grid, block: Grid, args: Sequence[Any], shared_mem: int = 0) -> float:
        cp = self._cp
        self._allow_shared(kernel, shared_mem)
        hold = self.hold_before_short_launches and self._last_ms.get(id(kernel), 0.0) < HOLD_BELOW_MS
        if hold and self.warm_up_kernel is None:  # built by the worker's warm-up, else here (a failure: no hold)
            self.warm_up()
        with self.device, self.stream:
            call_args = self._args(args)
            if hold and self.warm_up_kernel is not None:
                self.warm_up_kernel((1,), (1,), (np.uint64(HOLD_NS),))
            began = time.perf_counter()
            self._start.record(self.stream)
            kernel(grid, block, call_args, shared_mem=shared_mem)
            self._end.record(self.stream)
            self.last_launch_held_up = time.perf_counter() - began > HELD_UP_S
            self._end.synchronize()
        ms = float(cp.cuda.get_elapsed_time(self._start, self._end))
        self._last_ms[id(kernel)] = ms
        return ms

    def synchronize(self) -> None:
        self.stream.synchronize()

    def close(self) -> None:
        self.stream.synchronize()


def _version(v: int) -> str:
    """CUDA's 12040 -> "12.4"."""
    return f"{v // 1000}.{v % 1000 // 10}"


def _device_index(device: int | str | None, count: int, cp: Any) -> int:
    if count == 0:
        raise BackendError("no CUDA device found")
    if device is None:
        return 0
    if isinstance(device, str) and device.strip().isdigit():
        device = int(device)
    if isinstance(device, int):
        if not 0 <= device < count:
            raise BackendError(f"no CUDA device {device}; this machine has {count}")
        return device
    names = []
    for i in range(count):
        raw = cp.cuda.runtime.getDeviceProperties(i)["name"]
        names.append(raw.decode() if isinstance(raw, bytes) else str(raw))
        if device.lower() in names[-1].lower():
            return i
    raise BackendError(f"no CUDA device matches {device!r}; available: {names}")


def cuda_device_name(device: int | str | None = 0) -> str:
    cp = _cupy()
    raw = cp.cuda.runtime.getDeviceProperties(_device_index(device, cp.cuda.runtime.getDeviceCount(), cp))["name"]
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def list_cuda_devices() -> list[tuple[int, DeviceInfo]]:
    """(index, info) for every CUDA device; empty when CuPy or a GPU is missing."""
    try:
        cp = _cupy()
        count = cp.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver: simply no CUDA devices
        return []
    out = []
    for i in range(count):
        raw = cp.cuda.runtime.getDeviceProperties(i)["name"]
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        out.append((i, DeviceInfo(name, "cuda", _version(cp.cuda.runtime.driverGetVersion()))))
    return out
