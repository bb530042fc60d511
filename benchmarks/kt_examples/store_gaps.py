"""Where a tuning run's time went between results, read from adaptune's store (issue 22, a probe).

Why: an example stopped at the time limit leaves no per-call record, but its store keeps every result with the
time it was stored. The gap before each result is what that configuration cost the run (compiling it or waiting
for its binary, checking, timing); summed by outcome and listed at the longest, they say what held the run up
(``convolution_correct.py``: compile errors met twice, ``results/long_runs_2026-11-27/``).

    python -m benchmarks.kt_examples.store_gaps STORE [--top 10] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from adaptune.store import Store

#: a gap longer than this is a wait, not the run's steady pace
WAIT_S = 0.4


def gaps(db: str) -> list[dict[str, Any]]:
    """Each stored result in the order it was measured, with the seconds since the one before (the first: none)."""
    store = Store(db)
    try:
        results = sorted((s.result for s in store.iter_results()), key=lambda r: r.timestamp)
    finally:
        store.close()
    out, before = [], None
    for r in results:
        out.append({"gap_s": None if before is None else r.timestamp - before, "status": str(r.status),
                    "config": r.config, "error": r.error.splitlines()[0][:160] if r.error else ""})
        before = r.timestamp
    return out


def summary(rows: list[dict[str, Any]], top: int) -> dict[str, Any]:
    by_status: dict[str, dict[str, float]] = defaultdict(lambda: {"results": 0, "gap_s": 0.0, "waits": 0,
                                                                  "wait_s": 0.0})
    for row in rows:
        entry = by_status[row["status"]]
        entry["results"] += 1
        gap = row["gap_s"] or 0.0
        entry["gap_s"] += gap
        if gap > WAIT_S:
            entry["waits"] += 1
            entry["wait_s"] += gap
    span = sum(row["gap_s"] or 0.0 for row in rows)
    longest = sorted((r for r in rows if r["gap_s"]), key=lambda r: -r["gap_s"])[:top]
    return {"results": len(rows), "span_s": span, "by_status": dict(by_status), "longest": longest}


def markdown(name: str, report: dict[str, Any]) -> str:
    lines = [f"# Gaps between stored results: `{name}`", "",
             f"{report['results']} results over {report['span_s']:.0f} s; a wait is a gap over {WAIT_S} s.", "",
             "| outcome | results | seconds before them | waits | seconds in waits | mean gap s |", "|---|---:|---:|---:|---:|---:|"]
    for status, e in sorted(report["by_status"].items()):
        lines.append(f"| {status} | {e['results']} | {e['gap_s']:.0f} | {e['waits']} | {e['wait_s']:.0f} | "
                     f"{e['gap_s'] / max(e['results'], 1):.2f} |")
    lines += ["", "Longest gaps:", "", "| s | outcome | configuration | first line of the error |", "|---:|---|---|---|"]
    for r in report["longest"]:
        lines.append(f"| {r['gap_s']:.1f} | {r['status']} | {json.dumps(r['config'])} | {r['error']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", help="a store's path (SQLite) or URL")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None, help="write store_gaps.{json,md} here")
    args = ap.parse_args()
    if "://" not in args.store and not Path(args.store).is_file():
        ap.error(f"no store at {args.store}")
    report = summary(gaps(args.store), args.top)
    text = markdown(Path(args.store).name, report)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "store_gaps.json").write_text(json.dumps(report, indent=1))
        (args.out / "store_gaps.md").write_text(text)


if __name__ == "__main__":
    main()
