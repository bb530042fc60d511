"""Are the NDP study's labels repeatable, and does its selector lack training inputs? (offline, recorded runs)

Two questions about several recorded runs of one computation on the same inputs (same seed):
- *repeatability*: per test input, the label fastest in run A, timed in run B, as a fraction of run B's fastest
  (averaged over inputs): near 1 means the labels repeat, so a selector scoring far below it is the model's fault;
- *learning curve*: train and test inputs pooled, random splits, the study's ``cost`` model (hyperparameters by
  cross-validation on the training part) scored on the held-out part, by training-set size.

    python -m benchmarks.ndp.repeatability RUN.json RUN.json ... --out DIR   # -> DIR/repeatability.{json,md}
"""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import compile_predictor
from adaptune.adaptive.models import fit_model, fraction_of_oracle
from benchmarks.harness.cli import study_parser
from benchmarks.harness.report import write_results


def _costs(records: list[dict[str, Any]], labels: list[str]) -> np.ndarray:
    return np.array([[r["gen_ms"].get(lab) if r["gen_ms"].get(lab) is not None else np.inf for lab in labels]
                     for r in records], float)


def _fraction(costs: np.ndarray, picks: np.ndarray) -> float:
    return float(np.nanmean(fraction_of_oracle(costs, picks)))


def repeatability(runs: dict[str, dict[str, Any]], bench: str) -> list[dict[str, Any]]:
    """For every ordered pair of runs: run A's fastest label per test input, scored in run B."""
    rows = []
    for a, b in itertools.permutations(runs, 2):
        ra, rb = runs[a]["benchmarks"][bench]["records"]["test"], runs[b]["benchmarks"][bench]["records"]["test"]
        labels = list(ra[0]["gen_ms"])
        ca, cb = _costs(ra, labels), _costs(rb, labels)
        rows.append({"benchmark": bench, "best_of": a, "judged_in": b, "fraction": _fraction(cb, ca.argmin(axis=1))})
    return rows


def learning_curve(run: dict[str, Any], bench: str, sizes: tuple[int, ...], splits: int,
                   seed: int) -> list[dict[str, Any]]:
    """The ``cost`` model's held-out fraction of oracle by training-set size (train and test inputs pooled)."""
    part = run["benchmarks"][bench]["records"]
    records = part["train"] + part["test"]
    labels = list(records[0]["gen_ms"])
    x, c = np.array([r["features"] for r in records], float), _costs(records, labels)
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        scores = []
        for _ in range(splits):
            order = rng.permutation(len(records))
            train, held = order[:n], order[n:]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted = fit_model("cost", x[train], c[train], c[train], score_repeats=0)
            predict = compile_predictor(fitted.params)
            scores.append(_fraction(c[held], np.array([predict(v) for v in x[held]])))
        rows.append({"benchmark": bench, "n_train": n, "held_out": len(records) - n, "splits": splits,
                     "mean": float(np.mean(scores)), "min": float(np.min(scores)), "max": float(np.max(scores))})
    return rows


def main() -> None:
    ap = study_parser("ndp", __doc__)
    ap.add_argument("runs", nargs="+", type=Path, help="ndp_<device>.json files of runs on the same inputs")
    ap.add_argument("--benchmark", default="segreduce")
    ap.add_argument("--sizes", default="30,55", help="training-set sizes of the learning curve")
    ap.add_argument("--splits", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    runs = {f"{p.stem} {json.loads(p.read_text()).get('commit', '?')}": json.loads(p.read_text()) for p in args.runs}
    sizes = tuple(int(s) for s in args.sizes.split(","))
    pairs = repeatability(runs, args.benchmark)
    curve = [{"run": name, **row} for name, run in runs.items()
             for row in learning_curve(run, args.benchmark, sizes, args.splits, args.seed)]
    selector = {name: run["benchmarks"][args.benchmark]["selection"]["mean_fraction_of_oracle"]
                for name, run in runs.items()}
    table = ["| best of | judged in | fraction of oracle |", "|---|---|---|",
             *[f"| {r['best_of']} | {r['judged_in']} | {r['fraction']:.4f} |" for r in pairs], "",
             "| run | selector in the run (30 training inputs) | n_train | held out | cost model: mean (min-max) |",
             "|---|---|---|---|---|",
             *[f"| {r['run']} | {selector[r['run']]:.4f} | {r['n_train']} | {r['held_out']} | {r['mean']:.3f} "
               f"({r['min']:.3f}-{r['max']:.3f}) |" for r in curve]]
    write_results(args.out, "repeatability", {"benchmark": args.benchmark, "pairs": pairs, "learning_curve": curve,
                                              "selector": selector},
                  table="\n".join(table), title=f"NDP {args.benchmark}: label repeatability and learning curve",
                  notes=__doc__.split("\n\n")[1])
    print("\n".join(table))


if __name__ == "__main__":
    main()
