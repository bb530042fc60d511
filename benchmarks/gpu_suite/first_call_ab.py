"""The GPU suite's first call before and after issue 24's host-path cut, A/B (stand-ins on the CPU, CUDA or PoCL).

    python -m benchmarks.gpu_suite.first_call_ab                          # stand-ins, no launches -> out/gpu_suite/
    python -m benchmarks.gpu_suite.first_call_ab --profile smoke          # fewer calls
    bash benchmarks/gpu.sh gpu_suite.first_call_ab --device cuda          # real objects on the H100

What the live run times (``prefetched.first_calls``) is one ``bind`` right after ``fix``: below the gate (histogram,
SpMV and sort at their median inputs) the host tree's walk, at BFS the gate finding the features not yet landed and
then the host tree. ``Baseline`` is ``PrefetchedDispatch`` as of fbfc380 (a lambda, the gate by the object's id and a
dict lookup, the host tree through ``compile_tree``'s wrapper, a closure per node and per leaf, a closure per
check), kept here only as the A side; the B side is ``adaptune.kernels.prefetched.PrefetchedDispatch`` now (the
object fixed last in a closure cell, the gate's size compared at fix, no gate at all where the features are never
read, leaves returned by their parent node, C getters). Both are built from the same rules (``--rules``: the
selectors of ``first_call_rules.py``, as run live on the H100) at each benchmark's median test input, and timed
interleaved (order alternating) in ``ROUNDS`` rounds: ``first call`` = one ``bind`` right after ``fix`` (single
calls, each timed), ``loop`` = the per-call time of ``--calls`` calls in a loop (warm caches); beside them a call of
a function that does nothing with the same arguments after the same fix (``floor``). ``--device stub``: the
recorded inputs' metadata in the real classes (``reanalysis.stand_in``), nothing launched; an admitted object's
Pending never lands (as in the live pause-0 calls) unless ``--landed``. ``same_picks``: both sides' picks on every
test input of the recorded run, with no features and with the recorded ones landed (must all agree).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adaptune.kernels import distilled, features, inputs
from adaptune.kernels.dispatch import launcher_tree
from adaptune.kernels.prefetched import PrefetchedDispatch
from benchmarks.gpu_suite.prefetched import RAW, fit, recorded_median
from benchmarks.gpu_suite.reanalysis import per_call_us, stand_in
from benchmarks.gpu_suite.run import BENCHES, LIBRARY_DEFAULT, Runtime, add_replace_argument, load_raw, shrink
from benchmarks.harness import (
    device_tag,
    markdown_table,
    paired_summary,
    parse_study_args,
    study_parser,
    write_results,
)

RULES = Path(__file__).resolve().parent / "results" / "gpu_suite_h100_first_call_rules.json"
ROUNDS = 3


# ------------------------------------------------------------------- the A side: fbfc380's code, frozen


def _old_compile_tree(tree: distilled.Tree, sources: tuple[int, tuple[tuple[str, ...], ...]],
                      checks: dict[str, Callable[[Any], bool]], default: Any) -> Callable[..., Any]:
    """``distilled.compile_tree`` of fbfc380: a wrapper, a closure per node and per leaf."""
    arg, descriptors = sources
    root = _old_compile(tree, descriptors, checks, default)
    if arg == 0:
        def select(*args: Any) -> Any:
            return root(args[0])
    else:
        def select(*args: Any) -> Any:
            return root(args[arg])
    return select


def _old_compile(tree: distilled.Tree, sources: tuple[tuple[str, ...], ...],
                 checks: dict[str, Callable[[Any], bool]], default: Any) -> Callable[[Any], Any]:
    if "leaf" in tree:
        label = tree["leaf"]
        check = checks.get(tree.get("name", label))
        if check is None:
            return lambda o: label
        return lambda o: label if check(o) else default
    src, t = sources[int(tree["feature"])], float(tree["threshold"])
    low, high = _old_compile(tree["low"], sources, checks, default), _old_compile(tree["high"], sources, checks,
                                                                                  default)
    kind = src[0]
    if kind == "attr":
        name = src[1]
        return lambda o: low(o) if getattr(o, name) <= t else high(o)
    if kind == "ratio":
        num, den = src[1], src[2]
        return lambda o: low(o) if getattr(o, num) / getattr(o, den) <= t else high(o)
    if kind == "device":
        key = src[1]
        return lambda o: low(o) if o[1][key] <= t else high(o)
    if kind == "host" and src[1] == "attr":
        name = src[2]
        return lambda o: low(o) if getattr(o[0], name) <= t else high(o)
    return lambda o: low(o) if distilled._value(o, src) <= t else high(o)


class Baseline(PrefetchedDispatch):
    """``PrefetchedDispatch`` of fbfc380: the gate by id and a dict lookup on every call, its size compared there."""

    def __init__(self, benchmark: str, host_tree: dict[str, Any], feature_tree: dict[str, Any],
                 feature_names: Sequence[str], variants: dict[str, Callable[..., Any]], default: str, *,
                 min_size: float | None = 0.0) -> None:
        super().__init__(benchmark, host_tree, feature_tree, feature_names, variants, default, min_size=min_size)
        self.min_size = float("inf") if min_size is None else float(min_size)
        self._reads = True  # fbfc380 registered a given Pending at any size and compared the size at the call
        host_sources = distilled.SOURCES[benchmark]
        arg, sources = distilled.pair_sources(benchmark, feature_names)
        pair_checks = {k: (lambda p, _c=c: _c(p[0])) for k, c in self.checks.items()}
        launchers = self.variants
        host_select = _old_compile_tree(host_tree, host_sources, self.checks, default)
        host_bind = _old_compile_tree(launcher_tree(host_tree, launchers), host_sources, self.checks,
                                      launchers[default])
        walk = _old_compile_tree(feature_tree, (0, sources), pair_checks, default)
        walk_bind = _old_compile_tree(launcher_tree(feature_tree, launchers), (0, sources), pair_checks,
                                      launchers[default])
        pending, size_attr, limit = self._pending, self._size, self.min_size

        def gate(args: tuple[Any, ...], use_features: Callable[[Any], Any], fallback: Callable[..., Any]) -> Any:
            o = args[arg]
            entry = pending.get(id(o))
            if entry is not None:
                value = entry[1].value
                if value is not None and getattr(o, size_attr) >= limit:
                    del pending[id(o)]
                    return use_features((o, value))
            return fallback(*args)

        self.select = lambda *args: gate(args, walk, host_select)
        self.bind = lambda *args: gate(args, walk_bind, host_bind)

    def fix(self, *args: Any, high_priority: bool = False, pending: features.Pending | None = None
            ) -> features.Pending | None:
        o = args[self._arg]
        if pending is None:
            if getattr(o, self._size) < self.min_size:
                return None
            pending = self._start(args[0], o, high_priority)
        self._pending[id(o)] = (o, pending)
        return pending

    def forget(self, *args: Any) -> None:
        self._pending.pop(id(args[self._arg]), None)


# ------------------------------------------------------------------------------------------ the study


def _nothing(*args: Any) -> None:
    return None


def _never_lands() -> features.Pending:
    return features.Pending([], lambda: None, lambda: False, lambda hosts: {})


def selectors(name: str, sel: dict[str, Any], variants: dict[str, Callable[..., Any]], default: str,
              feature_names: Sequence[str]) -> dict[str, PrefetchedDispatch]:
    """A and B from one rules file's selector (its trees and gate)."""
    made = {}
    for side, cls in (("baseline", Baseline), ("now", PrefetchedDispatch)):
        made[side] = cls(name, sel["host_tree"], sel["feature_tree"], feature_names, variants, default,
                         min_size=sel["min_size"])
    return made


def same_picks(name: str, b: dict[str, Any], sels: dict[str, PrefetchedDispatch]) -> dict[str, int]:
    """Both sides' picks on every test input (stand-ins), not fixed and with the recorded features landed."""
    agree = disagree = 0
    for r in b["test"]:
        args = stand_in(name, r["info"])
        for landed in (False, True):
            picks = []
            for s in sels.values():
                if landed:
                    s.fix(*args, pending=features.Pending.finished(r["features"]))
                picks.append(s.select(*args))
                s.forget(*args)
            agree, disagree = agree + (picks[0] == picks[1]), disagree + (picks[0] != picks[1])
    return {"agree": agree, "disagree": disagree}


def ab(sels: dict[str, PrefetchedDispatch], args: tuple[Any, ...], start: Callable[[PrefetchedDispatch], Any],
       settle: Callable[[Any], None], repeats: int) -> dict[str, list[list[float]]]:
    """Per side (and ``floor``), ``ROUNDS`` lists of ``repeats`` single first calls (us), each right after
    ``start(sel)`` (a fix), the sides interleaved and their order alternating; ``settle`` after each call."""
    sides = [*sels, "floor"]
    samples: dict[str, list[list[float]]] = {k: [[] for _ in range(ROUNDS)] for k in sides}
    for rep in range(-2, repeats * ROUNDS):  # two warm-up repeats
        for side in sides[:: 1 if rep % 2 else -1]:
            sel = sels.get(side, sels["baseline"])
            sel.forget(*args)
            handle = start(sel)
            call = _nothing if side == "floor" else sel.bind
            t0 = time.perf_counter()
            call(*args)
            t1 = time.perf_counter()
            settle(handle)
            sel.forget(*args)
            if rep >= 0:
                samples[side][rep // repeats].append((t1 - t0) * 1e6)
    return samples


def loops(sels: dict[str, PrefetchedDispatch], args: tuple[Any, ...], calls: int) -> dict[str, list[float]]:
    """Per side, per-call us of ``calls`` binds in a loop (nothing fixed: the host path), ``ROUNDS`` x 2 interleaved."""
    out: dict[str, list[float]] = {k: [] for k in sels}
    for rep in range(2 * ROUNDS):
        for side in list(sels)[:: 1 if rep % 2 else -1]:
            bind = sels[side].bind
            out[side].append(per_call_us(lambda b=bind: b(*args), calls, 3)[1])
    return out


def summary(benchmark: str, protocol: str, samples: dict[str, list[list[float]]]) -> list[dict[str, Any]]:
    return [{"benchmark": benchmark, "protocol": protocol, **r} for r in paired_summary(samples, digits=3)]


def main(argv: list[str] | None = None) -> None:
    p = study_parser("gpu_suite", __doc__.splitlines()[0])
    p.add_argument("--device", choices=("stub", "cuda", "opencl"), default="stub")
    p.add_argument("--raw", default=str(RAW))
    add_replace_argument(p)
    p.add_argument("--rules", default=str(RULES), help="a first_call_rules.py result: its selectors")
    p.add_argument("--benchmarks", default="spmv,histogram,sort,bfs")
    p.add_argument("--repeats", type=int, default=300, help="single first calls per side and round")
    p.add_argument("--calls", type=int, default=20000, help="calls per timing loop")
    p.add_argument("--size-scale", type=float, default=1.0, help="shrink the device input (CPU pilots)")
    p.add_argument("--landed", action="store_true",
                   help="stub: an admitted object's features landed at fix (the output named ..._landed)")
    args = parse_study_args(p, argv, smoke={"repeats": 30, "calls": 2000})
    run(args)


def setup(name: str, median: dict[str, Any], rt: Runtime | None, args: argparse.Namespace
          ) -> tuple[dict[str, Callable[..., Any]], str, tuple[Any, ...], Callable[[Any], Any], Callable[[Any], None]]:
    """The variants, default and call arguments at the median input, how a side is fixed before its first call
    (``start``) and what follows it (``settle``): stand-ins and a Pending (stub), or the input built on the device
    and the features prefetched for real."""
    if rt is None:
        variants = BENCHES[name](types.SimpleNamespace(cuda=True, default=lambda k: LIBRARY_DEFAULT[k])).variants()
        call_args = stand_in(name, median["info"])
        recorded = features.Pending.finished(median["features"])

        def fix_stub(s: PrefetchedDispatch) -> Any:
            return s.fix(*call_args, pending=recorded if args.landed else _never_lands())

        return variants, LIBRARY_DEFAULT[name], call_args, fix_stub, lambda handle: None
    bench = BENCHES[name](rt)
    spec = shrink([inputs.InputSpec(**median["spec"])], args.size_scale)[0]
    built = bench.build(spec)[0]

    def fix(s: PrefetchedDispatch) -> Any:
        bench.forget(*built)
        rt.dev.synchronize()
        return s.fix(*built)

    def settle(handle: Any) -> None:
        if handle is not None:
            handle.result()
        rt.dev.synchronize()

    return bench.variants(), rt.default(name), built, fix, settle


def run(args: argparse.Namespace) -> Path:
    raw = load_raw(args.raw, args.replace)["benchmarks"]
    rules = next(iter(json.loads(Path(args.rules).read_text())["runs"].values()))["benchmarks"]
    rt = None if args.device == "stub" else Runtime(args.device)
    rows: list[dict[str, Any]] = []
    data: dict[str, Any] = {"device": "stub (no launches)" if rt is None else rt.dev.name, "raw": args.raw,
                            "rules": args.rules, "landed": args.landed, "benchmarks": {}}
    for name in args.benchmarks.split(","):
        b, sel = raw[name], rules[name]["selector"]
        keep = list(b["variants"])
        trees = fit(name, b, keep, 1.0, (), rules[name])
        median = b["test"][recorded_median(name, b, trees, keep)]
        bench_variants, default, call_args, start, settle = setup(name, median, rt, args)
        # a variant the device lacks (PoCL: the CUDA libraries) runs the device default: same tree, same path
        variants = {v: bench_variants.get(v, bench_variants[default]) for v in keep} | bench_variants
        sels = selectors(name, sel, variants, default, b["feature_names"])
        picks = same_picks(name, b, selectors(name, sel, variants, default, b["feature_names"]))
        rows += summary(name, "first call", ab(sels, call_args, start, settle, args.repeats))
        loop = loops(sels, call_args, args.calls)
        base = loop["baseline"]
        rows += [{"benchmark": name, "protocol": "loop", "side": side, "p50_us": statistics.median(v),
                  "p10_us": min(v), "p90_us": max(v), "p50_per_round": " / ".join(f"{x:.3f}" for x in v),
                  "paired_ratio_p50": statistics.median(a / c for a, c in zip(v, base, strict=True)),
                  "ratio_of_p50s": statistics.median(v) / statistics.median(base), "calls": args.calls * len(v)}
                 for side, v in loop.items()]
        size = distilled.read_metadata(name, *call_args)[distilled.GATE_SIZE[name]]
        data["benchmarks"][name] = {"input": median["name"], "min_size": sel["min_size"], "same_picks": picks,
                                    "admitted": sel["min_size"] is not None and size >= sel["min_size"]}
        print(name, json.dumps(data["benchmarks"][name]), flush=True)
    data["rows"] = rows
    table = markdown_table(rows, ["benchmark", "protocol", "side", "p50_us", "p10_us", "p90_us", "p50_per_round",
                                  "paired_ratio_p50", "ratio_of_p50s", "calls"])
    tag = ("stub" if rt is None else device_tag(rt.dev.name)) + ("_landed" if args.landed else "")
    return write_results(args.out, f"first_call_ab_{tag}", data, table=table,
                         title=f"GPU suite first call: fbfc380's host path against now ({data['device']})",
                         notes=NOTES)


NOTES = """`first call`: one `bind` right after `fix` (us, each timed alone; an admitted object's features not landed
unless the run says landed); `loop`: per-call us of a loop of binds, nothing fixed (min of 3 loops, one value per
repeat); `baseline`: fbfc380's PrefetchedDispatch, `now`: this commit's, `floor`: a call of a function that does
nothing; the sides interleaved, order alternating; `paired_ratio_p50`: median of each call over the baseline call of
the same repeat. See the module docstring of benchmarks/gpu_suite/first_call_ab.py."""


if __name__ == "__main__":
    main()
