"""The cached flush's host time over fresh processes: one table from the ``overhead`` runs under a folder.

    python -m benchmarks.hotpath.repeats out/hotpath_repeats     # reads */hotpath_*.json, writes repeats.{json,md}

``bash benchmarks/gpu.sh hotpath_repeats N`` makes the folder: N processes of this tree's
``--parts overhead``, each after one of a baseline tree (``.carry/flush_base``) where it is carried, so both
trees meet the same machine in the same minutes. One row per process; per tree the median, min and max of its
processes' p50s: the spread between processes is what a single run cannot show.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from benchmarks.harness import markdown_table, write_results

KEYS = ("flush_host_us_p50", "flush_host_us_p90", "flush_host_no_graph_us_p50", "record_and_flush_us_p50",
        "jit_call_us_p50", "jit_call_no_graph_us_p50", "python_loop_us_before", "python_loop_us_after")
PHASES = ("record", "collect", "key_and_lookup", "bind", "launch_and_alloc", "assign_and_stats")


def rows(folder: Path) -> list[dict[str, Any]]:
    """One row per run folder (named ``<tree>_<i>``): its commit, device and the overhead numbers."""
    out = []
    for path in sorted(folder.glob("*/hotpath_*.json")):
        doc = json.loads(path.read_text())
        over = doc.get("overhead", {})
        tree = path.parent.name.rsplit("_", 1)[0]
        row: dict[str, Any] = {"run": path.parent.name, "tree": tree,
                               "commit": doc.get("metadata", {}).get("commit"), "device": doc.get("device")}
        if "error" in over:
            row["error"] = over["error"]
        row.update({k: over.get(k) for k in KEYS})
        row["cpus"] = ",".join(map(str, over.get("cpus") or []))
        row.update({f"phase_{k}": over.get("phases_us_p50", {}).get(k) for k in PHASES})
        out.append(row)
    return out


def spread(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per tree and number: median, min and max over its processes."""
    out = []
    for tree in dict.fromkeys(r["tree"] for r in table):
        mine = [r for r in table if r["tree"] == tree]
        for key in KEYS:
            vals = [r[key] for r in mine if isinstance(r.get(key), float)]
            if vals:
                out.append({"tree": tree, "number": key, "processes": len(vals), "median": statistics.median(vals),
                            "min": min(vals), "max": max(vals)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    args = ap.parse_args(argv)
    table = rows(args.folder)
    if not table:
        raise SystemExit(f"no */hotpath_*.json under {args.folder}")
    summary = spread(table)
    cols = ["run", "commit", "cpus", *KEYS, *[f"phase_{k}" for k in PHASES]]
    md = ("Host microseconds of the cached 2-op update, one process per row:\n\n"
          + markdown_table(table, cols) + "\nPer tree, over its processes (p50s):\n\n"
          + markdown_table(summary, ["tree", "number", "processes", "median", "min", "max"]))
    path = write_results(args.folder, "repeats", {"runs": table, "spread": summary}, table=md,
                         title="hotpath: the cached flush over fresh processes", metadata=_meta(args.folder))
    print(path.with_suffix(".md").read_text())
    return 0


def _meta(folder: Path) -> dict[str, Any]:
    """The newest run's metadata (the processes ran on one machine, in one call)."""
    docs = [json.loads(p.read_text()) for p in sorted(folder.glob("*/hotpath_*.json"))]
    return dict(docs[-1].get("metadata", {})) if docs else {}


if __name__ == "__main__":
    raise SystemExit(main())
