"""Start the worker by forking this process, when that is safe: the child skips the interpreter and imports.

An exec'd worker (``python -m adaptune.measure.worker``) spends most of its start importing NumPy and adaptune
(0.5 s of 1.1 s on an H100) before it opens the device. A child forked from a parent that has them imported
goes straight to the device. Forking is safe only while this process holds no device driver (a CUDA or
OpenCL context does not survive a fork: the child would hang or fail). CUDA's driver library may be loaded (a
script that imports CuPy or Kernel Tuner before tuning has it mapped): it holds no state until ``cuInit``, which
opens ``/dev/nvidiactl`` and keeps it open, so an open device file is what refuses the fork there and runs no other thread (one holding a
lock at the fork leaves it locked forever in the child). :func:`fork_refusal` says why not, from
``/proc/self/maps`` and the thread counts; anywhere but Linux the answer is always no. After the fork, the
parent counts its threads again as the operating system sees them (a library's native threads are invisible to
:mod:`threading`); with more than one, the child is killed and the worker exec'd instead.

The child is the worker and nothing else: its stdin is ``/dev/null``, its stderr the worker's file, every other
inherited descriptor but the worker's socket is replaced by ``/dev/null`` (so it holds no copy of another
worker's socket or of the parent's files), the parent's buffered output and garbage are never flushed or
collected there, and it leaves with ``os._exit`` (no ``atexit`` handler, no ``finally`` of the parent's).
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable

#: shared libraries whose presence in this process makes a fork unsafe: device drivers and their runtimes that
#: may hold state (threads, platforms) as soon as they are used, with no device file to show it
DRIVER_LIBRARIES = ("libOpenCL.so", "libpocl.so", "libamdhip64.so")
#: device files a GPU driver opens when it is initialised (CUDA's cuInit, NVML, NVIDIA's OpenCL, ROCm)
DEVICE_FILES = ("/dev/nvidia", "/dev/dri/", "/dev/kfd")


def mapped_driver(maps_path: str = "/proc/self/maps") -> str | None:
    """The first device driver library of :data:`DRIVER_LIBRARIES` mapped into this process (its path), or None."""
    with open(maps_path, encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.rstrip("\n").split(maxsplit=5)[-1]
            if os.path.basename(path).startswith(DRIVER_LIBRARIES):
                return path
    return None


def open_device_file(fd_dir: str = "/proc/self/fd") -> str | None:
    """The first GPU device file this process has open (a driver was initialised here), or None."""
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(OSError):  # a descriptor closed since the listing
            target = os.readlink(os.path.join(fd_dir, fd))
            if target.startswith(DEVICE_FILES):
                return target
    return None


#: Native threads whose library makes fork safe: jemalloc's background purging threads (its fork handlers take
#: its locks around the fork and the child starts its own threads on demand); seen under a jemalloc-preloaded
#: Python on the GPU machines, where every process has one.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def os_threads() -> int:
    """Threads of this process as the operating system counts them (``/proc/self/stat``), native ones too."""
    with open("/proc/self/stat", encoding="ascii") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[17])


def os_thread_names() -> list[str]:
    """The names (``comm``) of this process's threads other than the calling one."""
    names = []
    for task in os.listdir("/proc/self/task"):
        if int(task) != threading.get_native_id():
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/comm", encoding="utf-8") as comm:
                names.append(comm.read().strip())
    return names


def fork_refusal() -> str | None:
    """Why this process must not fork a worker now (None: it may)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return f"forking a worker is done on Linux only (this is {sys.platform})"
    try:
        device, driver = open_device_file(), mapped_driver()
    except OSError as exc:
        return f"cannot read /proc/self ({exc})"
    if device is not None:
        return f"a device driver is initialised in this process ({device} is open)"
    if driver is not None:
        return f"a device driver is loaded in this process ({driver})"
    if threading.current_thread() is not threading.main_thread():
        return "the worker is started from a thread other than the main one"
    if threading.active_count() > 1:
        names = ", ".join(sorted(t.name for t in threading.enumerate() if t is not threading.current_thread()))
        return f"other threads run in this process ({names})"
    return None


class ForkedChild:
    """A forked child with the part of :class:`subprocess.Popen`'s interface a worker needs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else (SIGCHLD ignored): gone, its status unknown (as Popen)
                self.returncode = 0
                return 0
            if pid == 0:
                return None
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker pid {self.pid}", timeout or 0.0)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def fork_child(run: Callable[[], object], keep_fd: int, stderr_fd: int, tries: int = 3) -> ForkedChild | str:
    """Fork; the child runs ``run()`` and exits. Returns the child, or why none was kept: other threads ran in
    this process at each of ``tries`` forks (a thread that just ended lingers a moment; each child that could
    have inherited a held lock is killed and reaped before the next try)."""
    why = ""
    for attempt in range(tries):
        if attempt:
            time.sleep(0.005 * attempt)
        catcher = warnings.catch_warnings(record=True)  # Python 3.12's warning about threads: answered below
        catcher.__enter__()
        try:
            warnings.simplefilter("always", DeprecationWarning)
            pid = os.fork()
        except OSError as exc:  # no memory for a copy of a large process (strict overcommit), no processes left
            return f"the fork failed ({exc})"
        finally:
            catcher.__exit__(None, None, None)  # in both processes: the child's warnings are shown, as an exec'd one's
        if pid == 0:
            _be_the_child(run, keep_fd, stderr_fd)
        child = ForkedChild(pid)
        others = [name for name in os_thread_names() if name not in FORK_SAFE_THREADS] if os_threads() > 1 else []
        if not others:
            return child
        why = f"{len(others) + 1} threads ran in this process at the fork (native ones: {', '.join(others)})"
        child.kill()
        child.wait()
    return why


def _be_the_child(run: Callable[[], object], keep_fd: int, stderr_fd: int) -> None:
    """The forked child's whole life: never returns into the parent's code."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's, as for an exec'd worker
        gc.freeze()  # the parent's garbage (finalizers that stop its workers, close its files) is never collected here
        _own_descriptors(keep_fd, stderr_fd)
        for number in signal.valid_signals():  # the parent's Python handlers are not the worker's
            with contextlib.suppress(OSError, ValueError, TypeError):
                if callable(signal.getsignal(number)):
                    signal.signal(number, signal.SIG_DFL)
        run()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported in the worker's stderr, as an exec'd worker's would be
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def _own_descriptors(keep_fd: int, stderr_fd: int) -> None:
    """stdin ``/dev/null``, stderr the worker's file, stdout the parent's (as for an exec'd worker); every other
    descriptor becomes ``/dev/null`` (not closed: a number freed here could be reused and then closed by a
    stale object of the parent's) -- and fresh, unbuffered ``sys`` streams, so the parent's buffered text is
    never written twice."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(stderr_fd, 2)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in (keep_fd, null):
            with contextlib.suppress(OSError):
                os.dup2(null, fd)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True,
                                                   errors="backslashreplace")
