"""First-call selection of the NDP computations with features prefetched when the inputs are fixed (issue 24).

    python -m benchmarks.ndp.prefetched                                      # offline -> out/ndp/ndp_prefetched_offline.*
    python -m benchmarks.ndp.prefetched --live --device cuda                 # on a GPU -> out/ndp/ndp_prefetched_h100.*
    python -m benchmarks.ndp.prefetched --live --device opencl --scale 0.04  # the live part's pilot on PoCL

The selector is ``adaptune.lang.ndp.prefetched.PrefetchedSelector``: ``fix`` when the inputs are bound starts
the row-spread features (a side stream on CUDA), the host finishes them and the full rule's pick as they land,
and a call is a gate: that pick once it is there, else the host rule over sizes. Both rules are fitted on the
recorded H100 run's training inputs only (``RECORDED``): the host rule is the distilled tree over the sizes
(``Program.n_host_features``), the full rule the distilled tree over all features where its cross-validated
fraction of oracle on the training inputs reaches 0.95, else the ``cost`` model (auto's choice in that run).

Offline: each path's fraction of oracle on the recorded test inputs, and the gate's host cost timed here (real
Programs, arrays standing in with the median test input's sizes; fastest of 7 loops). Live: at the median test
input (by the landed path's recorded run time) rebuilt on the device, every label timed (CUDA events), then
``repeats`` times: fix, a call right after it (before the features land, honestly: the host rule unless they
were already there), wait until they land, a call then; each call's host cost and the chosen label's fraction
of oracle at that input.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.adaptive.models import fit_model
from adaptune.kernels import distilled
from adaptune.lang.ndp.prefetched import PrefetchedSelector
from benchmarks.harness import (
    device_tag,
    fastest_us,
    markdown_table,
    parse_study_args,
    run_metadata,
    study_parser,
    write_results,
)
from benchmarks.ndp import run as ndp_run

RECORDED = Path("benchmarks/ndp/results/ndp_h100.json")
COMPUTATIONS = ("spmv", "segreduce", "scan", "compact")
BUDGET = 0.05  # selection share of the median run (issue 24)
TARGET = 0.95  # mean fraction of oracle
COMPUTATION = {"spmv": ndp_run.spmv, "segreduce": ndp_run.row_sums, "scan": ndp_run.exclusive_scan,
               "compact": ndp_run.compact}


# ------------------------------------------------------------------------------------------- rules


def recorded(doc: dict[str, Any], name: str, keep: set[str] | None = None
             ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(labels, train features, train times, test features, test times) of one recorded computation
    (``keep``: only these labels, for a device that lacks some)."""
    b = doc["benchmarks"][name]
    labels = [lab["label"] if isinstance(lab, dict) else lab for lab in (b.get("labels") or b["names"])]
    labels = [lab for lab in labels if keep is None or lab in keep]

    def matrix(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        x = np.array([r["features"] for r in records], float)
        c = np.array([[r["gen_ms"].get(k) if r["gen_ms"].get(k) is not None else np.inf for k in labels]
                      for r in records], float)
        return x, c

    return (labels, *matrix(b["records"]["train"]), *matrix(b["records"]["test"]))


def fit_rules(labels: list[str], x_train: np.ndarray, t_train: np.ndarray, n_host: int) -> dict[str, Any]:
    """The host tree over the first ``n_host`` features and the full rule (see the module docstring)."""
    host = distilled.distil(x_train[:, :n_host], t_train, labels)
    tree = distilled.distil(x_train, t_train, labels)
    out = {"host": host["tree"], "host_cv": host["cv_fraction_of_oracle"], "host_depth": host["max_depth"],
           "tree_cv": tree["cv_fraction_of_oracle"]}
    if n_host == x_train.shape[1] or tree["cv_fraction_of_oracle"] >= TARGET:
        out.update(full=tree["tree"], full_kind="tree", full_cv=tree["cv_fraction_of_oracle"])
    else:
        cost = fit_model("cost", x_train, t_train, t_train)
        out.update(full=cost.params, full_kind="cost", full_cv=float(cost.cv_fraction or 0.0))
    return out


def picks(sel: PrefetchedSelector, x: np.ndarray, n_host: int) -> tuple[list[str], list[str]]:
    """Per recorded input: the host rule's label and the full rule's (what the gate returns on either path)."""
    return [sel.pick_host(list(r[:n_host])) for r in x], [sel.pick_full(list(r)) for r in x]


def fraction(times: np.ndarray, labels: list[str], chosen: list[str], extra_ms: float = 0.0) -> np.ndarray:
    """Per input: best label's time / (chosen label's time + ``extra_ms``)."""
    best = np.min(times, axis=1)
    got = times[np.arange(len(times)), [labels.index(c) for c in chosen]]
    return np.where(np.isfinite(got), best / (got + extra_ms), 0.0)


def median_index(times: np.ndarray, labels: list[str], chosen: list[str]) -> int:
    """The median test input by the selector's own run time (the issue's 'median run')."""
    run_ms = times[np.arange(len(times)), [labels.index(c) for c in chosen]]
    return int(np.argsort(run_ms)[len(run_ms) // 2])


def labels_of(b: ndp_run.Bench, name: str, prog: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """label -> (variant, policy) as the recorded run named them."""
    if name == "spmv":
        return {lab: (v, p) for lab, v, p, _ in ndp_run.spmv_labels(b.cuda)}
    if name == "segreduce":
        return {lab: (v, p) for lab, v, p in ndp_run.seg_labels(b.cuda)}
    return {lab: (prog.default_variant, p) for lab, p in ndp_run.flat_labels(prog, name)}


def selector(b: ndp_run.Bench, doc: dict[str, Any], name: str) -> tuple[Any, PrefetchedSelector, dict[str, Any],
                                                                          tuple[np.ndarray, ...], list[str]]:
    """The computation's Program on this device, its selector with rules fitted on the recorded training
    inputs, the fit's description, the recorded matrices and labels."""
    prog = COMPUTATION[name].generate(b.dev, reuse_outputs=True)
    available = labels_of(b, name, prog)
    labels, xtr, ttr, xte, tte = recorded(doc, name, set(available))
    fit = fit_rules(labels, xtr, ttr, prog.n_host_features)
    sel = PrefetchedSelector(prog, {lab: available[lab] for lab in labels}, fit["host"], fit["full"])
    return prog, sel, fit, (xtr, ttr, xte, tte), labels


# ------------------------------------------------------------------------------------------ offline


def stand_in(name: str, record: dict[str, Any]) -> tuple[Any, ...]:
    """Host arrays with a recorded input's sizes (no memory behind them): what the gate reads is sizes and the
    identity of the fixed array."""
    def sized(n: int, dtype: Any) -> np.ndarray:
        return np.broadcast_to(np.zeros(1, dtype), (int(n),))

    if name == "spmv":
        nnz, rows = record["nnz"], record["n_rows"]
        return (sized(nnz, np.float32), sized(nnz, np.int32), sized(rows + 1, np.int32), sized(rows, np.float32))
    if name == "segreduce":
        return sized(record["elements"], np.float32), sized(record["rows"] + 1, np.int32)
    return (sized(record["n"], np.int32 if name == "scan" else np.float32),)


def offline(b: ndp_run.Bench, doc: dict[str, Any], names: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        prog, sel, fit, (_, _, xte, tte), labels = selector(b, doc, name)
        n_host = prog.n_host_features
        host_picks, full_picks = picks(sel, xte, n_host)
        med = median_index(tte, labels, full_picks)
        run_ms = float(tte[med, labels.index(full_picks[med])])
        arrays = stand_in(name, doc["benchmarks"][name]["records"]["test"][med])
        sel.forget(*arrays)
        host_us = fastest_us(lambda a=arrays, s=sel: s.select(*a))
        sel.fix(*arrays)  # host arrays: finished at once (the pick included)
        landed_us = fastest_us(lambda a=arrays, s=sel: s.select(*a))
        old = doc["benchmarks"][name]
        rows.append({
            "computation": name, "n_train": len(old["records"]["train"]), "n_test": len(tte), "labels": len(labels),
            "host_rule": f"tree depth {fit['host_depth']} over {n_host} size feature(s)", "host_cv": fit["host_cv"],
            "full_rule": fit["full_kind"], "full_cv": fit["full_cv"], "distilled_full_tree_cv": fit["tree_cv"],
            "fraction_features_landed": float(fraction(tte, labels, full_picks).mean()),
            "fraction_not_landed": float(fraction(tte, labels, host_picks).mean()),
            "first_call_fraction_landed": float(fraction(tte, labels, full_picks, landed_us * 1e-3).mean()),
            "median_input_run_ms": run_ms, "gate_us_landed": landed_us, "gate_us_not_landed": host_us,
            "share_landed": landed_us * 1e-3 / run_ms, "share_not_landed": host_us * 1e-3 / run_ms,
            "old_fraction": old["mean_fraction_of_oracle"],
            "old_share": old["feature_cost"]["features_share_of_median_run"],
            "median_test_index": med,
        })
        r = rows[-1]
        r["meets_landed"] = r["share_landed"] <= BUDGET and r["fraction_features_landed"] >= TARGET
        r["meets_not_landed"] = r["share_not_landed"] <= BUDGET and r["fraction_not_landed"] >= TARGET
    return rows


OFFLINE_COLUMNS = ["computation", "full_rule", "fraction_features_landed", "fraction_not_landed", "old_fraction",
                   "median_input_run_ms", "gate_us_landed", "share_landed", "gate_us_not_landed", "share_not_landed",
                   "old_share", "meets_landed", "meets_not_landed"]


# --------------------------------------------------------------------------------------------- live


def median_input(b: ndp_run.Bench, name: str, index: int, scale: float, seed: int) -> tuple[Any, ...]:
    """The ``index``-th test input of the recorded run's generator, rebuilt on this device."""
    if name == "spmv":
        _, test = ndp_run.spmv_specs(b, scale, seed)
        args, _, _ = ndp_run.build_matrix(b, test[min(index, len(test) - 1)])
        return args
    if name == "segreduce":
        test = [p for part, _, p in ndp_run.seg_inputs(b, scale, seed) if part == "test"]
        family, nnz, avg, input_seed = test[min(index, len(test) - 1)]
        values, offsets, _ = ndp_run.ragged(b, family, nnz, avg, input_seed)
        return (values, b.xp.asarray(offsets)) if b.cuda else (b.upload(values), b.upload(offsets))
    test = [p for part, _, p in ndp_run.flat_inputs(b, scale, seed, name) if part == "test"]
    x, _ = ndp_run.flat_data(b, name, *test[min(index, len(test) - 1)])
    return (x,)


def wait_landed(pending: Any, limit_s: float = 1.0) -> float | None:
    """Seconds until the pending pick is on the host (polled, giving the GIL to the finishing thread); None
    when it did not land within ``limit_s``."""
    t0 = time.perf_counter()
    while pending.value is None:
        if time.perf_counter() - t0 > limit_s:
            return None
        time.sleep(0)  # gives the GIL to the finishing thread
    return time.perf_counter() - t0


def live_one(b: ndp_run.Bench, doc: dict[str, Any], name: str, scale: float, seed: int, repeats: int
             ) -> dict[str, Any]:
    prog, sel, fit, (_, _, xte, tte), labels = selector(b, doc, name)
    host_picks, full_picks = picks(sel, xte, prog.n_host_features)
    med = median_index(tte, labels, full_picks)
    arrays = median_input(b, name, med, scale, seed)
    ms = b.time_many({lab: prog.bind(v, *arrays, **p) for lab, (v, p) in sel.labels.items()})
    best = min(ms.values())
    wait_landed(sel.fix(*arrays))  # warm: the spread's kernels compile on first use
    sel.forget(*arrays)
    samples = []
    for _ in range(repeats):
        b.dev.synchronize()
        t0 = time.perf_counter()
        pending = sel.fix(*arrays)
        t1 = time.perf_counter()
        ready = pending.value is not None
        early = sel.select(*arrays)
        t2 = time.perf_counter()
        landed_s = wait_landed(pending)
        t3 = time.perf_counter()
        late = sel.select(*arrays)
        t4 = time.perf_counter()
        samples.append({"fix_us": (t1 - t0) * 1e6, "early_us": (t2 - t1) * 1e6, "early_label": early,
                        "landed_before_early_call": ready, "landed_after_fix_us": None if landed_s is None else
                        (t3 - t0) * 1e6, "late_us": (t4 - t3) * 1e6, "late_label": late,
                        "late_used_features": sel.used_features(*arrays)})
        sel.forget(*arrays)
    host_loop_us = fastest_us(lambda: sel.select(*arrays), 500)
    wait_landed(sel.fix(*arrays))
    landed_loop_us = fastest_us(lambda: sel.select(*arrays), 500)
    sel.forget(*arrays)

    def med_of(key: str) -> float | None:
        vals = [s[key] for s in samples if s[key] is not None]
        return float(np.median(vals)) if vals else None

    late_label = max(set(s["late_label"] for s in samples), key=[s["late_label"] for s in samples].count)
    early_label = max(set(s["early_label"] for s in samples), key=[s["early_label"] for s in samples].count)
    run_ms = ms[late_label]
    out = {"computation": name, "median_test_index": med, "label_ms": ms, "oracle_label": min(ms, key=ms.get),
           "full_rule": fit["full_kind"], "label_landed": late_label, "label_not_landed": early_label,
           "fraction_landed_at_input": best / run_ms, "fraction_not_landed_at_input": best / ms[early_label],
           "run_ms": run_ms, "first_call_us_landed": med_of("late_us"), "first_call_us_not_landed": med_of("early_us"),
           "loop_us_landed": landed_loop_us, "loop_us_not_landed": host_loop_us, "fix_us": med_of("fix_us"),
           "landed_after_fix_us": med_of("landed_after_fix_us"),
           "landed_share_of_repeats": float(np.mean([s["late_used_features"] for s in samples])),
           "landed_before_early_call_share": float(np.mean([s["landed_before_early_call"] for s in samples])),
           "samples": samples}
    out["share_landed"] = out["first_call_us_landed"] * 1e-3 / run_ms
    out["share_not_landed"] = out["first_call_us_not_landed"] * 1e-3 / ms[early_label]
    out["recorded_test_fraction_landed"] = float(fraction(tte, labels, full_picks).mean())
    out["recorded_test_fraction_not_landed"] = float(fraction(tte, labels, host_picks).mean())
    return out


LIVE_COLUMNS = ["computation", "full_rule", "run_ms", "first_call_us_landed", "loop_us_landed", "share_landed",
                "fraction_landed_at_input", "first_call_us_not_landed", "loop_us_not_landed", "share_not_landed",
                "fraction_not_landed_at_input", "fix_us", "landed_after_fix_us", "landed_share_of_repeats",
                "landed_before_early_call_share"]


# --------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    p = study_parser("ndp", __doc__.splitlines()[0])
    p.add_argument("--live", action="store_true", help="measure on the device at each median test input")
    p.add_argument("--device", choices=("cuda", "opencl"), default="opencl")
    p.add_argument("--scale", type=float, default=1.0, help="live: the recorded run's input scale (1.0 on CUDA)")
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--parts", nargs="+", default=list(COMPUTATIONS), choices=COMPUTATIONS)
    p.add_argument("--recorded", default=str(RECORDED))
    args = parse_study_args(p, argv, smoke={"scale": 0.04, "repeats": 5, "parts": ["segreduce", "scan"]})
    run(args)


def run(args: argparse.Namespace) -> Path:
    b = ndp_run.Bench(args.device)
    doc = json.loads(Path(args.recorded).read_text())
    device = ndp_run.device_description(b)
    data: dict[str, Any] = {"recorded": args.recorded, "recorded_commit": doc.get("commit"),
                            "budget": BUDGET, "target_fraction": TARGET, "device": device}
    if not args.live:
        data["rows"] = offline(b, doc, tuple(args.parts))
        return write_results(args.out, "ndp_prefetched_offline", data, table=markdown_table(data["rows"], OFFLINE_COLUMNS),
                             title="NDP first-call selection with prefetched features, offline",
                             notes=OFFLINE_NOTES.format(recorded=args.recorded, host=run_metadata()["host"]))
    data.update(scale=args.scale, seed=args.seed, repeats=args.repeats, rows=[])
    name_tag = f"ndp_prefetched_{device_tag(device['name'])}"
    for name in args.parts:
        t0 = time.perf_counter()
        data["rows"].append(live_one(b, doc, name, args.scale, args.seed, args.repeats))
        b.free()
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
        path = write_results(args.out, name_tag, data, table=markdown_table(data["rows"], LIVE_COLUMNS),
                             title=f"NDP first-call selection with prefetched features on {device['name']}",
                             notes=LIVE_NOTES)
    return path


OFFLINE_NOTES = """Rules fitted on the training inputs of {recorded} only; fractions of oracle over its test inputs
(recorded times). `landed`: the prefetched features and the full rule's pick are on the host (the gate returns
the pick); `not_landed`: the call came before they did (the host tree over sizes). Gate costs timed on {host}
(real Programs, stand-in arrays with the median test input's sizes; fastest of 7 loops of 2000 calls); the
share is over the recorded run time of the landed path's label at the median test input. `old`: the recorded
run's selector (auto model, features computed at the call)."""

LIVE_NOTES = """`share_*`: the call's host cost over that path's label's run at the input. At each computation's median test input (the offline analysis's, rebuilt on the device): every label
timed round-robin (CUDA events); `first_call_us_*`: medians over the repeats of one `select` right after `fix`
(not_landed; `landed_before_early_call_share` says how often they were already there) and one after the pick
landed (landed); `loop_us_*`: the fastest of 7 loops of 500 calls; `landed_after_fix_us`: from `fix` until the
pick was on the host (polled, yielding the GIL between reads); `fix_us`: the host cost of `fix` (at binding, not at the call)."""


if __name__ == "__main__":
    main()
