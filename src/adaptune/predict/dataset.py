"""The LS-CAT H100 table in adaptune's Store: one problem per kernel, one input per matrix size,
configurations ``{"block_size_x": bx, "block_size_y": by}``; and back to the tidy table."""

from __future__ import annotations

import csv
import gzip
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from adaptune.predict.corpus import SHAPES
from adaptune.records import DeviceInfo, Result, Status

_STATUS = {"ok": Status.OK, "launch_error": Status.LAUNCH_ERROR, "too_many_threads": Status.LAUNCH_ERROR,
           "crash": Status.LAUNCH_ERROR, "skipped": Status.TIMEOUT}
SPACE = {"params": {"block_size_x": sorted({s[0] for s in SHAPES}), "block_size_y": sorted({s[1] for s in SHAPES})},
         "shapes": [list(s) for s in SHAPES]}


def to_store(rows_csv_gz: str | Path, store: Any, device: DeviceInfo, kernels: Iterable[str] | None = None) -> int:
    """Write the table's rows (optionally only ``kernels``) into ``store``; returns rows written.
    Problems are named ``lscat:<kernel>``; a crash keeps its cause in ``error``."""
    keep = set(kernels) if kernels is not None else None
    grouped: dict[tuple[str, int], list[Result]] = defaultdict(list)
    with gzip.open(rows_csv_gz, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            if keep is not None and r["kernel"] not in keep:
                continue
            cfg = {"block_size_x": int(r["bx"]), "block_size_y": int(r["by"])}
            if r["status"] == "ok":
                t = float(r["time_us"]) / 1000.0
                res = Result(cfg, Status.OK, t, [t])
            else:
                res = Result.failure(cfg, _STATUS.get(r["status"], Status.LAUNCH_ERROR), r["status"])
            grouped[(r["kernel"], int(r["size"]))].append(res)
    dev = store.device(device)
    n = 0
    for (kernel, size), results in grouped.items():
        pid = store.problem(f"lscat:{kernel}", hashlib.sha1(kernel.encode()).hexdigest()[:16], SPACE)
        iid = store.input(pid, f"{size}x{size}", {"xsize": size, "ysize": size})
        n += store.put_many(dev, pid, iid, results)
    return n


def from_store(store: Any) -> Iterator[dict[str, Any]]:
    """Tidy rows (kernel, size, bx, by, time_us, status) of every ``lscat:`` problem in ``store``."""
    for p in store.problems():
        if not p.name.startswith("lscat:"):
            continue
        for inp in store.inputs(p.id):
            for r in store.results(problem_id=p.id, input_id=inp.id):
                yield {"kernel": p.name[6:], "size": inp.features.get("xsize"),
                       "bx": r.config["block_size_x"], "by": r.config["block_size_y"],
                       "time_us": round(r.time_ms * 1000.0, 4) if r.ok else None,
                       "status": "ok" if r.ok else (r.error or str(r.status))}
