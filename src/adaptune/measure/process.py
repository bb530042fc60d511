"""Start adaptune's worker program as a child process, without multiprocessing's ``spawn``.

Why not multiprocessing: ``spawn`` re-imports the user's ``__main__`` in the child, so a script
without an ``if __name__ == "__main__":`` guard re-runs itself and hangs. Here the child runs
``python -m adaptune.measure.worker``; it sees the parent's ``sys.path`` (through ``PYTHONPATH``)
and working directory, so whatever the parent could import the worker can import too. Its stderr
goes to a temporary file whose tail is quoted when the worker dies.

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
from multiprocessing.connection import Connection
from typing import IO, Any

STDERR_TAIL_CHARS = 2000


class WorkerStartError(RuntimeError):
    """No Python interpreter could be found to run the worker."""


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


def send_raw(conn: Connection, buffer: Any) -> None:
    """Write a buffer's bytes to the connection's socket as they are, without a frame: the setup's argument
    arrays (their sizes travel in the setup message). Half the time of ``send_bytes``/``recv_bytes_into``, which
    copy each chunk through a new bytes object (0.1 s instead of 0.25 s for Kernel Tuner's vector_add's
    120 MB on the development VM)."""
    view = memoryview(buffer).cast("B")
    sent = 0
    while sent < len(view):
        sent += os.write(conn.fileno(), view[sent:])


def receive_raw(conn: Connection, buffer: bytearray) -> None:
    """Fill ``buffer`` from the connection's socket (what :func:`send_raw` wrote); EOFError if it closes first."""
    view = memoryview(buffer)
    got = 0
    while got < len(view):
        n = os.readv(conn.fileno(), [view[got:]])
        if n == 0:
            raise EOFError("the connection closed in the middle of a buffer")
        got += n


class WorkerProcess:
    """One running worker: the child process, our end of its socket and its captured stderr.
    ``warm``: :func:`warm_argument`'s text, so the worker opens that device while it waits for its setup."""

    def __init__(self, name: str = "adaptune-measure", warm: str | None = None) -> None:
        ours, theirs = socket.socketpair()
        self.started_at = time.monotonic()  # the worker's start phases are counted from here
        self._stderr: IO[bytes] = tempfile.TemporaryFile(prefix=f"{name}-stderr-")  # noqa: SIM115 - lives as long as the worker
        try:
            self.proc = subprocess.Popen(
                [python_executable(), "-m", "adaptune.measure.worker", str(theirs.fileno()), str(os.getpid()),
                 *([warm] if warm else [])],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stderr=self._stderr,
                cwd=os.getcwd(), env=child_env(), close_fds=True)
        except BaseException:
            ours.close()
            self._stderr.close()
            raise
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())

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
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - STDERR_TAIL_CHARS))
            return self._stderr.read().decode(errors="replace").strip()
        return ""

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
