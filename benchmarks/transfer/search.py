"""Evaluations to reach 0.95 of the optimum on the six recorded convolution spaces, leave one GPU out.

Three searches per target GPU, replayed from data/benchmark_hub/convolution_milo (no GPU):

- ``auto`` (cold: knows nothing of other GPUs);
- ``warm`` with the consensus of the other five GPUs as its prior (``ConfigTransfer()``, as in
  benchmarks/transfer/run.py, so the numbers compare with the earlier rounds);
- ``bat``: BAT's "use another GPU's optimum" as a search: the five sources' optima are evaluated first
  (in a random order per seed), then the search goes on as ``auto`` would. Implemented as ``warm`` with a
  prior that is 0 on the sources' optima and 1 everywhere else, ``n_prior`` = the number of distinct
  source optima and no prior column for the surrogate.

A run that does not reach 0.95 within ``--cap`` evaluations counts as the cap (censored; counted).
Writes OUT/transfer_search.{json,md} (default OUT: out/transfer/) and, when OUT holds a transfer.json
of ``benchmarks.transfer.run``, updates its ``warm_evals_to_095``, ``cold_evals_to_095`` and
``warm_over_cold`` (previous values kept under ``previous_search``). Committed results are never written.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.transfer.search --repeats 10
    python -m benchmarks.transfer.search --profile smoke   # 1 seed, cap 60
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import json
import time
from pathlib import Path

import numpy as np

from adaptune.adaptive.transfer import ConfigTransfer, config_features
from adaptune.search import make_strategy
from benchmarks.harness import parse_study_args, study_meta, study_parser, write_results
from benchmarks.transfer.run import GPUS, evals_until_095, replays, spaces

ROOT = Path(__file__).resolve().parents[2]

STRATEGIES = ("auto", "warm", "bat")


def bat_prior(target: str, seed: int) -> tuple[np.ndarray, int]:
    """0 on the other GPUs' optima (ties broken by a seeded random order), 1 elsewhere; and their count."""
    n = len(replays()[target].values)
    best = sorted({int(np.argmin(s.values)) for s in spaces() if s.device != target})
    order = np.random.default_rng(seed).permutation(len(best))
    prior = np.ones(n)
    for rank, k in enumerate(order):
        prior[best[k]] = rank / (10 * len(best))
    return prior, len(best)


def evals_to(gpu: str, strategy: str, seed: int, cap: int) -> int:
    """Evaluations of one replayed search until the best found is >= 0.95 of the optimum (or ``cap``)."""
    rp = replays()[gpu]
    opts: dict = {}
    name = strategy
    if strategy == "warm":
        sources = [s for s in spaces() if s.device != gpu]
        opts["prior"] = ConfigTransfer().fit(config_features(rp.space), sources).predict()
    elif strategy == "bat":
        name = "warm"
        prior, n = bat_prior(gpu, seed)
        opts.update(prior=prior, n_prior=n, per_mode=n, prior_feature=False)
    return evals_until_095(make_strategy(name, rp.space, seed=seed, **opts), rp, cap)


def summary(v: list[int], cap: int) -> dict:
    a = np.asarray(v, dtype=float)
    return {"evals": v, "mean": round(float(a.mean()), 2), "median": float(np.median(a)),
            "std": round(float(a.std(ddof=1)) if len(a) > 1 else 0.0, 2),
            "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
            "censored": int((a >= cap).sum())}


SMOKE = {"repeats": 1, "cap": 60}


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("transfer", __doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--cap", type=int, default=400)
    ap.add_argument("--seed-offset", type=int, default=0, help="seeds (r + offset) * 100003: fresh seeds")
    ap.add_argument("--no-update", action="store_true", help="do not touch OUT/transfer.json")
    args = parse_study_args(ap, argv, smoke=SMOKE)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    stem = str(Path(args.out) / "transfer_search")
    t0 = time.perf_counter()
    per: dict[str, dict[str, list[int]]] = {g: {s: [] for s in STRATEGIES} for g in GPUS}
    for r in range(args.repeats):  # seeds outermost: a cut-short run still has every GPU and strategy
        for g in GPUS:
            for s in STRATEGIES:
                per[g][s].append(evals_to(g, s, (r + args.seed_offset) * 100003, args.cap))
        print(f"seed {r}: " + ", ".join(f"{g} " + "/".join(str(per[g][s][-1]) for s in STRATEGIES) for g in GPUS),
              f"({time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)
    out: dict = {"gpus": list(GPUS), "strategies": list(STRATEGIES), "repeats": args.repeats, "cap": args.cap,
                 "seeds": f"(r + {args.seed_offset}) * 100003, r = 0 .. repeats-1 (offset 0: the seeds of "
                          "benchmarks/transfer/run.py)",
                 "per_gpu": {g: {s: summary(v, args.cap) for s, v in d.items()} for g, d in per.items()}}
    means = {s: float(np.mean([out["per_gpu"][g][s]["mean"] for g in GPUS])) for s in STRATEGIES}
    # spread of the mean over GPUs across seeds: per seed, the mean over the six GPUs
    per_seed = {s: [float(np.mean([per[g][s][r] for g in GPUS])) for r in range(args.repeats)] for s in STRATEGIES}
    out["mean_over_gpus"] = {s: {"mean": round(means[s], 2), "std_over_seeds": round(float(np.std(per_seed[s], ddof=1)), 2)
                                 if args.repeats > 1 else 0.0} for s in STRATEGIES}
    out["warm_over_cold"] = round(means["warm"] / means["auto"], 4)
    out["bat_over_cold"] = round(means["bat"] / means["auto"], 4)
    ratios = [per_seed["warm"][r] / per_seed["auto"][r] for r in range(args.repeats)]
    out["warm_over_cold_per_seed"] = {"min": round(min(ratios), 4), "median": round(float(np.median(ratios)), 4),
                                      "max": round(max(ratios), 4)}
    out["meta"] = {**study_meta("benchmarks.transfer.search", t0)}
    path = write_results(args.out, Path(stem).name, out, table=markdown(out))
    if not args.no_update and (Path(args.out) / "transfer.json").exists():
        update_transfer(out, Path(args.out) / "transfer.json", stem)
    print(path.with_suffix(".md").read_text())


def update_transfer(out: dict, path: Path, stem: str = "transfer_search") -> None:
    """New ``warm_evals_to_095`` / ``cold_evals_to_095``; the old ones kept under ``previous_search``."""
    t = json.loads(path.read_text())
    if "previous_search" not in t:
        t["previous_search"] = {"warm_evals_to_095": t.get("warm_evals_to_095"),
                                "cold_evals_to_095": t.get("cold_evals_to_095"),
                                "warm_over_cold": t.get("warm_over_cold"),
                                "commit": t.get("meta", {}).get("commit"), "date": t.get("meta", {}).get("date"),
                                "repeats": t.get("search", {}).get("repeats")}
    t["warm_evals_to_095"] = {g: out["per_gpu"][g]["warm"]["mean"] for g in out["gpus"]}
    t["cold_evals_to_095"] = {g: out["per_gpu"][g]["auto"]["mean"] for g in out["gpus"]}
    t["bat_evals_to_095"] = {g: out["per_gpu"][g]["bat"]["mean"] for g in out["gpus"]}
    t["warm_over_cold"] = out["warm_over_cold"]
    t["search_remeasured"] = {"file": f"{stem}.json", "commit": out["meta"]["commit"],
                              "date": out["meta"]["date"], "repeats": out["repeats"], "cap": out["cap"],
                              "bat_over_cold": out["bat_over_cold"]}
    t["targets"]["warm_le_half_of_cold"] = out["warm_over_cold"] <= 0.5
    path.write_text(json.dumps(t, indent=1))


def markdown(out: dict) -> str:
    m = out["meta"]
    lines = ["# Evaluations to 0.95 of the optimum, leave one GPU out (six recorded convolution spaces)", "",
             f"- date {m['date']}, commit {m['commit']}, {m['host']}: replay of the records, no GPU; "
             f"{m['seconds']} s", f"- command: `{m['command']}`",
             f"- {out['repeats']} seeds per GPU and strategy, cap {out['cap']} (a run that does not get there counts "
             "as the cap)", "- `bat`: the five other GPUs' optima first (BAT's reuse), then `auto`", "",
             "| target | cold `auto` mean ± sd (median, censored) | `warm` | `bat` | warm / cold |", "|---|---|---|---|---|"]
    for g in out["gpus"]:
        d = out["per_gpu"][g]
        cell = [f"{d[s]['mean']:.1f} ± {d[s]['std']:.1f} ({d[s]['median']:.0f}, {d[s]['censored']})" for s in STRATEGIES]
        lines.append(f"| {g} | " + " | ".join(cell) + f" | {d['warm']['mean'] / d['auto']['mean']:.2f} |")
    mg = out["mean_over_gpus"]
    lines += [f"| **mean** (sd over seeds) | {mg['auto']['mean']:.1f} ({mg['auto']['std_over_seeds']:.1f}) | "
              f"{mg['warm']['mean']:.1f} ({mg['warm']['std_over_seeds']:.1f}) | {mg['bat']['mean']:.1f} "
              f"({mg['bat']['std_over_seeds']:.1f}) | **{out['warm_over_cold']:.2f}** |", "",
              f"warm / cold per seed (mean over GPUs): min {out['warm_over_cold_per_seed']['min']:.2f}, median "
              f"{out['warm_over_cold_per_seed']['median']:.2f}, max {out['warm_over_cold_per_seed']['max']:.2f}; "
              f"bat / cold {out['bat_over_cold']:.2f}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
