"""``adaptune replay`` and ``adaptune compare``: search strategies on recorded spaces, no kernel runs."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

#: For help texts only (a test keeps it equal to ``adaptune.search.STRATEGIES``).
STRATEGY_NAMES = ("brute_force", "random", "greedy_ils", "annealing", "genetic", "differential_evolution",
                  "bayes", "forest", "bandit", "auto", "warm")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``replay`` and ``compare`` to the parser (the search layer is imported only when they run)."""
    names = ", ".join(STRATEGY_NAMES)
    p = sub.add_parser("replay", help="run a strategy on a recorded search space (simulated clock)")
    p.add_argument("cache", help="Kernel Tuner cache (.json/.json.gz) or T4 file")
    p.add_argument("--strategy", default="auto", help=f"one of: {names} (default auto)")
    p.add_argument("--max-evals", type=int, default=100, help="configurations each run may evaluate")
    p.add_argument("--max-sim-seconds", type=float, default=None,
                   help="budget in simulated seconds (default: no limit)")
    p.add_argument("--repeats", type=int, default=1, help="runs, each with its own seed")
    p.add_argument("--seed", type=int, default=0, help="seed of the first run")
    p.add_argument("--noise", action="store_true", help="draw each objective from the recorded run times")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_replay)

    c = sub.add_parser("compare", help="compare strategies (ours and Kernel Tuner's) on recorded spaces")
    c.add_argument("caches", nargs="+", help="recorded spaces (Kernel Tuner caches or T4 files)")
    c.add_argument("--strategies", default="auto,random", help=f"comma-separated, from: {names}")
    c.add_argument("--kernel-tuner", default="", help="comma-separated Kernel Tuner strategies to run too (default: none)")
    c.add_argument("--repeats", type=int, default=25, help="runs of each strategy on each space")
    c.add_argument("--kt-repeats", type=int, default=None, help="runs of each Kernel Tuner strategy (default: --repeats)")
    c.add_argument("--max-evals", type=int, default=100, help="configurations each run may evaluate")
    c.add_argument("--seed", type=int, default=0, help="seed of the first run")
    c.add_argument("--jobs", type=int, default=None, help="worker processes (default: all cores)")
    c.add_argument("--baseline", default="paper", choices=("paper", "exact"),
                   help="the methodology's random-search baseline: the paper's approximation or exact")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.add_argument("--quiet", action="store_true", help="no progress bar (it is drawn only on a terminal anyway)")
    c.add_argument("--plot", default=None, help="write best-so-far curves to this PNG (default: no plot)")
    c.set_defaults(func=cmd_compare)


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


def cmd_replay(args: argparse.Namespace) -> int:
    from adaptune.search import STRATEGIES, Budget, Replay

    _positive("--max-evals", args.max_evals)
    _positive("--repeats", args.repeats)
    if args.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {args.strategy!r}; known: {', '.join(sorted(STRATEGIES))}")
    rp = Replay.from_file(args.cache)
    budget = Budget(max_evals=args.max_evals, max_sim_seconds=args.max_sim_seconds)
    traces = [rp.run(args.strategy, budget, seed=args.seed + r, noise=args.noise) for r in range(args.repeats)]
    bests = [rp.values[t.indices[np.argmin(t.values)]] if np.isfinite(t.values).any() else math.inf
             for t in traces]  # the recorded (noise-free) value of the configuration it picked
    fractions = [rp.optimum / b if math.isfinite(b) else 0.0 for b in bests]
    best_trace = traces[int(np.argmin(bests))]
    out = {"strategy": args.strategy, "space": rp.name, "size": len(rp.space), "optimum": rp.optimum,
           "mean_best": float(np.mean(bests)), "mean_fraction_of_optimum": float(np.mean(fractions)),
           "min_fraction_of_optimum": float(np.min(fractions)), "repeats": args.repeats,
           "mean_evaluations": float(np.mean([len(t) for t in traces])),
           "mean_sim_seconds": float(np.mean([t.sim_seconds[-1] if len(t) else 0.0 for t in traces])),
           "ms_per_ask": 1000.0 * sum(t.wall_seconds for t in traces) / max(sum(len(t) for t in traces), 1),
           "best_config": rp.space.config(int(best_trace.indices[np.argmin(best_trace.values)]))
           if np.isfinite(best_trace.values).any() else None}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>26}: {v:.4g}" if isinstance(v, float) else f"{k:>26}: {v}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from adaptune.search.compare import compare, plot_comparison

    _positive("--max-evals", args.max_evals)
    _positive("--repeats", args.repeats)
    strategies = [s for s in args.strategies.split(",") if s]
    kt = [s for s in args.kernel_tuner.split(",") if s]
    cmp = compare(args.caches, strategies, kt, repeats=args.repeats, kt_repeats=args.kt_repeats,
                  max_evals=args.max_evals, seed=args.seed, jobs=args.jobs, baseline=args.baseline,
                  progress=not (args.json or args.quiet))
    if args.plot:
        plot_comparison(cmp, Path(args.plot))
    if args.json:
        print(json.dumps(cmp.to_json()))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"methodology score / mean fraction of optimum at {args.max_evals} evaluations")
    table.add_column("strategy")
    for space in cmp.spaces():
        table.add_column(space.split("/")[-1], justify="right")
    table.add_column("mean", justify="right")
    summary = cmp.summary()
    for label in cmp.labels():
        row = [label]
        for space in cmp.spaces():
            c = cmp.cell(space, label)
            row.append("-" if c is None else f"{c.score:.3f} / {c.mean_fraction_of_optimum:.3f}")
        s = summary[label]
        row.append(f"{s['score']:.3f} / {s['mean_fraction_of_optimum']:.3f}")
        table.add_row(*row)
    Console().print(table)
    return 0
