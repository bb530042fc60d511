"""Merge one device run of benchmarks/lscat/measure.py into the committed table data/lscat_h100/.

    python -m benchmarks.lscat.merge --run OUT/run3 --run-id 3 [--data data/lscat_h100]   # OUT: the device run's folder

Appends the run's rows (column ``run`` = run id; ``time2_us`` is the second interleaved sweep, empty for
runs that timed each shape once) and kernel records, and adds the run's summary to run_summary.json.
A kernel id already in the table is refused (runs must not overlap: use --exclude when running).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
from pathlib import Path

ROW_FIELDS = ["kernel", "size", "bx", "by", "time_us", "status", "run", "time2_us"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True,
                    help="folder with kernels.csv, lscat_h100_rows.csv.gz (or rows.csv.gz), run_summary.json")
    ap.add_argument("--run-id", required=True, type=int)
    ap.add_argument("--data", default="data/lscat_h100")
    a = ap.parse_args(argv)
    run, data = Path(a.run), Path(a.data)
    with open(data / "kernels.csv", newline="") as fh:
        old_k = list(csv.DictReader(fh))
        k_fields = list(old_k[0].keys())
    if "buffer_rule" not in k_fields:
        k_fields.append("buffer_rule")
        for r in old_k:
            r["buffer_rule"] = "2xy"
    seen = {r["kernel"] for r in old_k}
    summary = json.loads((run / "run_summary.json").read_text())
    with open(run / "kernels.csv", newline="") as fh:
        new_k = list(csv.DictReader(fh))
    clash = seen & {r["kernel"] for r in new_k}
    if clash:
        raise SystemExit(f"{len(clash)} kernels of run {a.run_id} are already in the table, e.g. {sorted(clash)[:3]}")
    for r in new_k:
        r.update(run=str(a.run_id), buffer_rule=summary.get("buffer_rule", "2xy"))
    with open(data / "kernels.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, k_fields)
        w.writeheader()
        w.writerows(old_k + new_k)
    with gzip.open(data / "rows.csv.gz", "rt", newline="") as fh:
        old_r = list(csv.DictReader(fh))
    rows_path = run / "lscat_h100_rows.csv.gz"
    if not rows_path.exists():  # a run already copied into the data folder (e.g. data/lscat_h100/run5/)
        rows_path = run / "rows.csv.gz"
    with gzip.open(rows_path, "rt", newline="") as fh:
        new_r = list(csv.DictReader(fh))
    for r in new_r:
        r["run"] = str(a.run_id)
    buf = io.StringIO()
    w = csv.DictWriter(buf, ROW_FIELDS, extrasaction="ignore")
    w.writeheader()
    w.writerows(old_r + new_r)
    with gzip.open(data / "rows.csv.gz", "wt", newline="", compresslevel=9) as fh:
        fh.write(buf.getvalue())
    rs = json.loads((data / "run_summary.json").read_text())
    summary["run_id"] = a.run_id
    rs["runs"].append(summary)
    rs["date_utc"] = summary.get("date_utc", rs.get("date_utc"))
    (data / "run_summary.json").write_text(json.dumps(rs, indent=1))
    print(f"run {a.run_id}: +{len(new_k)} kernels, +{len(new_r)} rows; table {len(old_k) + len(new_k)} kernels, "
          f"{len(old_r) + len(new_r)} rows")


if __name__ == "__main__":
    main()
