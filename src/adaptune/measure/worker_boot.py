"""The exec'd measurement worker's entry (``python -m adaptune.measure.worker_boot FD PARENT_PID [WARM]``): CUDA's
driver starts before the worker's imports, so the two overlap; then :func:`adaptune.measure.worker.main` runs.

Why: an exec'd worker (the tuning process holds a device already, so it cannot fork one) spent 0.38-0.49 s on an H100
importing NumPy and adaptune and only then started CUDA's driver beside CuPy's import (0.19-0.24 s more before its
device was open: ``benchmarks/kt_examples/results/compile_ahead_h100/``). Where ``WARM`` names a CUDA device, this
module -- which imports the standard library and ``adaptune._cuda_driver`` only -- starts the driver in a thread
first (``cuInit`` and the primary context took 0.33 s in a forked child there).
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from adaptune import _cuda_driver


def cuda_device(argv: list[str]) -> tuple[bool, Any]:
    """Whether the worker's ``WARM`` argument (JSON ``[backend, device]``) names a CUDA device, and that device."""
    if len(argv) != 3:
        return False, None
    try:
        backend, device = json.loads(argv[2])
    except (ValueError, TypeError):  # a malformed WARM is the worker's to report
        return False, None
    return backend == "cuda", device


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    is_cuda, device = cuda_device(argv)
    if is_cuda:
        _cuda_driver.start(device)
    # the worker's imports (NumPy, adaptune's backends and runners) only now, beside the driver's start: the reason
    # this module exists, so they are not at its top
    importlib.import_module("adaptune.measure.worker").main(argv)


if __name__ == "__main__":
    main()
