"""CUDA's driver started in a thread -- ``cuInit`` and a device's primary context, through ``ctypes`` -- so a
measurement worker's imports and the driver's start overlap.

Why: a worker's way to an open device was CuPy's import, then the driver's start, one after the other (a worker
forked on an H100 had device 0 open 0.62 s after the fork; with the driver started in a thread before CuPy's import,
0.41 s: ``benchmarks/kt_examples/results/compile_ahead_h100/device_open_d312e00``). A forked worker starts it before
CuPy's import (``adaptune.measure.worker``), an exec'd one before all its imports (``adaptune.measure.worker_boot``);
``adaptune.backends.cuda`` waits for it before CuPy's first call. CuPy's runtime then finds the primary context made;
the reference taken here lasts as long as the process (a worker's). Only for a process that is to hold the device: a
started driver refuses later forks. Failures are left to CuPy, which reports them.

At the package's top, beside ``_lazy``, because the lowest layer (``backends.cuda``) and the worker's entry both use it,
and the entry must import nothing heavy before it: this imports the standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading
from typing import Any

_thread: threading.Thread | None = None


def start(device: Any = 0) -> None:
    """Start the driver for ``device`` (an index, or None for 0: its primary context too; anything else: ``cuInit``
    alone) in a thread, once per process."""
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_start, args=(device,), daemon=True, name="adaptune-cuda-driver")
        _thread.start()


def wait() -> None:
    """Return once a started driver's start has ended (at once where none was started)."""
    if _thread is not None:
        _thread.join()


def _start(device: Any) -> None:
    with contextlib.suppress(Exception):  # no driver here: CuPy's first call says so
        cuda = ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
        if cuda.cuInit(0) != 0 or not (device is None or isinstance(device, int)):
            return
        handle, context = ctypes.c_int(), ctypes.c_void_p()
        if cuda.cuDeviceGet(ctypes.byref(handle), device or 0) == 0:
            cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle)
