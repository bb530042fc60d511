"""Zero-shot configuration, round 3: a Gaussian process, a pairwise-ranking model and CV-DFS, each with its
hyperparameters chosen on the sources only; and the ceiling of what the sources can justify.

Leave one GPU out on the six recorded convolution spaces (data/benchmark_hub/convolution_milo, replay, no
GPU). For every candidate method and every target T the script records

- the outer score: fraction of T's optimum of the method's top-1 choice, trained on the five sources;
- the inner scores: for each source S of T, the fraction of S's optimum when trained on the other four.

The nested choice per target is the candidate with the best mean inner score (ties: the first listed),
the same rule as ``adaptive.zero_shot.nested_select``; the target's own measurements never enter it.
Fits are memoised by training set (a model trained on {A, B, C, D} serves both A-B-C-D-E's inner fold and
the outer fold of the sixth GPU), and each candidate's table is saved as soon as it is done
(``--cache``), so an interrupted run keeps what it computed.

Families, each reported on its own (nested within the family) and all together (nested over everything,
with the round-2 methods of benchmarks/transfer/zero_shot.py):

- ``gp``: ``GPTransfer`` on the parameter positions, without / with the vendor feature;
- ``rank``: ``PairwiseRank`` without device features, with vendor, and with vendor at C = 0.1;
- ``cv-dfs``: ``BoostedTransfer`` whose device features CV-DFS selects on the sources it is given
  (candidates vendor, memory bandwidth, L2, SIMD width; subsets of size <= 1).

Writes OUT/transfer_zero_shot_models.{json,md}.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.transfer.zero_shot_models [--out DIR]   # out/transfer/
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from adaptune.adaptive.transfer import DeviceSpace, best_of, config_features, cv_dfs
from adaptune.adaptive.zero_shot import BoostedTransfer
from adaptune.adaptive.zero_shot_models import GPTransfer, PairwiseRank, ceiling
from adaptune.search.surrogate import informative_columns
from benchmarks.harness import parse_study_args, study_meta, study_parser, write_results
from benchmarks.transfer.run import GPUS, replays, spaces
from benchmarks.transfer.zero_shot import candidates as round2_candidates

ROOT = Path(__file__).resolve().parents[2]

CV_DFS_CANDIDATES = ("vendor_nvidia", "mem_bandwidth_gbs", "l2_kb", "simd_width")
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
Fit = Callable[[list[DeviceSpace]], Callable[[dict], np.ndarray]]  # sources -> (target features -> scores)


def positions() -> np.ndarray:
    t = np.asarray(replays()["A100"].space.table, dtype=float)
    return t[:, informative_columns(t)]


SELECTED: dict[tuple[str, ...], list[str]] = {}  # CV-DFS's selection per training set (sources' names)


def new_candidates(x: np.ndarray) -> dict[str, tuple[str, Fit]]:
    """name -> (family, fit): ``fit(sources)`` returns the predictor for a target's device features."""
    xp = positions()

    def gp(dev: tuple[str, ...], per_source: int = 120) -> Fit:
        return lambda src: GPTransfer(dev, per_source=per_source).fit(xp, src).predict

    def rank(dev: tuple[str, ...], c: float = 1.0) -> Fit:
        return lambda src: PairwiseRank(dev, c=c, pairs_per_source=4000).fit(x, src).predict

    boosted_memo: dict[tuple, Callable] = {}

    def boosted(dev: tuple[str, ...], src: list[DeviceSpace]) -> Callable:
        key = (dev, tuple(sorted(s.device for s in src)))
        if key not in boosted_memo:
            boosted_memo[key] = BoostedTransfer(dev).fit(x, src).predict
        return boosted_memo[key]

    def cv_dfs_boosted(src: list[DeviceSpace]) -> Callable:
        selected, _ = cv_dfs(x, src, CV_DFS_CANDIDATES, max_size=1, k=1,
                             predict=lambda sub, rest, temp: boosted(tuple(sub), list(rest))(temp.features))
        SELECTED[tuple(sorted(s.device for s in src))] = selected
        return boosted(tuple(selected), src)

    return {"pairwise rank (no device features)": ("rank", rank(())),
            "pairwise rank + vendor": ("rank", rank(("vendor_nvidia",))),
            "pairwise rank + vendor, C=0.1": ("rank", rank(("vendor_nvidia",), 0.1)),
            "boosted + CV-DFS features": ("cv-dfs", cv_dfs_boosted),
            "GP (no device features)": ("gp", gp(())),
            "GP + vendor": ("gp", gp(("vendor_nvidia",))),
            "GP (no device features), 240 per source": ("gp", gp((), 240)),
            "GP + vendor, 240 per source": ("gp", gp(("vendor_nvidia",), 240))}


def table(fit: Fit, sp: list[DeviceSpace]) -> dict:
    """Outer and inner scores of one method, fits memoised by training set."""
    memo: dict[tuple[str, ...], Callable] = {}

    def trained(src: list[DeviceSpace]) -> Callable:
        key = tuple(sorted(s.device for s in src))
        if key not in memo:
            memo[key] = fit(src)
        return memo[key]

    out: dict = {"outer": {}, "inner": {}}
    for i, target in enumerate(sp):
        sources = [s for j, s in enumerate(sp) if j != i]
        out["outer"][target.device] = best_of(target.values, [int(np.argmin(trained(sources)(target.features)))])
        out["inner"][target.device] = {}
        for k, temp in enumerate(sources):
            rest = [s for j, s in enumerate(sources) if j != k]
            out["inner"][target.device][temp.device] = best_of(temp.values,
                                                               [int(np.argmin(trained(rest)(temp.features)))])
    return out


def nested(tables: dict[str, dict], names: list[str]) -> dict:
    """Per target: the candidate with the best mean inner score among ``names`` (ties: first) and its outer."""
    res = {}
    for g in GPUS:
        inner = {n: float(np.mean(list(tables[n]["inner"][g].values()))) for n in names}
        best = max(inner.values())
        chosen = next(n for n in names if inner[n] >= best - 1e-12)
        res[g] = {"chosen": chosen, "inner_mean": round(inner[chosen], 4), "fraction": round(tables[chosen]["outer"][g], 4)}
    return res


SMOKE = {"skip": ["gp", "cv-dfs"]}


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("transfer", __doc__.splitlines()[0])
    ap.add_argument("--cache", default="/tmp/adaptune_zero_shot_models_cache.json")
    ap.add_argument("--skip", nargs="*", default=[], help="candidate families to leave out (gp, rank, cv-dfs)")
    ap.add_argument("--only-cached", action="store_true", help="report the candidates in --cache, compute nothing")
    ap.add_argument("--cv-dfs-selections", action="store_true",
                    help="also run CV-DFS on each target's five sources and report what it selects")
    args = parse_study_args(ap, argv, smoke=SMOKE)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    stem = str(Path(args.out) / "transfer_zero_shot_models")
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", module="sklearn")
    t0 = time.perf_counter()
    sp = spaces()
    x = config_features(replays()["A100"].space)
    cache_path = Path(args.cache)
    tables: dict[str, dict] = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    family: dict[str, str] = {}
    todo: dict[str, Fit] = {}
    for name, m in round2_candidates().items():  # round 2's methods, same definitions
        family[name] = "round 2"
        todo[name] = (lambda mm: (lambda src: (lambda feats: mm(x, src, feats))))(m)
    for name, (fam, fit) in new_candidates(x).items():
        family[name] = fam
        if fam not in args.skip:
            todo[name] = fit
    timing: dict[str, float] = {}
    for name, fit in todo.items():
        if name in tables or args.only_cached:
            continue
        t1 = time.perf_counter()
        tables[name] = table(fit, sp)
        timing[name] = round(time.perf_counter() - t1, 1)
        cache_path.write_text(json.dumps(tables))
        print(f"{name}: outer " + ", ".join(f"{g} {tables[name]['outer'][g]:.3f}" for g in GPUS)
              + f" mean {np.mean(list(tables[name]['outer'].values())):.3f} ({timing[name]} s, load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
    done = [n for n in todo if n in tables]
    out: dict = {"gpus": list(GPUS), "configurations": len(x), "family": {n: family[n] for n in done},
                 "per_method": {n: {g: round(tables[n]["outer"][g], 4) for g in GPUS} for n in done},
                 "per_method_mean": {n: round(float(np.mean(list(tables[n]["outer"].values()))), 4) for n in done},
                 "inner_mean": {n: {g: round(float(np.mean(list(tables[n]["inner"][g].values()))), 4) for g in GPUS}
                                for n in done},
                 "nested": {}}
    groups = {"gp": [n for n in done if family[n] == "gp"], "rank": [n for n in done if family[n] == "rank"],
              "cv-dfs": [n for n in done if family[n] == "cv-dfs"],
              "round 2": [n for n in done if family[n] == "round 2"], "all": done}
    for label, names in groups.items():
        if names:
            res = nested(tables, names)
            out["nested"][label] = {"per_target": res,
                                    "mean": round(float(np.mean([r["fraction"] for r in res.values()])), 4)}
    if args.cv_dfs_selections:
        fit = new_candidates(x)["boosted + CV-DFS features"][1]
        for i in range(len(sp)):
            fit([s for j, s in enumerate(sp) if j != i])
        out["cv_dfs_selected_outer"] = {g: SELECTED[tuple(sorted(h for h in GPUS if h != g))] for g in GPUS}
    out["ceiling"] = {}
    for i, target in enumerate(sp):
        out["ceiling"][target.device] = ceiling(target, [s for j, s in enumerate(sp) if j != i], THRESHOLDS)
    out["ceiling_mean"] = {"pareto_best": round(float(np.mean([c["pareto_best"] for c in out["ceiling"].values()])), 4)}
    for t in THRESHOLDS:
        key = f"{t:.2f}"
        vals = [c["threshold"][key]["best"] for c in out["ceiling"].values()]
        out["ceiling_mean"][f"best_if_all_sources_ge_{key}"] = (round(float(np.mean(vals)), 4)
                                                               if all(v is not None for v in vals) else None)
    out["meta"] = {**study_meta("benchmarks.transfer.zero_shot_models", t0), "seconds_this_run": round(time.perf_counter() - t0, 1), "seconds_per_method": timing}
    path = write_results(args.out, Path(stem).name, out, table=markdown(out))
    print(path.with_suffix(".md").read_text())


def markdown(out: dict) -> str:
    m, g = out["meta"], out["gpus"]
    lines = ["# Zero-shot configuration, round 3: GP, pairwise ranking, CV-DFS; the sources' ceiling", "",
             f"- date {m['date']}, commit {m['commit']}, {m['host']}: replay of the six recorded convolution "
             "spaces, no GPU", f"- command: `{m['command']}`",
             "- fraction of the target's optimum of the top-1 configuration, trained on the other five GPUs. "
             "*nested* = per target, the candidate with the best mean leave-one-source-out score over its five "
             "sources (the target never takes part).", "",
             "| method | family | " + " | ".join(g) + " | mean |", "|---|---|" + "---|" * (len(g) + 1)]
    for n, per in out["per_method"].items():
        lines.append(f"| {n} | {out['family'][n]} | " + " | ".join(f"{per[x]:.3f}" for x in g)
                     + f" | {out['per_method_mean'][n]:.3f} |")
    for label, r in out["nested"].items():
        lines.append(f"| **nested within {label}** | | " + " | ".join(f"{r['per_target'][x]['fraction']:.3f}" for x in g)
                     + f" | **{r['mean']:.3f}** |")
    lines += ["", "Nested choices (over all candidates):", ""]
    if "all" in out["nested"]:
        for x in g:
            c = out["nested"]["all"]["per_target"][x]
            lines.append(f"- {x}: {c['chosen']} (inner mean {c['inner_mean']:.3f}) -> {c['fraction']:.3f}")
    lines += ["", "## Ceiling: what the five sources can justify on each target", "",
              "Best target fraction among configurations that reach at least x of the optimum on every source "
              "(count in brackets), and among the Pareto front of the sources' fractions (the most any monotone "
              "aggregation of the sources can reach).", "",
              "| target | " + " | ".join(f"x={t:.1f}" for t in THRESHOLDS) + " | Pareto front (size) |",
              "|---|" + "---|" * (len(THRESHOLDS) + 1)]
    for x, c in out["ceiling"].items():
        cells = []
        for t in THRESHOLDS:
            v = c["threshold"][f"{t:.2f}"]
            cells.append(f"{v['best']:.3f} ({v['count']})" if v["best"] is not None else f"- ({v['count']})")
        lines.append(f"| {x} | " + " | ".join(cells) + f" | {c['pareto_best']:.3f} ({c['pareto_count']}) |")
    cm = out["ceiling_mean"]
    lines += ["| **mean** | " + " | ".join(f"{cm[f'best_if_all_sources_ge_{t:.2f}']:.3f}"
                                           if cm[f"best_if_all_sources_ge_{t:.2f}"] is not None else "-"
                                           for t in THRESHOLDS) + f" | **{cm['pareto_best']:.3f}** |", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
