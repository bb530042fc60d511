"""Start adaptune's worker program as a child process, without multiprocessing's ``spawn``.

Why not multiprocessing: ``spawn`` re-imports the user's ``__main__`` in the child, so a script
without an ``if __name__ == "__main__":`` guard re-runs itself and hangs. Here the child runs
``python -m adaptune.measure.worker_boot`` (the worker, its CUDA driver started before its imports); it sees
the parent's ``sys.path`` (through ``PYTHONPATH``) and working directory, so whatever the parent could import the
worker can import too. Its stderr goes to a temporary file whose tail is quoted when the worker dies.

When this process holds no device driver and runs no other thread (:mod:`adaptune.measure.fork`), the worker is
forked instead, on Linux: the child has NumPy and adaptune imported already and goes straight to opening the
device (the interpreter's start and imports were 0.5 s of an exec'd worker's 1.1 s on an H100);
``$ADAPTUNE_WORKER_START`` (``auto``, ``exec``, ``fork``) chooses.

A worker costs an interpreter start, imports and a device context before it can measure; a caller that
knows the device early (``tune_kernel``) starts one with :func:`spare_worker` and the next
:class:`~adaptune.measure.Measurer` for that device takes it, so that cost overlaps the caller's own set-up.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from multiprocessing.connection import Connection
from typing import IO, Any

from adaptune.measure.fork import ForkedChild, fork_child, fork_refusal
from adaptune.measure.worker import main as worker_main

STDERR_TAIL_CHARS = 2000
#: values of ``$ADAPTUNE_WORKER_START``
START_METHODS = ("auto", "fork", "exec")


class WorkerStartError(RuntimeError):
    """The worker cannot be started: no Python interpreter to run it, or a fork asked for is not safe."""


def _looks_like_python(path: str | None) -> bool:
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return False
    name = os.path.basename(path).lower()
    return name.startswith(("python", "pypy"))


def python_executable() -> str:
    """The interpreter that runs workers: ``$ADAPTUNE_PYTHON``, else this one, else a matching Python.

    A frozen or embedded program's ``sys.executable`` is the host application, not Python; then the
    base installation's interpreter of the same version is used (it gets our ``sys.path``).
    """
    chosen = os.environ.get("ADAPTUNE_PYTHON")
    if chosen:
        if not os.path.isfile(chosen):
            raise WorkerStartError(f"ADAPTUNE_PYTHON={chosen!r} is not a file")
        return chosen
    if not getattr(sys, "frozen", False) and _looks_like_python(sys.executable):
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [getattr(sys, "_base_executable", None),
                  os.path.join(sys.base_exec_prefix, "bin", version),
                  os.path.join(sys.base_exec_prefix, "bin", "python3"),
                  shutil.which(version)]
    for path in candidates:
        if _looks_like_python(path):
            return str(path)
    raise WorkerStartError(f"this interpreter ({sys.executable!r}) is not a Python executable and no {version} "
                           "was found for the measurement worker; set ADAPTUNE_PYTHON to one")


def start_method() -> str:
    """``$ADAPTUNE_WORKER_START``: ``auto`` (the default: fork when safe, else exec), ``exec`` (always a fresh
    interpreter) or ``fork`` (fork, or fail saying why it is not safe)."""
    chosen = os.environ.get("ADAPTUNE_WORKER_START") or "auto"
    if chosen not in START_METHODS:
        raise WorkerStartError(f"ADAPTUNE_WORKER_START={chosen!r} is not one of {', '.join(START_METHODS)}")
    return chosen


def child_env() -> dict[str, str]:
    """The parent's environment with its whole import path, so the child imports what the parent does."""
    env = dict(os.environ)
    paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if os.path.exists(p)))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def warm_argument(backend: str, device: Any) -> str | None:
    """The worker's ``WARM`` argument: which device to open before the setup message (None: open none,
    for a backend without a device or a device with no JSON form)."""
    if backend not in ("opencl", "cuda", "c"):
        return None
    try:
        return json.dumps([backend, device])
    except TypeError:
        return None


class WorkerProcess:
    """One running worker: the child process, our end of its socket and its captured stderr.
    ``warm``: :func:`warm_argument`'s text, so the worker opens that device while it waits for its setup.
    ``how``: how it was started, ``"fork"`` or ``"exec"`` (with the reason a fork was not safe)."""

    def __init__(self, name: str = "adaptune-measure", warm: str | None = None) -> None:
        ours, theirs = socket.socketpair()
        self.started_at = time.monotonic()  # the worker's start phases are counted from here
        self._stderr: IO[bytes] = tempfile.TemporaryFile(prefix=f"{name}-stderr-")  # noqa: SIM115 - lives as long as the worker
        try:
            self.proc, self.how = self._start(theirs, [str(theirs.fileno()), str(os.getpid()), *([warm] if warm else [])])
        except BaseException:
            ours.close()
            self._stderr.close()
            raise
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())

    def _start(self, theirs: socket.socket, argv: list[str]) -> tuple[subprocess.Popen | ForkedChild, str]:
        """Reap the closed workers that have exited, then fork when :data:`ADAPTUNE_WORKER_START` allows it and it
        is safe (:func:`fork_refusal`), else exec."""
        reap_closed()
        method = start_method()
        why = "ADAPTUNE_WORKER_START=exec"
        if method != "exec":
            refusal = fork_refusal()
            if refusal is None:
                child = fork_child(partial(worker_main, argv), theirs.fileno(), self._stderr.fileno())
                if isinstance(child, ForkedChild):
                    return child, "fork"
                refusal = child
            if method == "fork":
                raise WorkerStartError(f"ADAPTUNE_WORKER_START=fork, but the worker cannot be forked: {refusal}")
            why = refusal
        proc = subprocess.Popen([python_executable(), "-m", "adaptune.measure.worker_boot", *argv],
                                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stderr=self._stderr,
                                cwd=os.getcwd(), env=child_env(), close_fds=True)
        return proc, f"exec ({why})"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_description(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                text = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                text = f"killed by signal {-code}"
        else:
            text = f"exit code {code}"
        tail = self.stderr_tail()
        return f"{text}; its stderr ends with:\n{tail}" if tail else text

    def stderr_tail(self) -> str:
        """The end of the worker's stderr, without the list of extension modules a fatal error ends with (a
        forked worker has every module of its parent loaded: the list would push the traceback out of the tail)."""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - 16 * STDERR_TAIL_CHARS))
            text = self._stderr.read().decode(errors="replace")
            lines = [line for line in text.splitlines() if not line.startswith("Extension modules: ")]
            return "\n".join(lines).strip()[-STDERR_TAIL_CHARS:]
        return ""

    def close_later(self, grace_s: float) -> None:
        """Close the socket and go on: the worker exits on its own once it has released its device; it is
        reaped, or killed when it is still running ``grace_s`` from now, at the next worker's start
        (:func:`reap_closed`). No thread waits for it, so the next worker can be forked at once (a thread waiting
        here made that fork wait for the exit: about 0.2 s of an H100's context teardown per call of a script)."""
        with contextlib.suppress(OSError):
            self.conn.close()
        _closed.append((self, time.monotonic() + grace_s))

    def stop(self, grace_s: float = 0.0) -> None:
        """Close the socket, wait up to ``grace_s`` for a clean exit, then kill; idempotent."""
        with contextlib.suppress(OSError):
            self.conn.close()
        if grace_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace_s)
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        # the stderr file stays readable for the report; it is deleted when this object is collected



#: Closed workers not yet exited, with the moment each is killed if still running (:meth:`WorkerProcess.close_later`).
_closed: list[tuple[WorkerProcess, float]] = []


def reap_closed() -> None:
    """Forget the closed workers that have exited; kill those past their grace period. Never waits."""
    now = time.monotonic()
    for entry in list(_closed):
        worker, deadline = entry
        if worker.proc.poll() is not None:
            _closed.remove(entry)
        elif now >= deadline:
            worker.stop()
            _closed.remove(entry)


#: Workers started ahead by :func:`spare_worker`, by their ``warm`` text, until a Measurer takes one.
_spares: dict[str, WorkerProcess] = {}


@contextlib.contextmanager
def spare_worker(backend: str, device: Any) -> Iterator[None]:
    """Start a worker for ``(backend, device)`` now; the first Measurer for that device in the block takes
    it (:func:`take_spare`), and one left untaken at the end (the run failed before measuring) is stopped."""
    warm = warm_argument(backend, device)
    if warm is not None and warm not in _spares:
        _spares[warm] = WorkerProcess(warm=warm)
    try:
        yield
    finally:
        left = _spares.pop(warm, None) if warm is not None else None
        if left is not None:
            left.stop()


def take_spare(warm: str | None) -> WorkerProcess | None:
    """The started worker for this ``warm`` text, if one is waiting and alive."""
    worker = _spares.pop(warm, None) if warm is not None else None
    if worker is not None and not worker.alive():
        worker.stop()
        return None
    return worker


@atexit.register
def _stop_spares() -> None:
    for worker in _spares.values():
        worker.stop()
    _spares.clear()
    reap_closed()  # the others exit on their own: their sockets are closed, and they watch for their parent
