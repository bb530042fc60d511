"""Energy as an objective on the H100: NVML energy of every measurement, Pareto front, selection for energy.

A. A tuning run of the CUDA convolution (examples/convolution, 4096^2, 15x15 filter), random search over
   ``--evals`` configurations, the same ``--repeats`` timed runs for each (no racing, so every window is
   as long), observer ``nvml``: the total-energy counter around the timed runs of every measurement,
   checked against the sampled power integrated over the same window (power x time). Stored in SQLite,
   exported as T4 (energy fields included), Pareto front of time vs energy per call, energy-optimal
   beside time-optimal with the energy saved, and a plot.
B. Selection for energy across inputs: the front's configurations (plus the time- and energy-optimal)
   are the labels; 9 inputs (output 2048/3072/4096 squared x filter 7/11/15) are measured on every label
   (repeats per input chosen so that each window lasts >= 0.2 s); a model trained with energy costs
   (leave one input out) is compared with one trained with time costs and with the single energy-optimal
   configuration of A, by fraction of the energy oracle.

Writes OUT/energy_<device>.{json,md}, energy_<device>_pareto.png, energy_<device>_t4.json (<device>: h100 on
the H100, pocl for the smoke run; default OUT: out/energy/; the committed run is benchmarks/energy/results/).

    python -m benchmarks.energy.run [--evals 100] [--repeats 64] [--out DIR]
    python -m benchmarks.energy.run --smoke      # PoCL, tiny, no energy (only checks the script runs);
                                                 # also --profile smoke
"""

from __future__ import annotations

import json
import math
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from adaptune.adaptive.models import fit_model, fraction_of_oracle
from adaptune.adaptive.objectives import (
    OBJECTIVES,
    energy_vs_time,
    expression_objective,
    metrics,
    pareto,
    values,
)
from adaptune.measure import Measurer, MeasureSettings
from adaptune.records import Result
from adaptune.report.plots import plot_pareto
from adaptune.store import RecordedSpace, Store, write_t4
from adaptune.tuning import tune
from benchmarks.harness import (
    device_tag,
    example_module,
    parse_study_args,
    run_metadata,
    study_parser,
    write_results,
)

ROOT = Path(__file__).resolve().parents[2]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def part_a(args, out: dict, energy) -> list[dict]:  # type: ignore[no-untyped-def]
    conv = example_module("convolution")
    if args.smoke:
        prob = conv.problem_small
    else:
        prob = conv.make_problem_cuda(4096, 15)
    log(f"A: {prob.name}, {len(prob.space)} valid configurations, {args.evals} random, {args.repeats} repeats")
    db = Path(args.out) / f"{args.stem}.db"
    rep = tune(prob, "random", max_evals=args.evals, max_seconds=args.max_seconds, repeats=args.repeats, backend=args.backend, db=str(db),
               seed=1, progress=False, observers=() if args.smoke else ("nvml",), discard_factor=None,
               timeout_s=20.0)
    results = [r for r in rep.results if r.ok]
    log(f"A: {len(rep.results)} measured, {len(results)} ok, best {rep.best_time_ms:.4f} ms")
    with_energy = [r for r in results if "energy_j" in r.observers]
    a: dict = {"problem": prob.name, "device": getattr(rep.device, "name", str(rep.device)), "configurations": len(prob.space),
               "evaluated": len(rep.results), "ok": len(results), "with_energy_j": len(with_energy),
               "repeats": args.repeats}
    if with_energy:
        ratio = np.array([r.observers["energy_j"] / r.observers["energy_sampled_j"] for r in with_energy
                          if r.observers.get("energy_sampled_j", 0) > 0])
        windows = np.array([r.observers.get("observed_s", math.nan) for r in with_energy])
        a["energy_check"] = {
            "counter_over_sampled_median": float(np.median(ratio)) if len(ratio) else None,
            "counter_over_sampled_p10_p90": [float(np.percentile(ratio, 10)), float(np.percentile(ratio, 90))]
            if len(ratio) else None,
            "window_s_median": float(np.nanmedian(windows)),
            "power_samples_median": float(np.median([r.observers.get("power_samples", 0) for r in with_energy])),
            "zero_counter_deltas": int(sum(r.observers["energy_j"] <= 0 for r in with_energy)),
        }
        log(f"A: energy check {a['energy_check']}")
    cmp = energy_vs_time(results, energy) if (with_energy or args.smoke) else None
    front = pareto(results, "time", energy)
    a["pareto_front"] = [{"config": r.config, "time_ms": r.time_ms, "energy_per_call_j": energy(r),
                          "power_w": metrics(r).get("power_w"), "power_peak_w": r.observers.get("power_peak_w")}
                         for r in front]
    if cmp:
        a["time_optimal"], a["energy_optimal"] = cmp["time_optimal"], cmp["energy_optimal"]
        a["energy_saved_fraction"] = cmp["energy_saved_fraction"]
        a["time_cost_fraction"] = cmp["time_cost_fraction"]
        log(f"A: energy-optimal saves {100 * cmp['energy_saved_fraction']:.1f} % energy at "
            f"{100 * cmp['time_cost_fraction']:+.1f} % time")
    edp = values(results, OBJECTIVES["edp"] if not args.smoke else energy)
    a["edp_optimal"] = results[int(np.argmin(edp))].config
    plot_pareto(results, Path(args.out) / f"{args.stem}_pareto.png", "time", energy,
                title=f"{prob.name} on {a['device']}: {len(results)} configurations")
    store = Store(db)
    try:
        rec = RecordedSpace.from_store(store)
    finally:
        store.close()
    write_t4(Path(args.out) / f"{args.stem}_t4.json", rec)
    t4 = json.loads((Path(args.out) / f"{args.stem}_t4.json").read_text())
    names = {m["name"] for res in t4["results"] for m in res["measurements"]}
    a["t4_measurement_names"] = sorted(names)
    out["A"] = a
    labels = [r.config for r in front]
    for extra in (a.get("time_optimal", {}).get("config"), a.get("energy_optimal", {}).get("config"),
                  a["edp_optimal"]):
        if extra and extra not in labels:
            labels.append(extra)
    return labels


def part_b(args, out: dict, labels: list[dict], energy) -> None:  # type: ignore[no-untyped-def]
    conv = example_module("convolution")

    t_a = out["A"]["time_optimal"]["time_ms"] / 1e3 if out["A"].get("time_optimal") else 1e-3
    size_a, filt_a = (128, 5) if args.smoke else (4096, 15)
    inputs = [(64, 5), (128, 5), (128, 3)] if args.smoke else [(s, f) for s in (2048, 3072, 4096) for f in (7, 11, 15)]
    rows_e, rows_t, feats, names = [], [], [], []
    for size, filt in inputs:
        if args.smoke:
            space = conv.make_space(conv.PARAMS_SMALL, size, size, filt, filt)
            prob = conv.make_problem(size, size, filt, filt, space, lang="opencl", name=f"conv_{size}_{filt}")
        else:
            space = conv.make_space(conv.PARAMS_CUDA, size, size, filt, filt, max_threads=1024, min_threads=32)
            prob = conv.make_problem(size, size, filt, filt, space, lang="cuda", name=f"conv_{size}_{filt}")
        valid = [space.is_valid(c) for c in labels]
        # the work scales with output pixels x filter taps: scale A's best time to size the window
        t_est = t_a * (size / size_a) ** 2 * (filt / filt_a) ** 2
        repeats = int(min(2000, max(16, math.ceil(0.2 / t_est))))
        settings = MeasureSettings(repeats=repeats, observers=() if args.smoke else ("nvml",))
        res: list[Result | None] = []
        with Measurer(prob.spec, backend=args.backend, settings=settings) as m:
            m.prefetch([c for c, ok in zip(labels, valid, strict=True) if ok])
            for c, ok in zip(labels, valid, strict=True):
                res.append(m.measure(c) if ok else None)
        rows_e.append([energy(r) if r is not None else math.inf for r in res])
        rows_t.append([r.time_ms if r is not None and r.ok else math.inf for r in res])
        feats.append([math.log2(size), filt])
        names.append(f"{size}^2 {filt}x{filt}")
        log(f"B: {names[-1]}: {sum(valid)} labels valid, {repeats} repeats; energy-best label "
            f"{int(np.argmin(rows_e[-1]))}, time-best label {int(np.argmin(rows_t[-1]))}")
    e, t, x = np.array(rows_e), np.array(rows_t), np.array(feats, dtype=float)
    n = len(x)
    picks: dict[str, list[int]] = {"energy_model": [], "time_model": []}
    for i in range(n):
        train = [j for j in range(n) if j != i]
        for name, costs in (("energy_model", e), ("time_model", t)):
            model = fit_model("knn", x[train], costs[train], seed=0, folds=min(3, len(train)), score_repeats=0)
            picks[name].append(int(model.predict(x[i:i + 1])[0]))
    single = int(np.argmin(np.where(np.isfinite(e), e / e.min(axis=1, keepdims=True), np.inf).max(axis=0)))
    fr = {k: fraction_of_oracle(e, np.array(v)) for k, v in picks.items()}
    fr["single_best_config"] = fraction_of_oracle(e, np.full(n, single))
    fr["time_oracle"] = fraction_of_oracle(e, np.argmin(t, axis=1))
    out["B"] = {"inputs": names, "labels": labels, "energy_per_call_j": e.tolist(), "time_ms": t.tolist(),
                "model": "knn (Nitro features: log2 size, filter size), leave one input out",
                "fraction_of_energy_oracle": {k: [float(f) for f in v] for k, v in fr.items()},
                "mean_fraction_of_energy_oracle": {k: float(np.nanmean(v)) for k, v in fr.items()},
                "energy_label_differs_from_time_label": int(np.sum(np.argmin(e, 1) != np.argmin(t, 1)))}
    log(f"B: mean fraction of the energy oracle {out['B']['mean_fraction_of_energy_oracle']}")


def write_md(out: dict) -> str:
    a, b, m = out.get("A", {}), out.get("B", {}), out["meta"]
    lines = ["# Energy as an objective on the H100", "",
             f"- date {m['date']}, commit {m['commit']}, device {a.get('device', '?')}, took {m['seconds']} s",
             f"- command: `{m['command']}`", ""]
    if a:
        lines += [f"## A. Tuning run with NVML energy: {a['problem']}", "",
                  f"{a['evaluated']} configurations measured (random search), {a['ok']} ok, {a['with_energy_j']} "
                  f"with an energy reading; {a['repeats']} timed runs each.", ""]
        if a.get("energy_check"):
            c = a["energy_check"]
            lines += [f"Energy counter vs sampled power x time over the same window: median ratio "
                      f"{c['counter_over_sampled_median']:.3f} (p10-p90 {c['counter_over_sampled_p10_p90'][0]:.3f}-"
                      f"{c['counter_over_sampled_p10_p90'][1]:.3f}), median window {c['window_s_median']:.3f} s, "
                      f"{c['power_samples_median']:.0f} power samples per window, {c['zero_counter_deltas']} "
                      "windows where the counter did not advance.", ""]
        if a.get("time_optimal"):
            to, eo = a["time_optimal"], a["energy_optimal"]
            lines += ["| | configuration | time (ms) | energy per call (mJ) | power (W) |", "|---|---|---|---|---|",
                      f"| time-optimal | {to['config']} | {to['time_ms']:.4f} | {1e3 * to['energy_per_call_j']:.3f} | "
                      f"{to['power_w'] or float('nan'):.1f} |",
                      f"| energy-optimal | {eo['config']} | {eo['time_ms']:.4f} | {1e3 * eo['energy_per_call_j']:.3f} | "
                      f"{eo['power_w'] or float('nan'):.1f} |", "",
                      f"Energy saved by the energy-optimal configuration: **{100 * a['energy_saved_fraction']:.1f} %**, "
                      f"at {100 * a['time_cost_fraction']:+.1f} % time. Pareto front: {len(a['pareto_front'])} "
                      f"configurations ({m['stem']}_pareto.png). T4 export carries: "
                      f"{', '.join(a['t4_measurement_names'])}.", ""]
    if b:
        lines += ["## B. Selecting for energy across inputs", "", f"{len(b['inputs'])} inputs x {len(b['labels'])} "
                  f"labels; model: {b['model']}; the energy-best label differs from the time-best on "
                  f"{b['energy_label_differs_from_time_label']} inputs.", "",
                  "| selection | mean fraction of the energy oracle |", "|---|---|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in b["mean_fraction_of_energy_oracle"].items()]
        lines.append("")
    if out.get("errors"):
        lines += ["## Errors", ""] + [f"- {e.splitlines()[-1]}" for e in out["errors"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("energy", __doc__.splitlines()[0])
    ap.add_argument("--evals", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=64)
    ap.add_argument("--max-seconds", type=float, default=None, help="time budget of the tuning run (part A)")
    ap.add_argument("--skip-b", action="store_true", help="part A only")
    ap.add_argument("--smoke", action="store_true")
    args = parse_study_args(ap, argv, smoke={"smoke": True})
    args.backend = "opencl" if args.smoke else "cuda"
    args.stem = "energy_pocl" if args.smoke else "energy_h100"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    # smoke (no NVML on a CPU): a stand-in 'energy' of 100 W x time, only to run the code paths
    energy = expression_objective("time_ms * 0.1", "energy") if args.smoke else OBJECTIVES["energy"]
    out: dict = {"errors": []}
    labels: list[dict] = []
    try:
        labels = part_a(args, out, energy)
    except Exception:
        out["errors"].append(traceback.format_exc())
        log(out["errors"][-1])
    if labels and not args.skip_b:
        try:
            part_b(args, out, labels, energy)
        except Exception:
            out["errors"].append(traceback.format_exc())
            log(out["errors"][-1])
    device = out.get("A", {}).get("device")
    if device and f"energy_{device_tag(device)}" != args.stem:  # e.g. an H200: files name the device it ran on
        new = f"energy_{device_tag(device)}"
        for suffix in (".db", "_pareto.png", "_t4.json"):
            if Path(args.out, args.stem + suffix).exists():
                Path(args.out, args.stem + suffix).rename(Path(args.out, new + suffix))
        args.stem = new
    meta = run_metadata(device=device)
    out["meta"] = {"date": meta["date"][:10], "commit": meta["commit"], "stem": args.stem,
                   "seconds": round(time.perf_counter() - t0, 1), "smoke": args.smoke,
                   "command": "python -m benchmarks.energy.run " + " ".join(sys.argv[1:])}
    write_results(args.out, args.stem, out, table=write_md(out), metadata=meta)
    print(Path(args.out, f"{args.stem}.md").read_text())


if __name__ == "__main__":
    main()
