"""Measurement noise of an LS-CAT table: 1-D kernels run the (b, b) shape exactly like (b*b, 1), so the spread
of those twin timings is noise. Prints, per run, the median and 90th percentile of |log(t_bb / t_b*b)|.

    python -m benchmarks.lscat.twins data/lscat_h100/rows.csv.gz data/lscat_h100/kernels.csv
"""

from __future__ import annotations

import collections
import csv
import gzip
import sys

import numpy as np


def twin_noise(rows_path: str, kernels_path: str) -> dict[str, list[float]]:
    """|log ratio| of every twin pair, grouped by the kernel's run (a run's own table has no run column)."""
    with open(kernels_path) as f:
        kernels = list(csv.DictReader(f))
    one_d = {r["kernel"] for r in kernels if r["two_d"] == "0"}
    run_of = {r["kernel"]: r.get("run") or "this" for r in kernels}
    times: dict[tuple[str, str], dict[tuple[int, int], float]] = collections.defaultdict(dict)
    with gzip.open(rows_path, "rt") as f:
        for r in csv.DictReader(f):
            if r["kernel"] in one_d and r["status"] == "ok" and r["time_us"]:
                times[(r["kernel"], r["size"])][(int(r["bx"]), int(r["by"]))] = float(r["time_us"])
    out: dict[str, list[float]] = collections.defaultdict(list)
    for (kernel, _), t in times.items():
        for b in (8, 16, 24, 32):
            if (b, b) in t and (b * b, 1) in t:
                out[run_of[kernel]].append(abs(float(np.log(t[(b, b)] / t[(b * b, 1)]))))
    return out


if __name__ == "__main__":
    for run, v in sorted(twin_noise(sys.argv[1], sys.argv[2]).items()):
        print(f"run {run}: {len(v)} twin pairs, median |log ratio| {np.median(v):.4f}, p90 {np.quantile(v, 0.9):.4f}")
