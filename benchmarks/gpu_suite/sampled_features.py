"""BFS's and sort's first call with features it can afford: a few hundred sampled values, offline (issue 24).

    python -m benchmarks.gpu_suite.sampled_features [--out DIR]   # -> DIR/sampled_first_call.{json,md} and
                                                                  #    DIR/gpu_suite_h100_first_call_rules_sampled.json
    python -m benchmarks.gpu_suite.sampled_features --profile smoke   # every 6th input only (a pilot, no rules file)

Why: live on the H100 (``results/history/prefetched_h100_87749a2.md``) BFS's first call took its tree over host metadata (the
device features land ~0.8 ms after ``fix``, after a median run) and picked a label 1.6x slower than the best at the
median test input (0.605 of oracle). ``adaptune.kernels.sampled`` computes, at ``fix``, the spread of the degrees of
sampled rows (one gather from the CSR row pointer). Here, on the recorded H100 run's inputs (per-input per-variant
times): every input is rebuilt on the CPU with the suite's builder (``inputs.graph``, the recorded family, size,
degree and seed) and its sampled features computed as the library computes them live, for row counts 64 / 256 /
1024 drawn at random (the library's rule) or evenly strided. Caveat: on the H100 the builder drew with CuPy's
generator, here NumPy's: vertices match, edges and degrees of the random families differ a little (both are
reported: the full degree spread against the recorded device feature). Sort likewise (``sampled.SORT_SAMPLE_FEATURES``:
the order of 64 / 256 / 1024 strided adjacent pairs of the rebuilt keys; the descent share of 4096 pairs beside the
recorded one); its pairs are strided (the device features' rule), so its other draws are the strides shifted by a
seeded offset.

Which sample, and then the selector, are chosen by training cross-validation alone (``distilled.distil_rule``: the
tree, or a student of the cost model, over host metadata then the sampled features; the sample of best CV among the
six); the gate as ``first_call_rules.py`` sets it. The test inputs score the choice once: mean fraction of oracle,
at the median test input (by the run time of the pick), and the spread when the rows are drawn with other seeds
(the live graphs differ a little from these: the rule must not hang on one draw). Written beside the results: a
``first_call_rules.py``-shaped rules file whose BFS selector is this one (the other three as committed), for
``prefetched.py --rules``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.kernels import distilled, features, inputs, sampled
from benchmarks.gpu_suite.prefetched import matrices
from benchmarks.gpu_suite.reanalysis import per_call_us, stand_in
from benchmarks.gpu_suite.run import RESULTS, add_replace_argument, best_fixed_both, cost_matrices, load_raw
from benchmarks.harness import git_commit, markdown_table, parse_study_args, study_parser, write_results

RAW = RESULTS / "gpu_suite_h100_raw.json"  # round 4, commit c899c09
RULES = RESULTS / "gpu_suite_h100_first_call_rules.json"  # the selectors run live at 87749a2
SIZES = (64, 256, 1024)  # sampled rows (BFS) / pairs (sort)
SCHEMES = {"bfs": ("random", "strided"), "sort": ("strided",)}
LIBRARY = {"bfs": f"random/{sampled.BFS_SAMPLE_ROWS}", "sort": f"strided/{sampled.SORT_SAMPLE_PAIRS}"}
OTHER_SEEDS = tuple(range(1, 11))
BUDGET, HANDOFF_US, TARGET = 0.02, 1.5, 0.95


def _graph_row(r: dict[str, Any]) -> dict[str, Any]:
    """A recorded graph rebuilt: sizes, full degree spread, sampled features per scheme / rows / seed."""
    s = r["spec"]
    indptr = np.asarray(inputs.graph(s["family"], s["size"], s["params"]["avg"], s["seed"])[0], np.int64)
    n, m = len(indptr) - 1, int(indptr[-1])
    samples = {}
    for scheme in SCHEMES["bfs"]:
        for k in SIZES:
            for seed in (sampled.SAMPLE_SEED, *OTHER_SEEDS) if scheme == "random" else (sampled.SAMPLE_SEED,):
                idx = (np.random.default_rng(seed).integers(0, n, k) if scheme == "random"
                       else np.linspace(0, n - 1, k).astype(np.int64))
                samples[f"{scheme}/{k}/{seed}"] = sampled.degree_sample_features(indptr[idx], indptr[idx + 1], n, m)
    idx = sampled.sample_rows(n)  # the library's own rule: what the live call computes
    assert samples[f"{LIBRARY['bfs']}/{sampled.SAMPLE_SEED}"] == sampled.degree_sample_features(
        indptr[idx], indptr[idx + 1], n, m)
    return {"n": n, "m": m, "check": ("degree_sd", float(np.diff(indptr).std()), r["features"]["degree_sd"]),
            "samples": samples}


def _keys_row(r: dict[str, Any]) -> dict[str, Any]:
    """Recorded sort keys rebuilt: sampled features per pair count, and shifted by seeded offsets."""
    s = r["spec"]
    keys = inputs.sort_keys(s["family"], s["size"], s["params"]["dtype"], s["seed"])
    samples = {}
    for k in SIZES:
        samples[f"strided/{k}/{sampled.SAMPLE_SEED}"] = sampled.sort_sample_reference(keys, k)
        stride, _ = features.sort_plan(keys.size, k)
        for seed in OTHER_SEEDS:
            offset = int(np.random.default_rng(seed).integers(0, max(1, stride - 1)))
            samples[f"strided/{k}/{seed}"] = sampled.sort_sample_reference(keys[offset:], k)
    full = features.sort_features_reference(keys)["descent_share"]
    return {"n": int(keys.size), "check": ("descent_share", full, r["features"]["descent_share"]), "samples": samples}


REBUILD: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"bfs": _graph_row, "sort": _keys_row}


def sample_table(name: str, records: list[dict[str, Any]], every: int) -> dict[str, dict[str, Any]]:
    """Per recorded input (every ``every``-th): the rebuilt input's sampled features and a check feature beside
    its recorded value."""
    out = {}
    t0 = time.perf_counter()
    for i, r in enumerate(records[::every]):
        out[r["name"]] = REBUILD[name](r)
        if sys.stdout.isatty():
            print(f"{name}: {i + 1} inputs rebuilt, {time.perf_counter() - t0:.0f} s", end="\r", flush=True)
    return out


def _x(name: str, records: list[dict[str, Any]], host: np.ndarray, table: dict[str, Any], key: str) -> np.ndarray:
    names = sampled.SAMPLED[name][0]
    return np.column_stack([host, [[table[r["name"]]["samples"][key][f] for f in names] for r in records]])


def _score(runtime: np.ndarray, names: list[str], picks: list[str]) -> dict[str, Any]:
    idx = np.arange(len(picks))
    chosen = np.array([names.index(p) for p in picks])
    frac = distilled.relative(runtime)[idx, chosen]
    run = runtime[idx, chosen]
    m = int(np.argsort(run)[len(run) // 2])
    return {"fraction": float(frac.mean()), "worst": float(frac.min()), "median_index": m,
            "median_fraction": float(frac[m]), "median_run_us": float(run[m] * 1e3)}


def analyse(name: str, b: dict[str, Any], table: dict[str, Any], recipes: tuple[dict[str, float], ...], calls: int
            ) -> dict[str, Any]:
    train = [r for r in b["train"] if r["name"] in table]
    test = [r for r in b["test"] if r["name"] in table]
    names, default, fnames = b["variants"], b["default"], sampled.SAMPLED[name][0]
    _, rt_train = cost_matrices(train, names, default)
    _, rt_test = cost_matrices(test, names, default)
    h_train, f_train = matrices(name, train, b["feature_names"])
    h_test, f_test = matrices(name, test, b["feature_names"])
    rows = []
    # the sample: by training CV of the plain tree over host metadata + its features
    for scheme in SCHEMES[name]:
        for k in SIZES:
            key = f"{scheme}/{k}/{sampled.SAMPLE_SEED}"
            fit = distilled.distil_rule(_x(name, train, h_train, table, key), rt_train, names, students=())
            s = _score(rt_test, names, [distilled.predict(fit["tree"], x) for x in _x(name, test, h_test, table, key)])
            rows.append({"benchmark": name, "features": f"host + {scheme} {k}", "key": key,
                         "cv_fraction": fit["cv_fraction_of_oracle"], "test_fraction": s["fraction"],
                         "median_fraction": s["median_fraction"], "worst": s["worst"],
                         "depth": distilled.tree_depth(fit["tree"])})
    for label, xtr, xte in (("host metadata only", h_train, h_test),
                            ("host + the full device features (reference: they land after the run)",
                             np.column_stack([h_train, f_train]), np.column_stack([h_test, f_test]))):
        fit = distilled.distil_rule(xtr, rt_train, names, students=())
        s = _score(rt_test, names, [distilled.predict(fit["tree"], x) for x in xte])
        rows.append({"benchmark": name, "features": label, "key": None, "cv_fraction": fit["cv_fraction_of_oracle"],
                     "test_fraction": s["fraction"], "median_fraction": s["median_fraction"], "worst": s["worst"],
                     "depth": distilled.tree_depth(fit["tree"])})
    # ties (equal CV) go to the larger sample: the same cost class (one gather or launch), less noise on other draws
    chosen = max((r for r in rows if r["key"]), key=lambda r: (round(r["cv_fraction"], 12), int(r["key"].split("/")[1])))
    for r in rows:
        r["chosen"] = r is chosen
    # the selector on the chosen sample: host rule and feature rule by training CV (students too), the gate
    key = chosen["key"]
    xs_train = _x(name, train, h_train, table, key)
    gated = distilled.distil_gated(h_train, xs_train[:, h_train.shape[1]:], rt_train, names, 1.0, BUDGET, name,
                                   students=recipes)
    tree = gated["features"]["tree"]
    walk = distilled.compile_tree(tree, (0, distilled.pair_sources(name, fnames)[1]))
    picks = [distilled.predict(tree, x) for x in _x(name, test, h_test, table, key)]
    s = _score(rt_test, names, picks)
    median = test[s["median_index"]]
    obj = stand_in(name, median["info"])[distilled.SOURCES[name][0]]
    feats = table[median["name"]]["samples"][key]
    pick_us = per_call_us(lambda: walk((obj, feats)), calls, 5)[2]
    best = np.nanmin(np.where(np.isfinite(rt_train), rt_train, np.nan), axis=1)
    sizes = h_train[:, distilled.GATE_SIZE[name]]
    # the gate's cost: the pick alone (the features were waited for at fix: no side-stream work is finishing on
    # another thread when the call comes, so no handoff); beside it, the gate with first_call_rules.py's handoff
    gates = {cost: (distilled.size_gate(sizes, best, cost, BUDGET) if gated["min_size"] is not None else np.inf)
             for cost in (pick_us, HANDOFF_US + pick_us)}
    gate = gates[pick_us]
    host_picks = [distilled.predict(gated["host"]["tree"], x) for x in h_test]

    def first_call(sample: str, limit: float = gate) -> dict[str, Any]:
        admitted = h_test[:, distilled.GATE_SIZE[name]] >= limit
        feature_picks = [distilled.predict(tree, x) for x in _x(name, test, h_test, table, sample)]
        return _score(rt_test, names, [p if a else h for p, h, a in zip(feature_picks, host_picks, admitted,
                                                                        strict=True)])

    first = first_call(key)
    with_handoff = first_call(key, gates[HANDOFF_US + pick_us])
    admitted = h_test[:, distilled.GATE_SIZE[name]] >= gate
    scheme, k, _ = key.split("/")
    other = [{"seed": seed, **{f: v for f, v in first_call(f"{scheme}/{k}/{seed}").items()
                               if f in ("fraction", "median_fraction")}} for seed in OTHER_SEEDS]
    fixed = best_fixed_both(test, names, default)["with_fallback"]
    first["median_input"] = test[first.pop("median_index")]["name"]
    selector = {"host_rule": gated["host"]["rule"], "feature_rule": gated["features"]["rule"],
                "host_tree": gated["host"]["tree"], "feature_tree": tree, "feature_names": list(fnames),
                "sample": key, "library_sample": LIBRARY[name],
                "gate_size": distilled.HOST_METADATA[name][distilled.GATE_SIZE[name]],
                "min_size": None if gate == np.inf else float(gate), "admitted_test_inputs": int(admitted.sum()),
                "median_input": first["median_input"], "best_fixed": fixed["variant"],
                "best_fixed_fraction": fixed["fraction"], "first_call": first, "pick_us": pick_us,
                "cv_fraction_host": gated["host"]["cv_fraction_of_oracle"],
                "cv_fraction_features": gated["features"]["cv_fraction_of_oracle"], "other_seeds": other,
                "gate_with_handoff": None if gates[HANDOFF_US + pick_us] == np.inf else float(gates[HANDOFF_US + pick_us]),
                "first_call_gate_with_handoff": {k: with_handoff[k] for k in ("fraction", "median_fraction")},
                "meets": first["fraction"] >= TARGET and first["median_fraction"] >= TARGET}
    return {"rows": rows, "selector": selector, "inputs": len(train) + len(test)}


def main(argv: list[str] | None = None) -> None:
    p = study_parser("gpu_suite", __doc__.splitlines()[0])
    p.add_argument("--raw", default=str(RAW))
    add_replace_argument(p)
    p.add_argument("--rules", default=str(RULES), help="the committed selectors (the other benchmarks' are kept)")
    p.add_argument("--benchmarks", default="bfs,sort")
    p.add_argument("--every", type=int, default=1, help="every n-th recorded input only (pilots)")
    p.add_argument("--resampled", type=int, default=4000, help="resampled inputs a student is fitted on")
    p.add_argument("--calls", type=int, default=20000, help="calls per timing loop of the pick")
    args = parse_study_args(p, argv, smoke={"every": 6, "resampled": 500, "calls": 500})
    run(args)


def run(args: argparse.Namespace) -> Path:
    raw = load_raw(args.raw, args.replace)
    rules = json.loads(Path(args.rules).read_text())
    run_key = next(iter(rules["runs"]))
    recipes = tuple({**r, "resampled": args.resampled} for r in distilled.STUDENT_RECIPES)
    data: dict[str, Any] = {"raw": args.raw, "replaced": raw.get("replaced", {}), "recorded_commit": raw["commit"],
                            "every": args.every,
                            "benchmarks": {}}
    summary, rows = [], []
    for name in args.benchmarks.split(","):
        b = raw["benchmarks"][name]
        table = sample_table(name, b["train"] + b["test"], args.every)
        result = analyse(name, b, table, recipes, args.calls)
        sel, fc = result["selector"], result["selector"]["first_call"]
        rules["runs"][run_key]["benchmarks"][name] = {"selector": sel, "rows": result["rows"]}
        checks = [{"input": k, "feature": v["check"][0], "rebuilt": v["check"][1], "recorded": v["check"][2]}
                  for k, v in table.items()]
        data["benchmarks"][name] = {
            "rows": result["rows"], "selector": sel, "inputs": result["inputs"], "rebuilt_against_recorded": checks,
            "samples": {k: {s: f for s, f in v["samples"].items() if s.endswith(f"/{sampled.SAMPLE_SEED}")}
                        for k, v in table.items()}}
        rel = [abs(c["rebuilt"] - c["recorded"]) / max(abs(c["recorded"]), 1e-9) for c in checks]
        spread = [o["fraction"] for o in sel["other_seeds"]], [o["median_fraction"] for o in sel["other_seeds"]]
        summary.append({
            "benchmark": name, "rule": f"{sel['feature_rule']} over host + {sel['sample']} (from {sel['gate_size']} "
                                      f"{sel['min_size']:.3g}), else {sel['host_rule']}"
            if sel["min_size"] is not None else f"{sel['host_rule']} (the sample not worth it)",
            "fraction": fc["fraction"], "median_fraction": fc["median_fraction"], "worst": fc["worst"],
            "median_input": fc["median_input"], "median_run_us": fc["median_run_us"], "pick_us": sel["pick_us"],
            "other draws: fraction": f"{min(spread[0]):.3f}-{max(spread[0]):.3f}",
            "other draws: median": f"{min(spread[1]):.3f}-{max(spread[1]):.3f}",
            "gate with the handoff: fraction / median": "{fraction:.3f} / {median_fraction:.3f}".format(
                **sel["first_call_gate_with_handoff"]),
            "best_fixed": f"{sel['best_fixed']} {sel['best_fixed_fraction']:.3f}",
            "rebuilt vs recorded (median rel. diff)": f"{checks[0]['feature']} {float(np.median(rel)):.2%}",
            "meets": sel["meets"]})
        rows += result["rows"]
        print(name, json.dumps({k: summary[-1][k] for k in ("rule", "fraction", "median_fraction", "meets")}),
              flush=True)
    out = Path(args.out)
    if args.every == 1:  # a rules file only from every input
        rules["sampled_features"] = {"benchmarks": args.benchmarks, "study": "benchmarks/gpu_suite/sampled_features.py",
                                     "commit": git_commit()}
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_suite_h100_first_call_rules_sampled.json").write_text(json.dumps(rules, indent=1))
    table_md = ("## The selector per benchmark\n\n" + markdown_table(summary, list(summary[0]))
                + "\n\n## Which sample (plain trees; training CV chooses)\n\n"
                + markdown_table(rows, ["benchmark", "features", "chosen", "cv_fraction", "test_fraction",
                                        "median_fraction", "worst", "depth"]))
    return write_results(out, "sampled_first_call", data, table=table_md,
                         title="BFS and sort first call over sampled features (offline, recorded H100 times)",
                         notes=NOTES.format(handoff=HANDOFF_US))


NOTES = """Recorded inputs rebuilt on the CPU (NumPy's generator where the H100 run used CuPy's: `rebuilt vs recorded`
compares a full feature; per input in the JSON). Run times recorded on the H100; the pick's cost (`pick_us`: the
feature tree's walk over (object, sampled features), median of this thread's CPU time) timed on this host. The gate:
the pick within 2 % of the run predicted from the training inputs (the features were waited for at fix: no
handoff); `gate with the handoff`: the same selector gated as first_call_rules.py gates ({handoff} us + the pick). `other draws`:
the same rule when the rows are drawn with seeds 1-10 (BFS) or the strided pairs shifted by seeded offsets (sort):
the live inputs are other draws. `meets`: mean and median-input fraction >= 0.95."""


if __name__ == "__main__":
    main()
