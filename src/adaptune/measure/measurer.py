"""The parent side of measurement: a worker process per Measurer, killed and respawned on faults.

A kernel that never ends, crashes the process or poisons the device context costs one
:class:`~adaptune.records.Result` (``timeout`` / ``launch_error``), never the session. The
worker is started with the ``spawn`` method, so scripts using a Measurer need the usual
``if __name__ == "__main__":`` guard, and callables in specs must be module-level functions.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import pickle
import signal
import time
import weakref
from collections.abc import Iterable, Mapping
from multiprocessing.connection import wait
from typing import Any

from adaptune.backends import BACKENDS
from adaptune.measure.geometry import SpecError
from adaptune.measure.spec import CallableSpec, KernelSpec, MeasureSettings
from adaptune.measure.worker import worker_main
from adaptune.records import DeviceInfo, Result, Status


class MeasureSetupError(RuntimeError):
    """The worker could not start measuring (no device, library missing, bad spec)."""


def _config_key(config: Mapping[str, Any]) -> str:
    return json.dumps(dict(config), sort_keys=True, default=str)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _stop(proc: Any, conn: Any) -> None:
    """Kill a worker (used by the finalizer too, so it takes no self)."""
    with contextlib.suppress(OSError):
        conn.close()
    if proc.is_alive():
        proc.kill()
    proc.join(5)


class Measurer:
    """Measure configurations of one spec on one device, in a worker process.

    ``backend``: "opencl", "cuda" or "python" (a :class:`CallableSpec` always runs on "python").
    """

    def __init__(self, spec: KernelSpec | CallableSpec, backend: str = "opencl",
                 settings: MeasureSettings | None = None, device: Any = 0, *, start_timeout_s: float = 180.0) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        if isinstance(spec, CallableSpec):
            backend = "python"
        elif isinstance(spec, KernelSpec):
            if backend == "python":
                raise ValueError("a KernelSpec needs a device backend (opencl or cuda); use CallableSpec for Python code")
            if spec.lang is not None and spec.lang != backend:
                raise ValueError(f"the kernel is {spec.lang} but the backend is {backend}")
        else:
            raise TypeError(f"spec must be a KernelSpec or CallableSpec, got {type(spec).__name__}")
        self.spec, self.backend, self.device = spec, backend, device
        self.settings = settings or MeasureSettings()
        self.start_timeout_s = start_timeout_s
        try:
            self._payload = pickle.dumps((spec, backend, self.settings, device))
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise TypeError(f"the spec cannot be sent to the worker process ({exc}); callables in a spec "
                            "must be module-level functions, not lambdas or closures") from None
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self._finalizer: Any = None
        self._info: DeviceInfo | None = None
        self._prefetched: dict[str, dict[str, Any]] = {}
        self.restarts = 0
        self._start()

    # --- worker lifecycle --------------------------------------------------------------------
    def _alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=worker_main, args=(child, self._payload), daemon=True,
                                 name="adaptune-measure")
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        self._finalizer = weakref.finalize(self, _stop, proc, parent)
        message = self._receive(self.start_timeout_s)
        if message is None or message[0] != "ready":
            self._kill()
            if message is None:
                raise MeasureSetupError(f"the measurement worker did not start within {self.start_timeout_s} s")
            if message[0] == "died":
                raise MeasureSetupError(f"the measurement worker died while starting ({message[1]})")
            raise MeasureSetupError(f"cannot measure with backend {self.backend!r} on device {self.device!r}: "
                                    f"{message[1]}")
        if self._info is None:
            self._info = message[1]
        if self._prefetched:
            self._conn.send(("prefetch", list(self._prefetched.values())))

    def _kill(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs _stop once
        self._proc = self._conn = self._finalizer = None

    def _restart_later(self) -> None:
        self._kill()
        self.restarts += 1

    def _receive(self, timeout: float) -> tuple[Any, ...] | None:
        """Next message; ("died", why) when the worker is gone; None on timeout."""
        ready = wait([self._conn, self._proc.sentinel], timeout=max(timeout, 0.0))
        if not ready:
            return None
        try:
            if self._conn in ready or self._conn.poll():
                return self._conn.recv()
        except (EOFError, OSError):
            pass
        self._proc.join(5)
        return ("died", _describe_exit(self._proc.exitcode))

    def _ensure_worker(self) -> None:
        if not self._alive():
            if self._proc is not None:
                self._restart_later()
            self._start()

    # --- public API --------------------------------------------------------------------------
    def device_info(self) -> DeviceInfo:
        assert self._info is not None
        return self._info

    def prefetch(self, configs: Iterable[Mapping[str, Any]]) -> None:
        """Compile ``configs`` ahead in the worker's thread pool (measure them later, in any order)."""
        fresh = []
        for config in configs:
            key = _config_key(config)
            if key not in self._prefetched:
                self._prefetched[key] = dict(config)
                fresh.append(dict(config))
        if fresh:
            self._ensure_worker()
            self._conn.send(("prefetch", fresh))

    def measure(self, config: Mapping[str, Any], best_ms: float | None = None) -> Result:
        """Measure one configuration; faults come back as a failed Result, never as an exception.

        Raises :class:`SpecError` only when the spec itself cannot handle ``config`` (e.g. a
        ``grid_div`` naming a parameter the configuration lacks).
        """
        config = dict(config)
        self._prefetched.pop(_config_key(config), None)
        self._ensure_worker()
        s = self.settings
        run_limit = s.timeout_s + (s.auto_max_seconds if s.repeats == "auto" else 0.0)
        self._conn.send(("measure", config, best_ms))
        compile_ms, compiled = 0.0, False
        deadline = time.monotonic() + s.compile_timeout_s
        while True:
            message = self._receive(deadline - time.monotonic())
            if message is None:
                self._restart_later()
                what = (f"no result {s.timeout_s:g} s after compilation" if compiled
                        else f"compilation did not finish within {s.compile_timeout_s:g} s")
                return Result.failure(config, Status.TIMEOUT, f"{what}; the worker was killed and is restarted",
                                      compile_ms=compile_ms)
            op = message[0]
            if op == "compiled":
                compile_ms, compiled = float(message[1]), True
                deadline = time.monotonic() + run_limit
            elif op == "result":
                result: Result = message[1]
                if message[2]:
                    self._restart_later()
                return result
            elif op == "spec_error":
                raise SpecError(message[1])
            elif op == "died":
                self._restart_later()
                return Result.failure(config, Status.LAUNCH_ERROR,
                                      f"the worker process died while measuring ({message[1]}); it is restarted",
                                      compile_ms=compile_ms)

    def stats(self) -> dict[str, int]:
        """Counters from the current worker (compiles, prefetched, compiled_ahead, ...) and restarts."""
        self._ensure_worker()
        self._conn.send(("stats",))
        message = self._receive(60.0)
        if message is None or message[0] != "stats":
            raise MeasureSetupError("the measurement worker did not answer a stats request")
        return {**message[1], "restarts": self.restarts}

    def close(self) -> None:
        """Stop the worker; safe to call twice."""
        if self._alive():
            try:
                self._conn.send(("close",))
                self._proc.join(5)
            except (OSError, BrokenPipeError):
                pass
        if self._proc is not None:
            self._kill()

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
