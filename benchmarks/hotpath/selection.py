"""Cost-aware selection on fresh inputs, re-analysed from recorded H100 runs (no GPU needed).

A selector pays for its features on an input's first call. Device features (a launch, a copy, a sync)
cost 50-500 us from Python; the median test inputs run 20-400 us, so at the median input the 2 % (GPU
suite) and 5 % (NDP) budgets leave 0.4-20 us: only host metadata (sizes the objects already hold) fit.
The cascade here is cheap-first and Nitro-like: a cheap model over host metadata always runs; the
expensive device features (and the full model) are asked for only when the *predicted* run time (a log-log
least-squares fit on the training inputs' fastest times, from the same host metadata) times the budget
covers the *predicted* feature cost (the training inputs' median). Everything is fitted on training
inputs only and scored on the recorded test inputs with each study's own fraction-of-oracle definition.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import compile_predictor
from adaptune.adaptive.models import FittedModel, choose_model, fit_model, fraction_of_oracle, margins
from adaptune.kernels import distilled, features
from adaptune.kernels.prefetched import PrefetchedDispatch
from benchmarks.gpu_suite.reanalysis import stand_in
from benchmarks.gpu_suite.run import LIBRARY_DEFAULT, cost_matrices
from benchmarks.harness import fastest_us

GPU_SUITE_RAW = Path("benchmarks/gpu_suite/results/history/gpu_suite_h100_round3_raw.json")  # what the reanalysis read
GPU_SUITE_ROUND4_RAW = Path("benchmarks/gpu_suite/results/gpu_suite_h100_raw.json")  # round 4 (c899c09)
# Reading prefetched features once ready, recorded on an H100 (wait + host finish, no model;
# gpu_dispatch_options_h100.json at the median inputs; sort: not recorded)
DISPATCH_OPTIONS = Path("benchmarks/gpu_suite/results/gpu_dispatch_options_h100.json")
GPU_SUITE_REANALYSIS = Path("benchmarks/gpu_suite/results/gpu_suite_h100_reanalysis.json")
NDP = Path("benchmarks/ndp/results/ndp_h100.json")
BUDGET = {"gpu_suite": 0.02, "ndp": 0.05}


def run_time_model(x_train: np.ndarray, best_train: np.ndarray) -> Any:
    """log(fastest time) ~ linear in log(1 + host metadata): what the gate predicts a run costs."""
    def design(x: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(x)), np.log1p(np.abs(np.asarray(x, float)))])

    coef, *_ = np.linalg.lstsq(design(x_train), np.log(best_train), rcond=None)
    return lambda x: np.exp(design(x) @ coef)


def cascade(cheap: np.ndarray, full: np.ndarray, predicted_ms: np.ndarray, feature_ms: float,
            budget: float) -> tuple[np.ndarray, np.ndarray]:
    """The cascade's choice per input and whether it paid for the device features."""
    ask = predicted_ms * budget >= feature_ms
    return np.where(ask, full, cheap), ask


CHEAP_KINDS = ("cost", "tree", "svm", "knn")  # single compiled models: a query costs about a microsecond


def cheap_auto(x_train: np.ndarray, cost_train: np.ndarray) -> FittedModel:
    """The host-metadata model chosen by repeated cross-validation on the training inputs only (no test
    input decides which kind is kept)."""
    fitted, _ = choose_model(x_train, cost_train, cost_train, kinds=CHEAP_KINDS)
    return fitted


def margin_gate(model: FittedModel, x_train: np.ndarray, cost_train: np.ndarray, full_train: np.ndarray,
                feature_ms_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, float]:
    """Ask for the device features where the cheap model is unsure (its best-vs-second margin below a
    threshold). The threshold is the one that maximises the first-call fraction of oracle (features paid)
    on the training inputs; returns the test inputs' ask mask and the threshold."""
    cheap_tr = model.predict(x_train)
    m_tr, m_te = margins(model, x_train), margins(model, x_test)
    n = len(cost_train)
    best = np.nanmin(np.where(np.isfinite(cost_train), cost_train, np.nan), axis=1)
    run_cheap = cost_train[np.arange(n), cheap_tr]
    run_full = cost_train[np.arange(n), full_train] + feature_ms_train
    top, threshold = -np.inf, -np.inf  # -inf: never ask
    for t in np.concatenate([[-np.inf], np.unique(m_tr)]):
        ask = m_tr <= t
        score = float(np.nanmean(best / np.where(ask, run_full, run_cheap)))
        if score > top + 1e-9:
            top, threshold = score, float(t)
    return m_te <= threshold, threshold


def gate_bound(runtime: np.ndarray, cheap: np.ndarray, full: np.ndarray, cheap_us: float,
               feature_us: np.ndarray) -> float:
    """The first-call fraction of oracle of a perfect gate (per input, whichever of the cheap choice and the
    full model with its features paid is better): no choice of *when* to compute the features beats it."""
    n = len(runtime)
    best = np.nanmin(np.where(np.isfinite(runtime), runtime, np.nan), axis=1)
    cheap_first = best / (runtime[np.arange(n), cheap] + cheap_us * 1e-3)
    full_first = best / (runtime[np.arange(n), full] + (cheap_us + feature_us) * 1e-3)
    return float(np.nanmean(np.maximum(cheap_first, full_first)))


def affordable_feature_us(runtime: np.ndarray, cheap: np.ndarray, full: np.ndarray, predicted_ms: np.ndarray,
                          cheap_us: float, budget: float) -> float | None:
    """The largest device-feature cost (us, a sweep from 0.1 us to 1 ms) at which the cascade reaches a mean
    fraction of oracle >= 0.95 with the selection at its median input within the budget: the cost a feature
    implementation must reach for one selector to meet both targets (None: none does)."""
    n = len(runtime)
    best = None
    for c_us in np.logspace(-1, 3, 81):
        chosen, asked = cascade(cheap, full, predicted_ms, c_us * 1e-3, budget)
        run_ms = runtime[np.arange(n), chosen]
        median = int(np.argsort(run_ms)[n // 2])
        share = (cheap_us + (c_us if asked[median] else 0.0)) * 1e-3 / run_ms[median]
        if np.nanmean(fraction_of_oracle(runtime, chosen)) >= 0.95 and share <= budget:
            best = float(c_us)
    return best


def summarise(name: str, runtime: np.ndarray, cheap: np.ndarray, full: np.ndarray, chosen: np.ndarray,
              asked: np.ndarray, cheap_us: float, feature_us_per_input: np.ndarray, budget: float,
              old: dict[str, Any], predicted_ms: np.ndarray) -> dict[str, Any]:
    n = len(runtime)
    run_ms = runtime[np.arange(n), chosen]
    median = int(np.argsort(run_ms)[n // 2])  # the median test input by the selector's own run time
    paid_us = cheap_us + np.where(asked, feature_us_per_input, 0.0)
    share = paid_us * 1e-3 / run_ms
    frac = fraction_of_oracle(runtime, chosen)
    # end to end on a first call: features paid count against the selector
    best = np.nanmin(np.where(np.isfinite(runtime), runtime, np.nan), axis=1)
    first_call = best / (run_ms + paid_us * 1e-3)
    row = {
        "benchmark": name, "n_test": n,
        "fraction_cheap_only": float(np.nanmean(fraction_of_oracle(runtime, cheap))),
        "fraction_full_model": float(np.nanmean(fraction_of_oracle(runtime, full))),
        "fraction_cascade": float(np.nanmean(frac)),
        "fraction_cascade_first_call_incl_features": float(np.nanmean(first_call)),
        "inputs_with_device_features": int(asked.sum()),
        "median_input_run_ms": float(run_ms[median]),
        "median_input_selection_us": float(paid_us[median]),
        "share_at_median_input": float(share[median]),
        "budget": budget, "old": old,
        "affordable_feature_us": affordable_feature_us(runtime, cheap, full, predicted_ms, cheap_us, budget),
    }
    row["gate_bound_first_call"] = gate_bound(runtime, cheap, full, cheap_us, feature_us_per_input)
    row["meets_share"] = row["share_at_median_input"] <= budget
    row["meets_fraction_0.95"] = row["fraction_cascade_first_call_incl_features"] >= 0.95
    return row


def gpu_suite(margin: bool = True) -> list[dict[str, Any]]:
    raw = json.loads(GPU_SUITE_RAW.read_text())
    re = json.loads(GPU_SUITE_REANALYSIS.read_text())["runs"]["gpu_suite_h100"]["benchmarks"]
    rows = []
    for name, b in raw["benchmarks"].items():
        names, default, train, test = b["variants"], b["default"], b["train"], b["test"]
        _, rt_train = cost_matrices(train, names, default)
        _, runtime = cost_matrices(test, names, default)
        x_train = np.array([distilled.metadata_from_info(name, r["info"]) for r in train], float)
        x_test = np.array([distilled.metadata_from_info(name, r["info"]) for r in test], float)
        tree = distilled.distil(x_train, rt_train, names)["tree"]
        cheap = np.array([names.index(distilled.predict(tree, row)) for row in x_test])
        full = np.array([names.index(r["chosen"]) for r in test])  # the run's full model, as recorded
        predict_ms = run_time_model(x_train, np.nanmin(rt_train, axis=1))
        feature_ms = float(np.median([r["feature_ms"] for r in train]))
        predicted = predict_ms(x_test)
        chosen, asked = cascade(cheap, full, predicted, feature_ms, BUDGET["gpu_suite"])
        bind_us = re[name]["this_host"]["distilled_bind_us_at_median_input"]  # recorded on the CPU host
        full_us = np.array([1e3 * r["dispatch_ms"] for r in test])  # features + model, recorded on the H100
        old = {"distilled_fraction": re[name]["distilled"]["fraction"],
               "full_model_fraction": re[name]["adaptive_all_features"]["fraction"],
               "full_model_first_call_share": float(np.median(full_us) * 1e-3 / re[name]["median_input_run_ms"])}
        rows.append({"selector": "tree + budget gate",
                     **summarise(f"gpu_suite/{name}", runtime, cheap, full, chosen, asked, bind_us, full_us,
                                 BUDGET["gpu_suite"], old, predicted)})
        f_train = np.array([r["model_features"] for r in train], float)
        f_test = np.array([r["model_features"] for r in test], float)
        h_train = np.log1p(np.abs(np.array([r["model_host_features"] for r in train], float)))
        h_test = np.log1p(np.abs(np.array([r["model_host_features"] for r in test], float)))
        if margin:
            rows.append(margin_row(f"gpu_suite/{name}", h_train, h_test, f_train, f_test, rt_train, runtime,
                                   np.array([r["feature_ms"] for r in train]), full_us, bind_us,
                                   BUDGET["gpu_suite"], old, predicted))
    return rows


def margin_row(name: str, h_train: np.ndarray, h_test: np.ndarray, f_train: np.ndarray, f_test: np.ndarray,
               cost_train: np.ndarray, runtime: np.ndarray, feature_ms_train: np.ndarray, feature_us_test: np.ndarray,
               metadata_us: float, budget: float, old: dict[str, Any], predicted: np.ndarray) -> dict[str, Any]:
    """The uncertainty-gated cascade: cheap and full models each chosen by cross-validation on the training
    inputs, device features asked for where the cheap model's margin is below the training-chosen threshold."""
    cheap_model = cheap_auto(h_train, cost_train)
    full_model, _ = choose_model(f_train, cost_train, cost_train, kinds=CHEAP_KINDS)
    cheap, full = cheap_model.predict(h_test), full_model.predict(f_test)
    asked, threshold = margin_gate(cheap_model, h_train, cost_train, full_model.predict(f_train),
                                   feature_ms_train, h_test)
    query_us = predictor_us(cheap_model, h_test)
    row = summarise(name, runtime, cheap, full, np.where(asked, full, cheap), asked, metadata_us + query_us,
                    feature_us_test, budget, old, predicted)
    return {"selector": f"cv {cheap_model.kind} / cv {full_model.kind} + margin gate",
            **row, "margin_threshold": threshold, "cheap_query_us": query_us}


def predictor_us(model: FittedModel, x: np.ndarray) -> float:
    """Microseconds of one compiled query on this host, the fastest of 7 batches (the shared host's load only
    adds to it): the cheap model's share of a first call."""
    predict = compile_predictor(model.params)
    row = x[len(x) // 2]
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(200):
            predict(row)
        samples.append((time.perf_counter() - t0) / 200 * 1e6)
    return float(np.min(samples))


def ndp(margin: bool = True) -> list[dict[str, Any]]:
    doc = json.loads(NDP.read_text())
    rows = []
    for name in ("spmv", "segreduce"):
        b = doc["benchmarks"][name]
        labels = [lab["label"] if isinstance(lab, dict) else lab for lab in (b.get("labels") or b["names"])]
        train, test = b["records"]["train"], b["records"]["test"]

        def matrix(records: list[dict[str, Any]], labels: list[str] = labels) -> tuple[np.ndarray, np.ndarray]:
            x = np.array([r["features"] for r in records], float)
            c = np.array([[r["gen_ms"].get(k) if r["gen_ms"].get(k) is not None else np.inf for k in labels]
                          for r in records], float)
            return x, c

        xtr, ctr = matrix(train)
        xte, cte = matrix(test)
        models = {}
        for key, cols in (("cheap", slice(0, 2)), ("full", slice(None))):
            fitted = fit_model("svm", xtr[:, cols], ctr, ctr)
            predict = compile_predictor(fitted.params)
            models[key] = np.array([int(predict(x)) for x in xte[:, cols]])
        predict_ms = run_time_model(np.exp2(xtr[:, :2]), ctr.min(axis=1))
        feature_ms = float(np.median([r["feature_us"] for r in train])) * 1e-3
        predicted = predict_ms(np.exp2(xte[:, :2]))
        chosen, asked = cascade(models["cheap"], models["full"], predicted, feature_ms, BUDGET["ndp"])
        cheap_us = [r["feature_cheap_us"] for r in test if "feature_cheap_us" in r]
        cheap_cost = float(np.median(cheap_us)) if cheap_us else float(
            np.median([r["feature_cheap_us"] for r in doc["benchmarks"]["spmv"]["records"]["test"]]))
        fc = b["feature_cost"]
        old = {"fraction": b["mean_fraction_of_oracle"], "features_share_of_median_run":
               fc["features_share_of_median_run"]}
        feature_us = np.array([r["feature_us"] for r in test])
        rows.append({"selector": "svm + budget gate",
                     **summarise(f"ndp/{name}", cte, models["cheap"], models["full"], chosen, asked,
                                 cheap_cost + 1.0,  # + about 1 us for the compiled SVM (measured in the README)
                                 feature_us, BUDGET["ndp"], old, predicted)})
        if margin:
            rows.append(margin_row(f"ndp/{name}", xtr[:, :2], xte[:, :2], xtr, xte, ctr, cte,
                                   np.array([r["feature_us"] for r in train]) * 1e-3, feature_us, cheap_cost,
                                   BUDGET["ndp"], old, predicted))
    return rows


def query_costs(sel: PrefetchedDispatch, args: list[tuple[Any, ...]], values: list[dict[str, float]],
                calls: int = 300, batches: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Per input, microseconds of a first call (``bind``) with nothing fixed (the host tree, the readiness check
    failing) and with the features on the host (the check, the gate, the tree over host metadata and device
    features): the latter as (fix + call) minus fix alone, each the fastest of ``batches`` loops."""
    def fixed_call(a: tuple[Any, ...], v: dict[str, float]) -> None:
        sel.fix(*a, pending=features.Pending.finished(v))
        sel.bind(*a)

    def fix_only(a: tuple[Any, ...], v: dict[str, float]) -> None:
        sel.fix(*a, pending=features.Pending.finished(v))
        sel.forget(*a)

    host = [fastest_us(lambda a=a: sel.bind(*a), calls, batches) for a in args]
    feat = [max(0.0, fastest_us(lambda a=a, v=v: fixed_call(a, v), calls, batches)
                - fastest_us(lambda a=a, v=v: fix_only(a, v), calls, batches)) for a, v in zip(args, values, strict=True)]
    return np.array(host), np.array(feat)


def prefetched(raw_path: Path = GPU_SUITE_ROUND4_RAW, round_name: str = "round 4") -> list[dict[str, Any]]:
    """The prefetched first call (``kernels.prefetched.PrefetchedDispatch``) from a recorded run: both trees and
    the gate fitted on the training inputs only, scored on the test inputs. On a first call whose features
    are on the host (started at fix time, finished as they landed) the selector pays the gate and a tree walk,
    measured here on the CPU host with stand-in objects carrying the recorded metadata (fastest of 7 batches);
    where they are not yet on the host it is the host-metadata tree. The GPU run
    (``benchmarks/gpu_suite/prefetched.py``) must confirm both the timing and that the features are ready."""
    raw = json.loads(raw_path.read_text())
    recorded = json.loads(DISPATCH_OPTIONS.read_text())["inputs"]
    budget = BUDGET["gpu_suite"]
    rows = []
    for name, b in raw["benchmarks"].items():
        names, default, train, test, fnames = b["variants"], b["default"], b["train"], b["test"], b["feature_names"]
        _, rt_train = cost_matrices(train, names, default)
        _, runtime = cost_matrices(test, names, default)
        n = len(test)

        def matrices(records: list[dict[str, Any]], fnames: list[str] = fnames, name: str = name
                     ) -> tuple[np.ndarray, np.ndarray]:
            return (np.array([distilled.metadata_from_info(name, r["info"]) for r in records], float),
                    np.array([[r["features"][k] for k in fnames] for r in records], float))

        (h_train, f_train), (h_test, f_test) = matrices(train), matrices(test)
        fit = distilled.distil_gated(h_train, f_train, rt_train, names, 1.0, budget, name)  # trees; gate below
        sel = PrefetchedDispatch(name, fit["host"]["tree"], fit["features"]["tree"], fnames,
                                 {v: (lambda *a: None) for v in names}, default, min_size=0.0, checks={})
        timed = test[::max(1, n // 15)]  # about 15 test inputs: the trees are shallow, the costs vary little
        host_q, feat_q = query_costs(sel, [stand_in(name, r["info"]) for r in timed],
                                     [dict(r["features"]) for r in timed])
        # one cost per path (the median over those inputs: a single input's difference of two loops is noise)
        read_us = float(np.median(feat_q))
        host_us, feat_us = np.full(n, np.median(host_q)), np.full(n, read_us)
        if fit["min_size"] is not None:  # the gate with the measured cost of the feature path
            gate = distilled.size_gate(h_train[:, distilled.GATE_SIZE[name]], np.nanmin(rt_train, axis=1), read_us,
                                       budget)
            fit["min_size"] = None if gate == np.inf else gate
        host = np.array([names.index(distilled.predict(fit["host"]["tree"], row)) for row in h_test])
        full = np.array([names.index(distilled.predict(fit["features"]["tree"], row))
                         for row in np.column_stack([h_test, f_test])])
        size = h_test[:, distilled.GATE_SIZE[name]]
        limit = np.inf if fit["min_size"] is None else fit["min_size"]
        asked = size >= limit
        chosen = np.where(asked, full, host)
        row = summarise(f"gpu_suite/{name}", runtime, host, full, chosen, asked, 0.0,
                        np.where(asked, feat_us, host_us), budget, {}, np.zeros(n))
        paid_us = np.where(asked, feat_us, host_us)
        run_ms = runtime[np.arange(n), chosen]
        best = np.nanmin(np.where(np.isfinite(runtime), runtime, np.nan), axis=1)
        median = int(np.argsort(run_ms)[n // 2])
        row.update({
            "fraction_cascade_first_call_incl_features": float(np.nanmean(best / (run_ms + paid_us * 1e-3))),
            "median_input_selection_us": float(paid_us[median]),
            "share_at_median_input": float(paid_us[median] * 1e-3 / run_ms[median]),
            "gate_bound_first_call": None, "affordable_feature_us": None,
        })
        row["meets_share"] = row["share_at_median_input"] <= budget
        row["meets_fraction_0.95"] = row["fraction_cascade_first_call_incl_features"] >= 0.95
        # features not on the host in time: the host tree for every input
        not_ready = best / (runtime[np.arange(n), host] + host_us * 1e-3)
        sync = recorded.get(name, {}).get("prefetch_normal_finish_ms")
        sync_row = None
        if sync is not None:  # reading them at the call instead (wait + host finish as recorded on the H100)
            sync_us = 1e3 * sync + read_us
            lim = distilled.size_gate(h_train[:, distilled.GATE_SIZE[name]], np.nanmin(rt_train, axis=1), sync_us,
                                      budget) if fit["min_size"] is not None else np.inf
            ask_s = size >= lim
            ch_s = np.where(ask_s, full, host)
            paid_s = np.where(ask_s, sync_us, host_us)
            run_s = runtime[np.arange(n), ch_s]
            med_s = int(np.argsort(run_s)[n // 2])
            sync_row = {"read_us": sync_us, "inputs_with_features": int(ask_s.sum()),
                        "fraction_first_call": float(np.nanmean(best / (run_s + paid_s * 1e-3))),
                        "share_at_median_input": float(paid_s[med_s] * 1e-3 / run_s[med_s])}
        rows.append({"selector": f"prefetched gate ({round_name})", **row, "source": str(raw_path),
                     "host_tree_query_us_median": float(np.median(host_us)),
                     "feature_tree_query_us_median": read_us,
                     "host_tree": {k: fit["host"][k] for k in ("tree", "max_depth", "min_leaf", "cv_fraction_of_oracle")},
                     "feature_tree": {k: fit["features"][k] for k in ("tree", "max_depth", "min_leaf",
                                                                      "cv_fraction_of_oracle")},
                     "gate_min_size": fit["min_size"], "gate_size": distilled.HOST_METADATA[name][distilled.GATE_SIZE[name]],
                     "fraction_first_call_features_not_ready": float(np.nanmean(not_ready)),
                     "reading_at_the_call_recorded_h100": sync_row,
                     "library_default": LIBRARY_DEFAULT[name]})
    return rows


def analyse(margin: bool = True) -> dict[str, Any]:
    """Every selector's row; ``margin=False`` (the smoke profile) leaves out the cross-validated margin-gate rows
    (round 2: most of the minute this takes)."""
    rows = gpu_suite(margin) + ndp(margin) + prefetched(GPU_SUITE_RAW, "round 3") + prefetched()
    return {"source": {"gpu_suite": str(GPU_SUITE_RAW), "ndp": str(NDP)}, "rows": rows}


COLUMNS = ["benchmark", "selector", "fraction_cheap_only", "fraction_full_model", "fraction_cascade",
           "fraction_cascade_first_call_incl_features", "inputs_with_device_features", "n_test",
           "median_input_run_ms", "median_input_selection_us", "share_at_median_input", "meets_share",
           "meets_fraction_0.95", "gate_bound_first_call", "affordable_feature_us"]
