"""One device's share of the cross-device experiments (issue 12): proxy micro-benchmarks + GPU-suite labels.

Run once per device (the H100, the H200, PoCL on the CPU) with the same seed, scale and size scale, so
every device labels the same inputs:

1. ``kernels.proxies.measure_proxies`` (copy bandwidth, atomics contended / spread, local-memory
   bandwidth, FMA rate, launch latency) -> OUT/proxies_<device>.json;
2. ``python -m benchmarks.gpu_suite.run run`` (a child process) on SpMV, histogram and sort (``--benchmarks``; BFS too with
   ``--benchmarks spmv histogram sort bfs``) at ``--size-scale`` (default 0.05: inputs of 5 k – 3 M
   elements, which PoCL on two cores can label in minutes) -> OUT/gpu_suite_<device>_raw.json.

Each part is wrapped so one failure keeps the other.

    python -m benchmarks.transfer.labels --device cuda --tag h100 [--out DIR]      # default out/transfer/
    python -m benchmarks.transfer.labels --device opencl --tag pocl --scale 0.1 --size-scale 0.01  # CPU pilot
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

from benchmarks.harness import git_commit

ROOT = Path(__file__).resolve().parents[2]


class _Skip(Exception):
    """--skip-proxies: leave the proxy part out."""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.transfer.labels", description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "opencl"), required=True)
    ap.add_argument("--out", default="out/transfer", help="folder (default out/transfer/)")
    ap.add_argument("--tag", required=True, help="short device name for the file names (h100, h200, pocl)")
    ap.add_argument("--size-scale", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of inputs (pilot: 0.1)")
    ap.add_argument("--commit", default=None, help="commit to record (default: git, or $ADAPTUNE_COMMIT)")
    ap.add_argument("--skip-suite", action="store_true")
    ap.add_argument("--benchmarks", nargs="+", default=["spmv", "histogram", "sort"],
                    choices=("spmv", "histogram", "sort", "bfs"))
    ap.add_argument("--skip-proxies", action="store_true", help="labels only (the proxies are already measured)")
    args = ap.parse_args(argv)
    args.commit = args.commit or git_commit()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        if args.skip_proxies:
            raise _Skip
        from adaptune.kernels.proxies import measure_proxies

        if args.device == "cuda":
            from adaptune.kernels.device import CupyDevice

            dev = CupyDevice()
        else:
            from adaptune.kernels.device import OpenCLDevice

            dev = OpenCLDevice()
        rates = measure_proxies(dev)
        rec = {"device": dev.name, "runtime": args.device, "multiprocessors": dev.multiprocessors,
               "size": "large" if args.device == "cuda" else "small", "proxies": rates,
               "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": args.commit,
               "python": platform.python_version(), "seconds": round(time.perf_counter() - t0, 2)}
        (out / f"proxies_{args.tag}.json").write_text(json.dumps(rec, indent=1))
        print("proxies", dev.name, {k: round(v, 3) for k, v in rates.items()}, flush=True)
    except _Skip:
        pass
    except Exception:  # keep the labels even if a proxy fails
        (out / f"proxies_{args.tag}_error.txt").write_text(traceback.format_exc())
        print(traceback.format_exc(), flush=True)
    if args.skip_suite:
        return
    tmp = out / "suite_tmp"
    try:
        subprocess.run([sys.executable, "-m", "benchmarks.gpu_suite.run", "run", "--out", str(tmp), "--device",
                        args.device, "--scale", str(args.scale), "--size-scale", str(args.size_scale), "--seed",
                        str(args.seed), "--benchmarks", *args.benchmarks, "--model", "svm", "--commit", args.commit],
                       cwd=ROOT, check=False)
    finally:
        if (tmp / "raw.json").exists():
            raw = json.loads((tmp / "raw.json").read_text())
            raw["size_scale"] = args.size_scale
            (out / f"gpu_suite_{args.tag}_raw.json").write_text(json.dumps(raw))
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
