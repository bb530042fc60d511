"""Per-input variant selection across devices: train on the others' labels, test on a target GPU.

Reads the raw files of ``benchmarks/gpu_suite.py run`` from two or more devices (same seed and scale,
so the same inputs) and, for each benchmark (SpMV, histogram, sort) and each device as the target:

- **target-trained**: the suite's model (SVM as Nitro, ``adaptive.models.fit_model``) trained on the
  target's own training labels, scored on its test inputs (fraction of oracle, run-time costs);
- **transferred**: the same model trained on the other devices' training labels only (with two or more
  sources, Nitro's MTL: ``MTLSelector``, device features concatenated), scored on the target's test
  inputs: the target's own features go in, its measured times score the choice;
- **source oracle labels**: each test input's best variant on a source, run on the target (what reusing
  another device's per-input choice gives, the upper bound of any source-only model);
- the best fixed variant on the target.

    python benchmarks/transfer_devices.py RAW_H100.json RAW_H200.json [--out benchmarks/results/transfer_devices]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from adaptune.adaptive.device_features import table_features
from adaptune.adaptive.models import fit_model, fraction_of_oracle
from adaptune.adaptive.transfer import MTLSelector

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_suite import cost_matrices  # noqa: E402

DEVICE_FEATURES = ("mem_bandwidth_gbs", "global_mem_gb")  # what differs between an H100 and an H200


def load(path: str) -> dict:
    raw = json.loads(Path(path).read_text())
    raw["path"] = path
    return raw


def arrays(bench: dict, part: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    recs = bench[part]
    costs, runtime = cost_matrices(recs, bench["variants"], bench["default"])
    xs = np.array([r["model_features"] for r in recs], dtype=float)
    return xs, costs, runtime, [r["name"] for r in recs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raws", nargs="+")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "transfer_devices"))
    args = ap.parse_args()
    raws = [load(p) for p in args.raws]
    names = [r["device"]["name"] for r in raws]
    feats = [table_features(n) for n in names]
    out: dict = {"devices": names, "sources": [r["path"] for r in raws], "benchmarks": {}}
    for bname in raws[0]["benchmarks"]:
        if not all(bname in r["benchmarks"] for r in raws):
            continue
        per: dict = {}
        data = [r["benchmarks"][bname] for r in raws]
        test_names = [arrays(d, "test")[3] for d in data]
        if any(t != test_names[0] for t in test_names):
            raise ValueError(f"{bname}: the devices' test inputs differ (same --seed and --scale needed)")
        for ti, target in enumerate(data):
            xs_t, c_t, rt_t, _ = arrays(target, "train")
            x_test, c_test, rt_test, _ = arrays(target, "test")
            own = fit_model("svm", xs_t, c_t, rt_t)
            f_own = float(np.nanmean(fraction_of_oracle(rt_test, own.predict(x_test))))
            srcs = [i for i in range(len(data)) if i != ti]
            if len(srcs) == 1:
                xs_s, c_s, rt_s, _ = arrays(data[srcs[0]], "train")
                moved = fit_model("svm", xs_s, c_s, rt_s).predict(x_test)
            else:
                sel = MTLSelector(DEVICE_FEATURES, kind="svm").fit(
                    [(arrays(data[i], "train")[0], arrays(data[i], "train")[2], feats[i]) for i in srcs])
                moved = sel.predict(x_test, feats[ti])
            f_moved = float(np.nanmean(fraction_of_oracle(rt_test, moved)))
            reuse = {names[i]: float(np.nanmean(fraction_of_oracle(rt_test, np.argmin(arrays(data[i], "test")[2], 1))))
                     for i in srcs}
            fixed = np.nanmean(np.array([fraction_of_oracle(rt_test, np.full(len(rt_test), j))
                                         for j in range(rt_test.shape[1])]), axis=1)
            same = float(np.mean(np.argmin(rt_test, 1) == np.argmin(arrays(data[srcs[0]], "test")[2], 1)))
            per[names[ti]] = {"target_trained": f_own, "transferred": f_moved, "points_behind": 100 * (f_own - f_moved),
                              "source_oracle_labels": reuse, "best_fixed": float(fixed.max()),
                              "best_fixed_variant": target["variants"][int(np.argmax(fixed))],
                              "same_oracle_label_share": same, "trained_on": [names[i] for i in srcs]}
            print(f"{bname} -> {names[ti]}: own {f_own:.4f}, transferred {f_moved:.4f}, reuse {reuse}", flush=True)
        out["benchmarks"][bname] = per
    commit = os.environ.get("ADAPTUNE_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    out["meta"] = {"date": datetime.date.today().isoformat(), "commit": commit or "unknown",
                   "command": "python benchmarks/transfer_devices.py " + " ".join(sys.argv[1:])}
    Path(args.out + ".json").write_text(json.dumps(out, indent=1))
    lines = ["# Per-input variant selection across devices (GPU suite)", "",
             f"- date {out['meta']['date']}, commit {out['meta']['commit']}; labels: " + ", ".join(
                 f"{n} ({r['date']}, commit {r['commit']})" for n, r in zip(names, raws, strict=True)), "",
             "Mean fraction of the target's oracle on its test inputs.", "",
             "| benchmark | target | trained on target | trained on others | points behind | others' oracle labels "
             "| same oracle label | best fixed |", "|---|---|---|---|---|---|---|---|"]
    for b, per in out["benchmarks"].items():
        for t, v in per.items():
            lines.append(f"| {b} | {t} | {v['target_trained']:.4f} | {v['transferred']:.4f} | {v['points_behind']:+.1f} | "
                         f"{', '.join(f'{x:.4f}' for x in v['source_oracle_labels'].values())} | "
                         f"{100 * v['same_oracle_label_share']:.0f} % | {v['best_fixed']:.4f} ({v['best_fixed_variant']}) |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
