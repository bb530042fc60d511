"""How a forked CUDA worker's 0.4-0.5 s to an open device splits, and whether the driver's start overlaps CuPy's
import (issue 22, a probe).

Why: on the H100 the forked worker of a Kernel Tuner example is ready 0.52-0.73 s after its fork, ~0.4 s of it
between receiving its setup and an open device (``results/compile_ahead_h100/phases_*``): the child imports
CuPy (the tuning process has not) and then starts the driver. Each round forks a child of this process (NumPy
and adaptune imported, CuPy not, no driver started, as in a tuning call) that opens device 0 either
- ``serial``: ``import cupy``, then the runtime's first call (``cuInit``, the primary context), a stream and the
  device's properties (what ``CUDABackend.__init__`` does), or
- ``overlapped``: the same, with ``cuInit`` and the primary context's retain started in a thread before
  ``import cupy`` (``adaptune._cuda_driver``, as the worker does; the committed run at d312e00 called the same
  ``ctypes`` functions from this file and stamped them one by one).

    python -m benchmarks.kt_examples.device_open --rounds 7 --out DIR      # -> DIR/device_open.{json,md}
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

from adaptune import _cuda_driver  # adaptune imported before the fork, as in a tuning call
from benchmarks.harness import run_metadata, study_parser, write_results

VARIANTS = ("serial", "overlapped")


def child(variant: str, t0: float) -> dict[str, float]:
    """Stamps (s from the fork) of each step of opening device 0 in this (forked) process."""
    stamps: dict[str, float] = {"forked": time.perf_counter()}
    if variant == "overlapped":
        _cuda_driver.start(0)  # what the worker does
    import cupy  # here: the import is one of the steps timed

    stamps["cupy_imported"] = time.perf_counter()
    if variant == "overlapped":
        _cuda_driver.wait()  # as backends.cuda does before CuPy's first call
        stamps["driver_up"] = time.perf_counter()
    cupy.cuda.runtime.getDeviceCount()
    cupy.cuda.Device(0).use()
    stamps["runtime_first_call"] = time.perf_counter()
    cupy.cuda.Stream(non_blocking=False)
    cupy.cuda.runtime.getDeviceProperties(0)
    cupy.cuda.Event()
    stamps["opened"] = time.perf_counter()
    return {k: v - t0 for k, v in stamps.items()}


def one_round(variant: str) -> dict[str, float]:
    read, write = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: open the device, report, leave without the parent's atexit handlers
        os.close(read)
        try:
            os.write(write, json.dumps(child(variant, t0)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(text)


def markdown(rows: dict[str, list[dict[str, float]]]) -> str:
    lines = ["# A forked child's way to an open CUDA device (s from the fork; median, min-max)", "",
             "| variant | step | median s | min s | max s |", "|---|---|---|---|---|"]
    for variant, runs in rows.items():
        for step in runs[0]:
            values = [r[step] for r in runs if step in r]
            lines.append(f"| {variant} | {step} | {statistics.median(values):.3f} | {min(values):.3f} | "
                         f"{max(values):.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = study_parser("kt_examples", __doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:  # interleaved
            rows[variant].append(one_round(variant))
    text = markdown(rows)
    print(text)
    write_results(args.out, "device_open", {"rounds": rows}, table=text, metadata=run_metadata())


if __name__ == "__main__":
    main()
