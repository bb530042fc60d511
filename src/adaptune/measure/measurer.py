"""The parent side of measurement: a worker process per Measurer, killed and respawned on faults.

A kernel that never ends, crashes the process or poisons the device context costs one
:class:`~adaptune.records.Result` (``timeout`` / ``launch_error``), never the session. The worker
is adaptune's own program (:mod:`adaptune.measure.process`), so no main guard is needed. The spec
travels to it pickled with cloudpickle: importable functions and classes go by reference, those
defined in ``__main__`` or a notebook (lambdas and closures too) go by value; the argument arrays go
out of band (pickle protocol 5), never copied into the pickle: on Linux in one shared-memory file the worker
maps, elsewhere written to the socket straight from their memory (:mod:`adaptune.measure.channel`).
"""

from __future__ import annotations

import contextlib
import pickle
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from multiprocessing.connection import wait
from typing import Any

import cloudpickle

from adaptune.backends import BACKENDS
from adaptune.measure.channel import send_setup
from adaptune.measure.geometry import SpecError
from adaptune.measure.process import WorkerProcess, take_spare, warm_argument
from adaptune.measure.spec import CallableSpec, KernelSpec, MeasureSettings
from adaptune.records import DeviceInfo, Result, Status
from adaptune.store.codec import config_key  # the store's canonical key: one identity for a configuration

#: Longest single wait for a message; a dead worker is noticed at least this often (seconds).
POLL_S = 0.5


class MeasureSetupError(RuntimeError):
    """The worker could not start measuring (no device, library missing, bad spec)."""


class Measurer:
    """Measure configurations of one spec on one device, in a worker process.

    ``backend``: "opencl", "cuda" or "python" (a :class:`CallableSpec` always runs on "python").
    ``start_timeout_s`` bounds the worker's start-up (interpreter, device context, argument upload);
    a worker that dies while starting is reported at once, with its stderr. ``started``: called once, right
    after the first worker is started, before waiting for it to be ready (a tuning call forks its compile
    processes there, :mod:`adaptune.measure.compile_ahead`).
    """

    def __init__(self, spec: KernelSpec | CallableSpec, backend: str = "opencl",
                 settings: MeasureSettings | None = None, device: Any = None, *, start_timeout_s: float = 120.0,
                 started: Callable[[], None] | None = None) -> None:
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
        if not start_timeout_s > 0:
            raise ValueError(f"start_timeout_s must be > 0, got {start_timeout_s!r}")
        self.spec, self.backend, self.device = spec, backend, device
        self.settings = settings or MeasureSettings()
        self.start_timeout_s = start_timeout_s
        try:
            buffers: list[pickle.PickleBuffer] = []
            self._payload = cloudpickle.dumps((spec, backend, self.settings, device), protocol=5,
                                              buffer_callback=buffers.append)
            self._buffers = [b.raw() for b in buffers]
        except Exception as exc:  # noqa: BLE001 - cloudpickle raises many types for unpicklable state
            raise TypeError(f"the spec cannot be sent to the worker process: {type(exc).__name__}: {exc}") from None
        self._worker: WorkerProcess | None = None
        self._finalizer: Any = None
        self._info: DeviceInfo | None = None
        self._prefetched: dict[str, dict[str, Any]] = {}
        self.restarts = 0
        #: seconds from the worker's start to each moment of its last start (:mod:`adaptune.measure.worker`),
        #: ``setup_sent`` (this process sent the spec: later than the start for a spare worker) and
        #: ``ready_seen`` (this process had the answer)
        self.start_phases: dict[str, float] = {}
        #: how the current worker was started: "fork", or "exec (why not forked)" (:mod:`adaptune.measure.process`)
        self.worker_start = ""
        self._started = started  # called once, when the first worker is started and before it is ready
        self._start()

    # --- worker lifecycle --------------------------------------------------------------------
    @property
    def _conn(self) -> Any:
        assert self._worker is not None
        return self._worker.conn

    def _alive(self) -> bool:
        return self._worker is not None and self._worker.alive()

    def _start(self) -> None:
        warm = None if self.settings.cache_dir else warm_argument(self.backend, self.device)
        worker = take_spare(warm) or WorkerProcess(warm=warm)
        self._worker, self.worker_start = worker, worker.how
        self._finalizer = weakref.finalize(self, worker.stop)
        sent = time.monotonic()
        with contextlib.suppress(OSError):  # a worker that died already: _receive reports how
            send_setup(worker.conn, self._payload, self._buffers)
        if self._started is not None:  # e.g. compile processes, forked now that the worker is (no thread before)
            started, self._started = self._started, None
            started()
        message = self._receive(self.start_timeout_s)
        if message is None or message[0] != "ready":
            note = _stderr_note(worker)
            self._kill()
            if message is None:
                raise MeasureSetupError(f"the measurement worker did not start within {self.start_timeout_s:g} s "
                                        f"(pass a larger start_timeout_s if the device is slow to start); it was killed"
                                        + note)
            if message[0] == "died":
                raise MeasureSetupError(f"the measurement worker died while starting ({message[1]})")
            raise MeasureSetupError(f"cannot measure with backend {self.backend!r} on device {self.device!r}: "
                                    f"{message[1]}")
        if self._info is None:
            self._info = message[1]
        phases = message[2] if len(message) > 2 else {}
        self.start_phases = {"setup_sent": sent - worker.started_at,
                             **{k: v - worker.started_at for k, v in phases.items()},
                             "ready_seen": time.monotonic() - worker.started_at}
        if self._prefetched:
            self._conn.send(("prefetch", list(self._prefetched.values())))

    def _kill(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs WorkerProcess.stop once
        self._worker = self._finalizer = None

    def _restart_later(self) -> None:
        self._kill()
        self.restarts += 1

    def _receive(self, timeout: float) -> tuple[Any, ...] | None:
        """Next message; ("died", why) when the worker is gone; None on timeout.

        Waits in short slices and checks the process too, so a worker that died is seen within
        ``POLL_S`` even if something else still holds its end of the socket.
        """
        worker = self._worker
        assert worker is not None
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            remaining = deadline - time.monotonic()
            ready = wait([worker.conn], timeout=max(0.0, min(POLL_S, remaining)))
            if ready:
                try:
                    return worker.conn.recv()
                except (EOFError, OSError):
                    break
            elif not worker.alive():
                break
            if remaining <= 0:
                return None
        worker.stop(grace_s=5.0)  # reap it, so the exit status is known
        return ("died", worker.exit_description())

    def _ensure_worker(self) -> None:
        if not self._alive():
            if self._worker is not None:
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
            key = config_key(config)
            if key not in self._prefetched:
                self._prefetched[key] = dict(config)
                fresh.append(dict(config))
        if fresh:
            self._ensure_worker()
            self._conn.send(("prefetch", fresh))

    def preload(self, items: Iterable[tuple[Mapping[str, Any], Any]]) -> None:
        """Kernels compiled by another process (``backends.binary.KernelBinary`` per configuration):
        measuring them loads the binary instead of compiling. Lost if the worker restarts (then compiled)."""
        items = [(dict(c), b) for c, b in items]
        if items:
            self._ensure_worker()
            self._conn.send(("binaries", items))

    def measure(self, config: Mapping[str, Any], best_ms: float | None = None) -> Result:
        """Measure one configuration; faults come back as a failed Result, never as an exception.

        Raises :class:`SpecError` only when the spec itself cannot handle ``config`` (e.g. a
        ``grid_div`` naming a parameter the configuration lacks).
        """
        config = dict(config)
        self._prefetched.pop(config_key(config), None)
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

    def stats(self, *, start: bool = True) -> dict[str, int]:
        """Counters from the current worker (compiles, prefetched, compiled_ahead, ...) and restarts;
        ``start=False``: only ``restarts`` when no worker is alive (none is started for the question)."""
        if not start and not self._alive():
            return {"restarts": self.restarts}
        self._ensure_worker()
        self._conn.send(("stats",))
        message = self._receive(60.0)
        if message is None or message[0] != "stats":
            raise MeasureSetupError("the measurement worker did not answer a stats request")
        return {**message[1], "restarts": self.restarts}

    def close(self) -> None:
        """Stop the worker: it gets 5 s to release the device, and the caller goes on at once (the next
        worker's start reaps it); safe to call twice."""
        worker = self._worker
        if worker is not None and self._alive():
            try:
                self._conn.send(("close",))
            except OSError:
                pass
            else:
                self._finalizer.detach()
                self._worker = self._finalizer = None
                worker.close_later(grace_s=5.0)
                return
        self._kill()

    def kill(self) -> None:
        """Stop the worker at once (Ctrl-C, errors): no grace period, nothing left running."""
        self._kill()

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # Ctrl-C or an error: the worker may be busy, so do not wait for it
            self.kill()


def _stderr_note(worker: WorkerProcess) -> str:
    tail = worker.stderr_tail()
    return f"; its stderr ends with:\n{tail}" if tail else ""
