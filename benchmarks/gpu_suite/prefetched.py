"""The prefetched first call on the GPU suite's median test inputs: one selector per benchmark
(``adaptune.kernels.prefetched.PrefetchedDispatch``), host wall time of its first call and its choice's fraction
of oracle, on the device.

    python -m benchmarks.gpu_suite.prefetched [--device cuda|opencl] [--out DIR] [--size-scale S] [--rules FILE]

Both rules (host metadata; host metadata + device features) and the budget gate are fitted on the training inputs
of a recorded run (default: the committed round-4 H100 raw file) alone: ``distilled.distil_gated`` with the
students of ``distilled.STUDENT_RECIPES`` (``--plain-trees``: the distilled trees only, as in round 4), or taken
from ``--rules``, a ``first_call_rules.py`` result (the selector it chose per benchmark, fitted offline: no fitting
here); ``--no-gate``: the feature rule at every size where it beat the host rule. Below the gate nothing is
prefetched (``fix`` starts nothing), so the first call is the host rule alone. The median test input is the one at
the middle of the test inputs ordered by the recorded run time of the selector's choice (recorded features).
There, live: every variant is timed (the suite's timer and checks); the time from fix until the features are on
the host; the feature path's cost (a first call with the features landed, after a sleep of twice that time) and
the gate from it; then, ``--repeats`` times per pause: the object's features are forgotten, the selector's
``fix`` starts them on a side stream where the gate admits the object (its host time is reported: it is spent at
fix time, not in the first call), the caller pauses (``--pauses`` ms: ``time.sleep``, the
GIL free as during device waits or I/O; and once busy in Python holding the GIL, where the early finish has to
wait for it), and the first call (``bind``) is timed on the host. Reported: its median and p90, how often the
features were used, the time from fix until the features were on the host, the chosen variant's fraction of
oracle at that input (live times; with ``--oracle-rounds K`` every variant is timed K times, the choice judged
against each round's best, and the median of those K fractions reported, each beside it) and the first call's
share of the run (at each variant's median time). CUDA or, as a pilot, OpenCL (PoCL; the
trees are then fitted over the variants PoCL has). Writes DIR/prefetched_<device>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.kernels import distilled, inputs
from adaptune.kernels.prefetched import PrefetchedDispatch
from benchmarks.gpu_suite.run import (
    BENCHES,
    TIMING,
    Runtime,
    add_replace_argument,
    cost_matrices,
    load_raw,
    measure_input,
    shrink,
)
from benchmarks.harness import device_tag, write_results

RAW = Path("benchmarks/gpu_suite/results/gpu_suite_h100_raw.json")  # round 4, commit c899c09
BUDGET = 0.02
PAUSES_MS = (0.0, 0.1, 0.5, 2.0, 10.0)
BUSY_PAUSE_MS = 0.5


def matrices(benchmark: str, records: list[dict[str, Any]], feature_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Host metadata and device features (as recorded) of recorded inputs: what the two trees are fitted on."""
    return (np.array([distilled.metadata_from_info(benchmark, r["info"]) for r in records], float),
            np.array([[r["features"][k] for k in feature_names] for r in records], float))


def fit(benchmark: str, b: dict[str, Any], keep: list[str], read_us: float, students: tuple[dict[str, float], ...],
        rules: dict[str, Any] | None = None) -> dict[str, Any]:
    """``distilled.distil_gated`` on a recorded run's training inputs, over the variants ``keep`` (run times of
    refused variants: the recorded default's, as dispatch falls back); or the selector ``rules`` names (a
    first_call_rules.py result's, fitted offline on the same inputs over every recorded variant)."""
    _, runtime = cost_matrices(b["train"], b["variants"], b["default"])
    runtime = runtime[:, [b["variants"].index(v) for v in keep]]
    h, f = matrices(benchmark, b["train"], b["feature_names"])
    if rules is not None:
        sel = rules["selector"]
        gated = {"host": {"tree": sel["host_tree"], "rule": sel["host_rule"]},
                 "features": {"tree": sel["feature_tree"], "rule": sel["feature_rule"]},
                 "min_size": sel["min_size"]}
    else:
        gated = distilled.distil_gated(h, f, runtime, keep, read_us, BUDGET, benchmark, students=students)
    return {**gated, "train_runtime": runtime, "train_host": h}


def recorded_median(benchmark: str, b: dict[str, Any], tree_fit: dict[str, Any], keep: list[str]) -> int:
    """Index of the median test input by the recorded run time of the selector's choice (features ready)."""
    _, runtime = cost_matrices(b["test"], b["variants"], b["default"])
    h, f = matrices(benchmark, b["test"], b["feature_names"])
    limit = np.inf if tree_fit["min_size"] is None else tree_fit["min_size"]
    chosen = [distilled.predict(tree_fit["features"]["tree"], list(hr) + list(fr))
              if hr[distilled.GATE_SIZE[benchmark]] >= limit else distilled.predict(tree_fit["host"]["tree"], hr)
              for hr, fr in zip(h, f, strict=True)]
    run = np.array([runtime[i, b["variants"].index(c)] for i, c in enumerate(chosen)])
    return int(np.argsort(run)[len(run) // 2])


def pause(ms: float, busy: bool) -> float:
    """Wait ``ms`` (sleeping: the GIL free; busy: a Python loop holding it); returns the ms actually waited."""
    t0 = time.perf_counter()
    end = t0 + ms * 1e-3
    if busy:
        while time.perf_counter() < end:
            pass
    else:
        while time.perf_counter() < end:
            time.sleep(0)
    return (time.perf_counter() - t0) * 1e3


def first_calls(rt: Runtime, bench: Any, sel: PrefetchedDispatch, args: tuple[Any, ...], names: dict[int, str],
                pause_ms: float, busy: bool, repeats: int) -> dict[str, Any]:
    """``repeats`` first calls after a fix and a pause: host time of fix and of the first call (us), the pause
    waited, whether the features were used, the labels chosen."""
    fix_us, call_us, waited, used, labels, started = [], [], [], [], [], []
    for _ in range(repeats + 1):  # the first repeat warms up (kernels compiled, pinned memory allocated)
        bench.forget(*args)
        sel.forget(*args)
        rt.dev.synchronize()
        t0 = time.perf_counter()
        pending = sel.fix(*args)
        t1 = time.perf_counter()
        w = pause(pause_ms, busy)
        u = sel.used_features(*args)
        t2 = time.perf_counter()
        launcher = sel.bind(*args)
        t3 = time.perf_counter()
        fix_us.append((t1 - t0) * 1e6)
        call_us.append((t3 - t2) * 1e6)
        waited.append(w)
        used.append(u)
        labels.append(names[id(launcher)])
        started.append(pending is not None)
        if pending is not None:  # None: below the gate, nothing was started
            pending.result()  # the device work done before the next fix
        sel.forget(*args)
        rt.dev.synchronize()
    fix_us, call_us, waited, used, labels = fix_us[1:], call_us[1:], waited[1:], used[1:], labels[1:]
    return {"pause_ms": pause_ms, "busy": busy, "waited_ms_median": statistics.median(waited),
            "fix_us_median": statistics.median(fix_us), "first_call_us_median": statistics.median(call_us),
            "first_call_us_p90": float(np.percentile(call_us, 90)), "first_call_us_min": min(call_us),
            "features_used_share": sum(used) / len(used), "prefetched_share": sum(started[1:]) / repeats,
            "labels": {k: labels.count(k) for k in sorted(set(labels))}}


def time_to_ready_ms(rt: Runtime, bench: Any, sel: PrefetchedDispatch, args: tuple[Any, ...], repeats: int) -> float:
    """Median ms from the fix until the features are on the host (finished), the caller sleeping meanwhile
    (``sel`` must prefetch this object: a gate at 0)."""
    samples = []
    for _ in range(repeats):
        bench.forget(*args)
        sel.forget(*args)
        rt.dev.synchronize()
        t0 = time.perf_counter()
        pending = sel.fix(*args)
        while pending.value is None and time.perf_counter() - t0 < 1.0:
            time.sleep(0)
        samples.append((time.perf_counter() - t0) * 1e3)
        pending.result()
        sel.forget(*args)
    return statistics.median(samples)


def _labelled(labels: dict[str, int], times: dict[str, float], default: str, f: Any) -> float:
    """The mean of ``f(time)`` over the first calls' labels; a variant refused at this input runs the default."""
    return sum(f(times.get(v, times.get(default, np.nan))) * k for v, k in labels.items()) / sum(labels.values())


def paired_fractions(labels: dict[str, int], rounds: list[dict[str, float]], default: str) -> list[float]:
    """The first calls' choices as a fraction of each round's own best. Each round times every variant under the
    same conditions, so a machine that drifts between rounds does not set a fast round's best against a slow
    round's pick (as each variant's median over the rounds would)."""
    return [_labelled(labels, r, default, lambda t, best=min(r.values()): best / t) for r in rounds]


def run_benchmark(rt: Runtime, name: str, b: dict[str, Any], repeats: int, size_scale: float,
                  pauses: tuple[float, ...], students: tuple[dict[str, float], ...],
                  rules: dict[str, Any] | None, gate: bool = True, oracle_rounds: int = 1) -> dict[str, Any]:
    bench = BENCHES[name](rt)
    variants = bench.variants()
    keep = [v for v in b["variants"] if v in variants]
    default = rt.default(name)
    trees = fit(name, b, keep, 1.0, students, rules)
    if not gate and trees["min_size"] is not None:  # the feature rule at every size where it beat the host rule
        trees["min_size"] = 0.0
    sel_rules = (rules or {}).get("selector", {})
    fnames = sel_rules.get("feature_names", b["feature_names"])  # sampled features (sampled_features.py) or recorded
    median_i = (recorded_median(name, b, trees, keep) if "median_input" not in sel_rules
                else [r["name"] for r in b["test"]].index(sel_rules["median_input"]))
    spec = shrink([inputs.InputSpec(**b["test"][median_i]["spec"])], size_scale)[0]
    # every variant checked and timed live, ``oracle_rounds`` times (the choice is judged round by round below)
    record = measure_input(bench, spec, rt.timer(*TIMING[name]), rounds=oracle_rounds)
    by_round = record.get("times_ms_by_round", [record["times_ms"]])
    rt.free()
    args, _, _ = bench.build(spec)
    names = {id(fn): v for v, fn in variants.items()}
    probe = PrefetchedDispatch(name, trees["host"]["tree"], trees["features"]["tree"], fnames, variants, default)
    # the feature path's cost here (features on the host: the check, the gate and the walk) after a sleep of twice
    # the time the features take to land (not the longest pause: a long sleep leaves the host's caches cold and
    # its clock low, and the gate would then refuse inputs whose feature path fits), then the gate
    ready_ms = time_to_ready_ms(rt, bench, probe, args, repeats)
    read_us = first_calls(rt, bench, probe, args, names, 2 * ready_ms, False, repeats)["first_call_us_median"]
    min_size = None
    if trees["min_size"] is not None and not gate:
        min_size = 0.0
    live_gate = None
    if trees["min_size"] is not None and gate:
        limit = distilled.size_gate(trees["train_host"][:, distilled.GATE_SIZE[name]],
                                    np.nanmin(trees["train_runtime"], axis=1), read_us, BUDGET)
        live_gate = min_size = None if limit == np.inf else float(limit)
        if "sample" in sel_rules:  # sampled features (sampled_features.py): landed at fix, no handoff to gate for
            min_size = trees["min_size"]  # the rules' gate (their pick's cost); the live one reported beside it
    sel = PrefetchedDispatch(name, trees["host"]["tree"], trees["features"]["tree"], fnames, variants, default,
                             min_size=min_size)
    calls = [first_calls(rt, bench, sel, args, names, p, False, repeats) for p in pauses]
    calls.append(first_calls(rt, bench, sel, args, names, BUSY_PAUSE_MS, True, repeats))
    rounds = [{k: v for k, v in r.items() if k in keep and v is not None} for r in by_round]
    times = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if all(k in r for r in rounds)}
    best = min(times.values())
    for c in calls:
        c["chosen"] = max(c["labels"], key=c["labels"].get)
        c["run_ms"] = _labelled(c["labels"], times, default, lambda t: t)
        c["fraction_of_oracle_by_round"] = paired_fractions(c["labels"], rounds, default)
        c["fraction_of_oracle"] = statistics.median(c["fraction_of_oracle_by_round"])
        c["first_call_fraction_of_oracle"] = best / (c["run_ms"] + c["first_call_us_median"] * 1e-3)
        c["share_of_run"] = c["first_call_us_median"] * 1e-3 / c["run_ms"]
    return {"input": spec.name, "recorded_input": b["test"][median_i]["name"], "variants": keep, "default": default,
            "live_times_ms": times, "live_times_ms_by_round": by_round,
            "live_features": record["features"],
            "recorded_features": b["test"][median_i]["features"], "best_ms": best,
            "oracle": min(times, key=times.get), "host_tree": trees["host"]["tree"],
            "feature_tree": trees["features"]["tree"], "min_size": min_size,
            "host_rule": trees["host"].get("rule"), "feature_rule": trees["features"].get("rule"),
            "gate_size": distilled.HOST_METADATA[name][distilled.GATE_SIZE[name]], "feature_path_us": read_us,
            "live_gate": live_gate,
            "time_to_ready_ms": ready_ms, "first_calls": calls}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Prefetched first call, one selector per benchmark ({result['device']})", "",
             f"Trees and gate fitted on the training inputs of `{result['raw']}`"
             + "".join(f", {n} from `{r['file']}` ({r['label_rounds']} rounds per label, {r['train_scale']:g}x the "
                       "training inputs)" for n, r in result.get("replaced", {}).items())
             + "; live at the median test input. "
             "Pause = what the caller does between fix and first call (sleep: GIL free; busy: a Python loop). "
             "Gate: the feature tree from size " + ", ".join(
                 f"{n} {r.get('gate_size')} >= {r.get('min_size')}" for n, r in result["benchmarks"].items()) + ".", "",
             "Rules (host / features): " + ", ".join(
                 f"{n} {r.get('host_rule')} / {r.get('feature_rule')}" for n, r in result["benchmarks"].items()) + ".",
             "", "| benchmark | input | pause ms | fix us | first call us (median / p90) | prefetched | features used | "
             "chosen (most) | fraction of oracle | by round | first call incl. selection | share of run | to ready ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in result["benchmarks"].items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error'][:120]} |||||||||||| ")
            continue
        for c in r["first_calls"]:
            lines.append(
                f"| {name} | {r['input']} | {c['pause_ms']:g}{' busy' if c['busy'] else ''} | {c['fix_us_median']:.1f} | "
                f"{c['first_call_us_median']:.2f} / {c['first_call_us_p90']:.2f} | {100 * c['prefetched_share']:.0f} % | "
                f"{100 * c['features_used_share']:.0f} % | "
                f"{c['chosen']} | {c['fraction_of_oracle']:.3f} | "
                f"{' / '.join(f'{x:.3f}' for x in c.get('fraction_of_oracle_by_round', []))} | "
                f"{c['first_call_fraction_of_oracle']:.3f} | "
                f"{100 * c['share_of_run']:.2f} % | {r['time_to_ready_ms']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_suite.prefetched",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "opencl"))
    parser.add_argument("--raw", default=str(RAW), help="recorded run to fit on (default: committed round 4)")
    add_replace_argument(parser)
    parser.add_argument("--out", default="out/gpu_suite", help="folder (default out/gpu_suite/)")
    parser.add_argument("--benchmarks", default="spmv,histogram,sort,bfs")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--oracle-rounds", type=int, default=1,
                        help="time every variant this many times at the input; the choice is judged round by round")
    parser.add_argument("--size-scale", type=float, default=1.0, help="shrink the input (CPU pilots)")
    parser.add_argument("--pauses", default=",".join(f"{p:g}" for p in PAUSES_MS), help="ms, comma-separated")
    parser.add_argument("--plain-trees", action="store_true", help="distilled trees only (no students), as round 4")
    parser.add_argument("--rules", default=None, help="a first_call_rules.py result: its selectors, no fitting")
    parser.add_argument("--no-gate", action="store_true",
                        help="prefetch and read the features at every size where the feature rule beat the host rule")
    args = parser.parse_args(argv)
    students = () if args.plain_trees else distilled.STUDENT_RECIPES
    rules = None
    if args.rules:
        rules = next(iter(json.loads(Path(args.rules).read_text())["runs"].values()))["benchmarks"]
    rt = Runtime(args.device)
    raw = load_raw(args.raw, args.replace)
    result: dict[str, Any] = {"device": rt.dev.name, "raw": args.raw, "replaced": raw.get("replaced", {}),
                              "budget": BUDGET, "rules": args.rules, "gate": not args.no_gate,
                              "students": list(students), "benchmarks": {}}
    pauses = tuple(float(p) for p in args.pauses.split(","))
    for name in args.benchmarks.split(","):
        try:
            result["benchmarks"][name] = run_benchmark(rt, name, raw["benchmarks"][name], args.repeats,
                                                       args.size_scale, pauses, students,
                                                       None if rules is None else rules[name], not args.no_gate,
                                                       args.oracle_rounds)
        except Exception as exc:  # recorded; the other benchmarks go on
            result["benchmarks"][name] = {"error": repr(exc)[:500]}
        rt.free()
        print(name, json.dumps({k: v for k, v in result["benchmarks"][name].items()
                                if k in ("input", "error", "time_to_ready_ms", "feature_path_us", "min_size")}), flush=True)
    path = write_results(args.out, f"prefetched_{device_tag(rt.dev.name)}", result, table=markdown(result))
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
