"""The runtime path: host cost of a cached flush, ``anp.jit`` end to end against JAX, cost-aware selection.

    python -m benchmarks.hotpath.run --profile smoke --device opencl     # CPU pilot (PoCL), about a minute
    python -m benchmarks.hotpath.run --out $OUT                          # H100: about 4 minutes

Parts (each one's result is written as soon as it finishes; a failing part is recorded, the rest run):
* ``overhead``: the cached 2-op update of the lang study (``a[...] = a * 0.5 + 1``), recorded and flushed
  each time (``flush_host_us_p50``, the old definition) and as a jitted call (``jit_call_us_p50``), and
  where a flush's host time goes: its phases timed around the real launches (collect the pending arrays,
  walk the trace, look the plan up, bind values, launch and allocate, hand the results back) and a
  cProfile of the plain loop;
* ``end_to_end``: heat, Black-Scholes, shallow water, n-body, per iteration: plain recording, ``anp.jit``,
  the kernels alone, JAX jit and hand-written CUDA where the lang study has them (its own functions);
* ``selection``: the cost-aware cascade re-analysed from the recorded H100 runs (no device needed).
Old numbers (the committed ``lang_h100.json``) are copied beside the new ones.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with CuPy

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import fuse  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402
from adaptune.lang.graphs import binding  # noqa: E402
from adaptune.lang.ir import Buffer  # noqa: E402
from adaptune.lang.runtime import Runtime  # noqa: E402
from benchmarks.harness import device_tag, markdown_table, run_metadata, study_parser, write_results  # noqa: E402
from benchmarks.hotpath import selection  # noqa: E402
from benchmarks.lang.run import (  # noqa: E402
    Peers,
    adaptune_sync,
    bench_black_scholes,
    bench_heat,
    bench_nbody,
    bench_shallow_water,
    black_scholes,
    heat_step,
    nbody_step,
    shallow_step,
    timed,
)

OLD = Path("benchmarks/lang/results/lang_h100.json")
SIZES = {  # (heat / shallow water side, Black-Scholes options, bodies, iterations): the lang study's sizes
    "smoke": (512, 1 << 18, 256, 4),
    "regular": (8192, 1 << 26, 8192, 20),
    "large": (8192, 1 << 26, 8192, 50),
}


# --------------------------------------------------------------------------------------------- overhead

def update_step(a: Any) -> None:
    a[...] = a * 0.5 + 1.0


def python_loop_us() -> float:
    """Median microseconds of a fixed loop of plain Python: a process slow at everything (a slower core or clock)
    is slow here too, where a slower flush alone is not."""
    samples = []
    for _ in range(15):
        t0 = time.perf_counter()
        total = 0
        for i in range(20_000):
            total += i
        samples.append((time.perf_counter() - t0) * 1e6)
    return float(np.median(samples))


def current_cpu() -> int | None:
    """The core this process last ran on (``/proc/self/stat``'s field 39), None off Linux."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def _captured(replay: Any) -> bool:
    """Whether a ``GraphReplay`` holds a captured graph (``graphs`` now; ``graph`` in a baseline tree before
    acf44c9, which the A/B runs load)."""
    return replay is not None and bool(getattr(replay, "graphs", None) or getattr(replay, "graph", None))


def overhead(n_calls: int) -> dict[str, Any]:
    """Host time per call of the cached 2-op update: recorded + flushed, and jitted; with the process's plain
    Python speed and cores before and after (``python_loop_us_*``, ``cpus``), to tell a slow process from a slow flush."""
    out: dict[str, Any] = {"n": n_calls, "python_loop_us_before": python_loop_us(), "cpus": [current_cpu()],
                           "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}
    a = anp.asarray(np.ones(1024, np.float32))
    sess = lang_session.session()
    variants = (True, False) if sess.runtime.graphs else (False,)
    for graphs in variants:  # a cache hit replays a CUDA graph where it binds the captured buffers and scalars
        sess.cuda_graphs = graphs
        tag = "" if graphs or not sess.runtime.graphs else "_no_graph"
        rec, host = [], []
        for i in range(n_calls + 50):
            t0 = time.perf_counter()
            update_step(a)
            anp.flush()
            if i >= 50:
                rec.append((time.perf_counter() - t0) * 1e6)
                host.append(anp.last_flush().host_us)
        out[f"flush_host{tag}_us_p50"] = float(np.median(host))
        out[f"flush_host{tag}_us_p90"] = float(np.percentile(host, 90))
        out[f"record_and_flush{tag}_us_p50"] = float(np.median(rec))
    # any remembered step's graph (the first entry may be a warm-up step's tape, never captured)
    out["flush_cuda_graph"] = any(_captured(hit.graph) for hit in sess.taped.values())
    sess = lang_session.session()
    for graphs in (True, False) if sess.runtime.graphs else (False,):
        sess.cuda_graphs = graphs
        step = anp.jit(update_step)
        calls = []
        for i in range(n_calls + 50):
            t0 = time.perf_counter()
            step(a)
            if i >= 50:
                calls.append((time.perf_counter() - t0) * 1e6)
        adaptune_sync()
        tag = "jit_call" if graphs or not sess.runtime.graphs else "jit_call_no_graph"
        out[f"{tag}_us_p50"] = float(np.median(calls))
        out[f"{tag}_us_p90"] = float(np.percentile(calls, 90))
        trace = next(iter(step.traces.values()), None)
        out[f"{tag}_replayed"] = trace is not None and anp.last_flush().cache_hit
        out[f"{tag}_cuda_graph"] = trace is not None and _captured(trace.graph)
    sess.cuda_graphs = True
    want = np.ones(1024, np.float32)
    for _ in range(2 * len(variants) * (n_calls + 50)):  # the plain loops and the jitted ones
        want = want * np.float32(0.5) + np.float32(1.0)
    out["max_abs_err"] = float(np.abs(a.get() - want).max())
    out["max_abs_err_changing_binding"] = changing_binding()
    out["phases_us_p50"] = flush_phases(n_calls)
    out["profile_top"] = profile_top(min(n_calls, 2000))
    out["python_loop_us_after"] = python_loop_us()
    out["cpus"].append(current_cpu())
    return out


def changing_binding() -> float:
    """Max abs error against NumPy of a plain loop whose scalar and arrays change between cache hits (a graph
    captured with the old ones must not replay): the check the converging update above cannot make."""
    rng = np.random.default_rng(7)
    hosts = [rng.uniform(-1, 1, 1024).astype(np.float32) for _ in range(2)]
    arrays = [anp.asarray(h) for h in hosts]
    want = [h.copy() for h in hosts]
    for i, s in enumerate([0.5] * 4 + [-0.25] * 4 + [1.5] * 2):
        j = (i // 3) % 2  # three steps on one array, then the other: other addresses
        arrays[j][...] = arrays[j] * np.float32(s) + np.float32(i)
        anp.flush()
        want[j] = want[j] * np.float32(s) + np.float32(i)
    return max(float(np.abs(x.get() - w).max()) for x, w in zip(arrays, want, strict=True))


def flush_phases(n_calls: int) -> dict[str, float]:
    """A cache-hit flush of the update, phase by phase (``Session.flush``'s steps on the taped path, timed in
    between; the launches are real and timed alone, one CUDA graph where the flush would replay one): where
    the host time goes. ``walk_for_reference`` times
    the trace walk (``fuse.linearise``) a hit no longer does, beside, outside the flush."""
    sess = lang_session.session()
    rt = sess.runtime
    a = anp.asarray(np.ones(1024, np.float32))
    for _ in range(10):
        update_step(a)
        anp.flush()
    pc = time.perf_counter
    phases: dict[str, list[float]] = {k: [] for k in ("record", "collect", "key_and_lookup", "bind",
                                                      "launch_and_alloc", "assign_and_stats",
                                                      "walk_for_reference")}
    for _ in range(n_calls):
        t0 = pc()
        update_step(a)
        t1 = pc()
        bases, roots, root_of = sess.collect()
        t2 = pc()
        nodes, items, ok, epoch = sess._taken
        hit = sess.taped.get(lang_session.tape_key(items, roots, epoch))
        if not ok or hit is None:
            raise RuntimeError("the cached update did not hit the taped plan cache")
        t3 = pc()
        plan = hit.plan
        vals = hit.bind(nodes)
        t4 = pc()
        graph = hit.graph
        if graph is not None and graph.usable and sess.cuda_graphs:  # as Session._flush_taped launches it
            results = graph.launch(plan, vals, rt, binding(vals, hit.n_leaves))
        else:
            results = fuse.launch(plan, vals, rt)
        t5 = pc()
        if len(bases) == 1:  # as Session._flush_taped hands the result back
            r = roots[0]
            buf = bases[0].node = Buffer(results[0], r.shape, r.dtype, True)
            if hasattr(hit, "remember_out"):  # a baseline tree before 609efc8 shares the description this way
                buf._key = hit.out_key or hit.remember_out(buf)
        else:
            sess.assign(bases, roots, root_of, results)
        sess.last = lang_session.FlushStats(plan.kernels, plan.bytes, hit.nodes, True, 0, 0.0, "", plan.inplace)
        t6 = pc()
        fuse.linearise(roots)
        t7 = pc()
        for k, d in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6), strict=True):
            phases[k].append(d * 1e6)
    adaptune_sync()
    return {k: float(np.median(v)) for k, v in phases.items()}


def profile_top(n_calls: int, top: int = 15) -> list[dict[str, Any]]:
    """cProfile of the plain record + flush loop: the functions with the most own time (profiler overhead
    inflates small functions; the phases above are the unperturbed split)."""
    a = anp.asarray(np.ones(1024, np.float32))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n_calls):
        update_step(a)
        anp.flush()
    prof.disable()
    adaptune_sync()
    stats = pstats.Stats(prof, stream=io.StringIO())
    rows = []
    for (file, line, fn), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({fn})", "calls_per_flush": ncalls / n_calls,
                     "own_us_per_flush": tottime / n_calls * 1e6, "cum_us_per_flush": cumtime / n_calls * 1e6})
    rows.sort(key=lambda r: -r["own_us_per_flush"])
    return rows[:top]


# --------------------------------------------------------------------------------------------- end to end

WORKLOADS = ("heat", "black_scholes", "shallow_water", "nbody")


def end_to_end(peers: Peers, sizes: tuple[int, int, int, int], repeats: int,
               workloads: Sequence[str] = WORKLOADS) -> dict[str, Any]:
    """The lang study's four workloads (its own functions and peers), plus ``anp.jit`` of the same step."""
    side, options, bodies, iters = sizes
    res: dict[str, Any] = {}
    if "heat" in workloads:
        res["heat"] = bench_heat(peers, side, iters, repeats)
        res["heat"]["adaptune_jit"] = _jit_heat(side, iters, repeats)
    if "black_scholes" in workloads:
        res["black_scholes"] = bench_black_scholes(peers, options, iters, repeats)
        res["black_scholes"]["adaptune_jit"] = _jit_black_scholes(options, iters, repeats)
        res["black_scholes"]["adaptune_jit_fast_math"] = _jit_black_scholes(options, iters, repeats, fast_math=True)
    if "shallow_water" in workloads:
        res["shallow_water"] = bench_shallow_water(peers, side, iters, repeats)
        res["shallow_water"]["adaptune_jit"] = _jit_shallow_water(side, iters, repeats)
    if "nbody" in workloads:
        res["nbody"] = bench_nbody(peers, bodies, max(2, iters // 2), repeats)
        res["nbody"]["adaptune_jit"] = _jit_nbody(bodies, max(2, iters // 2), repeats)
        res["nbody"]["host_cpu_us_p50"] = nbody_host_cpu(bodies)
    return res


def nbody_host_cpu(n: int, steps: int = 300, batches: int = 1,
                   prepare: Callable[[], None] | None = None) -> dict[str, Any]:
    """CPU µs of this process per plain n-body step (``time.thread_time_ns``: not the time it waits for the
    device), recording and flush apart: beside the kernels' time it says whether the plain step is bound by its
    host side. The median per batch of ``steps``, the lowest of ``batches``; ``prepare`` runs after the warm-up
    (``host_python`` stubs the launches there)."""
    rng = np.random.default_rng(3)
    st = tuple(anp.asarray(rng.random(n).astype(np.float32)) for _ in range(6))
    m = anp.asarray(rng.random(n).astype(np.float32))
    for _ in range(5):
        st = nbody_step(anp, *st, m)
        anp.flush()
    if prepare is not None:
        prepare()
    tt = time.thread_time_ns
    best: dict[str, Any] = {}
    for _ in range(batches):
        record, flush = [], []
        for _ in range(steps):
            t0 = tt()
            st = nbody_step(anp, *st, m)
            t1 = tt()
            anp.flush()
            t2 = tt()
            record.append(t1 - t0)
            flush.append(t2 - t1)
        for k, v in (("record", record), ("flush", flush)):
            best[k] = min(best.get(k, np.inf), float(np.median(v)) / 1e3)
    adaptune_sync()
    return {**best, "nodes": anp.last_flush().nodes, "cache_hit": anp.last_flush().cache_hit}


def _jit_heat(n: int, iters: int, repeats: int) -> dict[str, Any]:
    host = np.random.default_rng(0).random((n, n), dtype=np.float32)
    step, a = anp.jit(heat_step), anp.asarray(host)
    out = timed(lambda: step(a), adaptune_sync, iters, repeats)
    probe, check = anp.asarray(host), host.copy()
    for _ in range(3):
        step(probe)
        heat_step(check)
    return {**out, "max_abs_err_vs_numpy": float(np.abs(probe.get() - check).max()),
            "replayed": anp.last_flush().cache_hit and bool(step.traces)}


def _jit_black_scholes(n: int, iters: int, repeats: int, fast_math: bool = False) -> dict[str, Any]:
    """``anp.jit`` of the step; ``fast_math``: in a session whose kernels are compiled with relaxed floating
    point (``anp.use_device(kind, fast_math=True)``), its error against float64 reported beside the time."""
    from scipy.special import erf as np_erf

    previous = lang_session.session().runtime
    if fast_math:
        lang_session.use_runtime(Runtime(previous.kind, device=previous.device, fast_math=True))
    try:
        rng = np.random.default_rng(1)
        s, k = rng.uniform(5, 30, n).astype(np.float32), rng.uniform(1, 100, n).astype(np.float32)
        t = rng.uniform(0.25, 10, n).astype(np.float32)
        step = anp.jit(lambda s_, k_, t_: black_scholes(anp, anp.erf, s_, k_, t_))
        args = (anp.asarray(s), anp.asarray(k), anp.asarray(t))
        keep: list[Any] = [None]

        def run() -> None:
            keep[0] = step(*args)

        out = timed(run, adaptune_sync, iters, repeats)
        plain = black_scholes(anp, anp.erf, *args)
        err = max(float(np.abs(j.get() - p.get()).max()) for j, p in zip(keep[0], plain, strict=True))
        want = black_scholes(np, np_erf, *(x.astype(np.float64) for x in (s, k, t)))
        rel = max(float(np.max(np.abs(g.get() - w) / (np.abs(w) + 1))) for g, w in zip(keep[0], want, strict=True))
        return {**out, "max_abs_diff_vs_plain": err, "max_rel_err_vs_float64": rel, "replayed": bool(step.traces)}
    finally:
        if fast_math:
            lang_session.use_runtime(previous)


def _jit_shallow_water(n: int, iters: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    h0 = (1 + 0.01 * rng.random((n, n))).astype(np.float32)
    z = np.zeros((n, n), np.float32)
    step = anp.jit(shallow_step)
    st = (anp.asarray(h0), anp.asarray(z), anp.asarray(z))
    out = timed(lambda: step(*st), adaptune_sync, iters, repeats)
    ph, pu, pv = anp.asarray(h0), anp.asarray(z), anp.asarray(z)
    ch, cu, cv = h0.copy(), z.copy(), z.copy()
    for _ in range(3):
        step(ph, pu, pv)
        shallow_step(ch, cu, cv)
    return {**out, "max_abs_err_vs_numpy": float(np.abs(ph.get() - ch).max()), "replayed": bool(step.traces)}


def _jit_nbody(n: int, iters: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    init = [rng.random(n).astype(np.float32) for _ in range(3)] + [np.zeros(n, np.float32)] * 3
    m = anp.asarray(rng.random(n).astype(np.float32))
    step = anp.jit(lambda *a: nbody_step(anp, *a))
    st = [tuple(anp.asarray(a) for a in init)]

    def run() -> None:
        st[0] = step(*st[0], m)

    out = timed(run, adaptune_sync, iters, repeats)
    probe, plain = tuple(anp.asarray(a) for a in init), tuple(anp.asarray(a) for a in init)
    for _ in range(2):
        probe = step(*probe, m)
        plain = nbody_step(anp, *plain, m)
    err = max(float(np.abs(p.get() - q.get()).max()) for p, q in zip(probe, plain, strict=True))
    return {**out, "max_abs_diff_vs_plain": err, "replayed": bool(step.traces)}


# --------------------------------------------------------------------------------------------- report

def summary(res: dict[str, Any], old: dict[str, Any]) -> str:
    """Markdown: workloads (ms per iteration, new beside old), the update's host time, selection."""
    rows = []
    for name, r in res.get("end_to_end", {}).items():
        if not isinstance(r, dict) or "adaptune" not in r:
            continue
        o = old.get(name, {})
        row = {"workload": name, "plain_ms": r["adaptune"]["ms"], "jit_ms": r["adaptune_jit"]["ms"],
               "kernels_ms": r["adaptune_kernels_only"]["ms"], "jax_ms": r.get("jax", {}).get("ms"),
               "handwritten_ms": r.get("handwritten", {}).get("ms"),
               "old_plain_ms": o.get("adaptune", {}).get("ms"), "old_jax_ms": o.get("jax", {}).get("ms")}
        if "adaptune_jit_fast_math" in r:
            row["jit_fast_math_ms"] = r["adaptune_jit_fast_math"]["ms"]
        if row["jax_ms"]:
            row["jit_le_jax"] = row["jit_ms"] <= row["jax_ms"]
            if "jit_fast_math_ms" in row:
                row["jit_fast_math_le_jax"] = row["jit_fast_math_ms"] <= row["jax_ms"]
        if row["handwritten_ms"]:
            row["jit_le_1.1x_handwritten"] = row["jit_ms"] <= 1.1 * row["handwritten_ms"]
        rows.append(row)
    parts = ["End to end, ms per iteration (`kernels_ms`: the plan's kernels replayed alone; `old_*`: the "
             f"committed H100 run {old.get('commit', '?')}, comparable on an H100 only):", "",
             markdown_table(rows)] if rows else []
    nb_host = res.get("end_to_end", {}).get("nbody", {}).get("host_cpu_us_p50")
    if nb_host:
        parts += [f"Plain n-body step, host CPU per step (p50): record {nb_host['record']:.1f} µs, flush "
                  f"{nb_host['flush']:.1f} µs.", ""]
    ov = res.get("overhead")
    if isinstance(ov, dict) and "flush_host_us_p50" in ov:
        o = old.get("overhead", {})
        parts += ["Cached 2-op update, host microseconds (p50):", "", markdown_table([{
            "flush_host_us_p50": ov["flush_host_us_p50"], "record_and_flush_us_p50": ov["record_and_flush_us_p50"],
            "flush_host_no_graph_us_p50": ov.get("flush_host_no_graph_us_p50"),
            "jit_call_us_p50": ov["jit_call_us_p50"], "jit_call_no_graph_us_p50": ov.get("jit_call_no_graph_us_p50"),
            "old_flush_host_us_p50": o.get("flush_host_us_p50"),
            "old_record_and_flush_us_p50": o.get("record_and_flush_us_p50")}]),
            "Flush phases (us, p50): " + ", ".join(f"{k} {v:.2f}" for k, v in ov["phases_us_p50"].items()), ""]
    sel = res.get("selection")
    if isinstance(sel, dict) and "rows" in sel:
        parts += ["Selection on fresh inputs (recorded H100 runs, cascade re-analysed; `affordable_feature_us` "
                  "1000 = the sweep's top: the cheap model alone meets both targets):", "",
                  markdown_table(sel["rows"], selection.COLUMNS)]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = study_parser("hotpath", __doc__)
    ap.add_argument("--device", choices=("cuda", "opencl"), default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--parts", default="overhead,end_to_end,selection")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="end_to_end's workloads (comma-separated)")
    args = ap.parse_args(argv)
    runtime = Runtime(args.device)
    lang_session.use_runtime(runtime)
    peers = Peers(runtime.kind)
    sizes = SIZES[args.profile]
    old = json.loads(OLD.read_text()) if OLD.exists() else {}
    res: dict[str, Any] = {"device": runtime.name, "kind": runtime.kind, "profile": args.profile,
                           "old": {"file": str(OLD), "commit": old.get("commit"), "date": old.get("date")}}
    meta = run_metadata(runtime.name)
    stem = f"hotpath_{device_tag(runtime.name)}"
    parts: dict[str, Callable[[], Any]] = {
        "overhead": lambda: overhead(2000 if args.profile != "smoke" else 300),
        "end_to_end": lambda: end_to_end(peers, sizes, args.repeats, args.workloads.split(",")),
        "selection": lambda: selection.analyse(margin=args.profile != "smoke"),
    }
    for part in args.parts.split(","):
        t0 = time.perf_counter()
        try:
            res[part] = parts[part]()
        except Exception as exc:  # record and go on: one broken part must not lose the others
            res[part] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
        res.setdefault("wall_s", {})[part] = time.perf_counter() - t0
        print(f"{part}: {time.perf_counter() - t0:.1f} s", flush=True)
        path = write_results(args.out, stem, res, table=summary(res, old), title=f"hotpath on {runtime.name}",
                             metadata=meta)
    print(path.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
