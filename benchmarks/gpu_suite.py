"""Nitro's GPU benchmarks (SpMV, histogram, sort) on one NVIDIA GPU: label, train, dispatch, evaluate.

    PYTHONPATH=src python benchmarks/gpu_suite.py smoke                 # CUDA kernels vs NumPy/SciPy, small sizes
    PYTHONPATH=src python benchmarks/gpu_suite.py run --out DIR [--scale 0.1]   # measure + train + dispatch
    PYTHONPATH=src python benchmarks/gpu_suite.py analyse DIR/raw.json --out DIR  # report, curves, plots (CPU)

`run` generates every input on the GPU (CuPy), times every variant with CUDA events (warm-up, median of
repeats), labels the training set, fits the selection model (adaptune.adaptive, SVM as Nitro), installs it
in a CodeVariant and, on each test input, times the real dispatch (`cv.select`: features on the GPU +
compiled predictor + constraint check) and records what it chose. `analyse` turns raw.json into the
report: fraction of oracle, Nitro's buckets, fixed variants, library default, overheads, active-learning
curves (BvSB vs random), SpMV bandwidth against the measured copy bandwidth, and PNG plots.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.kernels import features, histogram, inputs, sort, spmv

LIBRARY_DEFAULT = {"spmv": "cusparse", "histogram": "bincount", "sort": "cub_radix"}
SETS = {"spmv": (inputs.spmv_specs, 54, 100), "histogram": (inputs.histogram_specs, 60, 100),
        "sort": (inputs.sort_specs, 60, 120)}
SIZE_KEYS = {"n_rows", "nnz", "avg_nnz_per_row", "row_length_sd", "max_deviation", "ell_fill", "dia_fill", "n",
             "n_per_bin", "ascending_runs"}


def model_vector(feats: dict[str, float], names: tuple[str, ...]) -> list[float]:
    """Features as the model sees them: sizes and counts on a log2 scale (they span 4+ decades)."""
    return [math.log2(1.0 + feats[k]) if k in SIZE_KEYS else feats[k] for k in names]


# ------------------------------------------------------------------------------------------ timing


class CudaTimer:
    """Median of CUDA-event timings after warm-up; stops early once `budget_ms` of samples are in."""

    def __init__(self, cp: Any, warmup: int = 2, repeats: int = 10, budget_ms: float = 150.0) -> None:
        self.cp, self.warmup, self.repeats, self.budget_ms = cp, warmup, repeats, budget_ms

    def __call__(self, run: Callable[[], Any]) -> float:
        cp = self.cp
        for _ in range(self.warmup):
            run()
        samples: list[float] = []
        for _ in range(self.repeats):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            run()
            end.record()
            end.synchronize()
            samples.append(cp.cuda.get_elapsed_time(start, end))
            if len(samples) >= 3 and sum(samples) > self.budget_ms:
                break
        return statistics.median(samples)


def wall_median_ms(fn: Callable[[], Any], repeats: int = 25) -> float:
    """Host wall time of fn (which must end in a host sync, as features and dispatch do)."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def copy_bandwidth_gbs(cp: Any, nbytes: int = 2 << 30) -> float:
    """Device-to-device copy, counting bytes read plus written (what the issue's 2.85 TB/s means)."""
    a = cp.ones(nbytes // 4, dtype=cp.float32)
    b = cp.empty_like(a)
    ms = CudaTimer(cp, warmup=3, repeats=10)(lambda: cp.copyto(b, a))

    return 2 * nbytes / (ms * 1e-3) / 1e9


# --------------------------------------------------------------------------------- per benchmark


class SharedFeatures:
    """Registers one CodeVariant feature per name; the first computes the whole vector in one launch."""

    def __init__(self, compute: Callable[..., dict[str, float]], names: tuple[str, ...]) -> None:
        self.compute, self.names = compute, names
        self.last: list[float] = []

    def register(self, cv: Any) -> None:
        for i, name in enumerate(self.names):
            cv.feature(self._getter(i), name=name)

    def _getter(self, i: int) -> Callable[..., float]:
        def feature(*args: Any) -> float:
            if i == 0:
                self.last = model_vector(self.compute(*args), self.names)
            return self.last[i]

        return feature


class Bench:
    """One benchmark's variants, input construction, features, reference check and CodeVariant wiring."""

    name: str
    feature_names: tuple[str, ...]

    def __init__(self, cp: Any, dev: Any) -> None:
        self.cp, self.dev = cp, dev

    def variants(self) -> dict[str, Callable[..., Any]]: ...
    def build(self, spec: inputs.InputSpec) -> tuple[tuple[Any, ...], dict[str, Any]]: ...
    def features(self, *args: Any) -> dict[str, float]: ...
    def available(self, name: str, *args: Any) -> bool:
        return True

    def forget(self, *args: Any) -> None:
        """Drop what an input keeps of its features, so the next call computes them (a first call)."""

    def check(self, name: str, args: tuple[Any, ...], out: Any, ref: Any) -> bool: ...

    def code_variant(self, timer: CudaTimer) -> Any:
        from adaptune.adaptive import CodeVariant

        cv = CodeVariant(self.name, timer=timer, verify=False)
        for vname, fn in self.variants().items():
            cv.variant(fn, name=vname, default=(vname == LIBRARY_DEFAULT[self.name]))
            if vname in self.constrained:
                cv.constraint(vname)(lambda *args, _v=vname: self.available(_v, *args))
        SharedFeatures(self.features, self.feature_names).register(cv)
        return cv

    constrained: tuple[str, ...] = ()


class SpmvBench(Bench):
    name = "spmv"
    feature_names = features.SPMV_FEATURES
    constrained = ("ell", "dia")

    def variants(self) -> dict[str, Callable[..., Any]]:
        return spmv.variants()

    def build(self, spec):
        cp = self.cp
        indptr, indices, data, shape = inputs.sparse_matrix(spec.family, spec.size, spec.params["avg"], spec.seed,
                                                            xp=cp)
        m = spmv.upload(self.dev, indptr, indices, data, shape)
        x = cp.random.default_rng(spec.seed).random(shape[1], dtype=cp.float32) * 2 - 1
        y = cp.empty(shape[0], dtype=cp.float32)
        # useful bytes of one product (format-independent): values + column indices + row pointers + y + x
        nbytes = m.nnz * 8 + (m.n_rows + 1) * 4 + m.n_rows * 4 + m.n_cols * 4
        info = {"n_rows": m.n_rows, "nnz": m.nnz, "bytes": nbytes, "ell_built": m.ell is not None,
                "dia_built": m.dia is not None}
        return (m, x, y), info

    def features(self, m, x, y):
        return features.spmv_features(m)

    def forget(self, m, x, y):
        features.forget_spmv_features(m)

    def available(self, name, m, x, y):
        return spmv.available(m, name)

    def reference(self, args):
        m, x, _ = args
        ref = m.library @ x
        absmat = m.library.copy()
        absmat.data = self.cp.abs(absmat.data)
        return ref, absmat @ self.cp.abs(x)

    def check(self, name, args, out, ref):
        value, magnitude = ref
        return bool(self.cp.all(self.cp.abs(args[2] - value) <= 1e-4 * magnitude + 1e-6))


class HistogramBench(Bench):
    name = "histogram"
    feature_names = features.HISTOGRAM_FEATURES

    def variants(self):
        table = dict(histogram.variants())
        table["bincount"] = histogram.bincount
        return table

    def build(self, spec):
        data = inputs.histogram_data(spec.family, spec.size, spec.seed, xp=self.cp)
        d = histogram.upload(self.dev, data)
        out, queue = self.cp.zeros(256, self.cp.uint32), self.cp.zeros(1, self.cp.uint32)
        return (d, out, queue), {"n": d.n_bytes, "bytes": d.n_bytes}

    def features(self, d, out, queue):
        return features.histogram_features(d)

    def reference(self, args):
        return self.cp.bincount(args[0].raw[: args[0].n_bytes], minlength=256)

    def check(self, name, args, out, ref):
        return bool(self.cp.array_equal(self.cp.asarray(out).astype(self.cp.int64), ref))


class SortBench(Bench):
    name = "sort"
    feature_names = features.SORT_FEATURES

    def variants(self):
        return sort.variants(with_torch=True)

    def build(self, spec):
        keys = inputs.sort_keys(spec.family, spec.size, spec.params["dtype"], spec.seed, xp=self.cp)
        return (self.dev, keys), {"n": int(keys.size), "bytes": int(keys.nbytes), "dtype": str(keys.dtype)}

    def features(self, dev, keys):
        return features.sort_features(dev, keys)

    def reference(self, args):
        return self.cp.sort(args[1])

    def check(self, name, args, out, ref):
        return bool(self.cp.array_equal(self.cp.asarray(out), ref))


BENCHES = {"spmv": SpmvBench, "histogram": HistogramBench, "sort": SortBench}


# ------------------------------------------------------------------------------------- measuring


def measure_input(bench: Bench, spec: inputs.InputSpec, timer: CudaTimer, cv: Any = None) -> dict[str, Any]:
    """Time every variant on one input (inf where a constraint refuses it or the output is wrong)."""
    args, info = bench.build(spec)
    feats = bench.features(*args)
    feature_ms = wall_median_ms(lambda: (bench.forget(*args), bench.features(*args)))
    ref = bench.reference(args)
    times: dict[str, float | None] = {}
    status: dict[str, str] = {}
    for vname, fn in bench.variants().items():
        if not bench.available(vname, *args):
            times[vname], status[vname] = None, "constraint"
            continue
        out = fn(*args)
        if not bench.check(vname, args, out, ref):
            times[vname], status[vname] = None, "wrong_result"
            continue
        times[vname], status[vname] = timer(lambda f=fn: f(*args)), "ok"
    record = {"spec": spec.as_dict(), "name": spec.name, "info": info, "features": feats,
              "model_features": model_vector(feats, bench.feature_names), "feature_ms": feature_ms,
              "times_ms": times, "status": status}
    if cv is not None:
        record["chosen"] = str(cv.select(*args))
        # first call on an input: its features are computed; repeated calls on one SpMV matrix reuse them
        record["dispatch_ms"] = wall_median_ms(lambda: (bench.forget(*args), cv.select(*args)))
        if type(bench).forget is not Bench.forget:
            record["dispatch_cached_ms"] = wall_median_ms(lambda: cv.select(*args))
    return record


def cost_matrices(records: list[dict[str, Any]], names: list[str], default: str) -> tuple[np.ndarray, np.ndarray]:
    """costs (inf where refused or wrong) and run-time costs (refused -> the default's cost, as dispatch does)."""
    costs = np.array([[r["times_ms"][v] if r["times_ms"][v] is not None else np.inf for v in names]
                      for r in records], float)
    runtime = costs.copy()
    d = names.index(default)
    for i, r in enumerate(records):
        for j, v in enumerate(names):
            if r["status"][v] == "constraint":
                runtime[i, j] = costs[i, d]
    return costs, runtime


def run_benchmark(name: str, cp: Any, dev: Any, scale: float, seed: int, progress: Any) -> dict[str, Any]:
    from adaptune.adaptive import Label
    from adaptune.adaptive.models import fit_model

    bench = BENCHES[name](cp, dev)
    make, n_train, n_test = SETS[name]
    n_train, n_test = max(6, round(n_train * scale)), max(8, round(n_test * scale))
    train, test = inputs.train_test(make, n_train, n_test, seed)
    timer = CudaTimer(cp, repeats=10 if name != "sort" else 7)
    names = list(bench.variants())
    task = progress.add_task(f"{name}: train", total=len(train) + len(test))
    train_rec = []
    for spec in train:
        train_rec.append(measure_input(bench, spec, timer))
        cp.get_default_memory_pool().free_all_blocks()
        best = min((v for v in names if train_rec[-1]["times_ms"][v] is not None),
                   key=lambda v: train_rec[-1]["times_ms"][v])
        progress.update(task, advance=1, description=f"{name}: train, last best {best}")
    costs, runtime = cost_matrices(train_rec, names, LIBRARY_DEFAULT[name])
    xs = np.array([r["model_features"] for r in train_rec])
    t0 = time.perf_counter()
    fitted = fit_model("svm", xs, costs, runtime)
    fit_s = time.perf_counter() - t0
    cv = bench.code_variant(timer)
    cv.install_model(fitted.params, [Label.of(v) for v in names], fitted.kind,
                     {"cv_fraction_of_oracle": fitted.cv_fraction})
    test_rec = []
    for spec in test:
        test_rec.append(measure_input(bench, spec, timer, cv))
        cp.get_default_memory_pool().free_all_blocks()
        progress.update(task, advance=1, description=f"{name}: test, chose {test_rec[-1]['chosen']}")
    return {"variants": names, "default": LIBRARY_DEFAULT[name], "feature_names": list(bench.feature_names),
            "train": train_rec, "test": test_rec,
            "model": {"kind": fitted.kind, "hyper": fitted.hyper, "cv_fraction_of_oracle": fitted.cv_fraction,
                      "fit_s": fit_s}}


def device_description(cp: Any) -> dict[str, Any]:
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {"name": name, "multiprocessors": int(props["multiProcessorCount"]),
            "l2_bytes": int(props["l2CacheSize"]), "memory_bytes": int(props["totalGlobalMem"]),
            "cuda_runtime": int(cp.cuda.runtime.runtimeGetVersion()),
            "driver": int(cp.cuda.runtime.driverGetVersion()), "cupy": cp.__version__}


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cmd_run(args: argparse.Namespace) -> None:
    import cupy as cp

    from adaptune.kernels.device import CupyDevice

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = CupyDevice()
    raw: dict[str, Any] = {"device": device_description(cp), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "commit": args.commit or git_commit(), "scale": args.scale, "seed": args.seed,
                           "python": platform.python_version(), "benchmarks": {}}
    raw["copy_bandwidth_gbs"] = copy_bandwidth_gbs(cp)
    if "histogram" in args.benchmarks:
        raw["histogram_sample_cost"] = histogram_sample_cost(cp, dev)
    with make_progress() as progress:
        for name in args.benchmarks:
            t0 = time.perf_counter()
            raw["benchmarks"][name] = run_benchmark(name, cp, dev, args.scale, args.seed, progress)
            raw["benchmarks"][name]["wall_s"] = time.perf_counter() - t0
            (out / "raw.json").write_text(json.dumps(raw, indent=1))
    print(f"wrote {out / 'raw.json'}")


def make_progress() -> Any:
    """A rich progress bar (best-so-far in the description); plain lines where rich is missing."""
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        return _PlainProgress()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, transient=False)


class _PlainProgress:
    def __enter__(self) -> _PlainProgress:
        self.done: dict[int, int] = {}
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def add_task(self, description: str, total: int) -> int:
        self.done[len(self.done)] = 0
        return len(self.done) - 1

    def update(self, task: int, advance: int = 0, description: str = "") -> None:
        self.done[task] += advance
        if self.done[task] % 10 == 0:
            print(f"[{self.done[task]}] {description}", flush=True)


def histogram_sample_cost(cp: Any, dev: Any) -> list[dict[str, float]]:
    """Cost of the sub-sample feature against its size, on a 64 MB uniform input (Nitro: shrink it)."""
    data = inputs.histogram_data("uniform", 64 << 20, 1, xp=cp)
    d = histogram.upload(dev, data)
    run_ms = CudaTimer(cp)(lambda: histogram.histogram(d, "shared", False))
    rows = []
    for sample in (100_000, 10_000, 1_000, 100):
        ms = wall_median_ms(lambda s=sample: features.histogram_features(d, sample=s))
        rows.append({"sample": sample, "feature_ms": ms, "histogram_ms": run_ms, "share": ms / run_ms})
    return rows


# --------------------------------------------------------------------------------------- smoke


def cmd_smoke(args: argparse.Namespace) -> None:
    """Every CUDA kernel against NumPy/SciPy at small sizes (the PoCL tests' twin on the real GPU)."""
    import cupy as cp
    import scipy.sparse as sp

    from adaptune.kernels.device import CupyDevice

    dev = CupyDevice()
    failures: list[str] = []
    checks = 0

    def expect(ok: bool, what: str) -> None:
        nonlocal checks
        checks += 1
        if not ok:
            failures.append(what)

    for family in inputs.MATRIX_FAMILIES:
        indptr, indices, data, shape = inputs.sparse_matrix(family, 3000, 9.0, seed=3)
        a = sp.csr_matrix((data, indices, indptr), shape=shape)
        x = np.random.default_rng(1).standard_normal(shape[1]).astype(np.float32)
        want = a.astype(np.float64) @ x.astype(np.float64)
        tol = 1e-4 * (abs(a).astype(np.float64) @ np.abs(x)) + 1e-5
        m = spmv.upload(dev, cp.asarray(indptr), cp.asarray(indices), cp.asarray(data), shape,
                        ell_max_fill=1e9, dia_max_fill=1e9, memory_budget_bytes=1 << 32)
        xd = cp.asarray(x)
        for vname, fn in spmv.variants().items():
            y = cp.zeros(shape[0], cp.float32)
            fn(m, xd, y)
            expect(bool(np.all(np.abs(cp.asnumpy(y) - want) <= tol)), f"spmv {family} {vname}")
        for vec in spmv.VECTOR_WIDTHS:
            y = cp.zeros(shape[0], cp.float32)
            spmv.csr_vector(m, xd, y, vec, portable_reduce=True)
            expect(bool(np.all(np.abs(cp.asnumpy(y) - want) <= tol)), f"spmv {family} portable vec{vec}")
        got = features.spmv_features(m, sample_rows=shape[0])
        ref = features.spmv_features_reference(indptr, indices, shape)
        expect(all(abs(got[k] - ref[k]) <= 1e-3 * max(1.0, abs(ref[k])) for k in ref), f"spmv features {family}")
    for kind in inputs.HISTOGRAM_KINDS:
        data = inputs.histogram_data(kind, 1_000_003, seed=4)
        want = np.bincount(data, minlength=256)
        d = histogram.upload(dev, cp.asarray(data))
        for vname, fn in {**histogram.variants(), "bincount": histogram.bincount}.items():
            expect(bool(np.array_equal(cp.asnumpy(fn(d)), want)), f"histogram {kind} {vname}")
        ref = features.histogram_features_reference(data)
        got = features.histogram_features(d)
        expect(abs(got["subsample_sd"] - ref["subsample_sd"]) < 1e-2, f"histogram features {kind}")
    for dtype in inputs.SORT_DTYPES:
        for order in inputs.SORT_ORDERS:
            keys = inputs.sort_keys(order, 100_003, dtype, seed=7)
            want = np.sort(keys)
            kd = cp.asarray(keys)
            for vname, fn in sort.variants(with_torch=True).items():
                expect(bool(np.array_equal(cp.asnumpy(cp.asarray(fn(dev, kd))), want)), f"sort {dtype} {order} {vname}")
            expect(features.sort_features(dev, kd) == features.sort_features_reference(keys),
                   f"sort features {dtype} {order}")
    # the GPU-side generators must make the same kinds of input (same structure statistics)
    for family in ("banded", "power_law", "arrow"):
        indptr, indices, data, shape = inputs.sparse_matrix(family, 100_000, 12.0, seed=5, xp=cp)
        m = spmv.upload(dev, indptr, indices, data, shape)
        f = features.spmv_features(m)
        print(f"  gpu-generated {family}: " + ", ".join(f"{k}={v:.3g}" for k, v in f.items()))
    print(f"smoke: {checks - len(failures)}/{checks} checks passed on {dev.name}")
    for what in failures:
        print("  FAILED:", what)
    if failures:
        sys.exit(1)


# ------------------------------------------------------------------------------------- analysing


def analyse_benchmark(name: str, b: dict[str, Any], copy_gbs: float, curves: bool, seed: int,
                      l2_bytes: int = 50 << 20) -> dict[str, Any]:
    from adaptune.adaptive.active import learning_curves
    from adaptune.adaptive.evaluate import bucket_counts
    from adaptune.adaptive.models import fraction_of_oracle

    names, default = b["variants"], b["default"]
    test, train = b["test"], b["train"]
    costs, runtime = cost_matrices(test, names, default)
    chosen = np.array([names.index(r["chosen"]) for r in test])
    frac = fraction_of_oracle(runtime, chosen)
    fixed = {v: float(np.nanmean(fraction_of_oracle(runtime, np.full(len(test), j)))) for j, v in enumerate(names)}
    best_fixed = max(fixed, key=fixed.get)
    best_ms = np.min(runtime, axis=1)
    chosen_ms = runtime[np.arange(len(test)), chosen]
    dispatch_ms = np.array([r["dispatch_ms"] for r in test])
    feature_ms = np.array([r["feature_ms"] for r in test])
    median_i = int(np.argsort(chosen_ms)[len(chosen_ms) // 2])
    result: dict[str, Any] = {
        "n_train": len(train), "n_test": len(test), "variants": names, "library_default": default,
        "model": b["model"],
        "mean_fraction_of_oracle": float(np.nanmean(frac)),
        "buckets": bucket_counts(frac),
        "fixed_variants": fixed, "best_fixed_variant": best_fixed,
        "points_above_best_fixed": 100 * (float(np.nanmean(frac)) - fixed[best_fixed]),
        "library_default_mean": fixed[default],
        "oracle_label_counts": {v: int((np.argmin(runtime, axis=1) == j).sum()) for j, v in enumerate(names)},
        "chosen_label_counts": {v: int((chosen == j).sum()) for j, v in enumerate(names)},
        "overhead": {
            "feature_ms_median": float(np.median(feature_ms)),
            "dispatch_ms_median": float(np.median(dispatch_ms)),
            "dispatch_share_at_median_input": float(dispatch_ms[median_i] / chosen_ms[median_i]),
            "median_input_run_ms": float(chosen_ms[median_i]),
            "dispatch_share_median": float(np.median(dispatch_ms / chosen_ms)),
            "calls_to_amortise_to_2pct_at_median_input": float(math.ceil(dispatch_ms[median_i] / (0.02 * chosen_ms[median_i]))),
        },
        "time_ms_total": {"adaptive": float(chosen_ms.sum()), "oracle": float(best_ms.sum()),
                          **{v: float(runtime[:, j].sum()) for j, v in enumerate(names)}},
    }
    cached_ms = np.array([r.get("dispatch_cached_ms", np.nan) for r in test], float)
    if np.isfinite(cached_ms).all():
        result["overhead"]["dispatch_cached_ms_median"] = float(np.median(cached_ms))
        result["overhead"]["dispatch_cached_share_at_median_input"] = float(cached_ms[median_i] / chosen_ms[median_i])
    if name == "spmv":
        lib = runtime[:, names.index("cusparse")]
        if np.isfinite(cached_ms).all():
            result["geomean_speedup_vs_cusparse_with_cached_dispatch"] = float(
                np.exp(np.mean(np.log(lib / (chosen_ms + cached_ms)))))
        result["geomean_speedup_vs_cusparse"] = float(np.exp(np.mean(np.log(lib / chosen_ms))))
        result["geomean_speedup_vs_cusparse_with_dispatch"] = float(np.exp(np.mean(np.log(lib / (chosen_ms + dispatch_ms)))))
        result["geomean_oracle_speedup_vs_cusparse"] = float(np.exp(np.mean(np.log(lib / best_ms))))
        nbytes = np.array([r["info"]["bytes"] for r in test], float)
        bw = nbytes / (chosen_ms * 1e-3) / 1e9
        big = nbytes >= 2 * l2_bytes  # beyond 2x L2 the data cannot stay cached between calls
        big_bw = bw[big] if big.any() else bw
        result["selected_bandwidth_gbs"] = {
            "median": float(np.median(bw)), "max": float(bw.max()),
            "median_fraction_of_copy": float(np.median(bw) / copy_gbs), "max_fraction_of_copy": float(bw.max() / copy_gbs),
            "n_beyond_2x_l2": int(big.sum()), "median_beyond_2x_l2": float(np.median(big_bw)),
            "median_fraction_of_copy_beyond_2x_l2": float(np.median(big_bw) / copy_gbs),
            "max_fraction_of_copy_beyond_2x_l2": float(big_bw.max() / copy_gbs)}
    if curves:
        tr_costs, tr_runtime = cost_matrices(train, names, default)
        result["learning_curves"] = learning_curves(
            np.array([r["model_features"] for r in train]), tr_costs, tr_runtime,
            np.array([r["model_features"] for r in test]), runtime, max_labels=len(train), kind="svm",
            random_repeats=3, seed=seed)
    result["per_input"] = [{"name": r["name"], "chosen": r["chosen"], "oracle": names[int(np.argmin(runtime[i]))],
                            "fraction": float(frac[i]), "chosen_ms": float(chosen_ms[i]),
                            "dispatch_ms": float(dispatch_ms[i])} for i, r in enumerate(test)]
    return result


def cmd_analyse(args: argparse.Namespace) -> None:
    from concurrent.futures import ProcessPoolExecutor

    raw = json.loads(Path(args.raw).read_text())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    copy_gbs = raw["copy_bandwidth_gbs"]
    with ProcessPoolExecutor(max_workers=max(1, min(3, args.jobs))) as pool:
        futures = {n: pool.submit(analyse_benchmark, n, b, copy_gbs, not args.no_curves, raw["seed"],
                               raw["device"]["l2_bytes"])
                   for n, b in raw["benchmarks"].items()}
        summary = {n: f.result() for n, f in futures.items()}
    report = {k: raw[k] for k in ("device", "date", "commit", "scale", "seed", "copy_bandwidth_gbs")}
    report["histogram_sample_cost"] = raw.get("histogram_sample_cost")
    report["benchmarks"] = summary
    stem = args.stem
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    (out / f"{stem}.md").write_text(markdown(report, stem))
    plot(report, out, stem)
    print((out / f"{stem}.md").read_text())


def markdown(rep: dict[str, Any], stem: str) -> str:
    d = rep["device"]
    lines = [f"# GPU suite: Nitro's SpMV, histogram and sort benchmarks on {d['name']}", "",
             f"Device {d['name']} ({d['multiprocessors']} SMs, L2 {d['l2_bytes'] >> 20} MB), CUDA runtime "
             f"{d['cuda_runtime']}, CuPy {d['cupy']}; date {rep['date']}; commit {rep['commit']}; "
             f"measured copy bandwidth {rep['copy_bandwidth_gbs'] / 1e3:.2f} TB/s (read + write).", "",
             "Timing: CUDA events, 2 warm-up calls, median of up to 10 (sort 7) repeats. Fraction of oracle = "
             "best variant's time / chosen variant's time per test input (constraint failures fall back to the "
             "library default, as dispatch does). Model: SVM (RBF, features in [-1, 1], C and gamma by "
             "cross-validated fraction of oracle), installed in an adaptune CodeVariant; `chosen` is what "
             "`cv.select` returned on the GPU.", "",
             "| | SpMV | Histogram | Sort |", "|---|---|---|---|"]
    b = rep["benchmarks"]
    cols = [n for n in ("spmv", "histogram", "sort") if n in b]

    def row(label: str, fn: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(fn(b[n]) if n in b else "-" for n in ("spmv", "histogram", "sort")) + " |")

    row("train / test inputs", lambda r: f"{r['n_train']} / {r['n_test']}")
    row("**adaptive: mean fraction of oracle**", lambda r: f"**{r['mean_fraction_of_oracle']:.4f}**")
    row("Nitro (paper)", lambda r: {"spmv": "0.9374", "histogram": "0.9416", "sort": "0.9925"}[_name_of(b, r)])
    row("buckets <70 / 70-80 / 80-90 / 90-100 %", lambda r: " / ".join(str(v) for v in r["buckets"].values()))
    row("best fixed variant (mean)", lambda r: f"{r['best_fixed_variant']} ({r['fixed_variants'][r['best_fixed_variant']]:.4f})")
    row("points above best fixed", lambda r: f"{r['points_above_best_fixed']:+.1f}")
    row("library default (mean)", lambda r: f"{r['library_default']} ({r['library_default_mean']:.4f})")
    row("features, median ms", lambda r: f"{r['overhead']['feature_ms_median']:.3f}")
    row("dispatch (features + model), median ms", lambda r: f"{r['overhead']['dispatch_ms_median']:.3f}")
    row("dispatch, features kept with the input, median ms",
        lambda r: f"{r['overhead']['dispatch_cached_ms_median']:.3f}" if "dispatch_cached_ms_median" in r["overhead"] else "-")
    row("median test input: run ms", lambda r: f"{r['overhead']['median_input_run_ms']:.3f}")
    row("dispatch share at the median input", lambda r: f"{100 * r['overhead']['dispatch_share_at_median_input']:.1f} %")
    row("calls to amortise dispatch to 2 %", lambda r: f"{r['overhead']['calls_to_amortise_to_2pct_at_median_input']:.0f}")
    row("share with features kept with the input",
        lambda r: f"{100 * r['overhead']['dispatch_cached_share_at_median_input']:.1f} %"
        if "dispatch_cached_share_at_median_input" in r["overhead"] else "-")
    lines += ["", "Fixed variants (mean fraction of oracle over the test set):", ""]
    for n in cols:
        lines.append(f"- **{n}**: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(b[n]["fixed_variants"].items(), key=lambda kv: -kv[1])))
        lines.append(f"  - oracle labels: {b[n]['oracle_label_counts']}; chosen: {b[n]['chosen_label_counts']}")
    if "spmv" in b:
        s = b["spmv"]
        bw = s["selected_bandwidth_gbs"]
        lines += ["", f"SpMV vs cuSPARSE (geometric mean over test matrices): adaptive {s['geomean_speedup_vs_cusparse']:.3f}x "
                  f"(kernel time), {s['geomean_speedup_vs_cusparse_with_dispatch']:.3f}x including a first-call dispatch "
                  f"(features computed) on every call"
                  + (f", {s['geomean_speedup_vs_cusparse_with_cached_dispatch']:.3f}x including a dispatch with the "
                     "matrix's features kept (repeated products with one matrix)"
                     if "geomean_speedup_vs_cusparse_with_cached_dispatch" in s else "") + "; "
                  f"oracle {s['geomean_oracle_speedup_vs_cusparse']:.3f}x.",
                  f"Selected SpMV bandwidth (useful bytes: values, column indices, row pointers, x, y): median "
                  f"{bw['median']:.0f} GB/s = {100 * bw['median_fraction_of_copy']:.1f} % of copy, max {bw['max']:.0f} GB/s = "
                  f"{100 * bw['max_fraction_of_copy']:.1f} % (matrices that fit in L2 exceed copy bandwidth). "
                  f"On the {bw['n_beyond_2x_l2']} test matrices over 2x L2: median "
                  f"{bw['median_beyond_2x_l2']:.0f} GB/s = {100 * bw['median_fraction_of_copy_beyond_2x_l2']:.1f} % of copy, "
                  f"max {100 * bw['max_fraction_of_copy_beyond_2x_l2']:.1f} %."]
    if rep.get("histogram_sample_cost"):
        lines += ["", "Histogram sub-sample feature cost (64 MB uniform input): " + "; ".join(
            f"{r['sample']} samples {r['feature_ms'] * 1e3:.0f} us = {100 * r['share']:.1f} % of one histogram"
            for r in rep["histogram_sample_cost"])]
    if any("learning_curves" in b[n] for n in cols):
        lines += ["", "Active learning (fraction of oracle on the test set vs labels used; random = mean of 3 seeds):", ""]
        for n in cols:
            c = b[n].get("learning_curves")
            if not c:
                continue
            pts = {sel: {p["labels"]: p["fraction_of_oracle"] for p in c[sel]} for sel in c}
            marks = sorted(set.intersection(*(set(v) for v in pts.values())))
            shown = [m for m in marks if m in (marks[0], 10, 20, 30, 40, marks[-1])]
            lines.append(f"- **{n}**: " + "; ".join(f"{m} labels: " + ", ".join(f"{sel} {pts[sel][m]:.3f}" for sel in pts)
                                                      for m in shown))
    lines += ["", f"Plots: `{stem}_fractions.png`, `{stem}_learning.png`. Raw per-input data: `{stem}.json`.", ""]
    return "\n".join(lines)


def _name_of(b: dict[str, Any], r: dict[str, Any]) -> str:
    return next(n for n, v in b.items() if v is r)


def plot(rep: dict[str, Any], out: Path, stem: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = rep["benchmarks"]
    fig, axes = plt.subplots(1, len(b), figsize=(5.5 * len(b), 4.2), squeeze=False)
    for ax, (n, r) in zip(axes[0], b.items(), strict=True):
        items = sorted(r["fixed_variants"].items(), key=lambda kv: kv[1])
        labels = [k for k, _ in items] + ["adaptive"]
        values = [v for _, v in items] + [r["mean_fraction_of_oracle"]]
        colors = ["#999999"] * len(items) + ["#d62728"]
        ax.barh(labels, values, color=colors)
        ax.set_xlim(0, 1.0)
        ax.set_title(f"{n}: mean fraction of oracle")
        for y, v in enumerate(values):
            ax.text(min(v, 0.98), y, f"{v:.3f}", va="center", ha="right", fontsize=7, color="white")
    fig.tight_layout()
    fig.savefig(out / f"{stem}_fractions.png", dpi=110)
    plt.close(fig)
    with_curves = {n: r["learning_curves"] for n, r in b.items() if r.get("learning_curves")}
    if with_curves:
        fig, axes = plt.subplots(1, len(with_curves), figsize=(5 * len(with_curves), 3.8), squeeze=False)
        for ax, (n, c) in zip(axes[0], with_curves.items(), strict=True):
            for sel, pts in c.items():
                ax.plot([p["labels"] for p in pts], [p["fraction_of_oracle"] for p in pts], label=sel)
            ax.set_xlabel("labelled training inputs")
            ax.set_ylabel("fraction of oracle (test)")
            ax.set_title(n)
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / f"{stem}_learning.png", dpi=110)
        plt.close(fig)


# ------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("smoke", help="CUDA kernels against NumPy/SciPy at small sizes")
    p.set_defaults(fn=cmd_smoke)
    p = sub.add_parser("run", help="measure, train and dispatch on the GPU; writes OUT/raw.json")
    p.add_argument("--out", required=True)
    p.add_argument("--scale", type=float, default=1.0, help="multiply the number of inputs (pilot: 0.1)")
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--benchmarks", nargs="+", default=list(BENCHES), choices=list(BENCHES))
    p.add_argument("--commit", default=None, help="commit hash to record (the GPU copy may have no .git)")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("analyse", help="report, learning curves and plots from raw.json (CPU only)")
    p.add_argument("raw")
    p.add_argument("--out", required=True)
    p.add_argument("--stem", default="gpu_suite_h100")
    p.add_argument("--jobs", type=int, default=3)
    p.add_argument("--no-curves", action="store_true")
    p.set_defaults(fn=cmd_analyse)
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
