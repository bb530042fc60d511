"""Threshold tuning experiments (seed 003): matmul V0-V4 and the MLP program with a loop.

Phase 1 (live, on the device): collect every dataset's comparison values by dry runs, then run and time every
distinct (dataset, executed path) once (``--repeats`` runs each, synchronised wall clock), check each matmul
version against NumPy, and re-time the tuned and the untuned assignment live at the end.
Phase 2 (replayed from those timings, on any machine): exhaustive (the seed's protocol, with and without
early termination), the path-memoised exhaustive search, hill climbing and adaptune's strategies; tuned vs
untuned vs per-dataset oracle; combinations and tuning cost for 1, 2, 3, 5 datasets; train on one dataset,
test on all. Every number says whether it is live or replayed.

    python -m benchmarks.thresholds.run --device opencl                  # live on PoCL -> out/thresholds/
    python -m benchmarks.thresholds.run --device cuda --out $OUT         # live on a GPU
    python -m benchmarks.thresholds.run --replay benchmarks/thresholds/results/thresholds_h100/timings_cuda.json
    python -m benchmarks.thresholds.run --profile smoke    # replay the committed PoCL matmul timings, 1 seed

Writes OUT/timings_<device>.json (live) and OUT/thresholds_<device>.json (h100, pocl, ...); the committed
results (benchmarks/thresholds/results/thresholds.json) merge several devices (``--merge``).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from adaptune.thresholds import deep, matmul
from adaptune.thresholds.futhark import write_tuning_file
from adaptune.thresholds.model import count_seed, describe, enumerate_exact, naive_space_size
from adaptune.thresholds.timing import PathTimes, live_measure
from adaptune.thresholds.tree import DEFAULT_THRESHOLD
from adaptune.thresholds.tuners import (
    candidate_space,
    exhaustive,
    hillclimb,
    oracle,
    path_exhaustive,
    strategy_search,
    untuned,
)
from benchmarks.harness import device_tag, parse_study_args, run_metadata, study_parser

SMOKE_TIMINGS = Path(__file__).resolve().parent / "results" / "thresholds_pocl" / "timings_opencl.json"
# (n, m, p) per dataset; chosen so that different versions win and the untuned choice is sometimes wrong
MATMUL_SETS = {
    "cuda": {"tall": (65536, 16, 4), "tallwide": (40000, 256, 256), "small": (64, 64, 64),
             "deep": (8, 262144, 8), "square": (1024, 1024, 1024)},
    "opencl": {"tall": (40000, 8, 4), "tallwide": (33000, 32, 16), "small": (32, 32, 32),
               "deep": (4, 65536, 4), "square": (96, 96, 96)},
}
# (n, widths) per dataset
MLP_SETS = {
    "cuda": {"a": (64, (256, 512, 512, 16)), "b": (4096, (64, 64, 64, 64)), "c": (16, (1024, 1024, 128, 16)),
             "d": (40000, (16, 32, 16, 8)), "e": (512, (512, 512, 512, 512))},
    "opencl": {"a": (16, (64, 256, 256, 8)), "b": (1024, (16, 16, 16, 16)), "c": (4, (1024, 512, 64, 4)),
               "d": (33000, (4, 8, 4, 2)), "e": (64, (64, 64, 64, 64))},
}
EXHAUSTIVE_LIMIT = 400_000


def tuner_datasets(model) -> list[str]:
    """The datasets the tuner comparison uses: the first ones, as many as exhaustive search can replay."""
    train = list(model.datasets)
    while count_seed(model.subset(train).forest, model.subset(train).candidates()) > EXHAUSTIVE_LIMIT:
        train = train[:-1]
    return train


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def make_device(kind: str):
    from adaptune.kernels.device import CupyDevice, OpenCLDevice

    return CupyDevice() if kind == "cuda" else OpenCLDevice()


def programs(kind: str, device):
    """(name, program, shape-only data, device data factory) per program."""
    mm = {k: v for k, v in MATMUL_SETS[kind].items()}
    ml = {k: v for k, v in MLP_SETS[kind].items()}
    return [
        ("matmul", matmul.program(), {k: matmul.make_data(None, *v) for k, v in mm.items()},
         lambda: {k: matmul.make_data(device, *v, seed=i) for i, (k, v) in enumerate(mm.items())}),
        ("mlp", deep.program(), {k: deep.make_data(None, *v) for k, v in ml.items()},
         lambda: {k: deep.make_data(device, *v, seed=i) for i, (k, v) in enumerate(ml.items())}),
    ]


def check_matmul(prog, data: dict, device) -> dict[str, float]:
    """Max relative error of every version on every dataset against NumPy (float64)."""
    errs = {}
    for name, d in data.items():
        a = device.to_host(d.a).astype(np.float64).reshape(d.n, d.m)
        b = device.to_host(d.b).astype(np.float64).reshape(d.m, d.p)
        ref = a @ b
        scale = max(1.0, float(np.abs(ref).max()))
        for v in matmul.VERSIONS:
            prog.run(d, matmul.forcing(v))
            device.synchronize()
            errs[f"{name}/{v}"] = float(np.abs(d.result() - ref).max() / scale)
    return errs


def record(kind: str, repeats: int, save=None) -> dict:
    """Phase 1: time every (dataset, path) live; returns the JSON-able timings and checks.
    ``save(rec)`` is called after each program so a run cut short keeps what it measured."""
    device = make_device(kind)
    out = {"device": device.name, "kind": kind, "repeats": repeats, "programs": {}}
    for pname, prog, shapes, factory in programs(kind, device):
        entry: dict = {}
        out["programs"][pname] = entry
        try:
            t0 = time.perf_counter()
            model = prog.model(shapes)
            entry["collect_s"] = time.perf_counter() - t0
            data = factory()
            if pname == "matmul":
                entry["max_rel_error"] = check_matmul(prog, data, device)
                worst = max(entry["max_rel_error"].values())
                log(f"matmul versions vs NumPy: worst relative error {worst:.2e}")
                if worst > 1e-3:
                    raise RuntimeError(f"matmul version wrong: {entry['max_rel_error']}")
            else:
                for name, d in data.items():
                    prog.run(d, {})
                    device.synchronize()
                    ref = deep.reference(d)
                    err = float(np.abs(device.to_host(d.head.c) - ref).max() / max(1.0, np.abs(ref).max()))
                    entry.setdefault("max_rel_error", {})[name] = err
            times = PathTimes(model, live_measure(prog, data, device.synchronize, repeats=repeats, warmup=1))
            t0 = time.perf_counter()
            n_paths = times.record_every_path(progress=lambda d, k, _p=pname: log(f"{_p}/{d}: {k} paths timed"))
            entry["record_s"] = time.perf_counter() - t0
            entry["paths"] = n_paths
            entry["timings"] = times.to_json()
            # live check of the replayed choice: tune as phase 2 does (exact, path-memoised), re-time live
            best = path_exhaustive(model.subset(tuner_datasets(model)), times, repeats=repeats).best
            live = {}
            fresh = PathTimes(model, live_measure(prog, data, device.synchronize, repeats=repeats, warmup=1))
            for d in model.datasets:
                live[d] = {"tuned_live_ms": statistics.median(fresh.samples(d, best)),
                           "untuned_live_ms": statistics.median(
                               fresh.samples(d, {n: DEFAULT_THRESHOLD for n in model.names}))}
            entry["live"] = {"assignment": best, "datasets": live}
            log(f"{pname}: {n_paths} paths in {entry['record_s']:.1f} s; live {live}")
        except Exception as exc:  # keep the other program's results
            entry["error"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        if save is not None:
            save(out)
    return out


def _versions(prog, shape_data, assignment) -> list[str]:
    """The code versions a dry run executes (pass:version), for humans reading the results."""
    return prog.run(shape_data, assignment, dry=True).versions


def summarize(outcomes: list, best_total: float) -> dict:
    totals = [o.best_total_ms for o in outcomes]
    costs = [o.tuning_s for o in outcomes]
    return {"final_total_ms_median": statistics.median(totals), "final_total_ms_max": max(totals),
            "tuning_s_median": statistics.median(costs), "tuning_s_max": max(costs),
            "evaluations_median": statistics.median(o.evaluations for o in outcomes),
            "within_2pct": sum(t <= 1.02 * best_total for t in totals), "runs": len(outcomes),
            "wall_s_median": statistics.median(o.wall_s for o in outcomes)}


def replay(rec: dict, program_name: str, kind: str, repeats: int, seeds: int, out_dir: Path) -> dict:
    """Phase 2 for one program on recorded timings."""
    entry = rec["programs"][program_name]
    prog, shapes = next((p, s) for n, p, s, _ in programs(kind, None) if n == program_name)
    model = prog.model(shapes)
    times = PathTimes.from_json(model, entry["timings"])
    names = list(model.datasets)
    res: dict = {"program": program_name, "device": rec["device"], "datasets": {},
                 "thresholds": len(model.names), "naive_space": naive_space_size(len(model.names)),
                 "replayed": "every tuner and every tuned/untuned/oracle ms below except *_live_ms is priced from "
                             "the recorded per-(dataset, path) samples; *_live_ms were re-timed live"}
    # which datasets the tuner comparison uses: as many as exhaustive search can handle
    train = tuner_datasets(model)
    res["tuner_datasets"] = train
    sub = model.subset(train)
    res["counts"] = describe(sub) | {"exact_combinations": len(enumerate_exact(sub, 3_000_000))}
    log(f"{program_name}: counts {res['counts']}")
    ex = exhaustive(sub, times, repeats=repeats, early_termination=False)
    exe = exhaustive(sub, times, repeats=repeats, early_termination=True)
    exo = exhaustive(sub, times, repeats=repeats, early_termination=True, order="incumbent")
    pe = path_exhaustive(sub, times, repeats=repeats)
    pee = path_exhaustive(sub, times, repeats=repeats, early_termination=True)
    best_total = ex.best_total_ms
    assert abs(pe.best_total_ms - best_total) <= 1e-9 * max(1.0, best_total), (pe.best_total_ms, best_total)
    assert abs(pee.best_total_ms - best_total) <= 1e-9 * max(1.0, best_total), (pee.best_total_ms, best_total)
    hc = [hillclimb(sub, times, repeats=repeats, max_evals=100, seed=s) for s in range(seeds)]
    sa = candidate_space(sub)
    ad = {name: [strategy_search(sub, times, name, repeats=repeats, max_evals=evals, seed=s, space_and_alias=sa)
                 for s in range(seeds)] for name, evals in (("auto", 150), ("random", 150))}
    res["space_size"] = len(sa[0])
    res["exhaustive_s"] = ex.tuning_s
    res["exhaustive_early_s"] = exe.tuning_s
    res["early_termination_saving"] = 1 - exe.tuning_s / ex.tuning_s
    res["early_stopped"] = exe.stopped_early
    res["exhaustive_early_ordered_s"] = exo.tuning_s
    res["early_ordered_saving"] = 1 - exo.tuning_s / ex.tuning_s
    res["paths_s"] = pe.tuning_s
    res["paths_early_s"] = pee.tuning_s
    res["hillclimb_s"] = statistics.median(o.tuning_s for o in hc)
    res["adaptune_s"] = statistics.median(o.tuning_s for o in ad["auto"])
    res["tuners"] = {"exhaustive": ex.to_json(), "exhaustive+early": exe.to_json(),
                     "exhaustive+early+ordered": exo.to_json(), "paths": pe.to_json(), "paths+early": pee.to_json(),
                     "hillclimb": summarize(hc, best_total),
                     **{f"adaptune:{k}": summarize(v, best_total) for k, v in ad.items()}}
    res["best_total_ms"] = best_total
    best = pe.best  # same total as exhaustive's; the one phase 1 re-timed live
    res["tuned_assignment"] = best
    pe_all = pe if train == names else path_exhaustive(model, times, repeats=repeats, limit=3_000_000)
    res["tuned_all_assignment"] = pe_all.best
    safe = path_exhaustive(model, times, repeats=repeats, limit=3_000_000, no_regression=True)
    res["tuned_safe_assignment"] = safe.best
    if "live" in entry:
        res["live_assignment_matches"] = entry["live"]["assignment"] == best
    write_tuning_file(out_dir / f"{program_name}.fut.tuning", best)
    un = untuned(model, times)
    untuned_a = {n: DEFAULT_THRESHOLD for n in model.names}
    orc = oracle(model, times)
    live = entry.get("live", {}).get("datasets", {})
    for d in names:
        res["datasets"][d] = {"tuned_ms": times.mean(d, pe_all.best), "untuned_ms": un[d], "oracle_ms": orc[d],
                              "tuned_on_tuner_datasets_ms": times.mean(d, best), "in_tuner_datasets": d in train,
                              "tuned_no_regression_ms": times.mean(d, safe.best),
                              "tuned_path_is_untuned": times.key(d, pe_all.best) == times.key(d, untuned_a),
                              "no_regression_path_is_untuned": times.key(d, safe.best) == times.key(d, untuned_a),
                              "tuned_path_versions": _versions(prog, shapes[d], pe_all.best),
                              "untuned_path_versions": _versions(prog, shapes[d], untuned_a),
                              **{f"{k.replace('tuned', 'tuned_on_tuner_datasets')}" if k.startswith("tuned")
                                 else k: v for k, v in live.get(d, {}).items()}}
    # datasets 1 -> 2 -> 3 -> 5: combinations and tuning cost
    scaling = []
    for k in (1, 2, 3, 5):
        if k > len(names):
            break
        s = model.subset(names[:k])
        row = describe(s)
        try:
            row["exact_combinations"] = len(enumerate_exact(s, 3_000_000))
        except ValueError as exc:
            row["exact_combinations"] = None
            row["note"] = str(exc)
        if names[:k] == train:  # the comparison above already ran these
            row |= {"exhaustive_s": ex.tuning_s, "exhaustive_early_s": exe.tuning_s, "paths_s": pe.tuning_s}
        elif row["seed_combinations"] <= EXHAUSTIVE_LIMIT:
            row["exhaustive_s"] = exhaustive(s, times, repeats=repeats, early_termination=False).tuning_s
            row["exhaustive_early_s"] = exhaustive(s, times, repeats=repeats, early_termination=True).tuning_s
        else:  # too many to replay here: price = combinations x mean per-combination cost of the 3-set run
            row["exhaustive_s_estimate"] = row["seed_combinations"] * ex.tuning_s / max(ex.evaluations, 1)
        if names[:k] == names and "paths_s" not in row:
            row["paths_s"] = pe_all.tuning_s
        if row.get("exact_combinations") is not None and "paths_s" not in row:
            row["paths_s"] = path_exhaustive(s, times, repeats=repeats, limit=3_000_000).tuning_s
        scaling.append(row)
        log(f"{program_name}: {k} datasets {row}")
    res["scaling"] = scaling
    # train on one dataset, test on all (the seed's Fig. 18)
    tt = []
    for d in names:
        s = model.subset([d])
        b = path_exhaustive(s, times, repeats=repeats).best
        full = model.complete(b)
        tt.append({"train": d, "test_ms": {x: times.mean(x, full) for x in names},
                   "vs_oracle": {x: times.mean(x, full) / orc[x] for x in names},
                   "vs_untuned": {x: times.mean(x, full) / un[x] for x in names}})
    res["train_test"] = tt
    return res


LIVE_KEYS = ("tuned_all_assignment", "tuned_safe_assignment", "tuned_assignment")


def live_check(kind: str, results_path: Path, repeats: int) -> dict:
    """Re-time live, per dataset, the assignments a replay chose (and the defaults) on this device."""
    results = json.loads(results_path.read_text())
    device = make_device(kind)
    out: dict = {"device": device.name, "kind": kind, "repeats": repeats, "programs": {}}
    for pname, prog, shapes, factory in programs(kind, device):
        exp = next((e for e in results["experiments"] if e.get("program") == pname and e.get("device") == device.name
                    and "error" not in e), None)
        if exp is None:
            continue
        try:
            model = prog.model(shapes)
            data = factory()
            assignments = {k: exp[k] for k in LIVE_KEYS if k in exp}
            assignments["untuned"] = {n: DEFAULT_THRESHOLD for n in model.names}
            entry = out["programs"][pname] = {}
            for d in model.datasets:  # interleave assignments per dataset so drift hits them alike
                for k, a in assignments.items():
                    fresh = live_measure(prog, data, device.synchronize, repeats=repeats, warmup=1)
                    entry.setdefault(d, {})[k] = statistics.median(fresh(d, model.complete(a)))
            log(f"{pname}: live {entry}")
        except Exception as exc:
            out["programs"][pname] = {"error": f"{type(exc).__name__}: {exc}"}
            traceback.print_exc()
    return out


def attach_live(results_path: Path, live: dict) -> None:
    """Add ``<assignment>_live_ms`` per dataset to the matching experiments of a results file."""
    results = json.loads(results_path.read_text())
    names = {"tuned_all_assignment": "tuned_live_ms", "tuned_safe_assignment": "tuned_no_regression_live_ms",
             "tuned_assignment": "tuned_on_tuner_datasets_live2_ms", "untuned": "untuned_live2_ms"}
    for e in results["experiments"]:
        per = live["programs"].get(e.get("program"), {})
        if e.get("device") != live["device"] or "error" in per:
            continue
        for d, vals in per.items():
            for k, v in vals.items():
                e["datasets"][d][names[k]] = v
        e["live_check"] = {"repeats": live["repeats"], "meta": live.get("meta", {})}
    results_path.write_text(json.dumps(results, indent=1, default=float))


def merge(path: Path, results: dict) -> None:
    """Fold one run's experiments into the committed results file, keyed by (program, device)."""
    merged = json.loads(path.read_text()) if path.exists() else {"experiments": [], "runs": []}
    keys = {(e.get("program"), e.get("device")) for e in results["experiments"]}
    merged["experiments"] = [e for e in merged["experiments"] if (e.get("program"), e.get("device")) not in keys]
    for e in results["experiments"]:
        merged["experiments"].append(e | {"run": results["meta"]})
    path.write_text(json.dumps(merged, indent=1, default=float))


def main(argv: list[str] | None = None) -> int:
    ap = study_parser("thresholds", __doc__.splitlines()[0])
    ap.add_argument("--device", choices=("opencl", "cuda"), default="opencl")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--programs", nargs="+", default=["matmul", "mlp"], choices=("matmul", "mlp"),
                    help="programs to tune (replay)")
    ap.add_argument("--replay", default=None, help="timings JSON from an earlier --record run")
    ap.add_argument("--record-only", action="store_true")
    ap.add_argument("--merge", default=None, help="also merge the experiments into this results JSON "
                                                  "(replacing those of the same program and device)")
    ap.add_argument("--live-check", default=None, help="results JSON: re-time its chosen assignments live")
    ap.add_argument("--attach-live", nargs=2, metavar=("LIVE_JSON", "RESULTS_JSON"), default=None,
                    help="fold a --live-check output into a results file")
    args = parse_study_args(ap, argv, smoke={"replay": str(SMOKE_TIMINGS), "seeds": 1, "programs": ["matmul"]})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = run_metadata(device=args.device)
    commit = run["commit"]
    meta = {"commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "host": run["host"], "python": run["python"], "loadavg": os.getloadavg()}
    if args.attach_live:
        attach_live(Path(args.attach_live[1]), json.loads(Path(args.attach_live[0]).read_text()))
        return 0
    if args.live_check:
        live = live_check(args.device, Path(args.live_check), args.repeats) | {"meta": meta}
        (out / f"live_{args.device}.json").write_text(json.dumps(live, indent=1))
        return 0
    if args.replay:
        rec = json.loads(Path(args.replay).read_text())
    else:
        target = out / f"timings_{args.device}.json"
        rec = record(args.device, args.repeats, save=lambda r: target.write_text(json.dumps(r | {"meta": meta})))
        rec["meta"] = meta
        log(f"wrote {out / f'timings_{args.device}.json'}")
    if args.record_only:
        return 0
    results = {"meta": {"commit": commit, "recorded": rec.get("meta", {}), "device": rec["device"],
                        "kind": rec["kind"], "repeats": args.repeats, "seeds": args.seeds,
                        "replayed_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
               "experiments": []}
    for pname in args.programs:
        if "timings" not in rec["programs"].get(pname, {}):
            results["experiments"].append({"program": pname, "error": rec["programs"].get(pname, {}).get("error")})
            continue
        try:
            results["experiments"].append(replay(rec, pname, rec["kind"], args.repeats, args.seeds, out))
        except Exception as exc:
            traceback.print_exc()
            results["experiments"].append({"program": pname, "error": f"{type(exc).__name__}: {exc}"})
        (out / f"thresholds_{device_tag(rec['device'])}.json").write_text(json.dumps(results, indent=1, default=float))
    if args.merge:
        merge(Path(args.merge), results)
    for e in results["experiments"]:
        if "error" in e:
            print(f"{e['program']}: ERROR {e['error']}")
            continue
        print(f"\n{e['program']} on {e['device']}: tuners on {e['tuner_datasets']}, counts {e['counts']}")
        print(f"  early termination saves {e['early_termination_saving']:.1%} of exhaustive run time "
              f"({e['early_ordered_saving']:.1%} with the slowest dataset first)")
        print(f"  exhaustive {e['exhaustive_s']:.2f} s (early {e['exhaustive_early_s']:.2f} s), paths "
              f"{e['paths_s']:.3f} s (early {e['paths_early_s']:.3f} s), hillclimb {e['hillclimb_s']:.3f} s, adaptune {e['adaptune_s']:.3f} s (run time)")
        for k, v in e["tuners"].items():
            tot = v.get("best_total_ms", v.get("final_total_ms_median"))
            print(f"  {k:18s} total {tot:.4f} ms  ({tot / e['best_total_ms']:.3f} x best)")
        for d, v in e["datasets"].items():
            print(f"  {d:9s} untuned {v['untuned_ms']:.4f} tuned {v['tuned_ms']:.4f} oracle {v['oracle_ms']:.4f}"
                  f"  speedup {v['untuned_ms'] / v['tuned_ms']:.2f}x, no-regression "
                  f"{v['untuned_ms'] / v['tuned_no_regression_ms']:.2f}x  (tuned on {e['tuner_datasets']}: "
                  f"{v['untuned_ms'] / v['tuned_on_tuner_datasets_ms']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
