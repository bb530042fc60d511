"""Plot benchmarks/results/thresholds.json: tuning cost per tuner, and combinations as datasets grow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TUNERS = (("exhaustive_s", "exhaustive (seed)"), ("exhaustive_early_s", "+ early termination"),
          ("hillclimb_s", "hill climbing"), ("adaptune_s", "adaptune auto"), ("paths_s", "path-memoised exact"))


def main(path: str = "benchmarks/results/thresholds.json", out: str = "benchmarks/results/thresholds.png") -> int:
    res = json.loads(Path(path).read_text())
    exps = [e for e in res["experiments"] if "error" not in e]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / len(TUNERS)
    for i, (key, label) in enumerate(TUNERS):
        vals = [e[key] for e in exps]
        ax1.bar([x + i * width for x in range(len(exps))], vals, width, label=label)
    ax1.set_xticks([x + 0.4 - width / 2 for x in range(len(exps))])
    ax1.set_xticklabels([f"{e['program']}\n{e['device'][:22]}" for e in exps], fontsize=8)
    ax1.set_yscale("log")
    ax1.set_ylabel("tuning cost: program run time (s, replayed)")
    ax1.set_title("Cost to reach the exhaustive optimum")
    ax1.legend(fontsize=7)
    for e in exps:
        rows = e["scaling"]
        k = [r["datasets"] for r in rows]
        tag = f"{e['program']} / {e['device'][:14]}"
        ax2.plot(k, [r["seed_combinations"] for r in rows], "o-", label=f"{tag}: seed enumeration")
        ax2.plot(k, [r["exact_combinations"] or float("nan") for r in rows], "s--", label=f"{tag}: distinct")
    ax2.set_yscale("log")
    ax2.set_xlabel("datasets")
    ax2.set_ylabel("combinations")
    ax2.set_title("Combinations as datasets are added")
    ax2.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
