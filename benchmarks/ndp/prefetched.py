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
from benchmarks.ndp import first_call
from benchmarks.ndp import run as ndp_run

RECORDED = Path("benchmarks/ndp/results/ndp_h100.json")
COMPUTATIONS = ("spmv", "segreduce", "scan", "compact")
COMPUTATION = {"spmv": ndp_run.spmv, "segreduce": ndp_run.row_sums, "scan": ndp_run.exclusive_scan,
               "compact": ndp_run.compact}


# ------------------------------------------------------------------------------------------- rules


def selector(b: ndp_run.Bench, doc: dict[str, Any], name: str) -> tuple[Any, PrefetchedSelector, dict[str, Any],
                                                                          tuple[np.ndarray, ...], list[str]]:
    """The computation's Program on this device, its selector with rules fitted on the recorded training
    inputs, the fit's description, the recorded matrices and labels."""
    prog = COMPUTATION[name].generate(b.dev, reuse_outputs=True)
    available = ndp_run.labels_of(b, name, prog)
    labels, xtr, ttr, xte, tte = first_call.matrices(doc["benchmarks"][name], set(available))
    fit = first_call.fit_rules(labels, xtr, ttr, prog.n_host_features)
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
        host_picks, full_picks = first_call.picks(sel, xte, n_host)
        med = first_call.median_index(tte, labels, full_picks)
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
            "fraction_features_landed": float(first_call.fraction(tte, labels, full_picks).mean()),
            "fraction_not_landed": float(first_call.fraction(tte, labels, host_picks).mean()),
            "first_call_fraction_landed": float(first_call.fraction(tte, labels, full_picks, landed_us * 1e-3).mean()),
            "median_input_run_ms": run_ms, "gate_us_landed": landed_us, "gate_us_not_landed": host_us,
            "share_landed": landed_us * 1e-3 / run_ms, "share_not_landed": host_us * 1e-3 / run_ms,
            "old_fraction": old["mean_fraction_of_oracle"],
            "old_share": old["feature_cost"]["features_share_of_median_run"],
            "median_test_index": med,
        })
        r = rows[-1]
        r["meets_landed"] = r["share_landed"] <= first_call.BUDGET and r["fraction_features_landed"] >= first_call.TARGET
        r["meets_not_landed"] = r["share_not_landed"] <= first_call.BUDGET and r["fraction_not_landed"] >= first_call.TARGET
    return rows


OFFLINE_COLUMNS = ["computation", "full_rule", "fraction_features_landed", "fraction_not_landed", "old_fraction",
                   "median_input_run_ms", "gate_us_landed", "share_landed", "gate_us_not_landed", "share_not_landed",
                   "old_share", "meets_landed", "meets_not_landed"]


# --------------------------------------------------------------------------------------------- live


def live_one(b: ndp_run.Bench, doc: dict[str, Any], name: str, scale: float, seed: int, repeats: int
             ) -> dict[str, Any]:
    prog, sel, fit, (_, _, xte, tte), labels = selector(b, doc, name)
    host_picks, full_picks = first_call.picks(sel, xte, prog.n_host_features)
    med = first_call.median_index(tte, labels, full_picks)
    arrays = ndp_run.median_input(b, name, med, scale, seed)
    ms = b.time_many({lab: prog.bind(v, *arrays, **p) for lab, (v, p) in sel.labels.items()})
    best = min(ms.values())
    live = first_call.measure(sel, arrays, repeats, b.dev.synchronize)
    late, early = live["label_landed"], live["label_not_landed"]
    out = {"computation": name, "median_test_index": med, "label_ms": ms, "oracle_label": min(ms, key=ms.get),
           "full_rule": fit["full_kind"], "fraction_landed_at_input": best / ms[late],
           "fraction_not_landed_at_input": best / ms[early], "run_ms": ms[late], **live}
    for path, run_ms in (("landed", ms[late]), ("not_landed", ms[early])):
        out[f"first_call_us_{path}"] = (out[f"first_call_us_{path}"] or {}).get("p50")
        out[f"share_{path}"] = out[f"first_call_us_{path}"] * 1e-3 / run_ms
    for key in ("fix_us", "landed_after_fix_us"):
        out[key] = (out[key] or {}).get("p50")
    out["recorded_test_fraction_landed"] = float(first_call.fraction(tte, labels, full_picks).mean())
    out["recorded_test_fraction_not_landed"] = float(first_call.fraction(tte, labels, host_picks).mean())
    return out


LIVE_COLUMNS = ["computation", "full_rule", "run_ms", "first_call_us_landed", "warm_us_landed", "share_landed",
                "fraction_landed_at_input", "first_call_us_not_landed", "warm_us_not_landed", "share_not_landed",
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
                            "budget": first_call.BUDGET, "target_fraction": first_call.TARGET, "device": device}
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
landed (landed); `warm_us_*`: p50 of 25 calls after one (the main run's old `feature_us` method); `landed_after_fix_us`: from `fix` until the
pick was on the host (polled, yielding the GIL between reads); `fix_us`: the host cost of `fix` (at binding, not at the call)."""


if __name__ == "__main__":
    main()
