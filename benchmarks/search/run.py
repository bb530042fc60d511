"""Search strategies side by side with Kernel Tuner's on every recorded space we ship.

Two groups of spaces, each at its own budget: the six convolution_milo GPUs (the issue's targets) at
``--max-evals``, and the spaces of other kernels, every ``data/recorded/*.json(.gz)`` (picked up
automatically) and Kernel Tuner test caches with at least 100 configurations, at ``--other-evals``
(they hold only 250-600 configurations). Also measures ``auto``'s ask+tell cost on a space of
10^4 valid configurations. Writes benchmarks/search/results/search_comparison.{json,md,png} (and
search_comparison_other.png).

    .venv/bin/python -m benchmarks.search.run [--repeats 25] [--kt-repeats 25] [--max-evals 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from adaptune.search import Budget, Replay
from adaptune.search.compare import compare, plot_comparison
from adaptune.space import Space
from benchmarks.harness import parse_study_args, run_metadata, study_parser, write_results

ROOT = Path(__file__).resolve().parents[2]
GPUS = ("A100", "A4000", "A6000", "MI250X", "W6600", "W7800")
OURS = ("auto", "bayes", "forest", "bandit", "greedy_ils", "genetic", "annealing", "differential_evolution",
        "random")
KT = ("genetic_algorithm", "greedy_ils", "simulated_annealing", "diff_evo", "random_sample", "dual_annealing",
      "mls", "pso", "firefly_algorithm", "basinhopping", "bayes_opt")


def convolution_spaces() -> list[Path]:
    return [ROOT / "data" / "benchmark_hub" / "convolution_milo" / f"{g}.json.gz" for g in GPUS]


def other_spaces(min_size: int = 100) -> list[Path]:
    extra = sorted((ROOT / "data" / "recorded").glob("*.json*")) + sorted(
        (ROOT / "data" / "kernel_tuner_tests").glob("*cache*.json"))
    return [p for p in extra if len(Replay.from_file(p).space) >= min_size]


def ask_cost(n_evals: int = 100, seeds: int = 3) -> dict:
    """ms per ask+tell of ``auto`` on a space of 10^4 valid configurations (a smooth synthetic objective)."""
    space = Space({"bx": list(range(16, 656, 16)), "by": [1, 2, 4, 8, 16], "tx": [1, 2, 3, 4], "ty": [1, 2, 4, 8],
                   "unroll": [0, 1], "mode": ["a", "b", "c"]}, constraints=["bx * by <= 1024"])
    t = np.asarray(space.table, dtype=float)
    values = 1.0 + ((t - t.mean(0)) ** 2).sum(1) + np.sin(t.sum(1))
    rp = Replay(space, values, name="synthetic")
    ms = [1000.0 * (tr := rp.run("auto", Budget(max_evals=n_evals), seed=s)).wall_seconds / len(tr)
          for s in range(seeds)]
    return {"configurations": len(space), "evaluations": n_evals, "seeds": seeds,
            "ms_per_ask_tell": round(float(np.mean(ms)), 2)}


SMOKE = {"repeats": 2, "kt_repeats": 1, "max_evals": 20, "other_evals": 10, "strategies": "auto,random",
         "kernel_tuner": "random_sample"}


def main(argv: list[str] | None = None) -> int:
    ap = study_parser("search", __doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--kt-repeats", type=int, default=25)
    ap.add_argument("--max-evals", type=int, default=100)
    ap.add_argument("--other-evals", type=int, default=40)
    ap.add_argument("--strategies", default=",".join(OURS))
    ap.add_argument("--kernel-tuner", default=",".join(KT))
    ap.add_argument("--jobs", type=int, default=None)
    args = parse_study_args(ap, argv, smoke=SMOKE)
    t0 = time.time()
    ours, kt = args.strategies.split(","), [s for s in args.kernel_tuner.split(",") if s]
    cmp = compare(convolution_spaces(), ours, kt, repeats=args.repeats, kt_repeats=args.kt_repeats,
                  max_evals=args.max_evals, jobs=args.jobs)
    out = Path(args.out) / "search_comparison"
    out.parent.mkdir(parents=True, exist_ok=True)
    write(out, args, t0, cmp, None, None)  # the main result on disk before the second group runs
    other = compare(other_spaces(), ours, kt, repeats=args.repeats, kt_repeats=args.kt_repeats,
                    max_evals=args.other_evals, jobs=args.jobs)
    write(out, args, t0, cmp, other, None)
    write(out, args, t0, cmp, other, ask_cost())
    print(out.with_suffix(".md").read_text())
    return 0


def write(out: Path, args: argparse.Namespace, t0: float, cmp, other, cost: dict | None) -> None:  # type: ignore[no-untyped-def]
    """JSON, markdown and plots of what has been measured so far."""
    run = run_metadata(device="replay (no GPU needed)")
    meta = {"command": "python -m benchmarks.search.run " + " ".join(sys.argv[1:]), "commit": run["commit"],
            "date": run["date"][:10], "host": f"{run['cpu']}, {run['cpu_count']} CPUs (replay: no GPU needed)",
            "seconds": round(time.time() - t0, 1), "auto_ask_cost": cost}
    data = {**meta, "convolution": cmp.to_json(), "other_kernels": other.to_json() if other else None}
    plot_comparison(cmp, out.with_suffix(".png"))
    text = markdown(cmp, meta, "six convolution GPUs")
    if other is not None:
        plot_comparison(other, out.with_name(out.name + "_other.png"))
        text += "\n" + markdown(other, meta, "other kernels", header=False)
    if cost is not None:
        text += (f"\n`auto` ask+tell on a space of {cost['configurations']} valid configurations: "
                 f"{cost['ms_per_ask_tell']} ms (mean over {cost['seeds']} runs of {cost['evaluations']} "
                 "evaluations)\n")
    write_results(out.parent, out.name, data, table=text, metadata=run)


def markdown(cmp, meta: dict, title: str, header: bool = True) -> str:  # type: ignore[no-untyped-def]
    s = cmp.settings
    lines = ["# Search strategies vs Kernel Tuner on recorded spaces", "",
             f"- date {meta['date']}, commit {meta['commit']}, {meta['host']}, took {meta['seconds']} s",
             f"- command: `{meta['command']}`", ""] if header else []
    lines += [f"## {title}: {s['max_evals']} evaluations", "",
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
    if asks:
        lines += ["", "Strategy bookkeeping, ms per ask+tell on convolution A100 (4362 configurations): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in sorted(asks.items())), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
