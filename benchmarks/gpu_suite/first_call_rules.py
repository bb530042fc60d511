"""First-call rules for the GPU suite chosen by training CV (issue 24), offline from the recorded H100 runs.

    python -m benchmarks.gpu_suite.first_call_rules [--out DIR]      # -> DIR/gpu_suite_h100_first_call_rules.{json,md}
    python -m benchmarks.gpu_suite.first_call_rules --profile smoke  # fewer resampled inputs, one CV shuffle

Why: the prefetched selector live on the H100 (``results/history/prefetched_h100_653426b.md``) missed 0.95 of oracle at the median
test input on histogram, sort and BFS and 2 % of the run on SpMV and histogram. For every benchmark of each
recorded run (``--raw``, ``--extra``: per-variant times of every training and test input) this fits, on the
training inputs alone, the candidate rules ``adaptune.kernels.distilled.distil_rule`` chooses from (the distilled
tree; students of the ``cost`` model, ``distilled.STUDENT_RECIPES``), over host metadata and over host metadata
then device features, and reports each one's cross-validated and test fraction of oracle, its fraction at its own
median test input (the middle of the test inputs ordered by the recorded run time of its choice) and the cost of one
pick timed here (fastest of 7 loops, the compiled closures on stand-in objects holding the recorded metadata).

The selector (``PrefetchedDispatch`` as fitted by ``distilled.distil_gated`` with the students): the host rule and
the feature rule of best training CV; features only where the feature rule's CV beats the host rule's, and then
only at or above the gate's size, where ``HANDOFF_US`` (the prefetched call right after a fix, measured live on the
H100's host) plus the feature rule's pick fit 2 % of the run predicted from the training inputs. Below the gate
nothing is prefetched and the call is the host rule alone. Scored two ways on the test inputs: right after the fix
(features not yet on the host: the host rule, plus the handoff where the object was prefetched) and with the
features landed (the feature rule where the gate admits). Run times and fractions are recorded; only the pick
costs are this host's.
"""

from __future__ import annotations

import argparse
import json
import types
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.kernels import distilled
from adaptune.kernels.dispatch import DistilledDispatch
from benchmarks.gpu_suite.prefetched import matrices
from benchmarks.gpu_suite.reanalysis import per_call_us, stand_in
from benchmarks.gpu_suite.run import (
    BENCHES,
    LIBRARY_DEFAULT,
    RESULTS,
    add_replace_argument,
    best_fixed_both,
    cost_matrices,
    load_raw,
)
from benchmarks.harness import (
    device_tag,
    git_commit,
    markdown_table,
    parse_study_args,
    study_parser,
    write_results,
)

RAW = RESULTS / "gpu_suite_h100_raw.json"  # round 4, commit c899c09, seed 2024
EXTRA = (RESULTS / "gpu_suite_h100_histogram_seed2025_raw.json",)  # round 3 code, commit b9080e6
HANDOFF_US = 1.5  # prefetched first call at pause 0 on the H100's host, features not landed (prefetched_h100.md)
BUDGET = 0.02
TARGET = 0.95


def _scores(runtime: np.ndarray, names: list[str], picks: list[str], cost_us: np.ndarray) -> dict[str, Any]:
    """Mean fraction of oracle, and at the median test input (by the run time of the pick) its fraction, run,
    and the first call's share of that run."""
    idx = np.arange(len(picks))
    chosen = np.array([names.index(p) for p in picks])
    frac = distilled.relative(runtime)[idx, chosen]
    run = runtime[idx, chosen]
    m = int(np.argsort(run)[len(run) // 2])
    return {"fraction": float(frac.mean()), "worst": float(frac.min()), "median_index": m,
            "median_fraction": float(frac[m]), "median_run_us": float(run[m] * 1e3),
            "median_cost_us": float(cost_us[m]), "median_share": float(cost_us[m] * 1e-3 / run[m])}


def analyse(name: str, b: dict[str, Any], recipes: list[dict[str, float]], calls: int) -> dict[str, Any]:
    names, default = b["variants"], b["default"]
    _, rt_train = cost_matrices(b["train"], names, default)
    _, runtime = cost_matrices(b["test"], names, default)
    h_train, f_train = matrices(name, b["train"], b["feature_names"])
    h_test, f_test = matrices(name, b["test"], b["feature_names"])
    a_test = np.column_stack([h_test, f_test])
    args = [stand_in(name, r["info"]) for r in b["test"]]
    pair_src = (0, distilled.pair_sources(name, b["feature_names"])[1])
    obj = distilled.SOURCES[name][0]
    variants = BENCHES[name](types.SimpleNamespace(cuda=True, default=lambda k: LIBRARY_DEFAULT[k])).variants()
    fit = distilled.distil_gated(h_train, f_train, rt_train, names, 1.0, BUDGET, name, students=recipes)

    def pick_cost(tree: dict[str, Any], over_features: bool, i: int) -> float:
        """One pick's host cost here at test input i: the host rule as DistilledDispatch.bind (checks and
        fall-back included), the feature rule as the compiled walk over (object, features)."""
        if over_features:
            walk = distilled.compile_tree(tree, pair_src)
            pair = (args[i][obj], dict(zip(b["feature_names"], f_test[i], strict=True)))
            return per_call_us(lambda: walk(pair), calls, 5)[2]
        bind = DistilledDispatch(name, tree, variants, default).bind
        return per_call_us(lambda: bind(*args[i]), calls, 5)[2]

    rows = []
    for over, rule in (("host metadata", fit["host"]), ("host metadata + device features", fit["features"])):
        x = a_test if over != "host metadata" else h_test
        for what, cand in rule["candidates"].items():
            picks = [distilled.predict(cand["tree"], r) for r in x]
            s = _scores(runtime, names, picks, np.zeros(len(picks)))
            cost = pick_cost(cand["tree"], over != "host metadata", s["median_index"])
            rows.append({"benchmark": name, "over": over, "rule": what, "chosen": what == rule["rule"],
                         "cv_fraction": cand["cv_fraction_of_oracle"], "test_fraction": s["fraction"],
                         "median_fraction": s["median_fraction"], "worst": s["worst"],
                         "median_run_us": s["median_run_us"], "leaves": distilled.tree_leaves(cand["tree"]),
                         "depth": distilled.tree_depth(cand["tree"]), "pick_us": cost})
        rows.append({"benchmark": name, "over": over, "rule": "cost model (the students' teacher)",
                     "chosen": False, "cv_fraction": rule["teacher_cv_fraction_of_oracle"]})
    host_cost = next(r["pick_us"] for r in rows if r["over"] == "host metadata" and r["chosen"])
    feat_cost = next(r["pick_us"] for r in rows if r["over"] != "host metadata" and r["chosen"])
    # the gate with this host's cost of the feature path: the handoff plus the feature rule's pick
    best = np.nanmin(np.where(np.isfinite(rt_train), rt_train, np.nan), axis=1)
    gate = (distilled.size_gate(h_train[:, distilled.GATE_SIZE[name]], best, HANDOFF_US + feat_cost, BUDGET)
            if fit["min_size"] is not None else np.inf)
    admitted = h_test[:, distilled.GATE_SIZE[name]] >= gate
    host_picks = [distilled.predict(fit["host"]["tree"], r) for r in h_test]
    feat_picks = [distilled.predict(fit["features"]["tree"], r) for r in a_test]
    not_landed = _scores(runtime, names, host_picks, host_cost + HANDOFF_US * admitted)
    landed = _scores(runtime, names, [f if a else h for f, h, a in zip(feat_picks, host_picks, admitted, strict=True)],
                     np.where(admitted, HANDOFF_US + feat_cost, host_cost))
    # what the gate costs in fraction: the feature rule on every input (the share then exceeds 2 % on small ones)
    ungated = _scores(runtime, names, feat_picks, np.full(len(feat_picks), HANDOFF_US + feat_cost))
    fixed = best_fixed_both(b["test"], names, default)["with_fallback"]
    selector = {"host_rule": fit["host"]["rule"], "feature_rule": fit["features"]["rule"],
                "host_tree": fit["host"]["tree"], "feature_tree": fit["features"]["tree"],
                "gate_size": distilled.HOST_METADATA[name][distilled.GATE_SIZE[name]],
                "min_size": None if gate == np.inf else float(gate), "admitted_test_inputs": int(admitted.sum()),
                "best_fixed": fixed["variant"], "best_fixed_fraction": fixed["fraction"]}
    for key, s in (("right_after_fix", not_landed), ("features_landed", landed), ("features_landed_no_gate", ungated)):
        s["median_input"] = b["test"][s.pop("median_index")]["name"]
        s["meets"] = (s["fraction"] >= TARGET and s["median_fraction"] >= TARGET and s["median_share"] <= BUDGET)
        s["beats_best_fixed"] = s["fraction"] > fixed["fraction"]
        selector[key] = s
    return {"rows": rows, "selector": selector}


def summary_rows(run_key: str, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name, r in results.items():
        s = r["selector"]
        rules = {"right_after_fix": s["host_rule"], "features_landed_no_gate": s["feature_rule"],
                 "features_landed": s["host_rule"] if s["min_size"] is None else
                 f"{s['feature_rule']} from {s['gate_size']} {s['min_size']:.3g}, else {s['host_rule']}"}
        for key, rule in rules.items():
            c = s[key]
            out.append({"run": run_key, "benchmark": name, "first call": key.replace("_", " "), "rule": rule,
                        "fraction": c["fraction"], "median_fraction": c["median_fraction"],
                        "median_run_us": c["median_run_us"], "median_cost_us": c["median_cost_us"],
                        "median_share_pct": 100 * c["median_share"],
                        "best_fixed": f"{s['best_fixed']} {s['best_fixed_fraction']:.3f}",
                        "meets": c["meets"]})
    return out


def main(argv: list[str] | None = None) -> None:
    p = study_parser("gpu_suite", __doc__.splitlines()[0])
    p.add_argument("--raw", default=str(RAW))
    add_replace_argument(p)
    p.add_argument("--extra", nargs="*", default=[str(e) for e in EXTRA])
    p.add_argument("--resampled", type=int, default=4000, help="resampled inputs a student is fitted on")
    p.add_argument("--repeats", type=int, default=3, help="CV shuffles (5 folds each)")
    p.add_argument("--calls", type=int, default=20000, help="calls per timing loop")
    args = parse_study_args(p, argv, smoke={"resampled": 500, "repeats": 1, "calls": 500})
    run(args)


def run(args: argparse.Namespace) -> Path:
    recipes = [{**r, "resampled": args.resampled, "repeats": args.repeats} for r in distilled.STUDENT_RECIPES]
    data: dict[str, Any] = {"handoff_us": HANDOFF_US, "budget": BUDGET, "recipes": recipes, "runs": {}}
    rows, summary = [], []
    device = None
    for path in [args.raw, *args.extra]:
        raw = load_raw(path, args.replace if path == args.raw else ())
        device = device or raw["device"]["name"]
        key = Path(path).stem.removesuffix("_raw")
        results = {}
        for name, b in raw["benchmarks"].items():
            if b.get("partial") or not b.get("test"):
                continue
            results[name] = analyse(name, b, recipes, args.calls)
            rows += [{"run": key, **r} for r in results[name]["rows"]]
            print(key, name, json.dumps({k: results[name]["selector"][k]
                                         for k in ("host_rule", "feature_rule", "min_size")}), flush=True)
        summary += summary_rows(key, results)
        data["runs"][key] = {"file": str(path), "replaced": raw.get("replaced", {}),
                             "device": raw["device"]["name"], "recorded_commit": raw["commit"],
                             "seed": raw["seed"], "benchmarks": results}
    table = ("## The selector per benchmark\n\n"
             + markdown_table(summary, ["run", "benchmark", "first call", "rule", "fraction", "median_fraction",
                                        "median_run_us", "median_cost_us", "median_share_pct", "best_fixed", "meets"])
             + "\n\n## Every candidate rule\n\n"
             + markdown_table(rows, ["run", "benchmark", "over", "rule", "chosen", "cv_fraction", "test_fraction",
                                     "median_fraction", "worst", "median_run_us", "depth", "leaves", "pick_us"]))
    data["summary"] = summary
    stem = f"gpu_suite_{device_tag(device or 'unknown')}_first_call_rules"
    return write_results(args.out, stem, data, table=table, title="GPU suite: first-call rules chosen by training CV",
                         notes=NOTES.format(commit=git_commit(), handoff=HANDOFF_US))


NOTES = """Analysis code commit {commit}; run times recorded on the H100 (no GPU used here), pick costs timed on this
shared 2-core host. Rules fitted on each run's training inputs alone (rule: the candidate of largest cross-validated
fraction of oracle; ties to the plain tree); test inputs scored once. `right after fix`: the features not yet on the
host, the host rule, plus the {handoff} us handoff measured live on the H100 where the gate prefetched the object;
`features landed`: the feature rule at or above the gate. `meets`: mean and median-input fraction >= 0.95 and the
first call <= 2 % of the median input's run. `median_cost_us`: this host's pick (+ handoff)."""


if __name__ == "__main__":
    main()
