"""``adaptune thresholds``: threshold trees, combination counts and tuning over multi-versioned code (seed 003).

    adaptune thresholds tree SIZES [--multi-parent duplicate]       # the --tree view of a --print-sizes listing
    adaptune thresholds count SIZES LOG [LOG ...]                    # candidates and combinations, nothing run
    adaptune thresholds tune TIMINGS [--tuner paths] -o prog.fut.tuning [--db adaptune.db]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

MULTI_PARENT_HELP = "a threshold under several parents: refuse, or duplicate its subtree under each"
TUNER_NAMES = ("paths", "paths+early", "exhaustive", "exhaustive+early", "hillclimb", "auto", "random", "greedy_ils")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``thresholds`` command group (the thresholds layer is imported only when it runs)."""
    p = sub.add_parser("thresholds", help="threshold tuning over multi-versioned code (Futhark's thresholds)")
    tsub = p.add_subparsers(dest="thresholds_command", required=True)

    t = tsub.add_parser("tree", help="print the threshold forest of a --print-sizes listing")
    t.add_argument("sizes", help="file with the output of `prog --print-sizes`")
    t.add_argument("--multi-parent", choices=("refuse", "duplicate"), default="refuse", help=MULTI_PARENT_HELP)
    t.set_defaults(func=cmd_tree)

    c = tsub.add_parser("count", help="candidate values and combination counts from -L logs (one per dataset)")
    c.add_argument("sizes", help="file with the output of `prog --print-sizes`")
    c.add_argument("logs", nargs="+", help="stderr of `prog -L` on each dataset (lines 'Compared X <= V')")
    c.add_argument("--multi-parent", choices=("refuse", "duplicate"), default="refuse", help=MULTI_PARENT_HELP)
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=cmd_count)

    u = tsub.add_parser("tune", help="tune on recorded per-path timings and write a Futhark tuning file")
    u.add_argument("timings", help="timings JSON written by benchmarks/thresholds/run.py (one program's entry "
                                   "or a whole file with --program)")
    u.add_argument("--program", default=None,
                   help="program inside a benchmark timings file (matmul, mlp; default: none, a one-program file)")
    u.add_argument("--tuner", default="paths", help=f"one of: {', '.join(TUNER_NAMES)}")
    u.add_argument("--datasets", default=None, help="comma-separated datasets to tune on (default all)")
    u.add_argument("--repeats", type=int, default=10, help="program runs per dataset the tuner charges")
    u.add_argument("--max-evals", type=int, default=150, help="combinations a strategy search may try")
    u.add_argument("--seed", type=int, default=0, help="seed of the search")
    u.add_argument("-o", "--output", default=None, help="tuning file to write (name=value lines; default: print only)")
    u.add_argument("--db", default=None, help="also store every recorded (dataset, path) timing here (default: nowhere)")
    u.add_argument("--tree", action="store_true", help="print the threshold tree first")
    u.add_argument("--json", action="store_true", help="print one JSON object")
    u.set_defaults(func=cmd_tune)


def _read(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    return p.read_text()


def cmd_tree(args: argparse.Namespace) -> int:
    from adaptune.thresholds.tree import build_forest, parse_print_sizes, render_tree

    decls = parse_print_sizes(_read(args.sizes), strict=False)
    if not decls:
        raise ValueError(f"{args.sizes}: no threshold declarations found")
    print(render_tree(build_forest(decls, multi_parent=args.multi_parent)), end="")
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    from adaptune.thresholds.futhark import flows_from_comparisons, parse_comparisons
    from adaptune.thresholds.model import ThresholdModel, describe, enumerate_exact, naive_space_size
    from adaptune.thresholds.tree import parse_print_sizes, render_tree

    decls = parse_print_sizes(_read(args.sizes), strict=False)
    datasets = {}
    for log in args.logs:
        pairs = parse_comparisons(_read(log))
        if not pairs:
            raise ValueError(f"{log}: no 'Compared <threshold> <= <value>' lines (run the program with -L)")
        datasets[Path(log).name] = flows_from_comparisons(pairs)
    model = ThresholdModel(decls, datasets, args.multi_parent)
    info = describe(model) | {"naive_2^15": naive_space_size(len(model.names))}
    try:
        info["distinct_behaviours"] = len(enumerate_exact(model))
    except ValueError as exc:
        info["distinct_behaviours"] = None
        info["note"] = str(exc)
    if args.json:
        print(json.dumps(info | {"candidates": model.candidates()}))
        return 0
    print(render_tree(model.forest, model.candidates()), end="")
    for k, v in info.items():
        print(f"{k}: {v}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from adaptune.thresholds.futhark import write_tuning_file
    from adaptune.thresholds.timing import PathTimes, model_from_json, to_store
    from adaptune.thresholds.tree import render_tree
    from adaptune.thresholds.tuners import exhaustive, hillclimb, path_exhaustive, strategy_search, untuned

    if args.tuner not in TUNER_NAMES:
        raise ValueError(f"unknown tuner {args.tuner!r}; known: {', '.join(TUNER_NAMES)}")
    data = json.loads(_read(args.timings))
    device = data.get("device", "unknown")
    if "programs" in data:
        if args.program is None:
            raise ValueError(f"{args.timings} holds programs {sorted(data['programs'])}: pass --program")
        if args.program not in data["programs"] or "timings" not in data["programs"][args.program]:
            raise KeyError(f"{args.timings} has no timings for program {args.program!r}")
        data = data["programs"][args.program]["timings"]
    model = model_from_json(data)
    times = PathTimes.from_json(model, data)
    train = model.subset(args.datasets.split(",")) if args.datasets else model
    if args.tree:
        print(render_tree(model.forest, train.candidates()), end="")
    if args.tuner.startswith("paths"):
        out = path_exhaustive(train, times, repeats=args.repeats, early_termination=args.tuner.endswith("early"))
    elif args.tuner.startswith("exhaustive"):
        out = exhaustive(train, times, repeats=args.repeats, early_termination=args.tuner.endswith("early"))
    elif args.tuner == "hillclimb":
        out = hillclimb(train, times, repeats=args.repeats, max_evals=args.max_evals, seed=args.seed)
    else:
        out = strategy_search(train, times, args.tuner, repeats=args.repeats, max_evals=args.max_evals,
                              seed=args.seed)
    if args.output:
        write_tuning_file(args.output, out.best)
    stored = None
    if args.db:
        from adaptune.store import Store

        stored = to_store(times, Store(args.db), device, args.program or "program")
    un = untuned(model, times)
    per = {d: {"tuned_ms": times.mean(d, out.best), "untuned_ms": un[d]} for d in model.datasets}
    if args.json:
        print(json.dumps({"tuner": out.tuner, "best": out.best, "datasets": per, "tuning_s": out.tuning_s,
                          "evaluations": out.evaluations, "stored": stored}))
        return 0
    print(f"{out.tuner}: {out.evaluations} combinations, {out.runs} runs, {out.tuning_s:.3f} s of program runs")
    for d, v in per.items():
        print(f"  {d}: tuned {v['tuned_ms']:.4f} ms, untuned {v['untuned_ms']:.4f} ms "
              f"({v['untuned_ms'] / v['tuned_ms']:.2f}x)")
    if args.output:
        print(f"wrote {args.output}")
    return 0
