"""The Python of recording and flushing the cached 2-op update, with the kernel launches stubbed out.

    PYTHONPATH=src python -m benchmarks.hotpath.host_python            # CPU (PoCL compiles the plan once)

On a CPU host PoCL's launch (30-60 µs, the host's own cores) buries the Python around it, and a shared host's
load moves wall-clock times by 2x. So this times CPU time (``time.thread_time_ns``: not counting the time the
process waits for a core) per operation of ``a[...] = a * 0.5 + 1.0`` and per ``anp.flush()``, after the
cached plan's launchers are replaced by a no-op: what is left is the code a GPU host runs too (collect, key,
bind, launch bookkeeping, results), without the device call. Median per batch of ``--calls``, the lowest of
``--batches`` batches. It works on older trees too (their plan cache entries were tuples), so a baseline
tree can be timed by the same file: ``PYTHONPATH=<old tree>/src python benchmarks/hotpath/host_python.py``.
``--phases`` adds the flush phase by phase (``benchmarks.hotpath.run.flush_phases``, wall clock, p50) on the
stubbed plan: run from a tree's root with ``PYTHONPATH=src:.`` it times that tree's own phase split.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from typing import Any

import numpy as np

import adaptune.numpy as anp
from adaptune.lang import session as lang_session
from adaptune.lang.runtime import Runtime
from benchmarks.hotpath.run import flush_phases, nbody_host_cpu


def _noop(grid: Any, block: Any, args: Any) -> None:
    return None


def stub_launches(sess: Any) -> None:
    """Replace every remembered plan's launchers by a no-op (the bookkeeping around them stays)."""
    for hit in sess.taped.values():
        plan = hit.plan if hasattr(hit, "plan") else hit[0]
        plan.fast = [(_noop if f[0] is not None else None, *f[1:]) for f in plan.fast]
        for name in ("launches", "direct"):  # (a baseline tree's plan may lack either)
            if getattr(plan, name, None) is not None:
                setattr(plan, name, [(_noop, *f[1:]) for f in getattr(plan, name)])


def measure(calls: int, batches: int) -> dict[str, float]:
    """CPU µs per recorded operation and per flush (median per batch, lowest batch)."""
    lang_session.use_runtime(Runtime("opencl"))
    sess = lang_session.session()
    a = anp.asarray(np.ones(1024, np.float32))
    for _ in range(20):
        a[...] = a * 0.5 + 1.0
        anp.flush()
    stub_launches(sess)
    tt = time.thread_time_ns
    cal = []
    for _ in range(20000):
        t0 = tt()
        cal.append(tt() - t0)
    clock = float(np.median(cal))  # the clock's own cost, taken off every interval
    best: dict[str, float] = {}
    for _ in range(batches):
        parts: dict[str, list[int]] = {"multiply": [], "add": [], "setitem": [], "flush": []}
        for _ in range(calls):
            t0 = tt()
            b = a * 0.5
            t1 = tt()
            c = b + 1.0
            t2 = tt()
            del b
            a[...] = c
            t3 = tt()
            del c
            anp.flush()
            t4 = tt()
            for k, d in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                parts[k].append(d)
        for k, v in parts.items():
            us = (float(np.median(v)) - clock) / 1e3
            best[k] = min(best.get(k, us), us)
    if not anp.last_flush().cache_hit:
        raise RuntimeError("the update did not hit the plan cache")
    best["record"] = best["multiply"] + best["add"] + best["setitem"]
    return best


def measure_nbody(calls: int, batches: int, n: int = 256) -> dict[str, float]:
    """CPU µs per recorded n-body step (51 nodes, the lang study's ``nbody_step``) and per flush of it, the
    launches stubbed as above (``run.nbody_host_cpu``): where a GPU host's time goes when the step is bound by
    its Python."""
    lang_session.use_runtime(Runtime("opencl"))
    sess = lang_session.session()
    r = nbody_host_cpu(n, calls, batches, prepare=lambda: stub_launches(sess))
    if not r.pop("cache_hit"):
        raise RuntimeError("the n-body step did not hit the plan cache")
    return r


def profile_nbody(steps: int, device: str, top: int = 30, n: int = 256) -> str:
    """cProfile over ``steps`` plain n-body steps (record and flush) with the real launches on ``device``: the
    functions that hold a GPU host's time, by their own time (the profiler's cost inflates every call, so
    this ranks, it does not time)."""
    lang_session.use_runtime(Runtime(device))
    nbody_host_cpu(n, 20)  # compiled, cached and warm
    prof = cProfile.Profile()
    prof.runcall(nbody_host_cpu, n, steps)
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--batches", type=int, default=7)
    ap.add_argument("--phases", action="store_true", help="also the flush phase by phase (wall clock, p50)")
    ap.add_argument("--nbody", action="store_true", help="the n-body step instead of the 2-op update")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="cProfile this many n-body steps with real launches on --device instead")
    ap.add_argument("--device", choices=("cuda", "opencl"), default="opencl", help="for --profile")
    args = ap.parse_args(argv)
    if args.profile:
        print(profile_nbody(args.profile, args.device))
        return 0
    if args.nbody:
        r = measure_nbody(max(1, args.calls // 10), args.batches)
        print("CPU us per n-body step: " + "  ".join(f"{k} {v:.1f}" for k, v in r.items()))
        return 0
    r = measure(args.calls, args.batches)
    print("CPU us: " + "  ".join(f"{k} {v:.2f}" for k, v in r.items()))
    if args.phases:  # the same array shape: the stubbed plan is the one hit
        ph = flush_phases(args.calls)
        print("phases us (wall, p50): " + "  ".join(f"{k} {v:.2f}" for k, v in ph.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
