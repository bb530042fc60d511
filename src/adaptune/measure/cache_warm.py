"""PoCL's kernel cache filled in forked processes, in bursts between timed runs, on an OpenCL CPU device.

Why: on PoCL a configuration's compile happens twice, and mostly at its first launch. ``clBuildProgram`` makes
LLVM bitcode (0.2-0.7 s for Kernel Tuner's ``convolution.cl`` on a 2-core Xeon host); the first launch then
compiles the work-group function for that work-group size (1.2-2.3 s more), and a single LLVM thread does
both. Both go to PoCL's kernel cache on disk (``POCL_CACHE_DIR``, keyed by source, options, device, and for the
second by the work-group size). A process that builds a configuration and launches one work-group of it leaves
both there: another process's build of it then takes 0.03 s and its first launch is an ordinary run
(``tests/test_cache_warm.py``). So the compiles can run in parallel on every core, where the worker
would do them one at a time.

On this device the kernels run on the cores the compiler needs (:func:`~adaptune.measure.runners.
shares_host_cores`), so compiling beside timed runs would slow both. Here nothing is compiled while the worker
times: :meth:`KernelCacheWarmer.ready` warms the configuration about to be measured together with the next ones
asked ahead (one burst, up to two per process), waits until they are all done, and only then lets the worker go.

Each warming process opens the device the worker uses with one compute unit (``POCL_CPU_MAX_CU_COUNT=1``: one
thread each, not one per core) and launches each configuration's kernel once, a single work-group on the real
arguments (wrapped, not copied: ``CL_MEM_USE_HOST_PTR`` on the arrays it inherited through ``fork``; what the
kernel writes stays in that process). Never fatal: a configuration that fails to build or launch there is
simply measured by the worker as before (which reports the error), and a burst that does not end within
:data:`BURST_TIMEOUT_S` (a kernel that hangs) stops the processes and the warming for the rest of the run. A
warming process that dies (a configuration whose launch crashes PoCL: Kernel Tuner's ``matmul.py`` has one) ends
its burst at once: ``multiprocessing.Pool`` replaces the process but never finishes the task it held, so waiting
for it would cost the whole timeout (180 s of a 64-core host's run before this was watched for). The burst's
unfinished configurations are left to the worker, and later bursts run in fresh processes, up to
:data:`MAX_CRASHES` times.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from adaptune.backends.opencl import OpenCLBackend
from adaptune.measure.choice import ArgumentChoice
from adaptune.measure.compile_ahead import PROCESSES_ENV
from adaptune.measure.fork import fork_refusal
from adaptune.measure.runners import kernel_source, shares_host_cores
from adaptune.measure.spec import KernelSpec
from adaptune.records import DeviceInfo
from adaptune.store.codec import config_key

#: warming processes at most (each compiles with one LLVM thread)
MAX_PROCESSES = 32
#: cores a host needs for warming by default: on 2 cores Kernel Tuner's vector_add (15 small kernels) took 1.1x
#: as long with it (3.4-3.6 s against 3.1-3.2 s inside tune_kernel), its stencil (44) 0.9x; on 32 cores 0.43-0.79x
MIN_CORES = 4
#: configurations per process in one burst: the slowest compile of a burst holds the others up
BURST_PER_PROCESS = 2
#: seconds a burst may take before the warming is given up (a kernel that hangs)
BURST_TIMEOUT_S = 180.0
#: warming processes that may die (their burst ended, the pool started afresh) before the warming is given up
MAX_CRASHES = 3
#: seconds between looks at the processes while a burst runs
POLL_S = 0.2

_STATE: dict[str, Any] = {}  # in a warming process: spec, device, then its backend and arguments (via fork)


def _init(spec: KernelSpec, device: Any, device_name: str) -> None:
    os.environ["POCL_CPU_MAX_CU_COUNT"] = "1"  # before PoCL starts in this process: one thread, not one per core
    os.environ["POCL_MAX_PTHREAD_COUNT"] = "1"  # its name in older PoCL (3.1 reads only this one)
    _STATE.update(spec=spec, device=device, device_name=device_name)


def _backend() -> OpenCLBackend | None:
    """This process's device, opened on first use; None when it is not the worker's (nothing is warmed)."""
    if "backend" not in _STATE:  # chosen by the worker's device's name: no probe build (select_device(None) does one)
        backend = OpenCLBackend(_STATE["device"])
        _STATE["backend"] = backend if backend.device_info().name == _STATE["device_name"] else None
    return _STATE["backend"]


def _arguments(backend: OpenCLBackend, config: Mapping[str, Any]) -> list[Any]:
    """The spec's arguments over this process's copy of the host arrays (each made once; a chosen one per value)."""
    made: dict[Any, Any] = _STATE.setdefault("arguments", {})
    out = []
    for i, arg in enumerate(_STATE["spec"].arguments):
        key: Any = (i, arg.pick(config)) if isinstance(arg, ArgumentChoice) else i
        if key not in made:
            value = arg.make(key[1]) if isinstance(arg, ArgumentChoice) else arg
            made[key] = backend.wrap_host(value) if isinstance(value, np.ndarray) else value
        out.append(made[key])
    return out


def _warm(config: dict[str, Any]) -> bool:
    """Build ``config`` and launch one work-group of it: True when both went through."""
    try:
        backend = _backend()
        if backend is None:
            return False
        spec = _STATE["spec"]
        geo, _, targs, full, _ = kernel_source(spec, config, "opencl")  # the worker's source, defines in it
        if geo.threads_per_block > backend.limits().max_threads_per_block:
            return False  # the worker refuses it unlaunched
        kernel, _, _ = backend.compile_timed(full, spec.name, None, tuple(spec.compiler_options), targs)
        backend.launch(kernel, (1, 1, 1), geo.block, _arguments(backend, config))
        backend.synchronize()
        return True
    except Exception:  # noqa: BLE001 - the worker meets this configuration's error itself and reports it
        return False


def _usable_cores() -> int:
    """Cores this process may run on (``taskset`` narrows them; ``os.cpu_count`` counts the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


class KernelCacheWarmer:
    """Warming processes for one tuning call on an OpenCL CPU device (see the module's docstring)."""

    def __init__(self, spec: KernelSpec, device: Any, device_name: str, processes: int) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.spec, self.processes = spec, processes
        self.usable = True  #: False once a burst failed to end: from then on the worker compiles as before
        self.burst_size = BURST_PER_PROCESS * processes
        self.warmed = 0  #: configurations built and launched in the warming processes
        self.failed = 0  #: configurations that did not build or launch there (the worker reports why)
        self.waited_s = 0.0  #: time spent waiting for bursts (the worker idle)
        self.crashes = 0  #: warming processes that died during a burst
        self._queued: dict[str, dict[str, Any]] = {}  # asked ahead, not yet warmed, in asking order
        self._done: set[str] = set()
        self._start = (spec, device, device_name)
        self._pool, self._pids = self._new_pool()

    def _new_pool(self) -> tuple[Any, set[int]]:
        """The warming processes and their pids (``Pool`` starts them before it returns)."""
        before = {p.pid for p in multiprocessing.active_children()}
        pool = multiprocessing.get_context("fork").Pool(self.processes, initializer=_init, initargs=self._start)
        return pool, {p.pid for p in multiprocessing.active_children()} - before

    def _one_died(self) -> bool:
        """Whether a warming process is gone (``active_children`` reaps it; the pool's replacement is new)."""
        return not self._pids <= {p.pid for p in multiprocessing.active_children()}

    @classmethod
    def for_device(cls, spec: Any, info: DeviceInfo, device: Any = None) -> KernelCacheWarmer | None:
        """One for a kernel on an OpenCL CPU device whose kernel cache is on, where this process may fork;
        else None. Processes: one per core this process may use, up to :data:`MAX_PROCESSES`, where it may use
        :data:`MIN_CORES` or more (``ADAPTUNE_COMPILE_PROCESSES`` sets the number; fewer than 2: none)."""
        cores = _usable_cores()
        processes = min(MAX_PROCESSES, cores) if cores >= MIN_CORES else 0
        if os.environ.get(PROCESSES_ENV, "").strip():
            processes = int(os.environ[PROCESSES_ENV])
        if not isinstance(spec, KernelSpec) or not shares_host_cores(info) or processes < 2 \
                or os.environ.get("POCL_KERNEL_CACHE", "1").strip() == "0" or fork_refusal() is not None:
            return None
        chosen = device if device is not None else f"{info.platform.removeprefix('opencl:')} / {info.name}"
        return cls(spec, chosen, info.name, processes)

    def queue(self, configs: Iterable[Mapping[str, Any]]) -> None:
        """Configurations asked ahead: warmed in a later burst, in this order."""
        for config in configs:
            key = config_key(config)
            if key not in self._done:
                self._queued.setdefault(key, dict(config))

    def ready(self, config: Mapping[str, Any]) -> None:
        """Return once ``config`` is warmed (or given up), warming the next ones asked ahead in the same burst."""
        key = config_key(config)
        if not self.usable or key in self._done:
            return
        burst = {key: dict(config)}
        for other, queued in self._queued.items():  # in asking order; popped below, after this loop
            if len(burst) >= self.burst_size:
                break
            burst.setdefault(other, queued)
        for k in burst:
            self._queued.pop(k, None)
            self._done.add(k)
        t0 = time.perf_counter()
        results = [self._pool.apply_async(_warm, (c,)) for c in burst.values()]
        deadline = t0 + BURST_TIMEOUT_S
        pending = results
        while pending:
            pending[0].wait(POLL_S)
            pending = [r for r in pending if not r.ready()]
            if not pending:
                break
            if self._one_died():  # its task will never finish: the rest of this burst is the worker's
                self.crashes += 1
                self._pool.terminate()
                if self.crashes >= MAX_CRASHES:
                    self.usable = False
                else:
                    self._pool, self._pids = self._new_pool()
                break
            if time.perf_counter() > deadline:
                self.usable = False
                self._pool.terminate()
                break
        warmed = sum(r.get() for r in results if r.ready())  # ``_warm`` never raises
        self.warmed += warmed
        self.failed += len(results) - warmed
        self.waited_s += time.perf_counter() - t0

    def close(self) -> None:
        """Stop the warming processes."""
        self._pool.terminate()
        self._pool.join()

    def stats(self) -> dict[str, Any]:
        return {"warming_processes": self.processes, "warmed": self.warmed, "warm_failed": self.failed,
                "warm_waited_ms": round(self.waited_s * 1e3), "warm_crashes": self.crashes,
                "warming_given_up": not self.usable}

