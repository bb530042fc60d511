"""The worker process: owns the device context and the resident argument buffers.

It answers messages from :class:`~adaptune.measure.measurer.Measurer` over a pipe:
``("measure", config)`` -> ``("compiled", ms)`` then ``("result", Result, restart)`` or
``("spec_error", message)``; ``("prefetch", configs)``; ``("stats",)`` -> ``("stats", dict)``;
``("close",)``. The spec arrives pickled from the parent process only, never from a file.
"""

from __future__ import annotations

import contextlib
import pickle
import signal
import warnings
from multiprocessing.connection import Connection
from typing import Any

from adaptune.measure.geometry import SpecError
from adaptune.measure.runners import exception_text, make_runner
from adaptune.records import Result, Status


def worker_main(conn: Connection, payload: bytes) -> None:
    """Entry point of the spawned process; returns (and the process exits) on close or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    warnings.simplefilter("ignore")
    try:
        spec, backend, settings, device = pickle.loads(payload)  # bytes from our parent's pipe
        runner = make_runner(spec, backend, settings, device)
    except Exception as exc:  # setup failures go back to the parent as one message
        conn.send(("setup_error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", runner.device_info()))
    try:
        _serve(conn, runner)
    finally:
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
        elif op == "stats":
            conn.send(("stats", runner.stats()))
        elif op == "close":
            return
