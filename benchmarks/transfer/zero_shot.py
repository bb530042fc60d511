"""Zero-shot configuration on the six recorded convolution spaces: stronger methods, chosen on sources only.

For each GPU of data/benchmark_hub/convolution_milo as the target (the other five the sources), every
method of ``adaptune.adaptive.zero_shot`` is scored leave-one-GPU-out (fraction of the target's optimum
of its top-1 choice), and ``nested_select`` picks one method per target by leave-one-out over the five
sources only (the target never takes part in the choice). Reports per GPU, mean and spread.

Writes OUT/transfer_zero_shot.{json,md,png}.

    OMP_NUM_THREADS=1 python -m benchmarks.transfer.zero_shot [--out DIR]   # default out/transfer/
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # boosting's OpenMP threads fight on a shared host

import time
from pathlib import Path

import numpy as np

from adaptune.adaptive.transfer import config_features, fractions
from adaptune.adaptive.zero_shot import (
    BoostedTransfer,
    method_aggregate,
    method_boosted,
    method_ensemble,
    method_similarity,
    nested_select,
)
from benchmarks.harness import finish_study, parse_study_args, study_meta, study_parser
from benchmarks.transfer.run import ALL_FEATURES, GPUS, replays, spaces

ROOT = Path(__file__).resolve().parents[2]

SENSITIVITY = {"default (150 iterations, lr 0.1, 31 leaves, cap 3)": {}, "100 iterations": {"max_iter": 100},
               "200 iterations": {"max_iter": 200}, "lr 0.05, 300 iterations": {"learning_rate": 0.05, "max_iter": 300},
               "15 leaves": {"max_leaf_nodes": 15}, "63 leaves": {"max_leaf_nodes": 63}, "cap 2": {"cap": 2.0},
               "cap 5": {"cap": 5.0}, "seed 1": {"seed": 1}}


class Cached:
    """A method whose prediction is kept per (source set, target): nested LOO asks the same fit again."""

    def __init__(self, method, key: str) -> None:
        self.method, self.key, self.memo = method, key, {}

    def __call__(self, x, sources, target):
        k = (tuple(s.device for s in sources), tuple(sorted(target.items())))
        if k not in self.memo:
            self.memo[k] = self.method(x, sources, target)
        return self.memo[k]


def candidates() -> dict[str, Cached]:
    c = {"consensus (geomean)": method_aggregate("geomean"),
         "quantile 0.25": method_aggregate("quantile", 0.25),
         "maximin": method_aggregate("maximin"),
         "borda (mean rank)": method_aggregate("borda"),
         "similarity tau=1 (9 features)": method_similarity(ALL_FEATURES, 1.0),
         "similarity tau=0.5 (vendor, simd)": method_similarity(("vendor_nvidia", "simd_width"), 0.5),
         "boosted (no device features)": method_boosted(()),
         "boosted + vendor": method_boosted(("vendor_nvidia",)),
         "boosted + vendor, simd": method_boosted(("vendor_nvidia", "simd_width")),
         "boosted + 9 features": method_boosted(ALL_FEATURES)}
    cached = {k: Cached(v, k) for k, v in c.items()}
    cached["ensemble (consensus, boosted + vendor)"] = Cached(method_ensemble(
        [cached["consensus (geomean)"], cached["boosted + vendor"]]), "ensemble")
    return cached


SMOKE: dict = {}


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("transfer", __doc__.splitlines()[0])
    args = parse_study_args(ap, argv, smoke=SMOKE)
    t0 = time.perf_counter()
    sp = spaces()
    x = config_features(replays()["A100"].space)
    cands = candidates()
    fixed: dict[str, dict[str, float]] = {name: {} for name in cands}
    nested: dict[str, dict] = {}
    for i, target in enumerate(sp):
        sources = [s for j, s in enumerate(sp) if j != i]
        f = fractions(target.values)
        for name, m in cands.items():
            fixed[name][target.device] = float(f[int(np.argmin(m(x, sources, target.features)))])
        sel = nested_select(x, sources, cands)
        nested[target.device] = {"chosen": sel.chosen, "fraction": fixed[sel.chosen][target.device],
                                 "inner_mean": {k: round(v, 4) for k, v in sel.inner_mean.items()}}
        print(f"{target.device}: nested choice {sel.chosen!r} -> {fixed[sel.chosen][target.device]:.3f} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    # how fragile is the best fixed method of the table? (chosen after seeing the targets: a bound, not a result)
    sens: dict[str, dict[str, float]] = {}
    for label, kw in SENSITIVITY.items():
        sens[label] = {}
        for i, target in enumerate(sp):
            sources = [s for j, s in enumerate(sp) if j != i]
            pred = BoostedTransfer(("vendor_nvidia",), **kw).fit(x, sources).predict(target.features)
            sens[label][target.device] = round(float(fractions(target.values)[int(np.argmin(pred))]), 4)
        print(f"boosted + vendor, {label}: mean {np.mean(list(sens[label].values())):.3f}", flush=True)
    summary = {name: {"mean": float(np.mean(list(v.values()))), "min": float(min(v.values())),
                      "std": float(np.std(list(v.values())))} for name, v in fixed.items()}
    nf = [nested[g]["fraction"] for g in GPUS]
    out = {"gpus": list(GPUS), "configurations": len(x),
           "per_method": {k: {g: round(v, 4) for g, v in d.items()} for k, d in fixed.items()},
           "per_method_summary": {k: {a: round(b, 4) for a, b in v.items()} for k, v in summary.items()},
           "nested": nested,
           "nested_fraction": {g: round(nested[g]["fraction"], 4) for g in GPUS},
           "nested_mean": round(float(np.mean(nf)), 4), "nested_min": round(float(min(nf)), 4),
           "nested_std": round(float(np.std(nf)), 4),
           "nested_mean_without_a100": round(float(np.mean([nested[g]["fraction"] for g in GPUS if g != "A100"])), 4)}
    out["boosted_vendor_sensitivity"] = {k: {**v, "mean": round(float(np.mean(list(v.values()))), 4)}
                                         for k, v in sens.items()}
    finish_study(args.out, "transfer_zero_shot", out, markdown=markdown, plot=plot,
                 meta=study_meta("benchmarks.transfer.zero_shot", t0))


def markdown(out: dict) -> str:
    m = out["meta"]
    g = out["gpus"]
    lines = ["# Zero-shot configuration, leave one GPU out: robust aggregation, similarity, boosting, nested choice",
             "", f"- date {m['date']}, commit {m['commit']}, {m['host']} (replay of records: no GPU), {m['seconds']} s",
             f"- command: `{m['command']}`",
             "- fraction of the target's optimum reached by the method's top-1 configuration (no evaluation on "
             "the target). *nested* = the method chosen per target by leave-one-out over its five sources only.",
             "", "| method | " + " | ".join(g) + " | mean | min | std |", "|---|" + "---|" * (len(g) + 3)]
    for name, per in out["per_method"].items():
        s = out["per_method_summary"][name]
        lines.append(f"| {name} | " + " | ".join(f"{per[x]:.3f}" for x in g)
                     + f" | {s['mean']:.3f} | {s['min']:.3f} | {s['std']:.3f} |")
    nf = out["nested_fraction"]
    lines.append("| **nested (sources-only choice)** | " + " | ".join(f"**{nf[x]:.3f}**" for x in g)
                 + f" | **{out['nested_mean']:.3f}** | {out['nested_min']:.3f} | {out['nested_std']:.3f} |")
    lines += ["", "Chosen per target (inner mean over the five sources of the chosen method):", ""]
    for x in g:
        n = out["nested"][x]
        lines.append(f"- {x}: {n['chosen']} (inner {n['inner_mean'][n['chosen']]:.3f})")
    sens = out["boosted_vendor_sensitivity"]
    lines += ["", "Sensitivity of the best fixed method (boosted + vendor; picked after seeing the targets, so an "
              "optimistic bound, not a zero-shot result) to its hyperparameters:", "",
              "| setting | " + " | ".join(g) + " | mean |", "|---|" + "---|" * (len(g) + 1)]
    for k, v in sens.items():
        lines.append(f"| {k} | " + " | ".join(f"{v[x]:.3f}" for x in g) + f" | {v['mean']:.3f} |")
    lines += ["", f"Target mean >= 0.90: **{'met' if out['nested_mean'] >= 0.90 else 'missed'}** "
              f"({out['nested_mean']:.3f}; without the A100 {out['nested_mean_without_a100']:.3f}).", ""]
    return "\n".join(lines)


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = out["gpus"]
    names = list(out["per_method"])
    fig, ax = plt.subplots(figsize=(11, 4.5))
    data = np.array([[out["per_method"][n][g] for g in gpus] for n in names] + [[out["nested_fraction"][g]
                                                                                  for g in gpus]])
    im = ax.imshow(data, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(gpus)), gpus)
    ax.set_yticks(range(len(names) + 1), names + ["NESTED (sources-only choice)"], fontsize=8)
    for r in range(data.shape[0]):
        for c in range(data.shape[1]):
            ax.text(c, r, f"{data[r, c]:.2f}", ha="center", va="center", fontsize=7,
                    color="w" if data[r, c] < 0.6 else "k")
    fig.colorbar(im, label="fraction of target optimum (zero-shot)")
    ax.set_title(f"leave one GPU out; nested mean {out['nested_mean']:.3f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
