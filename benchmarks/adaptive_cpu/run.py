"""Adaptive selection on the CPU: sort, SpMV and histogram, trained on few inputs, tested on many.

For each SPEC in benchmarks/adaptive_cpu/specs: label the training inputs and the (4x larger, disjoint)
test inputs once (interleaved repeats, median), then fit every model kind on the training labels and
score its choices on the test inputs (fraction of oracle, Nitro's buckets, each fixed variant); replay
active learning (BvSB vs random) on the measured test pool; time the dispatch path.

    python -m benchmarks.adaptive_cpu.run            # full run, writes out/adaptive_cpu/adaptive_cpu.*
    python -m benchmarks.adaptive_cpu.run --fast     # seconds: small inputs (CI runs this through a test)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from adaptune.adaptive import CodeVariant, cpu_device, learning_curves
from adaptune.adaptive.dataset import LabelledSet
from adaptune.adaptive.evaluate import score
from adaptune.adaptive.labelling import MeasureOptions, MemoryCache, as_inputs
from adaptune.adaptive.models import MODEL_KINDS, fit_model, pick_kind
from benchmarks.harness import load_file_module, run_metadata, study_parser, write_results

HERE = Path(__file__).parent
SPECS = ("sort", "spmv", "histogram")


def load_spec(name: str, scale: str) -> ModuleType:
    os.environ["ADAPTUNE_BENCH_SCALE"] = scale
    return load_file_module(HERE / "specs" / f"{name}.py", f"adaptive_spec_{name}")


def dispatch_overhead(cv: CodeVariant, features: np.ndarray, calls: int) -> dict[str, float]:
    """p50/p90 of the model query alone, and of a whole cv(...) call with no-op variants and
    constant features (so what remains is adaptune's own overhead). The two are timed alternately,
    call by call, so that both see the same load on a shared machine."""
    state = cv._state
    rows = [np.ascontiguousarray(r) for r in features]
    bare = CodeVariant(cv.name + "-overhead")
    for name in cv.variant_names:
        bare.variant(lambda *a: None, name=name, default=name == cv.default_name)
    values = rows[0].tolist()
    for fname, v in zip(cv.feature_names, values, strict=True):
        bare.feature(lambda *a, v=v: v, name=fname)
    bare.install_model(cv.model_params, cv.model_labels, cv.model_kind)
    predict, clock = state.predict, time.perf_counter_ns
    query, total = np.empty(calls), np.empty(calls)
    for i in range(calls):
        x = rows[i % len(rows)]
        t0 = clock()
        predict(x)
        t1 = clock()
        bare(None)
        t2 = clock()
        query[i], total[i] = t1 - t0, t2 - t1
    q, t = query / 1e3, total / 1e3
    return {"model_query_p50_us": float(np.median(q)), "model_query_p90_us": float(np.percentile(q, 90)),
            "dispatch_p50_us": float(np.median(t)), "dispatch_p90_us": float(np.percentile(t, 90)),
            "calls": calls}


def run_spec(name: str, scale: str, repeats: int, progress: bool,
             kinds: tuple[str, ...] = MODEL_KINDS, db: str | None = None) -> dict[str, Any]:
    module = load_spec(name, scale)
    cv: CodeVariant = module.variant
    # near-tied labels (within 5 %) get as many extra interleaved rounds again
    options = MeasureOptions(repeats=repeats, warmup=1, min_sample_ms=1.0, tie_repeats=repeats)
    cache = MemoryCache() if db is None else cv.open_cache(db)
    t0 = time.perf_counter()
    train = LabelledSet(cv, as_inputs(module.training_inputs()), cache, options, progress=progress,
                        description=f"{name}: train")
    train.label()
    test = LabelledSet(cv, as_inputs(module.test_inputs()), cache, options, labels=train.labels,
                       progress=progress, description=f"{name}: test")
    test.label(grow=False)
    label_s = time.perf_counter() - t0
    costs, runtime = train.costs()
    models: dict[str, Any] = {}
    for kind in kinds:
        t1 = time.perf_counter()
        fitted = fit_model(kind, train.features, costs, runtime)
        fit_s = time.perf_counter() - t1
        cv.install_model(fitted.params, train.labels, fitted.kind,
                         {"inputs": [x.name for x in train.inputs]})
        report = score(cv, test)
        models[kind] = {"mean_fraction_of_oracle": report.mean_fraction_of_oracle, "buckets": report.buckets,
                        "cv_fraction_of_oracle": fitted.cv_fraction, "hyperparameters": fitted.hyper,
                        "fit_s": fit_s}
    auto = pick_kind({k: models[k]["cv_fraction_of_oracle"] for k in kinds})  # what model="auto" picks
    fitted = fit_model(auto, train.features, costs, runtime)
    cv.install_model(fitted.params, train.labels, fitted.kind, {"inputs": [x.name for x in train.inputs]})
    final = score(cv, test)
    calls = 20000 if scale == "full" else 500
    overhead = dispatch_overhead(cv, test.features, calls)
    overhead_kinds = {}
    for kind in kinds:  # every kind's query and dispatch cost, for the record
        fitted_k = fit_model(kind, train.features, costs, runtime, score_repeats=0)
        cv.install_model(fitted_k.params, train.labels, fitted_k.kind, {"inputs": [x.name for x in train.inputs]})
        overhead_kinds[kind] = dispatch_overhead(cv, test.features, calls // 4)
    cv.install_model(fitted.params, train.labels, fitted.kind, {"inputs": [x.name for x in train.inputs]})
    overhead_svm = overhead_kinds.get("svm", overhead)
    # active learning replayed on the measured test pool: 60 % pool, 40 % held out
    rng = np.random.default_rng(0)
    order = rng.permutation(len(test.inputs))
    pool, held = order[: int(0.6 * len(order))], order[int(0.6 * len(order)):]
    t_costs, t_runtime = test.costs()
    oracle = test.oracle()
    curves = learning_curves(test.features[pool], t_costs[pool], t_runtime[pool], test.features[held],
                             t_runtime[held], oracle[held], max_labels=min(50 if scale == "full" else 6, len(pool)),
                             random_repeats=5 if scale == "full" else 2)
    return {
        "spec": name, "variants": cv.variant_names, "features": cv.feature_names,
        "train_inputs": len(train.inputs), "test_inputs": len(test.inputs), "labelling_s": label_s,
        "results_measured_now": train.measured_now + test.measured_now,
        "results_reused": sum(len(r) for r in train.results + test.results) - train.measured_now - test.measured_now,
        "model_auto": auto, "mean_fraction_of_oracle": final.mean_fraction_of_oracle,
        "buckets": final.buckets, "fixed_variants": final.fixed_variants,
        "best_fixed_variant": final.best_fixed_variant,
        "feature_overhead": final.feature_overhead, "models": models,
        "cost_aware_vs_svm": {"svm": models["svm"]["mean_fraction_of_oracle"],
                              "cost": models["cost"]["mean_fraction_of_oracle"]},
        "dispatch_auto_model": overhead, "dispatch_svm": overhead_svm, "dispatch_by_kind": overhead_kinds,
        "learning_curves": curves,
        "oracle_labels": {str(lab): int(c) for lab, c in zip(
            train.labels, np.bincount(np.argmin(t_runtime, axis=1), minlength=len(train.labels)), strict=True)},
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(5 * len(results), 8), squeeze=False)
    for col, r in enumerate(results):
        ax = axes[0, col]
        names = ["model"] + list(r["fixed_variants"])
        vals = [r["mean_fraction_of_oracle"]] + list(r["fixed_variants"].values())
        ax.bar(names, vals, color=["C3"] + ["C0"] * (len(names) - 1))
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{r['spec']}: mean fraction of oracle ({r['model_auto']})")
        ax.tick_params(axis="x", rotation=45)
        ax = axes[1, col]
        for sel, pts in r["learning_curves"].items():
            ax.plot([p["labels"] for p in pts], [p["fraction_of_oracle"] for p in pts], marker=".", label=sel)
        ax.set_xlabel("labelled inputs")
        ax.set_ylabel("hold-out fraction of oracle")
        ax.set_title(f"{r['spec']}: active learning (svm)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(doc: dict[str, Any]) -> str:
    load = doc.get("load_average")
    load_text = f"; 1-minute load average {load[0]:.1f}-{load[1]:.1f} during the run" if load else ""
    lines = [f"# Adaptive selection on the CPU ({doc['scale']} run)", "",
             f"Command: `{doc.get('command', 'python -m benchmarks.adaptive_cpu.run')}`. "
             f"Device: {doc['device']['name']} ({doc['device']['properties'].get('cores')} cores, shared with "
             f"other jobs{load_text}); date {doc['date']}; commit {doc['commit']}; {doc['repeats']} interleaved "
             "repeats, median, and as many again for labels within 5 % of the best. Model = what "
             "`model=\"auto\"` picks: the best repeated-CV fraction of oracle on the training set (ties within "
             "0.005 go to cost-aware, then the fastest query). Test inputs are disjoint from training inputs.", "",
             "| spec | train/test | model | mean fraction of oracle | best fixed variant | svm | cost-aware "
             "| buckets <70/70-80/80-90/90-100 | feature overhead (median share) | query p50 µs | dispatch p50 µs |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        b = r["buckets"]
        best = r["best_fixed_variant"]
        auto = r["dispatch_auto_model"]
        lines.append(
            f"| {r['spec']} | {r['train_inputs']}/{r['test_inputs']} | {r['model_auto']} | "
            f"{r['mean_fraction_of_oracle']:.3f} | {best} {r['fixed_variants'][best]:.3f} | "
            f"{r['models']['svm']['mean_fraction_of_oracle']:.3f} | {r['models']['cost']['mean_fraction_of_oracle']:.3f} | "
            f"{b['<70%']}/{b['70-80%']}/{b['80-90%']}/{b['90-100%']} | "
            f"{100 * r['feature_overhead']['median_share']:.2f}% | {auto['model_query_p50_us']:.2f} | "
            f"{auto['dispatch_p50_us']:.2f} |")
    reused = sum(r.get("results_reused", 0) for r in doc["results"])
    if reused:
        lines += ["", f"{reused} of {reused + sum(r.get('results_measured_now', 0) for r in doc['results'])} "
                  "label measurements were read from `--db`, measured by an earlier run of the same command on "
                  "this machine (same repeats); models, scores and dispatch timings are from this run."]
    lines += ["", "Targets (from the issue): mean fraction of oracle >= 0.95 and above the best fixed variant; "
              "model query p50 <= 5 µs; dispatch overhead without user features p50 <= 10 µs:", "",
              "| spec | >= 0.95 | beats best fixed | query <= 5 µs | dispatch <= 10 µs |", "|---|---|---|---|---|"]
    for r in doc["results"]:
        auto, best = r["dispatch_auto_model"], r["fixed_variants"][r["best_fixed_variant"]]
        ok = ["yes" if c else "**no**" for c in (r["mean_fraction_of_oracle"] >= 0.95,
                                                  r["mean_fraction_of_oracle"] > best,
                                                  auto["model_query_p50_us"] <= 5.0, auto["dispatch_p50_us"] <= 10.0)]
        lines.append(f"| {r['spec']} | " + " | ".join(ok) + " |")
    if all("dispatch_by_kind" in r for r in doc["results"]):
        lines += ["", "Model query / whole dispatch p50 in µs by kind (no-op variants, constant features; "
                  "the auto model's row above is timed with 4x the calls):", "",
                  "| spec | " + " | ".join(doc["models"]) + " |", "|---|" + "---|" * len(doc["models"])]
        for r in doc["results"]:
            lines.append(f"| {r['spec']} | " + " | ".join(
                f"{r['dispatch_by_kind'][k]['model_query_p50_us']:.1f} / {r['dispatch_by_kind'][k]['dispatch_p50_us']:.1f}"
                for k in doc["models"]) + " |")
    lines += ["", "Per model kind (test mean fraction of oracle):", "",
              "| spec | " + " | ".join(doc["models"]) + " |", "|---|" + "---|" * len(doc["models"])]
    for r in doc["results"]:
        lines.append(f"| {r['spec']} | " + " | ".join(f"{r['models'][k]['mean_fraction_of_oracle']:.3f}"
                                                       for k in doc["models"]) + " |")
    lines += ["", "Active learning (hold-out fraction of oracle after N labels, BvSB vs random):", ""]
    for r in doc["results"]:
        b = {p["labels"]: p["fraction_of_oracle"] for p in r["learning_curves"]["bvsb"]}
        rd = {p["labels"]: p["fraction_of_oracle"] for p in r["learning_curves"]["random"]}
        pts = [n for n in sorted(b) if n in rd][:: max(1, len(b) // 6)]
        lines.append(f"- {r['spec']}: " + ", ".join(f"{n}: {b[n]:.3f} vs {rd[n]:.3f}" for n in pts))
    lines += ["", "Plot: `adaptive_cpu.png`. Raw numbers: `adaptive_cpu.json`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = study_parser("adaptive_cpu", __doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="small inputs, few repeats (CI; also --profile smoke)")
    ap.add_argument("--specs", nargs="*", default=list(SPECS))
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--render", type=Path, default=None, help="only re-write the markdown of this JSON")
    ap.add_argument("--db", type=Path, default=None,
                    help="SQLite results store: labels measured once survive a re-run (default: in memory)")
    args = ap.parse_args(argv)
    if args.render is not None:
        doc = json.loads(args.render.read_text())
        args.render.with_suffix(".md").write_text(markdown(doc))
        return 0
    scale = "fast" if args.fast or args.profile == "smoke" else "full"
    repeats = args.repeats or (3 if args.fast else 7)
    kinds = MODEL_KINDS if scale == "full" else ("svm", "tree", "cost")
    db = None if args.db is None else str(args.db.resolve())
    results = []
    command = "python -m benchmarks.adaptive_cpu.run " + " ".join(argv if argv is not None else sys.argv[1:])
    loads = [os.getloadavg()[0]]
    for name in args.specs:
        results.append(run_spec(name, scale, repeats, not args.no_progress, kinds, db))
        loads.append(os.getloadavg()[0])
        write(results, scale, repeats, kinds, args.out, command, (min(loads), max(loads)))
    print(markdown(write(results, scale, repeats, kinds, args.out, command, (min(loads), max(loads)))))
    return 0


def write(results: list[dict[str, Any]], scale: str, repeats: int, kinds: tuple[str, ...], out: Path,
          command: str = "", load_average: tuple[float, float] | None = None) -> dict:
    """Write JSON, markdown and plot for the specs done so far (a crash later loses nothing)."""
    device = cpu_device().to_dict()
    meta = run_metadata(device=device["name"])
    doc = {"scale": scale, "repeats": repeats, "device": device, "python": meta["python"], "date": meta["date"],
           "commit": meta["commit"], "models": list(kinds), "command": command.strip(),
           "load_average": load_average, "results": results, "metadata": meta}
    stem = "adaptive_cpu" if scale == "full" else "adaptive_cpu_fast"
    write_results(out, stem, doc, table=markdown(doc))
    plot(results, Path(out) / f"{stem}.png")
    return doc


if __name__ == "__main__":
    sys.exit(main())
