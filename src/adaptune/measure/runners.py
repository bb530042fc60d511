"""Measure one configuration inside the worker process: compile, check, warm up, time.

:class:`KernelRunner` drives a device :class:`~adaptune.backends.Backend`; :class:`CallableRunner`
runs Python variants. Both return ``(Result, restart)``: ``restart`` asks the parent for a fresh
worker when a failure may have left the device context unusable.
"""

from __future__ import annotations

import math
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptune.backends import CompileError, DeviceArray, inject_defines, make_backend, name_expression
from adaptune.backends.binary import CompileFailure, compile_binary
from adaptune.backends.python import PythonBackend, timer_for, to_host
from adaptune.measure.choice import ArgumentChoice
from adaptune.measure.geometry import Geometry, SpecError, kernel_defines, launch_geometry, template_args
from adaptune.measure.observers import make_observers
from adaptune.measure.spec import CallableSpec, KernelSpec, MeasureSettings
from adaptune.measure.timing import collect, settle
from adaptune.measure.verify import check, poison_value
from adaptune.records import DeviceInfo, Result, Status

Notify = Callable[[float], None]
LOG_LINES = 30
#: Tries of one timed sample whose launch the host held up (``Backend.last_launch_held_up``); the last one stands.
HELD_UP_RETRIES = 4
LOG_CHARS = 4000
#: A warm-up run at least this long (ms), right after the verification launch, is timed and kept as the first
#: sample: the verification launch already paid the first-launch costs (PoCL's work-group compile, a module load),
#: and a run this long is a whole run of device time. Kernel Tuner runs no warm-up per configuration; on PoCL,
#: ``matmul.py``'s 4096³ products (1.3-4.6 s a run) and ``reduction.py``'s (7 s on 2 cores) spent one run in
#: every 4 to 9 on it.
KEEP_WARMUP_MS = 100.0
#: Backends whose every build is a compiler process (the C backend's g++/nvcc): threads that wait on them
#: scale with the host's cores, where NVRTC and OpenCL builds in threads of one process stop at about 8.
OUT_OF_PROCESS_BUILDS = frozenset({"c"})
#: Compile threads at most for an in-process compiler, and for compiler processes (two cores kept for measuring).
IN_PROCESS_COMPILE_THREADS, COMPILER_PROCESS_THREADS = 8, 64


def compile_threads(backend: str) -> int:
    """How many configurations the worker compiles at once on this host for ``backend``."""
    cores = os.cpu_count() or 1
    threads = max(1, min(IN_PROCESS_COMPILE_THREADS, cores))
    if backend in OUT_OF_PROCESS_BUILDS:
        return max(threads, min(COMPILER_PROCESS_THREADS, cores - 2))
    return threads


def racing(settings: MeasureSettings, best_ms: float | None) -> Callable[[float], bool] | None:
    """The early-discard test for one configuration, or None when racing is off or there is no incumbent."""
    factor = settings.discard_factor
    if factor is None or best_ms is None or not math.isfinite(best_ms):
        return None
    return lambda ms: ms > factor * best_ms


def shares_host_cores(info: DeviceInfo) -> bool:
    """An OpenCL CPU device (PoCL) runs kernels on the cores its compiler needs: there builds are not made beside
    timed runs (``tuning.tune``)."""
    return info.platform.startswith("opencl:") and "CPU" in str(info.properties.get("type", ""))


def racing_time(result: Result) -> float:
    """A result's time as an incumbent for racing: the lower of its first two timed runs, since a candidate is
    judged on its own first two. Where early runs are slower than later ones (PoCL: the first runs after a build
    took 2-3x the median) a candidate is then held to a time of the same kind, not to the incumbent's median."""
    return min(result.samples[:2]) if result.ok and result.samples else result.time_ms


def log_head(text: str) -> str:
    """The first lines of a compiler log: enough to see the first errors, short enough to store."""
    head = "\n".join(text.strip().splitlines()[:LOG_LINES])
    return head[:LOG_CHARS]


def exception_text(exc: BaseException) -> str:
    """``Type: message`` plus the innermost frame, for errors raised by user code."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


@dataclass
class Prepared:
    """Everything a configuration needs before it can be compiled."""

    geometry: Geometry
    defines: dict[str, Any]
    template_args: list[Any] | None
    key: str
    source: str  # the kernel text without defines (a generated source differs per configuration)


def kernel_source(spec: KernelSpec, config: dict[str, Any], backend: str
                  ) -> tuple[Geometry, dict[str, Any], list[Any] | None, str, str]:
    """(geometry, defines, template arguments, source with defines, kernel name expression) of a config:
    what compiling it needs, with no device (compile workers use it too)."""
    geo = launch_geometry(spec, config)
    if geo.shared_mem and backend != "cuda":
        raise SpecError("shared_mem (dynamic shared memory) needs the cuda backend; in OpenCL size "
                        "__local arrays with #defines")
    defines = kernel_defines(spec, config, geo)
    targs = template_args(spec, config)
    try:
        full = inject_defines(spec.text_for(config), defines)
    except Exception as exc:  # noqa: BLE001 - a bad define or a failing source generator: the spec's fault
        raise SpecError(f"{type(exc).__name__}: {exc}") from None
    return geo, defines, targs, full, name_expression(spec.name, targs)


def compile_binaries(spec: KernelSpec, backend: str, target: str, configs: Iterable[dict[str, Any]],
                     failures: bool = False) -> list[tuple[dict[str, Any], Any]]:
    """Binaries of ``configs`` for ``target`` (a CPU compile worker's job); a config that cannot be
    compiled here is left out: its measuring worker compiles it and reports what goes wrong. ``failures``:
    where this compile is the worker's own (``backends.binary.nvrtc_options``), a compile error comes back as a
    :class:`CompileFailure` for the worker to report, instead of a second compile there."""
    out: list[tuple[dict[str, Any], Any]] = []
    for config in configs:
        try:
            _, _, _, full, expr = kernel_source(spec, config, backend)
            out.append((dict(config), compile_binary(backend, target, full, expr, spec.compiler_options)))
        except CompileError as exc:
            if failures:
                out.append((dict(config), CompileFailure(exc.log or str(exc))))
        except Exception:  # noqa: BLE001 - see above
            continue
    return out


class KernelRunner:
    """``opened``: the device's backend when the worker opened it already (:func:`make_backend`'s result)."""

    def __init__(self, spec: KernelSpec, backend: str, settings: MeasureSettings, device: Any,
                 opened: Any = None) -> None:
        self.spec = spec
        self.settings = settings
        self.backend = opened if opened is not None else make_backend(backend, device, settings.cache_dir)
        if spec.lang is not None and spec.lang != self.backend.lang:
            raise ValueError(f"the kernel is {spec.lang} but the backend is {backend}")
        info = self.backend.device_info()
        self.observers = make_observers(tuple(settings.observers), backend, info.properties, device)
        self.backend.hold_before_short_launches = settings.hold_short_launches and not self.observers
        self.choices = {i: a for i, a in enumerate(spec.arguments) if isinstance(a, ArgumentChoice)}
        self.args = self.backend.allocate([np.int8(0) if i in self.choices else a  # chosen per configuration
                                           for i, a in enumerate(spec.arguments)])
        self.restored = spec.restored_indices()
        self.pristine: dict[int, DeviceArray] = {}
        for i in self.restored:
            if i not in self.choices:
                self.pristine[i] = self._pristine_copy(self.args[i])
        self.chosen: dict[tuple[int, Any], tuple[Any, DeviceArray | None]] = {}  # (argument, value) -> buffers
        answer = spec.answer
        self.poisoned = [] if callable(answer) or answer is None or not spec.poison_outputs else [
            i for i, a in enumerate(answer) if a is not None
            and (isinstance(self.args[i], DeviceArray) or (i in self.choices and self.choices[i].is_array()))]
        # the outputs a check reads (a callable answer may read any, unless it says which): only those are copied back
        if callable(answer) or answer is None:
            self.read_back = set(getattr(answer, "reads", range(len(self.args))))
        else:
            self.read_back = {i for i, a in enumerate(answer) if a is not None}
        self.backend.synchronize()
        workers = settings.compile_workers or compile_threads(self.backend.name)
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="adaptune-compile")
        self.pending: dict[str, Future[tuple[Any, float, bool]]] = {}
        self.counters = {"measured": 0, "prefetched": 0, "compiled_ahead": 0, "compile_waits": 0,
                         "loaded_binaries": 0, "held_up_launches": 0, "settle_runs": 0, "kept_warmups": 0}
        self._loaded_lock = threading.Lock()  # loads count from the pool's threads

    def device_info(self) -> DeviceInfo:
        return self.backend.device_info()

    def stats(self) -> dict[str, int]:
        return {**self.counters, "compiles": self.backend.compiles}

    # --- compilation -------------------------------------------------------------------------
    def prepare(self, config: dict[str, Any]) -> Prepared:
        geo, defines, targs, full, expr = kernel_source(self.spec, config, self.backend.name)
        key = self.backend.cache_key(full, expr, tuple(self.spec.compiler_options))
        return Prepared(geo, defines, targs, key, self.spec.text_for(config))

    def preload(self, items: Iterable[tuple[dict[str, Any], Any]]) -> None:
        """Kernels compiled by another process (``backends.binary``): loaded in the compile pool, as a compile
        ahead would be (a module load takes 10-100 ms on an H100; here it would hold up the next measurement)."""
        for config, binary in items:
            try:
                prep = self.prepare(config)
            except Exception:  # noqa: BLE001 - measure() reports the reason for this config
                continue
            if prep.key not in self.pending:
                self.pending[prep.key] = self.pool.submit(self._load, prep, binary)

    def _load(self, prep: Prepared, binary: Any) -> tuple[Any, float, bool]:
        """The binary loaded into the compile cache, then taken from it (compiled instead if it did not load);
        a :class:`CompileFailure` is this compile's error, raised as the worker's own compile would."""
        if isinstance(binary, CompileFailure):
            raise CompileError(f"compilation failed (in a compile process): {log_head(binary.log)}", log=binary.log)
        if self.backend.load_binary(prep.key, binary):
            with self._loaded_lock:
                self.counters["loaded_binaries"] += 1
        return self._compile(prep)

    def _compile(self, prep: Prepared) -> tuple[Any, float, bool]:
        return self.backend.compile_timed(prep.source, self.spec.name, prep.defines,
                                          tuple(self.spec.compiler_options), prep.template_args)

    def prefetch(self, configs: Iterable[dict[str, Any]]) -> None:
        """Start compiling ``configs`` in the thread pool; impossible ones are left for measure()."""
        for config in configs:
            try:
                prep = self.prepare(config)
            except Exception:  # noqa: BLE001 - measure() reports the reason for this config
                continue
            if prep.key in self.pending or self.limit_problem(prep.geometry):
                continue
            self.pending[prep.key] = self.pool.submit(self._compile, prep)
            self.counters["prefetched"] += 1

    def limit_problem(self, geo: Geometry, kernel: Any = None) -> str:
        """Why this block cannot launch on this device ("" when it can)."""
        limits = self.backend.limits()
        name = self.backend.device_info().name
        if geo.threads_per_block > limits.max_threads_per_block:
            return (f"block {geo.block} has {geo.threads_per_block} threads; {name} allows at most "
                    f"{limits.max_threads_per_block} per block")
        for axis, b, m in zip("xyz", geo.block, limits.max_block_dims, strict=True):
            if b > m:
                return f"block {geo.block}: {axis} = {b} exceeds the device maximum {m} on {name}"
        if limits.max_shared_mem is not None and geo.shared_mem > limits.max_shared_mem:
            return (f"{geo.shared_mem} bytes of dynamic shared memory per block; {name} allows at most "
                    f"{limits.max_shared_mem}")
        if kernel is not None:
            allowed = self.backend.kernel_max_threads(kernel)
            if allowed is not None and geo.threads_per_block > allowed:
                return (f"block {geo.block} has {geo.threads_per_block} threads; this compiled kernel allows at "
                        f"most {allowed} (registers or local memory limit it)")
        return ""

    # --- one configuration -------------------------------------------------------------------
    def _pristine_copy(self, arg: DeviceArray) -> DeviceArray:
        copy = self.backend.empty_like(arg)
        self.backend.copy_device(copy, arg)
        return copy

    def _choose(self, config: dict[str, Any]) -> None:
        """Put each :class:`ArgumentChoice`'s argument for ``config`` in place: made and uploaded the first time
        a configuration needs that value (that precision), then reused."""
        for i, choice in self.choices.items():
            try:
                value = choice.pick(config)
            except (KeyError, TypeError, ValueError) as exc:
                raise SpecError(f"argument {i}: {exc}") from None
            if (i, value) not in self.chosen:
                arg = self.backend.allocate([choice.make(value)])[0]
                self.chosen[i, value] = (arg, self._pristine_copy(arg) if i in self.restored else None)
            self.args[i], pristine = self.chosen[i, value]
            if pristine is not None:
                self.pristine[i] = pristine

    def _restore(self) -> None:
        for i, src in self.pristine.items():
            self.backend.copy_device(self.args[i], src)

    def _run(self, kernel: Any, geo: Geometry) -> None:
        self._restore()
        self.backend.launch(kernel, geo.grid, geo.block, self.args, geo.shared_mem)

    def _timed(self, kernel: Any, geo: Geometry) -> float:
        for _ in range(HELD_UP_RETRIES):  # a sample whose launch the host held up is run again (backends' docs)
            self._restore()  # enqueued before the launch, outside its events
            ms = self.backend.time_launch(kernel, geo.grid, geo.block, self.args, geo.shared_mem)
            if not self.backend.last_launch_held_up:
                break
            self.counters["held_up_launches"] += 1
        return ms

    def measure(self, config: dict[str, Any], notify: Notify, best_ms: float | None = None) -> tuple[Result, bool]:
        self.counters["measured"] += 1
        prep = self.prepare(config)  # SpecError propagates: the spec is wrong, not the kernel
        self._choose(config)
        why = self.limit_problem(prep.geometry)
        if why:
            notify(0.0)
            return Result.failure(config, Status.LAUNCH_ERROR, why + " (not launched)"), False
        future = self.pending.pop(prep.key, None)
        try:
            if future is not None:
                self.counters["compiled_ahead" if future.done() else "compile_waits"] += 1
                kernel, compile_ms, _ = future.result()
            else:
                kernel, compile_ms, _ = self._compile(prep)
        except CompileError as exc:
            notify(0.0)
            return Result.failure(config, Status.COMPILE_ERROR, log_head(exc.log)), False
        notify(compile_ms)
        why = self.limit_problem(prep.geometry, kernel)
        if why:
            return Result.failure(config, Status.LAUNCH_ERROR, why + " (not launched)", compile_ms=compile_ms), False
        try:
            if self.spec.constant_args:
                self.backend.set_constants(kernel, self.spec.constant_args)
            return self._benchmark(config, kernel, prep.geometry, compile_ms, best_ms), False
        except Exception as exc:  # a launch the API refused or a kernel fault the API reported
            return (Result.failure(config, Status.LAUNCH_ERROR, exception_text(exc), compile_ms=compile_ms),
                    self.backend.restart_after_launch_error)

    def _benchmark(self, config: dict[str, Any], kernel: Any, geo: Geometry, compile_ms: float,
                   best_ms: float | None) -> Result:
        spec, settings, be = self.spec, self.settings, self.backend
        verify_ms = 0.0
        outputs_observed: dict[str, float] = {}
        if settings.verify and spec.answer is not None:
            t0 = time.perf_counter()
            self._restore()
            for i in self.poisoned:
                be.fill(self.args[i], poison_value(self.args[i].dtype))
            be.launch(kernel, geo.grid, geo.block, self.args, geo.shared_mem)
            be.synchronize()
            outputs = [be.copy_out(a) if isinstance(a, DeviceArray) and i in self.read_back else a
                       for i, a in enumerate(self.args)]
            problem = check(outputs, spec.answer, spec.atol, spec.rtol)
            for metric in spec.output_metrics:  # error metrics of these outputs, recorded with the result
                outputs_observed.update({k: float(v) for k, v in metric(outputs).items()})
            verify_ms = (time.perf_counter() - t0) * 1e3
            if problem:
                return Result.failure(config, Status.WRONG_RESULT, problem, compile_ms=compile_ms, verify_ms=verify_ms)
        t0 = time.perf_counter()
        first, warmups = None, settings.warmup
        if warmups and verify_ms and not settings.settle and not self.observers:
            warmups -= 1
            ms = self._timed(kernel, geo)  # after the verification launch: warm, and perhaps long enough to keep
            if ms >= KEEP_WARMUP_MS:
                first = ms
                self.counters["kept_warmups"] += 1
        for _ in range(warmups):
            self._run(kernel, geo)
        be.synchronize()
        if settings.settle:
            self.counters["settle_runs"] += settle(lambda: self._timed(kernel, geo))
        for obs in self.observers:
            obs.start()
        samples = collect(lambda: self._timed(kernel, geo), settings.repeats,
                          min_repeats=settings.auto_min_repeats, max_repeats=settings.auto_max_repeats,
                          max_seconds=settings.auto_max_seconds, rel_ci=settings.auto_rel_ci,
                          give_up=racing(settings, best_ms), first=first)
        observed = dict(outputs_observed)
        for obs in self.observers:
            observed.update(obs.stop())
        benchmark_ms = (time.perf_counter() - t0) * 1e3
        return Result.from_samples(config, samples, compile_ms=compile_ms, verify_ms=verify_ms,
                                   benchmark_ms=benchmark_ms, observers=observed)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        for obs in self.observers:
            obs.close()
        self.backend.close()


class CallableRunner:
    """Python variants: ``fn(config, *arguments) -> outputs``, timed per call."""

    def __init__(self, spec: CallableSpec, settings: MeasureSettings, device: Any) -> None:
        self.spec = spec
        self.settings = settings
        self.backend = PythonBackend(device, spec.arguments)
        self.args = list(spec.arguments)
        self.pristine = [np.copy(a) if isinstance(a, np.ndarray) else None for a in self.args] \
            if spec.restore_inputs else []
        self.info = self.backend.device_info()
        self.observers = make_observers(tuple(settings.observers), "python", self.info.properties, device)
        self.counters = {"measured": 0, "prefetched": 0, "compiled_ahead": 0, "compile_waits": 0}

    def device_info(self) -> DeviceInfo:
        return self.info

    def stats(self) -> dict[str, int]:
        return {**self.counters, "compiles": 0}

    def prefetch(self, configs: Iterable[dict[str, Any]]) -> None:
        """Nothing to compile ahead for Python code."""

    def _restore(self) -> None:
        for arg, saved in zip(self.args, self.pristine, strict=False):
            if saved is not None:
                np.copyto(arg, saved)

    def measure(self, config: dict[str, Any], notify: Notify, best_ms: float | None = None) -> tuple[Result, bool]:
        self.counters["measured"] += 1
        notify(0.0)
        spec, settings = self.spec, self.settings
        fn = spec.fn
        try:
            t0 = time.perf_counter()
            self._restore()
            outputs = self.backend.call(fn, config, self.args)
            timer = timer_for(outputs)
            verify_ms = 0.0
            if settings.verify and spec.answer is not None:
                answer = spec.answer if callable(spec.answer) else list(spec.answer)
                problem = check([to_host(o) for o in outputs], answer, spec.atol, spec.rtol)
                verify_ms = (time.perf_counter() - t0) * 1e3
                if problem:
                    return Result.failure(config, Status.WRONG_RESULT, problem, verify_ms=verify_ms), False
            t0 = time.perf_counter()
            for _ in range(settings.warmup):
                self._restore()
                timer(lambda: fn(config, *self.args))
            for obs in self.observers:
                obs.start()

            def once() -> float:
                self._restore()
                return timer(lambda: fn(config, *self.args))[1]

            samples = collect(once, settings.repeats, min_repeats=settings.auto_min_repeats,
                              max_repeats=settings.auto_max_repeats, max_seconds=settings.auto_max_seconds,
                              rel_ci=settings.auto_rel_ci, give_up=racing(settings, best_ms))
            observed: dict[str, float] = {}
            for obs in self.observers:
                observed.update(obs.stop())
            benchmark_ms = (time.perf_counter() - t0) * 1e3
        except Exception as exc:  # the variant raised: it failed to run, the session goes on
            return Result.failure(config, Status.LAUNCH_ERROR, exception_text(exc)), False
        return Result.from_samples(config, samples, verify_ms=verify_ms, benchmark_ms=benchmark_ms,
                                   observers=observed), False

    def close(self) -> None:
        for obs in self.observers:
            obs.close()


def make_runner(spec: KernelSpec | CallableSpec, backend: str, settings: MeasureSettings,
                device: Any, opened: Any = None) -> KernelRunner | CallableRunner:
    if isinstance(spec, CallableSpec):
        return CallableRunner(spec, settings, device)
    return KernelRunner(spec, backend, settings, device, opened)
