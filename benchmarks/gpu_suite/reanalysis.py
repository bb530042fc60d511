"""Re-analysis of a recorded GPU-suite run (no GPU): the distilled first-call selector and best-fixed two ways.

    python -m benchmarks.gpu_suite.reanalysis [--out DIR]    # the committed H100 raw files -> out/gpu_suite/
    python -m benchmarks.gpu_suite.reanalysis --no-timing --number 200    # seconds (smoke)

Reads the committed raw runs (``--raw``, ``--extra``); writes DIR/gpu_suite_h100_reanalysis.{json,md} (the
stem names the device of the recorded run), never over benchmarks/gpu_suite/results/.

For every benchmark of each raw.json (recorded per-variant times of every training and test input):
1. distils a cost-aware tree over host metadata from the training inputs (``adaptune.kernels.distilled``:
   depth and leaf size by training-set CV, rule fixed before any test input was scored) and scores it on the
   test inputs with the run's own definition of fraction of oracle (a refused variant costs the default);
2. times the compiled selector (``DistilledDispatch.bind``) on THIS host, on real DeviceMatrix / DeviceKeys /
   DeviceGraph instances holding the recorded metadata (no device arrays: the selector reads host metadata
   only), and for comparison the run's host-metadata kernel-ridge model refitted on the same training data
   (``cv.select``, as the suite times it); the dispatch share divides this host's cost by the recorded
   H100 run time at the median test input;
3. best fixed variant two ways: with the constraint fall-back to the library default (rounds 1-3) and among
   variants valid on every test input (no fall-back);
4. the model chosen by the training-CV rule (all features vs host features) beside the pre-set model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
import timeit
import types
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.adaptive.models import fraction_of_oracle
from adaptune.kernels import bfs, distilled, histogram, spmv
from adaptune.kernels.dispatch import DistilledDispatch
from benchmarks.gpu_suite.run import BENCHES, LIBRARY_DEFAULT, best_fixed_both, cost_matrices
from benchmarks.harness import device_tag, git_commit, run_metadata, write_results

RESULTS = Path(__file__).resolve().parent / "results"

_LIBRARY = object()  # stands for the cupyx csr_matrix: the constraint checks only ask whether it is there


def stand_in(benchmark: str, info: dict[str, Any]) -> tuple[Any, ...]:
    """Call arguments whose host metadata are the recorded input's, as the real classes (attribute reads
    cost what they cost on the GPU objects); device arrays are absent, nothing here launches."""
    if benchmark == "spmv":
        n = info["n_rows"]
        m = spmv.DeviceMatrix(device=None, n_rows=n, n_cols=n, nnz=info["nnz"], indptr=None, indices=None,
                              data=None, ell=(None, None, 0) if info["ell_built"] else None,
                              dia=(None, None, 0) if info["dia_built"] else None, library=_LIBRARY)
        return (m, None, None)
    if benchmark == "histogram":
        return (histogram.DeviceKeys(device=None, n=info["n"], key_bits=info["key_bits"], bins=info["bins"],
                                     words=None, raw=None), None)
    if benchmark == "sort":  # NumPy array: .size / .dtype as on a CuPy array (np.empty does not touch the pages)
        return (None, np.empty(info["n"], np.dtype(info["dtype"])))
    if benchmark == "bfs":
        g = bfs.DeviceGraph(device=None, n=info["n"], m=info["m"], indptr=None, indices=None, src=None, level=None,
                            visited=None, queues=(None, None), counts=None, size=None)
        return (g, info["source"])
    raise ValueError(benchmark)


def per_call_us(fn: Any, number: int, repeats: int) -> tuple[float, float, float]:
    """Per-call time of ``number`` calls (timeit's loop, no timer per call) over ``repeats`` loops: wall
    median, wall min, and the median of this thread's CPU time. On a host shared with other busy processes
    the wall time also counts the time the thread waits for a core; its CPU time does not."""
    fn()
    loops = timeit.repeat(fn, number=number, repeat=repeats)
    cpu = timeit.repeat(fn, number=number, repeat=repeats, timer=time.thread_time)
    return (statistics.median(loops) / number * 1e6, min(loops) / number * 1e6,
            statistics.median(cpu) / number * 1e6)


def host_model_cv(name: str, b: dict[str, Any]) -> tuple[Any, Any]:
    """The run's host-metadata model refitted on its training data, in a CodeVariant built as the suite does
    (the real variant functions and constraint checks; CUDA's variant set and library default)."""
    from adaptune.adaptive import Label
    from adaptune.adaptive.models import fit_model

    rt = types.SimpleNamespace(cuda=True, default=lambda n: LIBRARY_DEFAULT[n])
    bench = BENCHES[name](rt)
    names = b["variants"]
    costs, runtime = cost_matrices(b["train"], names, b["default"])
    fitted = fit_model(b["model_host"]["kind"], np.array([r["model_host_features"] for r in b["train"]]), costs,
                       runtime)
    cv = bench.code_variant(None, host_only=True)
    cv.install_model(fitted.params, [Label.of(v) for v in names], fitted.kind)
    return cv, fitted


def analyse(name: str, b: dict[str, Any], timing: bool, number: int, repeats: int) -> dict[str, Any]:
    names, default, train, test = b["variants"], b["default"], b["train"], b["test"]
    _, rt_train = cost_matrices(train, names, default)
    _, runtime = cost_matrices(test, names, default)
    n = len(test)
    idx = np.arange(n)
    frac = fraction_of_oracle(runtime, np.array([names.index(r["chosen"]) for r in test]))
    frac_host = fraction_of_oracle(runtime, np.array([names.index(r["chosen_host"]) for r in test]))
    use_host = b["model_host"]["cv_fraction_of_oracle"] > b["model"]["cv_fraction_of_oracle"]
    fixed = best_fixed_both(test, names, default)
    fb, ve = fixed["with_fallback"]["fraction"], fixed["valid_everywhere"]["fraction"]

    def above(f: float) -> dict[str, float | None]:
        return {"with_fallback": 100 * (f - fb), "valid_everywhere": None if ve is None else 100 * (f - ve)}

    x_train = np.array([distilled.metadata_from_info(name, r["info"]) for r in train], float)
    x_test = np.array([distilled.metadata_from_info(name, r["info"]) for r in test], float)
    dres = distilled.distil(x_train, rt_train, names)
    tree = dres["tree"]
    chosen_d = np.array([names.index(distilled.predict(tree, row)) for row in x_test])
    frac_d = fraction_of_oracle(runtime, chosen_d)
    # the same distillation over all features (device features as recorded): what a tree loses or keeps
    # against the kernel-ridge model when the data features are there (the device round trip stays)
    fnames = b["feature_names"]
    xa_train = np.array([[r["features"][k] for k in fnames] for r in train], float)
    xa_test = np.array([[r["features"][k] for k in fnames] for r in test], float)
    dall = distilled.distil(xa_train, rt_train, names)
    frac_all = fraction_of_oracle(runtime, np.array([names.index(distilled.predict(dall["tree"], row))
                                                     for row in xa_test]))
    # the median test input as the suite defines it (by the adaptive model's chosen variant's run time)
    chosen_ms = runtime[idx, np.array([names.index(r["chosen"]) for r in test])]
    median_i = int(np.argsort(chosen_ms)[n // 2])
    d_ms = runtime[idx, chosen_d]
    median_d = int(np.argsort(d_ms)[n // 2])
    result: dict[str, Any] = {
        "n_train": len(train), "n_test": n, "variants": names, "library_default": default,
        "adaptive_all_features": {"fraction": float(np.nanmean(frac)), "points_above": above(float(np.nanmean(frac)))},
        "adaptive_host_features": {"fraction": float(np.nanmean(frac_host)),
                                   "points_above": above(float(np.nanmean(frac_host)))},
        "cv_rule": {"chosen_model": "host features" if use_host else "all features",
                    "cv": {"all features": b["model"]["cv_fraction_of_oracle"],
                           "host features": b["model_host"]["cv_fraction_of_oracle"]},
                    "fraction": float(np.nanmean(frac_host if use_host else frac))},
        "best_fixed": fixed,
        "distilled": {"tree": tree, "depth": distilled.tree_depth(tree), "leaves": distilled.tree_leaves(tree),
                      "max_depth": dres["max_depth"], "min_leaf": dres["min_leaf"],
                      "cv_fraction_of_oracle": dres["cv_fraction_of_oracle"], "features": list(distilled.HOST_METADATA[name]),
                      "fraction": float(np.nanmean(frac_d)), "points_above": above(float(np.nanmean(frac_d))),
                      "chosen_label_counts": {v: int((chosen_d == j).sum()) for j, v in enumerate(names) if (chosen_d == j).any()},
                      "oracle_label_counts": {v: int((np.argmin(runtime, axis=1) == j).sum()) for j, v in enumerate(names)
                                              if (np.argmin(runtime, axis=1) == j).any()}},
        "distilled_all_features": {
            "tree": dall["tree"], "depth": distilled.tree_depth(dall["tree"]), "features": fnames,
            "cv_fraction_of_oracle": dall["cv_fraction_of_oracle"], "fraction": float(np.nanmean(frac_all)),
            "recorded_feature_ms_at_median_input": test[median_i]["feature_ms"]},
        "median_input": test[median_i]["name"], "median_input_run_ms": float(chosen_ms[median_i]),
        "median_input_distilled": test[median_d]["name"], "median_input_distilled_run_ms": float(d_ms[median_d]),
        "recorded_h100_host": {"dispatch_host_ms_at_median_input": test[median_i]["dispatch_host_ms"],
                               "dispatch_ms_at_median_input": test[median_i]["dispatch_ms"]},
    }
    if timing:
        variants = BENCHES[name](types.SimpleNamespace(cuda=True, default=lambda k: LIBRARY_DEFAULT[k])).variants()
        dd = DistilledDispatch(name, tree, variants, default)
        args_all = [stand_in(name, r["info"]) for r in test]
        arg = distilled.SOURCES[name][0]
        for a, j in zip(args_all, chosen_d, strict=True):  # compiled == the tree's walk (or its fall-back)
            check = dd.checks.get(names[j])
            assert dd.select(*a) == (names[j] if check is None or check(a[arg]) else default)
        both = np.array([per_call_us(lambda a=a: dd.bind(*a), number, repeats) for a in args_all])
        bind_us, bind_min_us, bind_cpu_us = both[:, 0], both[:, 1], both[:, 2]
        cv, _ = host_model_cv(name, b)
        krr_us, krr_min_us, krr_cpu_us = per_call_us(lambda: cv.select(*args_all[median_i]), max(200, number // 50), repeats)
        result["this_host"] = {
            "distilled_bind_min_us_at_median_input": float(bind_min_us[median_i]),
            "distilled_bind_cpu_us_at_median_input": float(bind_cpu_us[median_i]),
            "distilled_bind_cpu_us_median": float(np.median(bind_cpu_us)),
            "host_model_select_min_us_at_median_input": krr_min_us,
            "host_model_select_cpu_us_at_median_input": krr_cpu_us,
            "dispatch_share_median_cpu": float(bind_cpu_us[median_i] * 1e-3 / chosen_ms[median_i]),
            "dispatch_share_median_from_min": float(bind_min_us[median_i] * 1e-3 / chosen_ms[median_i]),
            "distilled_bind_us_median": float(np.median(bind_us)), "distilled_bind_us_max": float(bind_us.max()),
            "distilled_bind_us_at_median_input": float(bind_us[median_i]),
            "host_model_select_us_at_median_input": krr_us,
            "recorded_h100_host_model_us_at_median_input": 1e3 * test[median_i]["dispatch_host_ms"],
            "dispatch_share_median": float(bind_us[median_i] * 1e-3 / chosen_ms[median_i]),
            "dispatch_share_own_median": float(bind_us[median_d] * 1e-3 / d_ms[median_d]),
        }
        t = result["this_host"]
        ok = result["distilled"]["fraction"] >= 0.95
        result["targets"] = {"fraction_ge_0.95 (distilled)": ok,
                             "dispatch_share_le_2pct (distilled, this host, wall median)": t["dispatch_share_median"] <= 0.02,
                             "dispatch_share_le_2pct (distilled, this host, CPU time)": t["dispatch_share_median_cpu"] <= 0.02,
                             "both (wall median)": ok and t["dispatch_share_median"] <= 0.02,
                             "both (CPU time)": ok and t["dispatch_share_median_cpu"] <= 0.02}
    return result


def this_host() -> dict[str, Any]:
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average": load, "python": platform.python_version(),
            "note": "shared 2-core host (4 agents), probably slower than the H100 machine's host"}


def _f(v: float | None, fmt: str = ".4f") -> str:
    return "-" if v is None else format(v, fmt)


def markdown(rep: dict[str, Any]) -> str:
    lines = [f"# GPU suite: re-analysis of recorded runs ({rep['date']})", "",
             f"Analysis code commit {rep['commit']}; host timings on this host: {rep['this_host']['cpu']}, "
             f"{rep['this_host']['cores']} cores, load {rep['this_host']['load_average']} "
             f"({rep['this_host']['note']}). No GPU was used: every run time below is recorded.", ""]
    for key, run in rep["runs"].items():
        lines += [f"## {key}: {run['device']}, recorded {run['date']}, commit {run['commit']}, seed {run['seed']}", ""]
        b = run["benchmarks"]
        cols = list(b)
        lines += ["| | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]

        def row(label: str, fn: Any, b: dict[str, Any] = b, cols: list[str] = cols, lines: list[str] = lines) -> None:
            cells = []
            for c in cols:
                try:
                    cells.append(fn(b[c]))
                except (KeyError, TypeError):
                    cells.append("-")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")

        row("train / test inputs", lambda r: f"{r['n_train']} / {r['n_test']}")
        row("adaptive, all features (recorded choice)", lambda r: _f(r["adaptive_all_features"]["fraction"]))
        row("adaptive, host-metadata model (recorded choice)", lambda r: _f(r["adaptive_host_features"]["fraction"]))
        row("training-CV rule: model / fraction", lambda r: f"{r['cv_rule']['chosen_model']} / {_f(r['cv_rule']['fraction'])}")
        row("best fixed, with fall-back to the default (rounds 1-3)", lambda r: (
            f"{r['best_fixed']['with_fallback']['variant']} {_f(r['best_fixed']['with_fallback']['fraction'])} "
            f"(refused on {r['best_fixed']['with_fallback']['refused_inputs']})"))
        row("best fixed, valid on every input (no fall-back)", lambda r: (
            f"{r['best_fixed']['valid_everywhere']['variant']} {_f(r['best_fixed']['valid_everywhere']['fraction'])}"))
        row("adaptive (all features): points above best fixed, fall-back / valid", lambda r: (
            f"{r['adaptive_all_features']['points_above']['with_fallback']:+.1f} / "
            f"{_f(r['adaptive_all_features']['points_above']['valid_everywhere'], '+.1f')}"))
        row("**distilled tree: fraction of oracle**", lambda r: f"**{r['distilled']['fraction']:.4f}**")
        row("distilled: depth / leaves / training CV", lambda r: (
            f"{r['distilled']['depth']} / {r['distilled']['leaves']} / {r['distilled']['cv_fraction_of_oracle']:.3f}"))
        row("distilled: points above best fixed, fall-back / valid", lambda r: (
            f"{r['distilled']['points_above']['with_fallback']:+.1f} / "
            f"{_f(r['distilled']['points_above']['valid_everywhere'], '+.1f')}"))
        row("distilled tree over all features (device features kept): fraction / training CV", lambda r: (
            f"{r['distilled_all_features']['fraction']:.4f} / {r['distilled_all_features']['cv_fraction_of_oracle']:.3f}"))
        row("... its first call would still pay the device features: recorded H100 feature ms at the median input",
            lambda r: f"{r['distilled_all_features']['recorded_feature_ms_at_median_input']:.3f}")
        row("median test input: recorded H100 run, ms", lambda r: f"{r['median_input_run_ms']:.4f}")
        row("distilled `bind` on this host, us: at the median input / median / max", lambda r: (
            f"{r['this_host']['distilled_bind_us_at_median_input']:.2f} / {r['this_host']['distilled_bind_us_median']:.2f}"
            f" / {r['this_host']['distilled_bind_us_max']:.2f}"))
        row("... at the median input: least disturbed loop (wall min) / thread CPU time (median), us",
            lambda r: f"{r['this_host']['distilled_bind_min_us_at_median_input']:.2f} / "
                      f"{r['this_host']['distilled_bind_cpu_us_at_median_input']:.2f}")
        row("host-metadata model `cv.select` at the median input, us: this host wall median (min, CPU) / "
            "recorded H100 host", lambda r: (
            f"{r['this_host']['host_model_select_us_at_median_input']:.1f} "
            f"({r['this_host']['host_model_select_min_us_at_median_input']:.1f}, "
            f"{r['this_host']['host_model_select_cpu_us_at_median_input']:.1f}) / "
            f"{r['this_host']['recorded_h100_host_model_us_at_median_input']:.1f}"))
        row("**distilled first call: share of the median run (this host's cost)**",
            lambda r: f"**{100 * r['this_host']['dispatch_share_median']:.2f} %**")
        row("... from the least disturbed loop / from thread CPU time", lambda r: (
            f"{100 * r['this_host']['dispatch_share_median_from_min']:.2f} % / "
            f"{100 * r['this_host']['dispatch_share_median_cpu']:.2f} %"))
        row("... at the distilled choice's own median input", lambda r: f"{100 * r['this_host']['dispatch_share_own_median']:.2f} %")
        row("fraction >= 0.95 and first call <= 2 % (distilled; this host: wall median / CPU time)",
            lambda r: ("yes" if r["targets"]["both (wall median)"] else "no") + " / "
                      + ("yes" if r["targets"]["both (CPU time)"] else "no"))
        lines += ["", "Distilled trees (feature <= threshold: low, else high):", ""]
        for c in cols:
            lines.append(f"- **{c}** ({', '.join(b[c]['distilled']['features'])}): `{json.dumps(b[c]['distilled']['tree'])}`")
            lines.append(f"  - chosen {b[c]['distilled']['chosen_label_counts']}; oracle {b[c]['distilled']['oracle_label_counts']}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_suite.reanalysis", description=__doc__.splitlines()[0])
    p.add_argument("--raw", default=str(RESULTS / "history" / "gpu_suite_h100_round3_raw.json"))  # the committed reanalysis: round 3
    p.add_argument("--extra", nargs="*", default=[str(RESULTS / "gpu_suite_h100_histogram_seed2025_raw.json")])
    p.add_argument("--out", default="out/gpu_suite", help="folder (default out/gpu_suite/)")
    p.add_argument("--stem", default=None, help="file names (default gpu_suite_<device of --raw>_reanalysis)")
    p.add_argument("--number", type=int, default=20000, help="calls per timing loop")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--no-timing", action="store_true")
    args = p.parse_args(argv)
    rep: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "commit": git_commit(), "this_host": this_host(), "runs": {}}
    for path in [args.raw, *args.extra]:
        raw = json.loads(Path(path).read_text())
        key = Path(path).stem.removesuffix("_raw")
        run = {"file": path, "device": raw["device"]["name"], "date": raw["date"], "commit": raw["commit"],
               "seed": raw["seed"], "benchmarks": {}}
        for name, b in raw["benchmarks"].items():
            if b.get("partial") or not b.get("test"):
                continue
            run["benchmarks"][name] = analyse(name, b, not args.no_timing, args.number, args.repeats)
            print(key, name, json.dumps({k: v for k, v in run["benchmarks"][name].items()
                                         if k in ("distilled", "this_host")}, default=str)[:400], flush=True)
        rep["runs"][key] = run
    first = next(iter(rep["runs"].values()))
    stem = args.stem or f"gpu_suite_{device_tag(first['device'])}_reanalysis"
    write_results(args.out, stem, rep, table=markdown(rep), metadata=run_metadata(device="host only (recorded runs)"))
    print(markdown(rep))


if __name__ == "__main__":
    main()
