"""CUDA kernels compiled ahead in forked CPU processes while the measurement worker starts and measures.

Why: a tuning call's measurement worker compiles in its own thread pool, and only once it has opened the device
(0.4-0.7 s into the call on an H100). NVRTC in threads of one process does not scale: on the H100 host (16 cores)
4, 8 or 16 threads compile 70-75 small kernels a second, the worker's CuPy builds 60-69, while 8 processes compile
131 (``benchmarks/kt_examples/results/compile_ahead_h100/``). So the tuning call forks a few compile processes
right after it forked the worker: the first of them asks NVML which architecture the GPUs this process may use
have, for all of them (no CUDA context: the parent stays free to fork again); they compile the first
configurations while the worker opens the device, then whatever the strategy asks ahead; the parent hands each
finished cubin to the worker (``Measurer.preload``), which loads it instead of compiling (``backends.binary``).

A compile error here is the worker's own: NVRTC gets the options CuPy's ``RawModule`` would give it
(``backends.binary.nvrtc_options``), and a source NVRTC refuses for its host code goes to nvcc in both places.
So the error is handed to the worker in place of a binary (``CompileFailure``), which reports it without
compiling again: a failing compile can take as long as a good one (Kernel Tuner's ``convolution_correct.py``
has ptxas errors after 20-50 s of compiling, ``matmul.py`` four of 1-2.5 s), and the worker met them one after
another while measuring.

Never fatal: a configuration that fails here for another reason, a binary for another architecture, no NVML,
GPUs of mixed architectures or a compile process that died leave the work to the worker, which compiles and
reports as without this. :meth:`CompileAhead.left_to_worker` names what the worker must compile ahead itself:
each such configuration, as soon as that is known, and all that is outstanding once
:attr:`CompileAhead.usable` turns False (no binary can come).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

from adaptune.backends.binary import cuda_target
from adaptune.measure.geometry import launch_geometry
from adaptune.measure.runners import compile_binaries
from adaptune.measure.spec import KernelSpec
from adaptune.store.codec import config_key  # the store's canonical key: one identity for a configuration

#: compile processes: this many at most, and two cores left to the worker and this process
MAX_PROCESSES = 8
#: environment variable that sets the number of compile processes (0: none, the worker compiles ahead itself)
PROCESSES_ENV = "ADAPTUNE_COMPILE_PROCESSES"

_STATE: dict[str, Any] = {}  # in a compile process: the spec and backend, inherited through fork (never pickled)


def visible_gpus(text: str | None) -> list[int | str] | None:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` (``text``) lets this process use, as indices or ``GPU-`` UUIDs, read as
    CUDA reads it (up to the first entry it cannot use); None where it is unset or names MIG instances (then all
    the host's GPUs are asked)."""
    if text is None:
        return None
    out: list[int | str] = []
    for item in (part.strip() for part in text.split(",")):
        if item.startswith("MIG-"):
            return None
        if item.isdigit():
            out.append(int(item))
        elif item.startswith("GPU-"):
            out.append(item)
        else:
            break
    return out


def gpu_target() -> str | None:
    """The cubin architecture of the GPUs this process may use (``sm_90``) from NVML, when they all share one; else
    None. Only those ``CUDA_VISIBLE_DEVICES`` names are asked: fewer NVML queries, and a host with GPUs of two
    kinds still gets binaries for the one a job sees. An index is NVML's (PCI order); where CUDA orders the GPUs
    otherwise (``CUDA_DEVICE_ORDER`` unset on a host of mixed GPUs) and this picks another kind, the worker's own
    architecture differs and its compiles take over (:meth:`CompileAhead.expect`)."""
    try:
        import pynvml  # nvidia-ml-py: optional (adaptune[cuda]); without it the worker compiles everything

        pynvml.nvmlInit()
        try:
            visible = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"))
            handles = ([pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
                       if visible is None else
                       [pynvml.nvmlDeviceGetHandleByUUID(v) if isinstance(v, str) else
                        pynvml.nvmlDeviceGetHandleByIndex(v) for v in visible])
            found = {pynvml.nvmlDeviceGetCudaComputeCapability(h) for h in handles}
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no library, no driver, no GPU, no such GPU: nothing to compile for
        return None
    if len(found) != 1:
        return None
    major, minor = found.pop()
    return cuda_target(f"{major}.{minor}")


def _init(spec: KernelSpec, backend: str, found: Any) -> None:
    _STATE.update(spec=spec, backend=backend, found=found)


def _target() -> str | None:
    """The GPUs' architecture, asked of NVML by the first compile process only and shared with the others:
    eight ``nvmlInit`` at once, beside the worker's ``cuInit``, delayed its device by ~0.1 s on an H100."""
    if "target" not in _STATE:
        found = _STATE["found"]
        with found.get_lock():
            if not found.value:
                found.value = (gpu_target() or "-").encode()
            _STATE["target"] = None if found.value == b"-" else found.value.decode()
    return _STATE["target"]


def _compile(config: dict[str, Any]) -> tuple[str | None, list[tuple[dict[str, Any], Any]]]:
    """(the target compiled for, [(config, binary)]): no binary where it does not compile here."""
    target = _target()
    if target is None:
        return None, []
    return target, compile_binaries(_STATE["spec"], _STATE["backend"], target, [config], failures=True)


class CompileAhead:
    """Compile processes for one tuning call; :meth:`start` forks them (call it once the worker is forked)."""

    def __init__(self, spec: KernelSpec, backend: str = "cuda", processes: int = MAX_PROCESSES) -> None:
        if backend != "cuda":
            raise ValueError(f"compiling ahead in processes is for CUDA (NVRTC needs no device); got {backend!r}")
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.spec, self.backend, self.processes = spec, backend, processes
        self.usable = True  #: False once no binary can come (see the module's docstring)
        self.expected: str | None = None  #: the worker's architecture, once it said
        self.max_threads: int | None = None  #: threads per block the worker's GPU allows, once it said
        self._pool: ProcessPoolExecutor | None = None
        self._undelivered: dict[str, dict[str, Any]] = {}  # key -> config asked for, no binary handed out yet
        self._asked: set[str] = set()
        self._futures: dict[str, Future] = {}  # compiles not yet looked at (a window, not the whole run)
        self._failed: list[dict[str, Any]] = []  # did not compile here, not yet handed to the worker
        self.waited_s = 0.0  #: time :meth:`binaries` spent waiting for a configuration's binary

    @classmethod
    def for_tuning(cls, spec: Any, backend: str) -> CompileAhead | None:
        """One for a CUDA kernel on a host with cores to spare and the ``fork`` start method; else None.
        ``ADAPTUNE_COMPILE_PROCESSES`` sets the number (fewer than 2: none)."""
        spare = min(MAX_PROCESSES, (os.cpu_count() or 1) - 2)
        if os.environ.get(PROCESSES_ENV, "").strip():
            spare = int(os.environ[PROCESSES_ENV])
        if backend != "cuda" or not isinstance(spec, KernelSpec) or spare < 2 \
                or "fork" not in multiprocessing.get_all_start_methods():
            return None
        return cls(spec, backend, spare)

    def start(self) -> None:
        """Fork the compile processes and hand them what was asked so far."""
        if self._pool is not None:
            return
        fork = multiprocessing.get_context("fork")
        found = fork.Array("c", 32)  # the target, once a compile process has asked NVML (a semaphore: no thread)
        self._pool = ProcessPoolExecutor(self.processes, mp_context=fork, initializer=_init,
                                         initargs=(self.spec, self.backend, found))
        for key, config in self._undelivered.items():
            self._futures[key] = self._pool.submit(_compile, config)

    def compile(self, configs: Iterable[Mapping[str, Any]]) -> None:
        """Compile ``configs`` (each once); before :meth:`start` they wait for it. One whose block has more
        threads than the GPU allows is not compiled: the worker refuses it unlaunched, without a binary."""
        for config in configs:
            key = config_key(config)
            if key in self._asked:
                continue
            self._asked.add(key)
            if self._never_launched(config):
                continue
            self._undelivered[key] = dict(config)
            if self._pool is not None:
                self._futures[key] = self._pool.submit(_compile, self._undelivered[key])

    def expect(self, target: str | None, max_threads: int | None = None) -> None:
        """The worker's architecture (``backends.binary.binary_target_of``): binaries for another are dropped;
        and its GPU's threads per block: configurations with larger blocks are no longer compiled, and those
        asked before and not yet begun are cancelled (two thirds of ``sepconv.py``'s 122 880 configurations)."""
        self.expected, self.max_threads = target, max_threads
        if target is None:
            self.usable = False
            return
        for key, config in list(self._undelivered.items()):
            future = self._futures.get(key)
            if self._never_launched(config) and (future is None or future.cancel()):
                self._futures.pop(key, None)
                del self._undelivered[key]

    def _never_launched(self, config: Mapping[str, Any]) -> bool:
        if not self.max_threads:
            return False
        try:
            return launch_geometry(self.spec, config).threads_per_block > self.max_threads
        except Exception:  # noqa: BLE001 - a configuration the worker will report as wrong: not this one's call
            return False

    def binaries(self, config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> list[tuple[dict, Any]]:
        """The binaries finished since the last call, for the expected architecture; waits up to ``timeout``
        for ``config``'s own first (one this process never asked for is not waited for)."""
        future = self._futures.get(config_key(config)) if config is not None else None
        if future is not None and self.usable and not future.done():
            t0 = time.perf_counter()
            wait_futures([future], timeout=timeout)
            self.waited_s += time.perf_counter() - t0
        out: list[tuple[dict, Any]] = []
        for key, done in list(self._futures.items()):
            if not done.done():
                continue
            del self._futures[key]
            try:
                target, items = done.result()
            except Exception:  # noqa: BLE001 - a compile process died: the worker compiles this one
                target, items = self.expected, []
            if target is None or target != self.expected:
                self.usable = False
                continue
            if items:
                del self._undelivered[key]
                out.extend(items)
            else:
                self._failed.append(self._undelivered.pop(key))
        return out

    def left_to_worker(self) -> list[dict[str, Any]]:
        """Configurations the worker must compile itself, each named once: those that did not compile here
        since the last call, and once no binary can come, every one asked for and not yet delivered."""
        left, self._failed = self._failed, []
        if not self.usable:
            left.extend(self._undelivered.values())
            self._undelivered.clear()
        return left

    def close(self) -> None:
        """Stop the compile processes (a compile in progress is finished first: no thread stays behind, so a
        later worker of this process can be forked)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
