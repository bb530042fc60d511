"""The LS-CAT H100 table round-trips through adaptune's Store (real SQLite)."""

import csv
import gzip
from pathlib import Path

from adaptune.predict.dataset import from_store, to_store
from adaptune.records import DeviceInfo
from adaptune.store import Store

ROWS = Path(__file__).resolve().parents[1] / "data" / "lscat_h100" / "rows.csv.gz"


def test_table_round_trips_through_the_store(tmp_path):
    with gzip.open(ROWS, "rt", newline="") as fh:
        rows = list(csv.DictReader(fh))
    kernels = sorted({r["kernel"] for r in rows})[:2]
    want = [r for r in rows if r["kernel"] in kernels]
    store = Store(str(tmp_path / "lscat.db"))
    n = to_store(ROWS, store, DeviceInfo("NVIDIA H100 80GB HBM3", "cuda"), kernels)
    assert n == len(want) > 0
    got = {(r["kernel"], int(r["size"]), r["bx"], r["by"]): r for r in from_store(store)}
    assert len(got) == len(want)
    for r in want:
        g = got[(r["kernel"], int(r["size"]), int(r["bx"]), int(r["by"]))]
        if r["status"] == "ok":
            assert g["status"] == "ok" and abs(g["time_us"] - float(r["time_us"])) < 1e-3
        else:
            assert g["status"] == r["status"] and g["time_us"] is None
