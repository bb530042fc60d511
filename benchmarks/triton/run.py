"""Study: adaptune.triton.autotune beside triton.autotune on Triton's tutorial kernels, over realistic keys.

    python -m benchmarks.triton.run prepare --checkout TRITON/python/tutorials   # once, where the checkout is
    python -m benchmarks.triton.run [--kernels matmul,...] [--train 24 --test 24] [--out DIR]
    python -m benchmarks.triton.run --device cpu --train 3 --test 3              # pilot: Triton's interpreter

Per kernel, keys are drawn (token counts skewed toward small batches), split into train and test (never
measured before the test). Side by side on the test trace: ``triton.autotune`` on every key, the same with
the bucketed size rounded up to a power of two, the first configuration untuned, adaptune ``predict`` and
adaptune ``predict+tune``. Oracle = the best configuration Triton's own benchmark measured for that key.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import run_metadata, study_parser, write_results

STUDY = "triton"
DEFAULT_KERNELS = "matmul,softmax,layernorm_fwd,layernorm_bwd,attention"


def parse(argv: list[str] | None = None) -> Any:
    parser = study_parser(STUDY, __doc__)
    parser.add_argument("action", nargs="?", default="run", choices=("run", "prepare"))
    parser.add_argument("--checkout", default=None, help="prepare: Triton's python/tutorials folder")
    parser.add_argument("--tutorials", default=".carry/triton_tutorials", help="the prepared copies")
    parser.add_argument("--kernels", default=DEFAULT_KERNELS)
    parser.add_argument("--train", type=int, default=20, help="training keys per kernel")
    parser.add_argument("--test", type=int, default=20, help="unseen test keys per kernel")
    parser.add_argument("--budget-s", type=float, default=60.0, help="per kernel and phase: no more keys after this")
    parser.add_argument("--deadline-s", type=float, default=420.0, help="start no kernel after this (results so "
                                                                         "far are written after every kernel)")
    parser.add_argument("--bench-ms", default="5,20", help="do_bench warmup,rep in ms for every method alike")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="triton_h100", help="result file stem")
    parser.add_argument("--shrink", type=int, default=1, help="divide every size by this (CPU pilot: 64)")
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------ set-up
def setup_device(device: str, bench_ms: tuple[int, int]) -> Any:
    """Import Triton for the device; every method benchmarks with the same ``do_bench`` budget."""
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    import triton
    import triton.testing
    from triton.runtime.driver import driver

    warmup, rep = bench_ms
    if device == "cpu":
        driver.set_active(_interpreter_driver())
        return triton
    active = driver.active
    active.get_benchmarker = lambda: (lambda fn, quantiles=None: triton.testing.do_bench(
        fn, warmup=warmup, rep=rep, quantiles=quantiles))
    return triton


def _interpreter_driver() -> Any:
    """What the tutorials ask of a driver at import, answered for the CPU pilot (Triton's interpreter)."""
    import torch
    from triton.backends.compiler import GPUTarget

    from adaptune.integrations.triton.environment import host_bench

    class Utils:
        @staticmethod
        def get_device_properties(_index: Any) -> dict:
            return {"multiprocessor_count": 4, "max_num_regs": 65536, "max_shared_mem": 232448, "warpSize": 32}

    class Interpreter:
        utils = Utils()

        def get_active_torch_device(self) -> Any:
            return torch.device("cpu")

        def get_current_target(self) -> Any:
            return GPUTarget("cuda", 90, 32)

        def get_benchmarker(self) -> Any:
            return host_bench

        def get_current_device(self) -> int:
            return 0

    return Interpreter()


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------------ methods
def first_call(fn: Any, device: str) -> float:
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def oracle_run(case: Any, module: Any, keys: list[dict], device: str, budget_s: float) -> dict:
    """triton.autotune on every key: its choice, tuning time, first-call latency, and every config's time."""
    kernel, out = case.kernel(module), {}
    start = time.perf_counter()
    for key in keys:
        if time.perf_counter() - start > budget_s:
            break
        call = case.call(module, key)
        latency = first_call(call, device)
        tkey = tuple(kernel.cache)[-1] if kernel.cache else None
        times = {str(c): float(t[0] if isinstance(t, list | tuple) else t) for c, t in kernel.configs_timings.items()}
        out[_name(key)] = {"key": key, "tkey": list(tkey) if tkey else None, "chosen": str(kernel.cache[tkey]),
                           "times": times, "tuning_s": float(kernel.bench_time), "first_call_s": latency}
    return out


def _name(key: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in key.items())


def bucketed(case: Any, module: Any, keys: list[dict], device: str) -> dict:
    """triton.autotune tuned at the key rounded up to a power of two (what users bucket by hand)."""
    kernel, out = case.kernel(module), {}
    for key in keys:
        bkey = {**key, case.bucket: 1 << max(0, math.ceil(math.log2(key[case.bucket])))}
        before = len(kernel.cache)
        first_call(case.call(module, bkey), device)
        tuned = len(kernel.cache) > before
        chosen = kernel.best_config
        out[_name(key)] = {"chosen": str(chosen), "tuning_s": float(kernel.bench_time) if tuned else 0.0}
    return out


def adaptune_run(case: Any, module: Any, keys: list[dict], device: str, *, wait: bool) -> dict:
    """adaptune with the policy set by $ADAPTUNE_TRITON_POLICY: choice at the first call and after background tuning."""
    kernel, out = case.kernel(module), {}
    for key in keys:
        call = case.call(module, key)
        caller_before = kernel.stats.caller_s
        latency = first_call(call, device)
        out[_name(key)] = {"chosen": str(kernel.best_config), "first_call_s": latency,
                           "tuning_s": kernel.stats.caller_s - caller_before, "call": call}
        if device == "cpu":
            kernel.wait()  # Triton's interpreter is not thread-safe: no launches beside the background thread
    if wait:
        kernel.wait()
        for key in keys:
            entry = out[_name(key)]
            entry["call"]()
            entry["final"] = str(kernel.best_config)
    for entry in out.values():
        entry.pop("call")
    return out


def hit_overhead_us(fn: Any, device: str, calls: int = 200, repeats: int = 15) -> float:
    """Host time of one call whose key is cached (p50 over batches of launches, device drained between)."""
    samples = []
    fn()
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter_ns() - t0) / calls / 1e3)
    sync(device)
    return float(statistics.median(samples))


# ------------------------------------------------------------------------------------------ one kernel
def fractions(oracle: dict, chosen: dict, field: str = "chosen") -> list[float | None]:
    out = []
    for name, o in oracle.items():
        times = o["times"]
        best = min(times.values())
        pick = times.get(chosen[name][field]) if name in chosen else None
        out.append(best / pick if pick and math.isfinite(pick) and pick > 0 else None)
    return out


def summary(values: list[float | None]) -> dict:
    known = [v for v in values if v is not None]
    if not known:
        return {"mean": None, "min": None, "p10": None, "n": 0, "unknown": len(values)}
    return {"mean": float(np.mean(known)), "min": float(np.min(known)), "p10": float(np.percentile(known, 10)),
            "n": len(known), "unknown": len(values) - len(known)}


def study_kernel(case: Any, args: Any, folder: Path, db: str) -> dict:
    from benchmarks.triton.tutorials import load

    rng = np.random.default_rng(args.seed)
    keys = case.keys(rng, args.train + args.test)
    if len(keys) <= args.train:
        raise ValueError(f"{case.name}: only {len(keys)} distinct keys for {args.train} training and "
                         f"{args.test} test keys")
    order = rng.permutation(len(keys))
    train = [keys[i] for i in order[:args.train]]
    test = [keys[i] for i in order[args.train:]]
    os.environ["ADAPTUNE_TRITON_DB"] = db
    # 1. training keys, measured by adaptune (policy tune) into the store
    os.environ["ADAPTUNE_TRITON_POLICY"] = "tune"
    trained = load(folder, case.tutorial, "adaptune", f"{case.name}_train")
    tkernel = case.kernel(trained)
    t0 = time.perf_counter()
    for key in train:
        if time.perf_counter() - t0 > args.budget_s:
            break
        case.call(trained, key)()
    sync(args.device)
    train_s = time.perf_counter() - t0
    # 2. Triton on every test key: its choices, and the per-config times that define the oracle
    tmod = load(folder, case.tutorial, "triton", f"{case.name}_every")
    oracle = oracle_run(case, tmod, test, args.device, args.budget_s)
    test = [o["key"] for o in oracle.values()]
    # 3. adaptune predict: a model trained on the stored keys, nothing benchmarked at call time
    os.environ["ADAPTUNE_TRITON_POLICY"] = "predict"
    pmod = load(folder, case.tutorial, "adaptune", f"{case.name}_predict")
    pkernel = case.kernel(pmod)
    fit_t0 = time.perf_counter()
    selector = pkernel.fit()
    fit_s = time.perf_counter() - fit_t0
    predicted = adaptune_run(case, pmod, test, args.device, wait=False)
    # 4. adaptune predict+tune: the same first choice, then the top-3 measured on a background thread
    os.environ["ADAPTUNE_TRITON_POLICY"] = "predict+tune"
    bmod = load(folder, case.tutorial, "adaptune", f"{case.name}_background")
    bkernel = case.kernel(bmod)
    bkernel.fit()
    background = adaptune_run(case, bmod, test, args.device, wait=True)
    # 5. triton.autotune with the bucketed size rounded up to a power of two
    bucket = bucketed(case, load(folder, case.tutorial, "triton", f"{case.name}_bucket"), test, args.device)
    first = {name: {"chosen": str(case.kernel(tmod).configs[0])} for name in oracle}
    # 6. hit path: the same cached key through both decorators
    probe = test[0]
    batch = {"calls": 200, "repeats": 15} if args.device == "cuda" else {"calls": 2, "repeats": 3}
    overhead = {"triton_autotune": hit_overhead_us(case.call(tmod, probe), args.device, **batch),
                "adaptune": hit_overhead_us(case.call(pmod, probe), args.device, **batch)}
    frac = {"triton_autotune": summary(fractions(oracle, {n: {"chosen": o["chosen"]} for n, o in oracle.items()})),
            "triton_pow2_bucket": summary(fractions(oracle, bucket)),
            "first_config": summary(fractions(oracle, first)),
            "adaptune_predict": summary(fractions(oracle, predicted)),
            "adaptune_predict_tune_first": summary(fractions(oracle, background)),
            "adaptune_predict_tune_final": summary(fractions(oracle, background, "final"))}
    p50 = lambda xs: float(statistics.median(xs)) if xs else None  # noqa: E731
    return {
        "kernel": case.name, "train_keys": len(train), "test_keys": len(test), "configs": len(tkernel.configs),
        "train_tuning_s": train_s, "model": {"kind": selector.kind if selector else None,
                                             "cv_fraction": selector.cv_fraction if selector else None,
                                             "fit_s": fit_s},
        "fraction_of_oracle_unseen": frac,
        "tuning_s": {"triton_autotune": sum(o["tuning_s"] for o in oracle.values()),
                     "triton_pow2_bucket": sum(b["tuning_s"] for b in bucket.values()),
                     "first_config": 0.0,
                     "adaptune_predict": sum(p["tuning_s"] for p in predicted.values()),
                     "adaptune_predict_tune": sum(p["tuning_s"] for p in background.values()),
                     "adaptune_predict_tune_background": bkernel.stats.background_s},
        "first_call_s_p50": {"triton_autotune": p50([o["first_call_s"] for o in oracle.values()]),
                             "adaptune_predict": p50([p["first_call_s"] for p in predicted.values()]),
                             "adaptune_predict_tune": p50([p["first_call_s"] for p in background.values()])},
        "call_overhead_us": overhead,
        "keys": {"train": train, "test": test},
        "per_key": {"oracle": oracle, "predict": predicted, "predict_tune": background, "bucket": bucket},
    }


def targets(r: dict) -> dict:
    """The issue's three targets for one kernel (met or not; None where the run could not tell)."""
    frac = r["fraction_of_oracle_unseen"]["adaptune_predict"]["mean"]
    tuning, overhead = r["tuning_s"], r["call_overhead_us"]
    return {"fraction_of_oracle_unseen_ge_0.95": None if frac is None else frac >= 0.95,
            "tuning_s_predict_le_1pct_of_triton": tuning["adaptune_predict"] <= 0.01 * tuning["triton_autotune"],
            "call_overhead_adaptune_le_triton": overhead["adaptune"] <= overhead["triton_autotune"]}


def table(results: list[dict]) -> list[dict]:
    rows = []
    for r in results:
        f = r["fraction_of_oracle_unseen"]
        rows.append({"kernel": r["kernel"], "keys train/test": f"{r['train_keys']}/{r['test_keys']}",
                     "triton every key": f["triton_autotune"]["mean"], "pow2 bucket": f["triton_pow2_bucket"]["mean"],
                     "first config": f["first_config"]["mean"], "predict": f["adaptune_predict"]["mean"],
                     "predict min": f["adaptune_predict"]["min"],
                     "predict+tune final": f["adaptune_predict_tune_final"]["mean"],
                     "tuning s triton": r["tuning_s"]["triton_autotune"],
                     "tuning s predict": r["tuning_s"]["adaptune_predict"],
                     "first call s triton": r["first_call_s_p50"]["triton_autotune"],
                     "first call s predict": r["first_call_s_p50"]["adaptune_predict"],
                     "hit µs triton": r["call_overhead_us"]["triton_autotune"],
                     "hit µs adaptune": r["call_overhead_us"]["adaptune"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    folder = Path(args.tutorials)
    if args.action == "prepare":
        if not args.checkout:
            raise SystemExit("prepare needs --checkout TRITON/python/tutorials")
        from benchmarks.triton.tutorials import prepare

        for path in prepare(Path(args.checkout), folder):
            print(path)
        return 0
    triton = setup_device(args.device, tuple(int(x) for x in args.bench_ms.split(",")))
    from benchmarks.triton import kernels

    kernels.DEVICE, kernels.SHRINK = args.device, args.shrink
    device = "cpu (Triton interpreter)" if args.device == "cpu" else _gpu_name()
    results, failures = [], {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.kernels.split(","):
            if time.perf_counter() - started > args.deadline_s:
                failures[name] = f"not run: past --deadline-s {args.deadline_s:g}"
                continue
            case = kernels.CASES[name]
            t0 = time.perf_counter()
            try:
                result = study_kernel(case, args, folder, str(Path(tmp) / f"{name}.db"))
            except Exception as exc:  # one kernel failing must not lose the others' results
                failures[name] = f"{type(exc).__name__}: {exc}"
                print(f"{name}: FAILED {failures[name]}", file=sys.stderr, flush=True)
                continue
            result["wall_s"] = time.perf_counter() - t0
            result["targets"] = targets(result)
            results.append(result)
            print(json.dumps({k: result[k] for k in ("kernel", "fraction_of_oracle_unseen", "tuning_s",
                                                     "call_overhead_us", "wall_s")}, default=str), flush=True)
            write(args, device, triton.__version__, results, failures)
    print(write(args, device, triton.__version__, results, failures))
    return 0 if results and not failures else 1


def write(args: Any, device: str, version: str, results: list[dict], failures: dict) -> Path:
    data = {"device": device, "triton": version, "args": vars(args), "results": results, "failures": failures}
    return write_results(args.out, args.name, data, table=table(results), title="adaptune.triton vs triton.autotune",
                         metadata=run_metadata(device))


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()


if __name__ == "__main__":
    sys.exit(main())
