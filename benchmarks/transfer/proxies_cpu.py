"""Proxy micro-benchmarks on a CPU OpenCL device, repeated: median and range, with the host's load.

A shared CPU host is noisy (PoCL's proxies varied up to 4x between runs), so one measurement is not a
device feature: this runs ``kernels.proxies.measure_proxies`` ``--runs`` times on the OpenCL device that
``POCL_DEVICES`` selects (``pthread``: all cores; ``basic``: serial, one compute unit), records each run
and the 1-minute load average beside it, and merges the median under the device's name into a copy of
data/devices/proxy_features.json at OUT/proxy_features.json (default OUT: out/transfer/; an existing entry
is kept unless ``--replace``). ``--table data/devices/proxy_features.json`` updates the library's own table.

    POCL_DEVICES=basic nice -n 10 python -m benchmarks.transfer.proxies_cpu --runs 5
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import time
from pathlib import Path

from adaptune.kernels.device import OpenCLDevice
from adaptune.kernels.proxies import PROXY_NAMES, measure_proxies
from benchmarks.harness import git_commit, parse_study_args, study_parser

TABLE = Path(__file__).resolve().parents[2] / "data" / "devices" / "proxy_features.json"


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("transfer", __doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--table", default=None, help="proxy table to merge into (default: a copy in OUT)")
    ap.add_argument("--log", default=None, help="also write every run here (JSON)")
    ap.add_argument("--replace", action="store_true", help="overwrite an existing entry for this device")
    args = parse_study_args(ap, argv, smoke={"runs": 1})
    dev = OpenCLDevice()
    runs = []
    for _ in range(args.runs):
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        rates = measure_proxies(dev)
        runs.append({"proxies": rates, "load_before": round(load, 2), "seconds": round(time.perf_counter() - t0, 2)})
        print(dev.name, {k: round(v, 3) for k, v in rates.items()}, f"load {load:.1f}", flush=True)
    median = {k: statistics.median(r["proxies"][k] for r in runs) for k in PROXY_NAMES}
    commit = git_commit()
    entry = {"proxies": median,
             "range": {k: [min(r["proxies"][k] for r in runs), max(r["proxies"][k] for r in runs)] for k in PROXY_NAMES},
             "runtime": "opencl", "size": "small", "multiprocessors": dev.multiprocessors, "runs": args.runs,
             "load_range": [min(r["load_before"] for r in runs), max(r["load_before"] for r in runs)],
             "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit or "unknown",
             "note": f"PoCL ({os.environ.get('POCL_DEVICES', 'default')} driver) on a 2-core x86 host shared with "
                     f"other work: median of {args.runs} runs, range and load kept"}
    if args.log:
        Path(args.log).write_text(json.dumps({"device": dev.name, "runs": runs, "entry": entry}, indent=1))
    path = Path(args.table) if args.table else Path(args.out) / "proxy_features.json"
    table = json.loads((path if path.exists() else TABLE).read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    if dev.name in table["devices"] and not args.replace:
        print(f"{dev.name} already in {path}: kept (pass --replace to overwrite); this run's median: {median}")
        return
    table["devices"][dev.name] = entry
    path.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{dev.name}: median of {args.runs} written to {path}")


if __name__ == "__main__":
    main()
