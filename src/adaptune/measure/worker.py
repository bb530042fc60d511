"""The worker process: owns the device context and the resident argument buffers.

It is started as adaptune's own program (``python -m adaptune.measure.worker_boot FD PARENT_PID [WARM]``), never
by re-importing the user's ``__main__``, so tuning works from a script without a main guard, a
notebook, ``python -c`` or ``python - < file`` -- or, where that is safe, forked from the parent, whose child calls
:func:`main` with the same arguments (:mod:`adaptune.measure.fork`). It answers messages from
:class:`~adaptune.measure.measurer.Measurer` over the socket ``FD``:
``("setup", payload, sizes, shared)`` followed by the out-of-band buffers of ``sizes`` (the argument arrays): a
shared-memory file's descriptor, or their bytes unframed (:mod:`adaptune.measure.channel`)
-> ``("ready", DeviceInfo, start_phases)`` or ``("setup_error", message)``;
``("measure", config, best_ms)`` -> ``("compiled", ms)`` then ``("result", Result, restart)`` or
``("spec_error", message)``; ``("prefetch", configs)``; ``("binaries", [(config, KernelBinary)])``; ``("stats",)`` -> ``("stats", dict)``;
``("close",)``. The payload is pickled by the parent process and arrives over that private socket
only, never from a file. ``WARM`` (JSON ``[backend, device]``) opens that device while the setup message
arrives, so the device context is ready while the parent still prepares the spec
(:func:`adaptune.measure.process.spare_worker`); the payload is unpickled as it arrives (the modules it
names are imported then), beside the device's opening. ``start_phases`` are ``time.monotonic()`` stamps (one
clock for every process of the machine) of the moments its start reached: ``imported``, ``device_opened``
and ``warm_up_built`` (with ``WARM``: the compiler's warm-up build runs in a thread from then on, beside the
runner's set-up and the first measurements, and is stamped only when it ended before ``ready``),
``setup_received``, ``runner_ready``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import pickle
import signal
import sys
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

from adaptune import _cuda_driver
from adaptune.backends import make_backend
from adaptune.measure.channel import receive_buffers
from adaptune.measure.geometry import SpecError
from adaptune.measure.runners import exception_text, make_runner
from adaptune.records import Result, Status

PARENT_POLL_S = 0.5


def _exit_when_orphaned(parent_pid: int) -> None:
    """Leave no orphan: a worker whose parent died (SIGKILL, crash) exits even in the middle of a run."""
    while True:
        if os.getppid() != parent_pid:
            os._exit(3)
        time.sleep(PARENT_POLL_S)


def main(argv: list[str] | None = None) -> None:
    phases = {"imported": time.monotonic()}
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3):
        sys.exit("adaptune.measure.worker is started by adaptune's Measurer, not by hand "
                 "(usage: python -m adaptune.measure.worker_boot FD PARENT_PID [WARM])")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle, from the first moment
    fd, parent_pid = int(argv[0]), int(argv[1])
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True,
                     name="adaptune-parent-watch").start()
    faulthandler.enable()  # a crashing kernel leaves a Python traceback in the stderr the parent reports
    conn = Connection(fd)
    warmed = None
    if len(argv) == 3:  # the setup and its arrays arrive in a thread while this one opens the device
        pool = ThreadPoolExecutor(2, thread_name_prefix="adaptune-setup")
        arriving = pool.submit(_receive_setup, conn, phases)
        warmed = _open(argv[2])
        phases["device_opened"] = time.monotonic()
        if warmed is not None:  # the compiler's warm-up build runs beside the runner's set-up (argument upload)
            warmed.warming = pool.submit(_warm_up, warmed.backend, phases)
        pool.shutdown(wait=False)
        setup = arriving.result
    else:
        setup = partial(_receive_setup, conn, phases)
    try:
        kind, loaded = setup()
    except (EOFError, OSError):
        return
    if kind != "setup":
        conn.send(("setup_error", f"expected a setup message, got {kind!r}"))
        return
    serve(conn, loaded, warmed, phases)


def _receive_setup(conn: Connection, phases: dict[str, float]) -> tuple[str, Any]:
    """The setup message's kind and its payload unpickled with its out-of-band buffers (writable, as the
    arrays the caller passed) -- or the exception unpickling raised, for :func:`serve` to report."""
    message = conn.recv()
    if message[0] != "setup":
        return message[0], None
    buffers = receive_buffers(conn, message)
    try:
        loaded: Any = pickle.loads(message[1], buffers=buffers)  # from our parent's socket
    except Exception as exc:  # noqa: BLE001 - reported by serve, as any other setup failure
        loaded = exc
    phases["setup_received"] = time.monotonic()
    return "setup", loaded


@dataclass
class Opened:
    """The device the ``WARM`` argument named, opened before the setup arrived; ``warming``: the compiler's
    warm-up build (:meth:`~adaptune.backends.Backend.warm_up`) in a thread."""

    name: str
    device: Any
    backend: Any
    warming: Future | None = None

    def settle(self) -> None:
        """Wait for the warm-up build (before the backend is closed)."""
        if self.warming is not None:
            with contextlib.suppress(Exception):
                self.warming.result()


def _open(text: str) -> Opened | None:
    """The device of the ``WARM`` argument, opened; None when it cannot be opened now (the setup then opens
    the device itself and reports why it fails)."""
    try:
        name, device = json.loads(text)
        device = tuple(device) if isinstance(device, list) else device
        if name == "cuda":
            _cuda_driver.start(device)  # beside CuPy's import, which make_backend does (once: worker_boot may have)
        return Opened(name, device, make_backend(name, device))
    except Exception:  # noqa: BLE001 - only a head start: the setup message repeats the work and reports errors
        return None


def _warm_up(backend: Any, phases: dict[str, float]) -> None:
    """The compiler's warm-up build (its failures are left to the first real compile), stamped."""
    backend.warm_up()
    phases["warm_up_built"] = time.monotonic()


def serve(conn: Connection, loaded: Any, warmed: Opened | None = None, phases: dict[str, float] | None = None) -> None:
    """Set up the runner from the unpickled setup ``(spec, backend, settings, device)`` (reusing the device
    ``warmed`` opened when it is the one asked for) and answer requests until close or EOF."""
    warnings.simplefilter("ignore")
    phases = {} if phases is None else phases
    try:
        if isinstance(loaded, Exception):
            raise loaded
        spec, backend, settings, device = loaded
        opened = None
        if warmed is not None:
            asked_for = (warmed.name, warmed.device) == (backend, device) and not settings.cache_dir
            opened = warmed.backend if asked_for else None
            if opened is None:
                warmed.settle()
                warmed.backend.close()
        # the warm-up build is not waited for here (~0.1 s of an H100 worker's 0.5-0.8 s start): a worker sent
        # binaries compiled elsewhere may never compile, a first compile loads the compiler beside it, and a
        # held launch that needs its kernel waits for it (Backend.warm_up)
        runner = make_runner(spec, backend, settings, device, opened)
    except Exception as exc:  # setup failures go back to the parent as one message
        conn.send(("setup_error", f"{type(exc).__name__}: {exc}"))
        return
    phases["runner_ready"] = time.monotonic()
    conn.send(("ready", runner.device_info(), dict(phases)))  # a copy: the warm-up thread may stamp it now
    try:
        _serve(conn, runner)
    finally:
        if warmed is not None:
            warmed.settle()  # no build left running in a context being closed
        with contextlib.suppress(Exception):  # a poisoned CUDA context fails even to close
            runner.close()


def _serve(conn: Connection, runner: Any) -> None:
    def notify(compile_ms: float) -> None:
        conn.send(("compiled", compile_ms))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent went away
            return
        op = message[0]
        if op == "measure":
            config = message[1]
            best_ms = message[2] if len(message) > 2 else None
            try:
                result, restart = runner.measure(config, notify, best_ms)
            except SpecError as exc:
                conn.send(("spec_error", str(exc)))
                continue
            except Exception as exc:  # a bug outside user code must still not lose the session
                result, restart = Result.failure(config, Status.LAUNCH_ERROR, exception_text(exc)), True
            conn.send(("result", result, restart))
            if restart:
                return
        elif op == "prefetch":
            runner.prefetch(message[1])
        elif op == "binaries":
            if hasattr(runner, "preload"):
                runner.preload(message[1])
        elif op == "stats":
            conn.send(("stats", runner.stats()))
        elif op == "close":
            return


if __name__ == "__main__":
    main()
