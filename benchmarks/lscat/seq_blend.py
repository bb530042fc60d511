"""Exploratory, designed after the sequence model scored below the forests: does token order add anything
to the forest? On the same repository-grouped folds, average the forest's (source + PTX) and the sequence
model's predicted relative performances and score the argmax.

    python -m benchmarks.lscat.seq_blend [--seeds 2]     # needs torch and data/lscat_work

Writes benchmarks/lscat/results/lscat_seq_blend.json. The blend weight (0.5) was fixed, not tuned.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import benchmarks.lscat.run as lt
from adaptune.adaptive.device_features import cpu_device
from adaptune.predict import metric, model, sequence
from benchmarks.harness import git_commit

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", default="out/lscat/lscat_seq_blend.json", help="default out/lscat/lscat_seq_blend.json (never the committed results)")
    a = ap.parse_args(argv)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(1)
    data = ROOT / "data" / "lscat_h100"
    feats, repos = lt.load_features(data / "features.csv.gz")
    kinfo = lt._read_csv(data / "kernels.csv")
    s = model.build_samples(model.load_rows(data / "rows.csv.gz"),
                            kernels={k for k, r in kinfo.items() if r["status"] == "ok"})
    groups = np.array([repos.get(k, k.split("/")[0]) for k in s.kernel])
    names = [n for n in sorted({n for f in feats.values() for n in f}) if n.startswith(lt.FEATURE_SETS["source+ptx"])]
    x = model.feature_matrix(s, feats, names)
    texts = lt.kernel_texts(ROOT / "data" / "lscat_work")
    tokens = {k: sequence.tokenize(texts[k]) for k in set(s.kernel)}
    cfg, runs, t0 = sequence.SeqConfig(), [], time.time()
    for seed in range(a.seeds):
        pf, ps = np.zeros_like(s.perf), np.zeros_like(s.perf)
        for train, test in model.group_folds(len(s.perf), groups, seed):
            pf[test] = model.make_model("forest", seed, 1).fit(x[train], s.perf[train]).predict(x[test])
            m = sequence.SequenceModel(cfg, seed).fit(tokens, s.kernel[train], s.size[train], s.perf[train])
            ps[test] = m.predict(tokens, s.kernel[test], s.size[test])
        r = {name: metric.score(s.perf, np.argmax(p, axis=1))
             for name, p in (("forest", pf), ("sequence", ps), ("blend_0.5", (pf + ps) / 2))}
        r["same_choice_share"] = float((pf.argmax(1) == ps.argmax(1)).mean())
        runs.append(r)
        print(f"seed {seed}: {r} ({time.time() - t0:.0f}s)", flush=True)
        out = {"note": __doc__.split("\n\n")[0], "seeds": len(runs), "per_seed": runs,
               "mean": {k: float(np.mean([q[k] for q in runs])) for k in runs[0]},
               "commit": git_commit(), "cpu": cpu_device().name, "wall_s": time.time() - t0}
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
