"""Benchpress-style benchmarks of adaptune.numpy (seed 002): generated fused kernels against the peers.

    python -m benchmarks.lang.run --device cuda --out DIR      # H100: CuPy, fuse, JAX, CUDA
    python -m benchmarks.lang.run --device opencl              # PoCL: against NumPy -> out/lang/
    python -m benchmarks.lang.run --profile smoke              # PoCL, heat + Black-Scholes + overhead, 1 repeat

Per benchmark: milliseconds per iteration (median of ``--repeats`` timed runs of ``--iters`` iterations,
min and max kept), GB/s (bytes a perfect kernel must move / time), kernels launched per iteration by
adaptune (from the flush statistics), and the largest difference from the reference result. Results go
to ``DIR/lang_<device>.json`` (h100, h200, pocl, ...) as each part finishes (a failing part is recorded, the rest still run).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with CuPy

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402
from adaptune.lang.runtime import Runtime  # noqa: E402
from benchmarks.harness import device_tag, git_commit, parse_study_args, study_parser, time_host  # noqa: E402

R, V = 0.02, 0.30  # Black-Scholes rate and volatility
SMOKE = {"device": "opencl", "parts": "heat,black_scholes,overhead", "repeats": 1}


def timed(step: Callable[[], Any], sync: Callable[[], None], iters: int, repeats: int,
          warmup: int = 1) -> dict[str, float]:
    """ms per iteration: median (min, max) of ``repeats`` timed runs of ``iters`` iterations."""
    s = time_host(step, warmup=warmup, repeats=repeats, number=iters, sync=sync)
    return {"ms": s["p50"] * 1e3, "min_ms": s["min"] * 1e3, "max_ms": s["max"] * 1e3}


class Peers:
    """What the comparison has on this machine: CuPy, JAX (CUDA) or NumPy (OpenCL/PoCL)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.cp = self.jax = self.jnp = None
        if kind == "cuda":
            import cupy

            self.cp = cupy
            try:
                import jax
                import jax.numpy as jnp

                self.jax, self.jnp = jax, jnp
            except Exception as exc:  # JAX missing: report and go on
                print("jax unavailable:", exc)

    def sync(self) -> None:
        if self.cp is not None:
            self.cp.cuda.Device().synchronize()


def adaptune_sync() -> None:
    lang_session.session().runtime.synchronize()


def kernels_only(iters: int, repeats: int) -> dict[str, float]:
    """Replay the last flushed plan (same kernels, same inputs; kernels are pure): the generated code's
    time without recording or planning in Python."""
    return timed(lang_session.session().replay_last, adaptune_sync, iters, repeats)


# ----------------------------------------------------------------------------- heat equation

HEAT_CU = r"""
extern "C" __global__ void heat(const float* __restrict__ a, float* __restrict__ b, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < 1 || i >= n - 1 || j < 1 || j >= n - 1) return;
    size_t c = (size_t)i * n + j;
    b[c] = 0.2f * ((((a[c] + a[c - n]) + a[c + n]) + a[c - 1]) + a[c + 1]);
}
"""


def heat_step(xp_array: Any) -> None:
    a = xp_array
    a[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])


def bench_heat(peers: Peers, n: int, iters: int, repeats: int) -> dict[str, Any]:
    host = np.random.default_rng(0).random((n, n), dtype=np.float32)
    out: dict[str, Any] = {"size": [n, n], "dtype": "float32", "bytes_per_iter": 2 * n * n * 4}
    a = anp.asarray(host)

    def ours() -> None:
        heat_step(a)
        anp.flush()

    out["adaptune"] = timed(ours, adaptune_sync, iters, repeats)
    out["kernels_per_iter"] = anp.last_flush().kernels
    out["flush_host_us"] = anp.last_flush().host_us
    out["adaptune_kernels_only"] = kernels_only(iters, repeats)
    check = host.copy()
    probe = anp.asarray(host)
    for _ in range(3):
        heat_step(check)
        heat_step(probe)
    out["max_abs_err_vs_numpy"] = float(np.abs(probe.get() - check).max())
    if peers.cp is not None:
        cp = peers.cp
        c = cp.asarray(host)
        out["cupy"] = timed(lambda: heat_step(c), peers.sync, iters, repeats)
        ek = cp.ElementwiseKernel("T c, T nn, T s, T w, T e", "T o", "o = (T)0.2 * ((((c + nn) + s) + w) + e)",
                                  "heat_ek")
        bufs = [cp.asarray(host), cp.asarray(host)]

        def ek_step() -> None:
            src, dst = bufs
            ek(src[1:-1, 1:-1], src[:-2, 1:-1], src[2:, 1:-1], src[1:-1, :-2], src[1:-1, 2:], dst[1:-1, 1:-1])
            bufs.reverse()

        out["cupy_elementwise_kernel"] = timed(ek_step, peers.sync, iters, repeats)
        kern = cp.RawKernel(HEAT_CU, "heat")
        hb = [cp.asarray(host), cp.asarray(host)]

        def hand() -> None:
            kern(((n + 31) // 32, (n + 7) // 8), (32, 8), (hb[0], hb[1], np.int32(n)))
            hb.reverse()

        out["handwritten"] = timed(hand, peers.sync, iters, repeats)
        probe2 = [cp.asarray(host), cp.asarray(host)]
        for _ in range(3):
            kern(((n + 31) // 32, (n + 7) // 8), (32, 8), (probe2[0], probe2[1], np.int32(n)))
            probe2.reverse()
        out["handwritten_max_abs_err_vs_numpy"] = float(np.abs(cp.asnumpy(probe2[0]) - check).max())
        if peers.jax is not None:
            jax, jnp = peers.jax, peers.jnp

            @jax.jit
            def jstep(a):
                return a.at[1:-1, 1:-1].set(0.2 * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2]
                                                   + a[1:-1, 2:]))

            state = [jnp.asarray(host)]

            def jrun() -> None:
                state[0] = jstep(state[0])

            out["jax"] = timed(jrun, lambda: state[0].block_until_ready(), iters, repeats)
    elif peers.kind == "opencl":
        h = host.copy()
        out["numpy"] = timed(lambda: heat_step(h), lambda: None, max(1, iters // 4), repeats, warmup=1)
    return out


# ----------------------------------------------------------------------------- Black-Scholes

BS_CU = r"""
extern "C" __global__ void bs(const float* __restrict__ S, const float* __restrict__ K,
                              const float* __restrict__ T, float r, float v,
                              float* __restrict__ call, float* __restrict__ put, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = S[i], k = K[i], t = T[i];
    float sq = sqrtf(t);
    float d1 = (logf(s / k) + (r + 0.5f * v * v) * t) / (v * sq);
    float d2 = d1 - v * sq;
    float c1 = 0.5f * (1.0f + erff(d1 * 0.70710678118654752f));
    float c2 = 0.5f * (1.0f + erff(d2 * 0.70710678118654752f));
    float e = k * expf(-r * t);
    call[i] = s * c1 - e * c2;
    put[i] = e * (1.0f - c2) - s * (1.0f - c1);
}
"""


def black_scholes(xp: Any, erf: Callable[[Any], Any], s: Any, k: Any, t: Any) -> tuple[Any, Any]:
    sq = xp.sqrt(t)
    d1 = (xp.log(s / k) + (R + 0.5 * V * V) * t) / (V * sq)
    d2 = d1 - V * sq
    c1 = 0.5 * (1.0 + erf(d1 * (1 / math.sqrt(2.0))))
    c2 = 0.5 * (1.0 + erf(d2 * (1 / math.sqrt(2.0))))
    e = k * xp.exp(-R * t)
    return s * c1 - e * c2, e * (1.0 - c2) - s * (1.0 - c1)


def bench_black_scholes(peers: Peers, n: int, iters: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    s, k = rng.uniform(5, 30, n).astype(np.float32), rng.uniform(1, 100, n).astype(np.float32)
    t = rng.uniform(0.25, 10, n).astype(np.float32)
    out: dict[str, Any] = {"size": n, "dtype": "float32", "bytes_per_iter": 5 * n * 4}
    a_s, a_k, a_t = anp.asarray(s), anp.asarray(k), anp.asarray(t)
    keep: list[Any] = []

    def ours() -> None:
        keep[:] = black_scholes(anp, anp.erf, a_s, a_k, a_t)
        anp.flush()

    out["adaptune"] = timed(ours, adaptune_sync, iters, repeats)
    out["kernels_per_iter"] = anp.last_flush().kernels
    out["adaptune_kernels_only"] = kernels_only(iters, repeats)
    from scipy.special import erf as np_erf

    want = black_scholes(np, np_erf, s.astype(np.float64), k.astype(np.float64), t.astype(np.float64))
    got = [x.get() for x in keep]
    out["max_rel_err_vs_float64"] = float(max(np.max(np.abs(g - w) / (np.abs(w) + 1)) for g, w in zip(got, want, strict=False)))
    if peers.cp is not None:
        cp = peers.cp
        import cupyx.scipy.special as cps

        c_s, c_k, c_t = cp.asarray(s), cp.asarray(k), cp.asarray(t)
        out["cupy"] = timed(lambda: black_scholes(cp, cps.erf, c_s, c_k, c_t), peers.sync, iters, repeats)
        try:
            def bs_fused(s_, k_, t_):
                return black_scholes(cp, cps.erf, s_, k_, t_)

            fused = cp.fuse(bs_fused)
            out["cupy_fuse"] = timed(lambda: fused(c_s, c_k, c_t), peers.sync, iters, repeats)
        except Exception as exc:
            out["cupy_fuse_error"] = f"{type(exc).__name__}: {exc}"[:300]
        kern = cp.RawKernel(BS_CU, "bs")
        call, put = cp.empty(n, cp.float32), cp.empty(n, cp.float32)
        grid = (n + 255) // 256
        args = (c_s, c_k, c_t, np.float32(R), np.float32(V), call, put, np.int64(n))
        out["handwritten"] = timed(lambda: kern((grid,), (256,), args), peers.sync, iters, repeats)
        out["handwritten_max_rel_err_vs_float64"] = float(max(
            np.max(np.abs(cp.asnumpy(g) - w) / (np.abs(w) + 1)) for g, w in zip((call, put), want, strict=False)))
        if peers.jax is not None:
            jax, jnp = peers.jax, peers.jnp
            from jax.scipy.special import erf as jerf

            jbs = jax.jit(lambda s_, k_, t_: black_scholes(jnp, jerf, s_, k_, t_))
            j_s, j_k, j_t = jnp.asarray(s), jnp.asarray(k), jnp.asarray(t)
            res: list[Any] = [None]

            def jrun() -> None:
                res[0] = jbs(j_s, j_k, j_t)

            out["jax"] = timed(jrun, lambda: res[0][0].block_until_ready(), iters, repeats)
            out["jax_max_rel_err_vs_float64"] = float(max(
                np.max(np.abs(np.asarray(g) - w) / (np.abs(w) + 1)) for g, w in zip(res[0], want, strict=False)))
    elif peers.kind == "opencl":
        out["numpy"] = timed(lambda: black_scholes(np, np_erf, s, k, t), lambda: None, max(1, iters // 4), repeats,
                             warmup=1)
    return out


# ----------------------------------------------------------------------------- shallow water (3 arrays)

def shallow_step(h: Any, u: Any, v: Any, c: float = 0.1) -> None:
    """Linearised shallow water, forward-backward: u and v from h, then h from the new u and v."""
    u[1:-1, 1:-1] = u[1:-1, 1:-1] - c * (h[1:-1, 2:] - h[1:-1, :-2])
    v[1:-1, 1:-1] = v[1:-1, 1:-1] - c * (h[2:, 1:-1] - h[:-2, 1:-1])
    h[1:-1, 1:-1] = h[1:-1, 1:-1] - c * ((u[1:-1, 2:] - u[1:-1, :-2]) + (v[2:, 1:-1] - v[:-2, 1:-1]))


def bench_shallow_water(peers: Peers, n: int, iters: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    h0 = (1 + 0.01 * rng.random((n, n))).astype(np.float32)
    z = np.zeros((n, n), np.float32)
    out: dict[str, Any] = {"size": [n, n], "dtype": "float32", "bytes_per_iter": 3 * 2 * n * n * 4}
    ah, au, av = anp.asarray(h0), anp.asarray(z), anp.asarray(z)

    def ours() -> None:
        shallow_step(ah, au, av)
        anp.flush()

    out["adaptune"] = timed(ours, adaptune_sync, iters, repeats)
    out["kernels_per_iter"] = anp.last_flush().kernels
    out["adaptune_kernels_only"] = kernels_only(iters, repeats)
    ph, pu, pv = anp.asarray(h0), anp.asarray(z), anp.asarray(z)
    ch, cu, cv = h0.copy(), z.copy(), z.copy()
    for _ in range(3):
        shallow_step(ph, pu, pv)
        shallow_step(ch, cu, cv)
    out["max_abs_err_vs_numpy"] = float(np.abs(ph.get() - ch).max())
    if peers.cp is not None:
        cp = peers.cp
        gh, gu, gv = cp.asarray(h0), cp.asarray(z), cp.asarray(z)
        out["cupy"] = timed(lambda: shallow_step(gh, gu, gv), peers.sync, iters, repeats)
        if peers.jax is not None:
            jax, jnp = peers.jax, peers.jnp

            @jax.jit
            def jstep(h, u, v, c=0.1):
                u = u.at[1:-1, 1:-1].set(u[1:-1, 1:-1] - c * (h[1:-1, 2:] - h[1:-1, :-2]))
                v = v.at[1:-1, 1:-1].set(v[1:-1, 1:-1] - c * (h[2:, 1:-1] - h[:-2, 1:-1]))
                h = h.at[1:-1, 1:-1].set(h[1:-1, 1:-1] - c * ((u[1:-1, 2:] - u[1:-1, :-2])
                                                               + (v[2:, 1:-1] - v[:-2, 1:-1])))
                return h, u, v

            st = [(jnp.asarray(h0), jnp.asarray(z), jnp.asarray(z))]

            def jrun() -> None:
                st[0] = jstep(*st[0])

            out["jax"] = timed(jrun, lambda: st[0][0].block_until_ready(), iters, repeats)
    elif peers.kind == "opencl":
        hh, uu, vv = h0.copy(), z.copy(), z.copy()
        out["numpy"] = timed(lambda: shallow_step(hh, uu, vv), lambda: None, max(1, iters // 4), repeats, warmup=1)
    return out


# ----------------------------------------------------------------------------- n-body

def nbody_step(xp: Any, x: Any, y: Any, z: Any, vx: Any, vy: Any, vz: Any, m: Any, dt: float = 1e-3):
    dx = x[None, :] - x[:, None]
    dy = y[None, :] - y[:, None]
    dz = z[None, :] - z[:, None]
    r2 = dx * dx + dy * dy + dz * dz + 1e-2
    w = m[None, :] / (r2 * xp.sqrt(r2))
    vx = vx + dt * (dx * w).sum(axis=1)
    vy = vy + dt * (dy * w).sum(axis=1)
    vz = vz + dt * (dz * w).sum(axis=1)
    return x + dt * vx, y + dt * vy, z + dt * vz, vx, vy, vz


def bench_nbody(peers: Peers, n: int, iters: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    init = [rng.random(n).astype(np.float32) for _ in range(3)] + [np.zeros(n, np.float32)] * 3
    m = rng.random(n).astype(np.float32)
    out: dict[str, Any] = {"size": n, "dtype": "float32", "pairs": n * n,
                           "bytes_per_iter": 13 * n * 4}
    st = [tuple(anp.asarray(a) for a in init)]
    am = anp.asarray(m)

    def ours() -> None:
        st[0] = nbody_step(anp, *st[0], am)
        anp.flush()

    out["adaptune"] = timed(ours, adaptune_sync, iters, repeats)
    out["kernels_per_iter"] = anp.last_flush().kernels
    out["bytes_moved_per_iter"] = anp.last_flush().bytes
    out["adaptune_kernels_only"] = kernels_only(iters, repeats)
    probe = tuple(anp.asarray(a) for a in init)
    ref = tuple(a.astype(np.float64) for a in init)
    for _ in range(2):
        probe = nbody_step(anp, *probe, am)
        ref = nbody_step(np, *ref, m.astype(np.float64))
    out["max_abs_err_vs_float64"] = float(max(np.abs(p.get() - r).max() for p, r in zip(probe, ref, strict=False)))
    if peers.cp is not None:
        cp = peers.cp
        cs = [tuple(cp.asarray(a) for a in init)]
        cm = cp.asarray(m)

        def crun() -> None:
            cs[0] = nbody_step(cp, *cs[0], cm)

        out["cupy"] = timed(crun, peers.sync, iters, repeats)
        if peers.jax is not None:
            jax, jnp = peers.jax, peers.jnp
            jf = jax.jit(lambda *a: nbody_step(jnp, *a))
            js = [tuple(jnp.asarray(a) for a in init)]
            jm = jnp.asarray(m)

            def jrun() -> None:
                js[0] = jf(*js[0], jm)

            out["jax"] = timed(jrun, lambda: js[0][0].block_until_ready(), iters, repeats)
    elif peers.kind == "opencl":
        ns = [tuple(init)]

        def nrun() -> None:
            ns[0] = nbody_step(np, *ns[0], m)

        out["numpy"] = timed(nrun, lambda: None, max(1, iters // 4), repeats, warmup=1)
    return out


# ----------------------------------------------------------------------------- reduction ladder

VARIANTS = ("thread_per_output", "tree", "segmented", "two_pass", "grid_stride", "column")

def ladder_cases(big: bool) -> list[tuple[str, tuple[int, ...], Any]]:
    if big:  # 256 MiB of float32 each (5x the H100's L2)
        return [("1d_all", (1 << 26,), None), ("2d_axis0", (8192, 8192), 0), ("2d_axis1", (8192, 8192), 1),
                ("3d_axis0", (256, 512, 512), 0), ("3d_axis1", (256, 512, 512), 1),
                ("3d_axis2", (256, 512, 512), 2), ("short_rows_axis1", (1 << 22, 16), 1),
                ("long_rows_axis1", (16, 1 << 22), 1), ("tall_axis0", (1 << 22, 16), 0),
                ("2d_all", (8192, 8192), None)]
    return [("1d_all", (1 << 22,), None), ("2d_axis0", (2048, 2048), 0), ("2d_axis1", (2048, 2048), 1),
            ("3d_axis0", (128, 128, 256), 0), ("3d_axis1", (128, 128, 256), 1), ("3d_axis2", (128, 128, 256), 2),
            ("short_rows_axis1", (1 << 18, 16), 1), ("long_rows_axis1", (16, 1 << 18), 1),
            ("tall_axis0", (1 << 18, 16), 0), ("2d_all", (2048, 2048), None)]


def bench_reductions(peers: Peers, big: bool, iters: int, repeats: int, chooser: Any = None,
                     label: str = "adaptune") -> dict[str, Any]:
    sess = lang_session.session()
    results: dict[str, Any] = {}
    for name, shape, axis in ladder_cases(big):
        row: dict[str, Any] = {"shape": list(shape), "axis": axis, "bytes": int(np.prod(shape)) * 4}
        sess.chooser = chooser
        try:
            _one_reduction(peers, row, shape, axis, iters, repeats, label)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:400]
        finally:
            sess.chooser = None
        results[name] = row
        print(f"  reduction {name}: {json.dumps({k: v for k, v in row.items() if k in (label, 'cupy', 'choice')})}",
              flush=True)
    return results


def _one_reduction(peers: Peers, row: dict[str, Any], shape: tuple[int, ...], axis: Any, iters: int,
                   repeats: int, label: str) -> None:
    sess = lang_session.session()
    host = np.random.default_rng(4).random(shape, dtype=np.float32)
    a = anp.asarray(host)
    keep: list[Any] = []

    def ours() -> None:
        keep[:] = [a.sum(axis=axis)]
        anp.flush()

    row[label] = timed(ours, adaptune_sync, iters, repeats)
    row["kernels"] = anp.last_flush().kernels
    row["choice"] = _last_choice(sess)
    got = keep[0].get()
    want = host.sum(axis=axis, dtype=np.float64)
    row["max_rel_err"] = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-30)))
    if peers.cp is not None:
        cp = peers.cp
        c = cp.asarray(host)
        row["cupy"] = timed(lambda: c.sum(axis=axis), peers.sync, iters, repeats)
        del c
        if peers.jax is not None:
            jax, jnp = peers.jax, peers.jnp
            jf = jax.jit(lambda x: jnp.sum(x, axis=axis))
            ja = jnp.asarray(host)
            res: list[Any] = [None]

            def jrun() -> None:
                res[0] = jf(ja)

            row["jax"] = timed(jrun, lambda: res[0].block_until_ready(), iters, repeats)
    elif peers.kind == "opencl":
        row["numpy"] = timed(lambda: host.sum(axis=axis), lambda: None, iters, repeats, warmup=1)


def _last_choice(sess: Any) -> Any:
    for plan in reversed(list(sess.plans.values())):
        if plan.reductions:
            return plan.reductions[-1]
    return None


def bench_variants(peers: Peers, big: bool, iters: int, repeats: int) -> dict[str, Any]:
    """Every reduction variant (default work-group) on every ladder shape: direct (strided) vs coalesced
    access, seed 002's ch. 4-6 comparison. Hopeless pairings (one work-item per output on a handful of
    outputs, one group for a whole vector) are skipped."""
    sess = lang_session.session()
    out: dict[str, Any] = {}
    for name, shape, axis in ladder_cases(big):
        host = np.random.default_rng(4).random(shape, dtype=np.float32)
        a = anp.asarray(host)
        n_out = 1 if axis is None else int(np.prod(shape)) // shape[axis]
        row: dict[str, Any] = {}
        for variant in VARIANTS:
            if (variant == "thread_per_output" and n_out < 4096) or (variant in ("tree", "segmented") and n_out == 1):
                continue
            if variant == "column" and not (axis == 0 and 1 < n_out <= 64 and 256 % n_out == 0):
                continue  # where the column mapping does not fit it would run as two_pass
            sess.chooser = (lambda v: (lambda rs, node, rt: (v, {"block": 256, "seg": 32 if rs.length >= 256
                                                                   else 8})))(variant)
            keep: list[Any] = []

            def ours(keep: list[Any] = keep, a: Any = a, axis: Any = axis) -> None:
                keep[:] = [a.sum(axis=axis)]
                anp.flush()

            try:
                row[variant] = timed(ours, adaptune_sync, iters, repeats, warmup=1)["ms"]
                got = keep[0].get()
                want = host.sum(axis=axis, dtype=np.float64)
                if not np.allclose(got, want, rtol=1e-3):
                    row[variant + "_wrong"] = True
            except Exception as exc:
                row[variant + "_error"] = f"{type(exc).__name__}: {exc}"[:200]
        sess.chooser = None
        out[name] = row
        print(f"  variants {name}: {row}", flush=True)
    # element-wise over a transposed view: the direct (strided-read) kernel; no coalesced variant exists yet
    n = 8192 if big else 1024
    host = np.random.default_rng(5).random((n, n), dtype=np.float32)
    a = anp.asarray(host)
    keep2: list[Any] = []
    row2: dict[str, Any] = {"size": [n, n]}
    for label, fn, coalesce in (("contiguous", lambda: a * 2.0, True), ("transposed_direct", lambda: a.T * 2.0, False),
                                ("transposed_coalesced", lambda: a.T * 2.0, True),
                                ("sum_with_transpose_direct", lambda: a + a.T, False),
                                ("sum_with_transpose_coalesced", lambda: a + a.T, True)):
        def step(fn: Any = fn) -> None:
            keep2[:] = [fn()]
            anp.flush()

        sess.coalesce = coalesce
        try:
            row2[f"adaptune_{label}_ms"] = timed(step, adaptune_sync, iters, repeats)["ms"]
            row2[f"adaptune_{label}_kernel"] = sess.last_plan.steps[0].what
            want = host * 2.0 if label == "contiguous" else host.T * 2.0 if label.startswith("transposed") \
                else host + host.T
            row2[f"adaptune_{label}_ok"] = bool(np.array_equal(keep2[0].get(), want))
        except Exception as exc:
            row2[f"adaptune_{label}_error"] = f"{type(exc).__name__}: {exc}"[:200]
        finally:
            sess.coalesce = True
    if peers.cp is not None:
        c = peers.cp.asarray(host)
        row2["cupy_contiguous_ms"] = timed(lambda: c * 2.0, peers.sync, iters, repeats)["ms"]
        row2["cupy_transposed_ms"] = timed(lambda: c.T * 2.0, peers.sync, iters, repeats)["ms"]
        row2["cupy_sum_with_transpose_ms"] = timed(lambda: c + c.T, peers.sync, iters, repeats)["ms"]
        if peers.jax is not None:
            jax, jnp = peers.jax, peers.jnp
            ja = jnp.asarray(host)
            for label, f in (("contiguous", lambda x: x * 2.0), ("transposed", lambda x: x.T * 2.0),
                             ("sum_with_transpose", lambda x: x + x.T)):
                jt = jax.jit(f)
                res: list[Any] = [None]

                def jrun(jt: Any = jt, res: list[Any] = res) -> None:
                    res[0] = jt(ja)

                row2[f"jax_{label}_ms"] = timed(jrun, lambda res=res: res[0].block_until_ready(), iters, repeats)["ms"]
    out["elementwise_transpose"] = row2
    print(f"  transpose: {row2}", flush=True)
    return out


# ----------------------------------------------------------------------------- flush overhead

def bench_flush_overhead(n_flushes: int) -> dict[str, Any]:
    """Host time of a flush whose plan is cached, p50 / p90 over many flushes: a tiny 2-op update written
    in place (``a[...] = a * 0.5 + 1``, the previous round's case) and the same expression into a fresh
    array (``b = a * 0.5 + 1``: one allocation per flush)."""
    out: dict[str, Any] = {"n": n_flushes}
    for case in ("update", "fresh"):
        a = anp.asarray(np.ones(1024, np.float32))
        keep: list[Any] = []
        host_us, wall_us = [], []
        for i in range(n_flushes + 50):
            t0 = time.perf_counter()
            if case == "update":
                a[...] = a * 0.5 + 1.0
            else:
                keep[:] = [a * 0.5 + 1.0]
            anp.flush()
            t1 = time.perf_counter()
            if i >= 50:
                host_us.append(anp.last_flush().host_us)
                wall_us.append((t1 - t0) * 1e6)
        adaptune_sync()
        last = anp.last_flush()
        prefix = "flush" if case == "update" else "fresh_flush"
        out[f"{prefix}_host_us_p50"] = float(np.percentile(host_us, 50))
        out[f"{prefix}_host_us_p90"] = float(np.percentile(host_us, 90))
        out[f"{prefix.replace('flush', 'record_and_flush') if case == 'fresh' else 'record_and_flush'}_us_p50"] = \
            float(np.percentile(wall_us, 50))
        out[f"{case}_cache_hit"] = last.cache_hit
        out[f"{case}_inplace"] = last.inplace
    out["cache_hit"] = out["update_cache_hit"]
    return out


# ----------------------------------------------------------------------------- driver

def copy_bandwidth(peers: Peers) -> float | None:
    if peers.cp is None:
        return None
    cp = peers.cp
    a = cp.ones(1 << 28, cp.float32)
    b = cp.empty_like(a)
    t = timed(lambda: cp.copyto(b, a), peers.sync, 10, 5)
    return 2 * a.nbytes / (t["ms"] * 1e-3) / 1e9


def summarise(res: dict[str, Any], bw: float | None) -> None:
    for name in ("heat", "black_scholes", "shallow_water", "nbody"):
        b = res.get(name)
        if not isinstance(b, dict) or "adaptune" not in b:
            continue
        ms = b["adaptune"]["ms"]
        b["adaptune_ms"] = ms
        if "adaptune_kernels_only" in b:
            b["adaptune_kernel_ms"] = b["adaptune_kernels_only"]["ms"]
            if "handwritten" in b:
                b["kernel_vs_handwritten"] = b["adaptune_kernel_ms"] / b["handwritten"]["ms"]
        for peer in ("cupy", "cupy_elementwise_kernel", "cupy_fuse", "jax", "handwritten", "numpy"):
            if peer in b and isinstance(b[peer], dict):
                b[f"{peer}_ms"] = b[peer]["ms"]
                b[f"speedup_vs_{peer}"] = b[peer]["ms"] / ms
        b["gbps"] = b["bytes_per_iter"] / (ms * 1e-3) / 1e9
        if bw:
            b["fraction_of_copy_bw"] = b["gbps"] / bw
    lad = res.get("reductions", {})
    for row in lad.values():
        if "adaptune" in row:
            row["adaptune_ms"] = row["adaptune"]["ms"]
            row["gbps"] = row["bytes"] / (row["adaptune_ms"] * 1e-3) / 1e9
            for peer in ("cupy", "jax", "numpy"):
                if peer in row:
                    row[f"{peer}_ms"] = row[peer]["ms"]
                    row[f"ratio_vs_{peer}"] = row[peer]["ms"] / row["adaptune_ms"]
            if "tuned" in row:
                row["tuned_ms"] = row["tuned"]["ms"]


def previous_summary(prev: dict[str, Any]) -> dict[str, Any]:
    """The numbers of an earlier run that this round set out to change (kept in the new JSON)."""
    out: dict[str, Any] = {"commit": prev.get("commit"), "date": prev.get("date"), "device": prev.get("device")}
    for name in ("heat", "black_scholes", "shallow_water", "nbody"):
        b = prev.get(name, {})
        out[name] = {k: b.get(k) for k in ("adaptune_ms", "adaptune_kernel_ms", "kernels_per_iter")}
    out["reductions"] = {name: {k: row.get(k) for k in ("adaptune_ms", "tuned_ms", "cupy_ms")}
                         for name, row in prev.get("reductions", {}).items()}
    out["overhead"] = prev.get("overhead")
    out["elementwise_transpose"] = prev.get("variants", {}).get("elementwise_transpose")
    tr = prev.get("tuning", {}).get("reduction_training", {})
    out["cv_fraction_of_oracle"] = tr.get("cv_fraction_of_oracle")
    out["training_shapes"] = len(tr.get("ladder", []))
    return out


def markdown(res: dict[str, Any]) -> str:
    """The results as a short markdown report (``--report FILE.json`` writes FILE.md)."""
    def f(x: Any, digits: int = 3) -> str:
        return f"{x:.{digits}f}" if isinstance(x, float) else "-"

    bw = res.get("copy_gbps")
    lines = [f"# adaptune.numpy benchmarks on {res['device']}", "",
             f"Date {res['date']}, commit {res['commit']}, {res['kind']}; NumPy {res['numpy']}"
             + (f", CuPy {res['cupy']}" if "cupy" in res else "") + (f", JAX {res['jax']}" if "jax" in res else "")
             + f"; median of {res['repeats']} runs (min/max in the JSON)."
             + (f" Device-to-device copy: {bw:.0f} GB/s." if bw else ""), "",
             "Times are ms per iteration. `adaptune` = record + flush + kernels, end to end; `kernels` = the "
             "cached plan replayed (generated code alone). GB/s = bytes a perfect kernel moves / adaptune time.", "",
             "| benchmark | adaptune | kernels | CuPy eager | CuPy fused | JAX jit | hand CUDA | NumPy | GB/s "
             "| kernels/iter |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in ("heat", "black_scholes", "shallow_water", "nbody"):
        b = res.get(name, {})
        if "adaptune_ms" not in b:
            continue
        fused = b.get("cupy_elementwise_kernel_ms", b.get("cupy_fuse_ms"))
        lines.append(f"| {name} | {f(b['adaptune_ms'])} | {f(b.get('adaptune_kernel_ms'))} | {f(b.get('cupy_ms'))} | "
                     f"{f(fused)} | {f(b.get('jax_ms'))} | {f(b.get('handwritten_ms'))} | {f(b.get('numpy_ms'))} | "
                     f"{b['gbps']:.{0 if b['gbps'] >= 10 else 2}f} | {b['kernels_per_iter']} |")
    lines += ["", "Reduction ladder (float32 sums): ms; `rule` = untuned default, `tuned` = the trained "
              "CodeVariant's pick.", "",
              "| case | shape | axis | rule | tuned | CuPy | JAX | NumPy | rule/CuPy | rule choice | tuned choice |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in res.get("reductions", {}).items():
        if "adaptune_ms" not in row:
            continue

        def ch(c: Any) -> str:
            if not c:
                return "-"
            extra = ",".join(f"{k}={c[k]}" for k in ("block", "seg") if k in c)
            return f"{c['variant']}[{extra}]"

        ratio = row.get("cupy_ms", 0) / row["adaptune_ms"] if row.get("cupy_ms") else None
        lines.append(f"| {name} | {tuple(row['shape'])} | {row['axis']} | {f(row['adaptune_ms'])} | "
                     f"{f(row.get('tuned_ms'))} | {f(row.get('cupy_ms'))} | {f(row.get('jax_ms'))} | "
                     f"{f(row.get('numpy_ms'))} | {f(ratio, 2)} | {ch(row.get('choice'))} | "
                     f"{ch(row.get('tuned_choice'))} |")
    var = res.get("variants", {})
    if var:
        lines += ["", "Every reduction variant at work-group 256 (ms): direct vs coalesced access.", "",
                  "| case | " + " | ".join(VARIANTS) + " |", "|---|" + "---|" * len(VARIANTS)]
        for name, row in var.items():
            if name == "elementwise_transpose":
                continue
            lines.append(f"| {name} | " + " | ".join(f(row.get(v)) for v in VARIANTS) + " |")
        et = var.get("elementwise_transpose")
        if et:
            lines += ["", f"Element-wise over a transposed view, {et['size'][0]}x{et['size'][1]} float32 (ms); "
                      "`direct` = strided loads, `coalesced` = the tiled variant (chosen by default):", "",
                      "| expression | adaptune contiguous / direct | adaptune coalesced | CuPy | JAX jit |",
                      "|---|---|---|---|---|",
                      f"| `x * 2` | {f(et.get('adaptune_contiguous_ms'))} | - | {f(et.get('cupy_contiguous_ms'))} | "
                      f"{f(et.get('jax_contiguous_ms'))} |",
                      f"| `x.T * 2` | {f(et.get('adaptune_transposed_direct_ms'))} | "
                      f"{f(et.get('adaptune_transposed_coalesced_ms'))} | {f(et.get('cupy_transposed_ms'))} | "
                      f"{f(et.get('jax_transposed_ms'))} |",
                      f"| `x + x.T` | {f(et.get('adaptune_sum_with_transpose_direct_ms'))} | "
                      f"{f(et.get('adaptune_sum_with_transpose_coalesced_ms'))} | "
                      f"{f(et.get('cupy_sum_with_transpose_ms'))} | {f(et.get('jax_sum_with_transpose_ms'))} |"]
    ov = res.get("overhead")
    if ov:
        lines += ["", f"Flush with a cached plan (tiny 2-op update, written in place): host time p50 "
                  f"{ov['flush_host_us_p50']:.1f} us, p90 {ov['flush_host_us_p90']:.1f} us; record + flush p50 "
                  f"{ov['record_and_flush_us_p50']:.1f} us."]
        if "fresh_flush_host_us_p50" in ov:
            lines += [f"The same expression into a fresh array (one allocation per flush): host p50 "
                      f"{ov['fresh_flush_host_us_p50']:.1f} us, p90 {ov['fresh_flush_host_us_p90']:.1f} us; "
                      f"record + flush p50 {ov['fresh_record_and_flush_us_p50']:.1f} us."]
    tr = res.get("tuning", {}).get("reduction_training")
    if tr:
        lines += ["", f"Reduction training on {tr.get('shapes', len(tr.get('ladder', [])))} shapes: {tr['measured']} "
                  f"labels measured ({tr['reused']} reused) in {tr['wall_s']:.0f} s; cross-validated fraction of "
                  f"oracle {f(tr['cv_fraction_of_oracle'], 2)}."]
    wg = res.get("tuning", {}).get("workgroup")
    if wg:
        lines += ["", "Element-wise work-group tuning (ms per candidate size):"]
        seen: set[str] = set()
        for r in wg["report"]:
            if r["kernel"] in seen:
                continue
            seen.add(r["kernel"])
            lines.append(f"- {r['what']} ({r['items']} items): best {r['best_block']}, default {r['default_block']}, "
                         + ", ".join(f"{k}: {v:.3f}" for k, v in sorted(r["times_ms"].items(), key=lambda kv: int(kv[0]))))
    pv = res.get("previous")
    if pv:
        lines += ["", f"## Against the previous run (commit {pv['commit']}, {pv['date']})", "",
                  "| measure | previous | this run |", "|---|---|---|"]
        for name in ("heat", "black_scholes", "shallow_water", "nbody"):
            old, new = pv.get(name, {}), res.get(name, {})
            lines.append(f"| {name} ms (end to end / kernels / kernels per iter) | {f(old.get('adaptune_ms'))} / "
                         f"{f(old.get('adaptune_kernel_ms'))} / {old.get('kernels_per_iter', '-')} | "
                         f"{f(new.get('adaptune_ms'))} / {f(new.get('adaptune_kernel_ms'))} / "
                         f"{new.get('kernels_per_iter', '-')} |")
        for name, old in pv.get("reductions", {}).items():
            new = res.get("reductions", {}).get(name, {})
            r_old = old["cupy_ms"] / old["adaptune_ms"] if old.get("cupy_ms") and old.get("adaptune_ms") else None
            r_new = new["cupy_ms"] / new["adaptune_ms"] if new.get("cupy_ms") and new.get("adaptune_ms") else None
            lines.append(f"| sum {name}: rule ms (x cupy.sum) | {f(old.get('adaptune_ms'))} ({f(r_old, 2)}) | "
                         f"{f(new.get('adaptune_ms'))} ({f(r_new, 2)}) |")
        ov_old, ov_new = pv.get("overhead") or {}, res.get("overhead") or {}
        lines.append(f"| flush, cached plan: host p50 / p90 us | {f(ov_old.get('flush_host_us_p50'), 1)} / "
                     f"{f(ov_old.get('flush_host_us_p90'), 1)} | {f(ov_new.get('flush_host_us_p50'), 1)} / "
                     f"{f(ov_new.get('flush_host_us_p90'), 1)} |")
        lines.append(f"| record + flush p50 us | {f(ov_old.get('record_and_flush_us_p50'), 1)} | "
                     f"{f(ov_new.get('record_and_flush_us_p50'), 1)} |")
        et_old = pv.get("elementwise_transpose") or {}
        et_new = res.get("variants", {}).get("elementwise_transpose") or {}
        lines.append(f"| `x.T * 2` ms | {f(et_old.get('adaptune_transposed_ms'))} | "
                     f"{f(et_new.get('adaptune_transposed_coalesced_ms'))} |")
        tr = res.get("tuning", {}).get("reduction_training", {})
        lines.append(f"| reduction model: training shapes, CV fraction of oracle | {pv.get('training_shapes')}, "
                     f"{f(pv.get('cv_fraction_of_oracle'), 2)} | {tr.get('shapes', '-')}, "
                     f"{f(tr.get('cv_fraction_of_oracle'), 2)} |")
    return "\n".join(lines) + "\n"


def plot(res: dict[str, Any], path: Path) -> None:
    """Bar chart: ms per iteration of each benchmark, adaptune next to its peers (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peers = [("adaptune_ms", "adaptune"), ("adaptune_kernel_ms", "adaptune kernels"), ("cupy_ms", "CuPy eager"),
             ("cupy_elementwise_kernel_ms", "CuPy EK"), ("cupy_fuse_ms", "cupy.fuse"), ("jax_ms", "jax.jit"),
             ("handwritten_ms", "hand CUDA"), ("numpy_ms", "NumPy")]
    names = [n for n in ("heat", "black_scholes", "shallow_water", "nbody") if "adaptune_ms" in res.get(n, {})]
    present = [(k, lab) for k, lab in peers if any(k in res[n] for n in names)]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(len(present), 1)
    for i, (k, lab) in enumerate(present):
        ax.bar([j + i * width for j in range(len(names))], [res[n].get(k, 0) for n in names], width, label=lab)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names)
    ax.set_yscale("log")
    ax.set_ylabel("ms per iteration")
    ax.set_title(f"adaptune.numpy on {res['device']} ({res['date']}, {res['commit']})")
    ax.legend(fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = study_parser("lang", __doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "opencl"), default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--parts", default="heat,black_scholes,shallow_water,nbody,reductions,overhead,variants,tune")
    ap.add_argument("--tune-db", default=None, help="Store for the reduction and work-group tuning")
    ap.add_argument("--report", default=None, help="write the markdown report of this results JSON and exit")
    ap.add_argument("--previous", default=None, help="an earlier results JSON, summarised next to this run")
    args = parse_study_args(ap, argv, smoke=SMOKE)
    if args.report:
        src = Path(args.report)
        data = json.loads(src.read_text())
        src.with_suffix(".md").write_text(markdown(data))
        plot(data, src.with_suffix(".png"))
        return 0
    runtime = Runtime(args.device)
    lang_session.use_runtime(runtime)
    peers = Peers(runtime.kind)
    big = runtime.kind == "cuda"
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"lang_{device_tag(runtime.name if big else 'pocl')}.json"
    res: dict[str, Any] = {"device": runtime.name, "kind": runtime.kind, "date": time.strftime("%Y-%m-%d %H:%M UTC",
                           time.gmtime()), "commit": git_commit(),
                           "python": platform.python_version(), "numpy": np.__version__,
                           "repeats": args.repeats}
    if peers.cp is not None:
        res["cupy"] = peers.cp.__version__
    if peers.jax is not None:
        res["jax"] = peers.jax.__version__
    if args.previous and Path(args.previous).exists():
        res["previous"] = previous_summary(json.loads(Path(args.previous).read_text()))
    bw = copy_bandwidth(peers)
    res["copy_gbps"] = bw
    parts = args.parts.split(",")

    def save() -> None:
        summarise(res, bw)
        path.write_text(json.dumps(res, indent=1, default=float))
        path.with_suffix(".md").write_text(markdown(res))

    jobs: list[tuple[str, Callable[[], Any]]] = [
        ("heat", lambda: bench_heat(peers, 8192 if big else 1024, 20 if big else 8, args.repeats)),
        ("black_scholes", lambda: bench_black_scholes(peers, 1 << 26 if big else 1 << 20, 20 if big else 4,
                                                      args.repeats)),
        ("shallow_water", lambda: bench_shallow_water(peers, 8192 if big else 1024, 20 if big else 4,
                                                      args.repeats)),
        ("nbody", lambda: bench_nbody(peers, 8192 if big else 1024, 10 if big else 2, args.repeats)),
        ("reductions", lambda: bench_reductions(peers, big, 20 if big else 4, args.repeats)),
        ("overhead", lambda: bench_flush_overhead(2000 if big else 300)),
        ("variants", lambda: bench_variants(peers, big, 10 if big else 2, 3)),
    ]
    for name, job in jobs:
        if name not in parts:
            continue
        t0 = time.perf_counter()
        try:
            res[name] = job()
        except Exception as exc:
            res[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-1500:]}
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
        save()
    if "tune" in parts:
        t0 = time.perf_counter()
        try:
            res["tuning"] = tune_part(peers, big, args, res)
        except Exception as exc:
            res["tuning"] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-1500:]}
        print(f"tuning: {time.perf_counter() - t0:.1f} s", flush=True)
        save()
    print_table(res)
    return 0


def tune_part(peers: Peers, big: bool, args: Any, res: dict[str, Any]) -> dict[str, Any]:
    """Does tuning pay? Reduction variants + work-groups trained on the ladder shapes, then re-timed;
    element-wise work-group sizes tuned for heat and Black-Scholes, then re-timed."""
    from adaptune.lang import reduce as lang_reduce
    from adaptune.lang.tune import WorkGroupTuner

    out: dict[str, Any] = {}
    db: Any = args.tune_db or str(Path(args.out) / "lang_tuning.db")
    try:
        import sqlalchemy  # noqa: F401
    except ImportError:
        db = None
        out["store"] = "sqlalchemy missing on this machine: labels kept in memory"
    ladder = []
    for _, shape, axis in ladder_cases(big):
        size = int(np.prod(shape))
        if axis is None:
            ladder.append((1, size, True))
        else:
            n_len = shape[axis]
            inner = int(np.prod(shape[axis + 1:]))
            ladder.append((size // n_len, n_len, inner == 1))
    # the GPU trains on the 38-shape ladder only (1 Mi and 16 Mi elements), so the benchmark's own 256 MiB
    # shapes are out of sample for the trained pick; PoCL trains on the small ladder plus its cases
    ladder = list(lang_reduce.LADDER_FULL) if big else list(dict.fromkeys(ladder + list(lang_reduce.LADDER_SMALL)))
    blocks = (256, 1024) if big else (64, 256)
    segs = (8, 32) if big else (4, 16)
    t0 = time.perf_counter()
    cv = lang_reduce.tune_reductions(db, ladder=ladder, repeats=3, blocks=blocks, segments=segs, model="knn",
                                     install=False, unrolls=(2, 4, 8), groups_per_sm=(4, 8, 16),
                                     grid_budget=3 if big else 2)
    rep = cv.last_training
    out["reduction_training"] = {"shapes": len(ladder), "labels": rep.labels, "measured": rep.measured,
                                 "reused": rep.reused,
                                 "cv_fraction_of_oracle": rep.cv_fraction_of_oracle, "wall_s": rep.wall_s,
                                 "failures": rep.failures[:5], "ladder": ladder}
    out["reduction_training_s"] = time.perf_counter() - t0
    tuned = bench_reductions(peers, big, 20 if big else 4, args.repeats, chooser=lang_reduce.Selector(cv),
                             label="tuned")
    lad = res.get("reductions", {})
    for name, row in tuned.items():
        if name in lad and "tuned" in row:
            lad[name]["tuned"] = row["tuned"]
            lad[name]["tuned_choice"] = row.get("choice")
    # element-wise work-group tuning on heat and Black-Scholes
    if db is None:
        return out
    sess = lang_session.session()
    sess.tuner = WorkGroupTuner(db, candidates=(64, 128, 256, 512, 1024) if big else (64, 256, 1024))
    sess.plans.clear()
    heat = bench_heat(Peers("skip"), 8192 if big else 1024, 20 if big else 8, args.repeats)
    bs = bench_black_scholes(Peers("skip"), 1 << 26 if big else 1 << 20, 20 if big else 4, args.repeats)
    out["workgroup"] = {"report": sess.tuner.report, "heat_tuned_ms": heat["adaptune"]["ms"],
                        "black_scholes_tuned_ms": bs["adaptune"]["ms"]}
    for name, b in (("heat", heat), ("black_scholes", bs)):
        if name in res and "adaptune_ms" in res[name]:
            res[name]["adaptune_tuned_wg_ms"] = b["adaptune"]["ms"]
    sess.tuner = None
    return out


def print_table(res: dict[str, Any]) -> None:
    print(f"\ndevice {res['device']}  copy {res.get('copy_gbps') or 0:.0f} GB/s")
    print(f"{'benchmark':16s} {'adaptune':>9s} {'kernels':>9s} {'cupy':>9s} {'fused':>9s} {'jax':>9s} {'hand':>9s} {'numpy':>9s} "
          f"{'GB/s':>7s} {'k/it':>5s}")
    for name in ("heat", "black_scholes", "shallow_water", "nbody"):
        b = res.get(name, {})
        if "adaptune_ms" not in b:
            print(f"{name:16s} {b.get('error', '')[:80]}")
            continue
        fused = b.get("cupy_elementwise_kernel_ms", b.get("cupy_fuse_ms"))

        def f(x: Any) -> str:
            return f"{x:9.3f}" if isinstance(x, float) else f"{'-':>9s}"

        print(f"{name:16s} {f(b['adaptune_ms'])} {f(b.get('adaptune_kernel_ms'))} {f(b.get('cupy_ms'))} {f(fused)} {f(b.get('jax_ms'))} "
              f"{f(b.get('handwritten_ms'))} {f(b.get('numpy_ms'))} {b['gbps']:7.0f} {b['kernels_per_iter']:5d}")
    for name, row in res.get("reductions", {}).items():
        if "adaptune_ms" in row:
            print(f"  sum {name:18s} ours {row['adaptune_ms']:.3f} tuned {row.get('tuned_ms', float('nan')):.3f} "
                  f"cupy {row.get('cupy_ms', float('nan')):.3f} jax {row.get('jax_ms', float('nan')):.3f} "
                  f"numpy {row.get('numpy_ms', float('nan')):.3f} {row['gbps']:.0f} GB/s {row.get('choice')}")
    if "overhead" in res:
        print("flush overhead:", res["overhead"])


if __name__ == "__main__":
    sys.exit(main())
