"""Search strategies side by side with Kernel Tuner's on every recorded space we ship.

Spaces: the six convolution_milo GPUs, plus every ``data/recorded/*.json(.gz)`` (picked up
automatically) and the Kernel Tuner test caches that are large enough for the budget (at least
``4 * max_evals`` configurations). Writes benchmarks/results/search_comparison.{json,md,png}.

    .venv/bin/python benchmarks/search_comparison.py [--repeats 25] [--kt-repeats 10] [--max-evals 100]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from adaptune.search import Replay
from adaptune.search.compare import compare, plot_comparison

ROOT = Path(__file__).resolve().parents[1]
GPUS = ("A100", "A4000", "A6000", "MI250X", "W6600", "W7800")
OURS = ("auto", "bayes", "forest", "bandit", "greedy_ils", "genetic", "annealing", "differential_evolution",
        "random")
KT = ("genetic_algorithm", "greedy_ils", "simulated_annealing", "diff_evo", "random_sample", "dual_annealing",
      "mls", "pso", "firefly_algorithm", "basinhopping")


def spaces(max_evals: int) -> list[Path]:
    found = [ROOT / "data" / "benchmark_hub" / "convolution_milo" / f"{g}.json.gz" for g in GPUS]
    extra = sorted((ROOT / "data" / "recorded").glob("*.json*")) + sorted(
        (ROOT / "data" / "kernel_tuner_tests").glob("*cache*.json"))
    found += [p for p in extra if len(Replay.from_file(p).space) >= 4 * max_evals]
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--kt-repeats", type=int, default=10)
    ap.add_argument("--max-evals", type=int, default=100)
    ap.add_argument("--strategies", default=",".join(OURS))
    ap.add_argument("--kernel-tuner", default=",".join(KT))
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "search_comparison"))
    args = ap.parse_args()
    t0 = time.time()
    paths = spaces(args.max_evals)
    cmp = compare(paths, args.strategies.split(","), [s for s in args.kernel_tuner.split(",") if s],
                  repeats=args.repeats, kt_repeats=args.kt_repeats, max_evals=args.max_evals, jobs=args.jobs)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    meta = {"command": "python " + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "commit": commit,
            "date": datetime.date.today().isoformat(), "host": f"{platform.processor() or platform.machine()}, "
            f"{platform.system()} (replay: no GPU needed)", "seconds": round(time.time() - t0, 1)}
    out = Path(args.out)
    data = {**meta, **cmp.to_json()}
    out.with_suffix(".json").write_text(json.dumps(data, indent=1))
    plot_comparison(cmp, out.with_suffix(".png"))
    out.with_suffix(".md").write_text(markdown(cmp, meta))
    print(out.with_suffix(".md").read_text())
    return 0


def markdown(cmp, meta: dict) -> str:  # type: ignore[no-untyped-def]
    s = cmp.settings
    lines = [f"# Search strategies vs Kernel Tuner {s['max_evals']} evaluations, recorded spaces",
             "", f"- date {meta['date']}, commit {meta['commit']}, {meta['host']}, took {meta['seconds']} s",
             f"- command: `{meta['command']}`",
             f"- repeats: ours {s['repeats']}, Kernel Tuner {s['kt_repeats']} (its simulation mode); "
             f"score: methodology of Willemsen et al. (paper baseline), window 1..{s['max_evals']} evaluations",
             "", "Cell: methodology score / mean fraction of optimum (optimum / best found).", ""]
    names = [sp.split("/")[-1] for sp in cmp.spaces()]
    lines.append("| strategy | " + " | ".join(names) + " | mean score | mean fraction | worst space |")
    lines.append("|---" * (len(names) + 4) + "|")
    summary = cmp.summary()
    for label in sorted(cmp.labels(), key=lambda k: -summary[k]["score"]):
        cells = []
        for sp in cmp.spaces():
            c = cmp.cell(sp, label)
            cells.append("-" if c is None else f"{c.score:.2f} / {c.mean_fraction_of_optimum:.3f}")
        m = summary[label]
        lines.append(f"| {label} | " + " | ".join(cells)
                     + f" | {m['score']:.3f} | {m['mean_fraction_of_optimum']:.3f} | {m['worst_space_fraction']:.3f} |")
    asks = {c.label: c.ms_per_ask for c in cmp.cells if c.ms_per_ask is not None and "A100" in c.space}
    lines += ["", "Strategy bookkeeping, ms per ask+tell on convolution A100 (4362 configurations): "
              + ", ".join(f"{k} {v:.2f}" for k, v in sorted(asks.items())), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
