"""Scores on the LS-CAT H100 table: the seed's metric for baselines and models, grouped CV over seeds.

    python benchmarks/lscat_train.py [--data data/lscat_h100] [--work data/lscat_work] [--seeds 5]

Writes benchmarks/results/lscat_h100.json (+ .md, .png). With --work it first (re)computes the kernel
features (source + PTX) from the git-ignored working set into data/lscat_h100/features.csv.gz, which is
committed so the scores can be recomputed without the corpus.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from adaptune.predict import corpus, features, metric, model  # noqa: E402


def _read_csv(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as fh:
        return {r["kernel"]: r for r in csv.DictReader(fh)}


def write_features(work: Path, kernels_csv: Path, out: Path) -> None:
    """Source + PTX features of every working-set kernel, plus device attributes from the run."""
    attrs = _read_csv(kernels_csv) if kernels_csv.exists() else {}
    rows = []
    for line in (work / "workset.jsonl").read_text().splitlines():
        item = json.loads(line)
        f = {"kernel": item["id"], "repo": item["repo"]}
        f.update(features.source_features(item["source"], corpus.parse_params(item["params"])))
        ptx = work / "ptx" / (item["id"].replace("/", "_") + ".ptx")
        if ptx.exists():
            f.update(features.ptx_features(ptx.read_text()))
        a = attrs.get(item["id"], {})
        f.update(features.attr_features({k: int(float(a[k])) for k in features.ATTR_FEATURES if a.get(k)}))
        rows.append(f)
    names = sorted({k for r in rows for k in r} - {"kernel", "repo"})
    with gzip.open(out, "wt", newline="") as fh:
        w = csv.DictWriter(fh, ["kernel", "repo", *names])
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()})


def load_features(path: Path) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    feats, repos = {}, {}
    with gzip.open(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            k = r.pop("kernel")
            repos[k] = r.pop("repo")
            feats[k] = {n: float(v) for n, v in r.items() if v != ""}
    return feats, repos


FEATURE_SETS = {
    "size_only": ("",),
    "source": ("src_", "par_"),
    "source+ptx": ("src_", "par_", "ptx_"),
    "source+ptx+attrs": ("src_", "par_", "ptx_", "attr_"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "data" / "lscat_h100"))
    ap.add_argument("--work", default="", help="working set to (re)compute features from")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "lscat_h100"))
    ap.add_argument("--kinds", default="forest,extra")
    a = ap.parse_args()
    data = Path(a.data)
    if a.work:
        write_features(Path(a.work), data / "kernels.csv", data / "features.csv.gz")
    feats, repos = load_features(data / "features.csv.gz")
    kinfo = _read_csv(data / "kernels.csv")
    s = model.build_samples(model.load_rows(data / "rows.csv.gz"))
    groups = np.array([repos.get(k, k.split("/")[0]) for k in s.kernel])
    perf = s.perf
    occ = np.array([metric.shape_for_block_size(int(float(kinfo[k]["occ_block"])) if kinfo.get(k, {}).get(
        "occ_block") not in (None, "", "None") else None) for k in s.kernel])
    occ_known = np.array([kinfo.get(k, {}).get("occ_block") not in (None, "", "None") for k in s.kernel])
    best = np.argmax(perf, axis=1)
    res: dict = {
        "device": "", "n_kernels": int(len(set(s.kernel))), "n_samples": int(len(s.kernel)),
        "n_rows": int(s.n_rows), "n_incomplete_samples": int(s.n_incomplete),
        "n_repositories": int(len(set(groups))), "sizes": sorted({int(x) for x in s.size}),
        "score_oracle": 1.0,
        "score_always_1024": metric.score(perf, metric.always(perf)),
        "score_random": metric.random_score(perf),
        "score_occupancy": metric.score(perf, occ), "occupancy_known_share": float(occ_known.mean()),
        "share_1024_not_best": float((best != metric.always(perf)).mean()),
        "share_best_20pct_better_than_1024": float((perf[:, corpus.SHAPE_1024] < 1 / 1.2).mean()),
        "best_shape_counts": {f"{bx}x{by}": int(c) for (bx, by), c in zip(
            corpus.SHAPES, np.bincount(best, minlength=len(corpus.SHAPES)), strict=True)},
        "score_always_best_fixed": float(perf.mean(axis=0).max()),
        "best_fixed_shape": "{}x{}".format(*corpus.SHAPES[int(perf.mean(axis=0).argmax())]),
        "models": {},
    }
    all_names = sorted({n for f in feats.values() for n in f})
    t0 = time.time()
    for kind in a.kinds.split(","):
        for set_name, prefixes in FEATURE_SETS.items():
            names = [n for n in all_names if prefixes != ("",) and n.startswith(prefixes)]
            x = model.feature_matrix(s, feats, names)
            runs = [model.grouped_cv(x, perf, groups, seed, kind) for seed in range(a.seeds)]
            summary = {k: {"mean": float(np.mean([r[k] for r in runs])), "sd": float(np.std([r[k] for r in runs],
                                                                                              ddof=1))}
                       for k in runs[0]}
            summary["n_features"] = len(names) + 1
            res["models"][f"{kind}:{set_name}"] = summary
            print(f"{kind:7s} {set_name:18s} score {summary['score_model']['mean']:.4f} ± "
                  f"{summary['score_model']['sd']:.4f}  most-common {summary['score_most_common']['mean']:.4f}"
                  f"  ({time.time() - t0:.0f}s)", flush=True)
    best_key = max(res["models"], key=lambda k: res["models"][k]["score_model"]["mean"])
    res["best_model"] = best_key
    res["score_model"] = res["models"][best_key]["score_model"]["mean"]
    res["score_model_sd"] = res["models"][best_key]["score_model"]["sd"]
    res["score_most_common"] = res["models"][best_key]["score_most_common"]["mean"]
    run_summary = data / "run_summary.json"
    if run_summary.exists():
        rs = json.loads(run_summary.read_text())
        res["device"] = rs.get("device", "")
        res["measured_utc"] = rs.get("date_utc", "")
    res["seeds"] = a.seeds
    res["cv"] = "GroupKFold(5, shuffle) by LS-CAT repository; one seed = one fold split + model seed"
    try:
        res["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip()
    except OSError:
        res["commit"] = ""
    out = Path(a.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1))
    print(json.dumps({k: v for k, v in res.items() if k.startswith(("score", "n_", "share", "best"))}, indent=1))


if __name__ == "__main__":
    main()
