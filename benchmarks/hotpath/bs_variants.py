"""Black-Scholes' generated kernel, variant by variant, beside ``jax.jit`` in one process (issue 24).

Why: with IEEE arithmetic the generated kernel (0.473 ms on an H100 at 1b1e610, 2^26 options) was 1-2 % slower
than JAX's whole step (0.466 ms), and 4 % faster with ``--use_fast_math`` (0.453 ms). Which part of the kernel's
arithmetic, or which launch shape, held it back? (Neither: its loads did; since 783fbc7 every variant with 4 per
item runs at the copy floor, see the README.) Each variant rebuilds the plan in a fresh session: elements per
work-item (``fuse.ELEMENTS_PER_ITEM``), work-group size, and one compiler option at a time (CUDA: ``-ftz=true``
flushes subnormals, ``-prec-div=false`` / ``-prec-sqrt=false`` approximate division / square root; together with
fast exp/log they make ``--use_fast_math``). The kernels alone are replayed (``Session.replay_last``) and timed,
rounds interleaved over the variants and JAX; every variant's outputs are checked against float64.

    python -m benchmarks.hotpath.bs_variants --device cuda --out DIR     # -> DIR/bs_variants_<device>.{json,md}
    python -m benchmarks.hotpath.bs_variants --device opencl --n 1048576  # a PoCL pilot (no compiler options)
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import erf as np_erf

import adaptune.numpy as anp
from adaptune.lang import fuse
from adaptune.lang import session as lang_session
from adaptune.lang.runtime import Runtime
from benchmarks.harness import device_tag, markdown_table, run_metadata, study_parser, write_results
from benchmarks.lang.run import Peers, black_scholes

OPTIONS = {"cuda": ((), ("-ftz=true",), ("-prec-div=false",), ("-prec-sqrt=false",),
                    ("-ftz=true", "-prec-div=false", "-prec-sqrt=false"), ("--use_fast_math",)),
           "opencl": ((),)}


def inputs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)  # the lang and hotpath studies' draws
    s, k = rng.uniform(5, 30, n).astype(np.float32), rng.uniform(1, 100, n).astype(np.float32)
    return s, k, rng.uniform(0.25, 10, n).astype(np.float32)


def build(kind: str, host: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...], per_item: int, block: int | None,
          options: tuple[str, ...]) -> tuple[Callable[[], Any], float, dict[str, Any]]:
    """A fresh session with these settings: (replay its kernels, max relative error vs float64, the step)."""
    rt = Runtime(kind)
    rt.options = tuple(options)
    lang_session.use_runtime(rt)
    saved = fuse.ELEMENTS_PER_ITEM
    fuse.ELEMENTS_PER_ITEM = per_item
    try:
        sess = lang_session.session()
        args = [anp.asarray(h) for h in host]
        out = black_scholes(anp, anp.erf, *args)
        anp.flush()
        plan = sess.last_plan
        assert plan is not None and plan.kernels == 1, "Black-Scholes fuses into one kernel"
        step = plan.steps[0]
        if block is not None:  # the cached plan's step relaunched at this size (as the work-group tuner sets it)
            step.block = block
            step.grid = -(-step.items // (block * step.per_item))
            fuse.prepare(plan)
            out = black_scholes(anp, anp.erf, *args)  # the same plan from the cache, at the new size
            anp.flush()
        err = max(float(np.max(np.abs(o.get() - w) / (np.abs(w) + 1))) for o, w in zip(out, want, strict=True))
        return sess.replay_last, err, {"block": step.block, "per_item": step.per_item, "grid": step.grid}
    finally:
        fuse.ELEMENTS_PER_ITEM = saved


def main() -> None:
    ap = study_parser("hotpath", __doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "opencl"), default="cuda")
    ap.add_argument("--n", type=int, default=1 << 26)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    peers = Peers(args.device)
    host = inputs(args.n)
    want = black_scholes(np, np_erf, *(h.astype(np.float64) for h in host))
    previous = lang_session.session().runtime
    variants: dict[str, tuple[Callable[[], Any], dict[str, Any]]] = {}
    blocks = (None, 128, 256, 512) if args.device == "cuda" else (None, 64)
    for per_item, block, options in itertools.chain(
            ((p, b, ()) for p, b in itertools.product((1, 2, 4, 8), blocks)),
            ((fuse.ELEMENTS_PER_ITEM, None, o) for o in OPTIONS[args.device][1:])):
        name = f"per_item={per_item} block={block or 'default'} options={' '.join(options) or '-'}"
        try:
            replay, err, shape = build(args.device, host, want, per_item, block, options)
        except Exception as exc:  # a variant that fails to build is reported, not fatal
            print(f"{name}: {type(exc).__name__}: {exc}")
            continue
        variants[name] = (replay, {**shape, "options": " ".join(options), "max_rel_err_vs_float64": err})
        print(f"built {name} {shape} err {err:.2e}", flush=True)
    lang_session.use_runtime(previous)
    if peers.jax is not None:
        from jax.scipy.special import erf as jerf

        jbs = peers.jax.jit(lambda s_, k_, t_: black_scholes(peers.jnp, jerf, s_, k_, t_))
        jargs = [peers.jnp.asarray(h) for h in host]
        jout: list[Any] = [None]

        def jax_step() -> None:
            jout[0] = jbs(*jargs)

        jax_step()
        variants["jax.jit"] = (jax_step, {"options": "XLA"})
    sync = peers.sync if args.device == "cuda" else lang_session.session().runtime.synchronize
    times: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(args.rounds):  # interleaved: each round times every variant once, order rotated
        names = list(variants)
        names = names[r % len(names):] + names[:r % len(names)]
        for name in names:
            fn = variants[name][0]
            fn()
            sync()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                fn()
            sync()
            times[name].append((time.perf_counter() - t0) * 1e3 / args.iters)
    rows = [{"variant": k, **variants[k][1], "ms": float(np.median(v)), "min_ms": float(np.min(v)),
             "max_ms": float(np.max(v))} for k, v in times.items()]
    ref = next((r["ms"] for r in rows if r["variant"] == "jax.jit"), None)
    for r in rows:
        r["vs_jax"] = r["ms"] / ref if ref else None
    rows.sort(key=lambda r: r["ms"])
    tag = device_tag(previous.name)
    write_results(args.out, f"bs_variants_{tag}", {"n": args.n, "rounds": args.rounds, "iters": args.iters,
                                                   "rows": rows},
                  table=rows, title=f"Black-Scholes' generated kernel by variant ({tag}, {args.n} options)",
                  notes=__doc__.split("\n\n")[1], metadata=run_metadata())
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
