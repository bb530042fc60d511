"""Black-Scholes' generated kernel with its loads arranged three ways, beside ``jax.jit`` (issue 24).

Why: with IEEE arithmetic the generated kernel (4 elements per work-item, one work-group width apart) is
1-3 % slower than JAX's whole step, and 1 % faster with ``--use_fast_math`` (``bs_variants_h100.md``). In
its PTX each element's three loads sit behind the previous element's arithmetic and bounds check (``bra``
between them), so a work-item has at most three loads in flight. Does issuing every load first, or
loading 4 neighbouring elements as one 16-byte vector (as XLA does), close the gap? The kernel text is the
one adaptune generates, rearranged here by text (an experiment, not the code generator); each variant's
outputs must equal the generated kernel's bit for bit. XLA's PTX is dumped beside the results.

    python -m benchmarks.hotpath.bs_loads --out DIR     # -> DIR/bs_loads_<device>.{json,md}, DIR/xla/
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any

import numpy as np

OUT_DIR = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--out"), None)
if OUT_DIR:  # before JAX is imported: XLA writes its PTX there
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={OUT_DIR}/xla").strip()

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import fuse  # noqa: E402
from adaptune.lang import session as lang_session  # noqa: E402
from adaptune.lang.runtime import Runtime  # noqa: E402
from benchmarks.harness import device_tag, markdown_table, run_metadata, study_parser, write_results  # noqa: E402
from benchmarks.hotpath.bs_variants import inputs  # noqa: E402
from benchmarks.lang.run import Peers, black_scholes  # noqa: E402

LOAD = re.compile(r"const (\w+) (v\d+) = (b\d+)\[gid\];")
VAR = re.compile(r"\bv(\d+)\b")


def parse(src: str) -> tuple[str, int, list[str], list[str]]:
    """(the kernel's signature line, n, body lines, store lines) of a generated per_item kernel."""
    lines = src.splitlines()
    sig = next(ln for ln in lines if ln.startswith("KERNEL"))
    n = int(re.search(r"if \(gid < (\d+)\)", src).group(1))
    start = next(i for i, ln in enumerate(lines) if "if (gid <" in ln) + 1
    body, stores = [], []
    for ln in lines[start:]:
        s = ln.strip()
        if s.startswith("o") and "[gid] =" in s:
            stores.append(s)
        elif s.startswith("const "):
            body.append(s)
    return sig, n, body, stores


def renamed(line: str, part: int) -> str:
    return VAR.sub(lambda m: f"v{m.group(1)}_{part}", line)


def scalar_loop(n: int, per_item: int, body: list[str], stores: list[str], first: str) -> str:
    inner = "\n".join("        " + ln for ln in body + stores)
    return (f"    #pragma unroll\n    for (int part = 0; part < {per_item}; ++part) {{\n"
            f"        const idx_t gid = {first} + (idx_t)part * (idx_t)GROUP_SIZE();\n"
            f"        if (gid < {n}) {{\n{inner}\n        }}\n    }}\n")


def hoisted(src: str, per_item: int) -> str:
    """Every part's loads first (a work-group wholly inside n), then every part's arithmetic."""
    sig, n, body, stores = parse(src)
    first = f"((idx_t)GROUP_ID() * (idx_t)(GROUP_SIZE() * {per_item}u) + (idx_t)LID())"
    loads, rest = [], []
    for p in range(per_item):
        gid = f"(first + {p} * (idx_t)GROUP_SIZE())"
        for ln in body:
            m = LOAD.fullmatch(ln)
            if m:
                loads.append(f"const {m.group(1)} {m.group(2)}_{p} = {m.group(3)}[{gid}];")
            else:
                rest.append(renamed(ln, p))
        rest += [renamed(st, p).replace("[gid]", f"[{gid}]") for st in stores]
    fast = "\n".join("        " + ln for ln in loads + rest)
    return (f"typedef i32 idx_t;\n{sig}\n    const idx_t first = {first};\n"
            f"    if (((idx_t)GROUP_ID() + 1) * (idx_t)(GROUP_SIZE() * {per_item}u) <= {n}) {{\n{fast}\n"
            f"        return;\n    }}\n" + scalar_loop(n, per_item, body, stores, "first") + "}\n")


def vectorised(src: str, vectors: int) -> str:
    """Each work-item takes 4 * ``vectors`` neighbouring elements: one 16-byte load per input and vector,
    all issued first; 16-byte stores. The ragged end falls back to scalar code."""
    sig, n, body, stores = parse(src)
    per_item = 4 * vectors
    loads, rest = [], []
    comps = "xyzw"
    for v in range(vectors):
        for ln in body:
            m = LOAD.fullmatch(ln)
            if m:
                loads.append(f"const float4 {m.group(2)}_q{v} = ((const float4*){m.group(3)})[t * {vectors} + {v}];")
    out_names = sorted({st.split("[")[0] for st in stores})
    for v in range(vectors):
        for c in range(4):
            p = v * 4 + c
            for ln in body:
                m = LOAD.fullmatch(ln)
                if m:
                    rest.append(f"const float {m.group(2)}_{p} = {m.group(2)}_q{v}.{comps[c]};")
                else:
                    rest.append(renamed(ln, p))
        for o in out_names:
            val = {st.split("[")[0]: st.split("= ", 1)[1].rstrip(";") for st in stores}[o]
            parts = ", ".join(renamed(val, v * 4 + c) for c in range(4))
            rest.append(f"((float4*){o})[t * {vectors} + {v}] = make_float4({parts});")
    fast = "\n".join("        " + ln for ln in loads + rest)
    first = f"((idx_t)GROUP_ID() * (idx_t)GROUP_SIZE() + (idx_t)LID()) * {per_item}"
    tail = "\n".join("            " + ln for ln in body + stores)
    return (f"typedef i32 idx_t;\n{sig}\n    const idx_t t = (idx_t)GROUP_ID() * (idx_t)GROUP_SIZE() + (idx_t)LID();\n"
            f"    if ((t + 1) * {per_item} <= {n}) {{\n{fast}\n        return;\n    }}\n"
            f"    for (int part = 0; part < {per_item}; ++part) {{\n"
            f"        const idx_t gid = {first} + part;\n        if (gid < {n}) {{\n{tail}\n        }}\n    }}\n}}\n")


VARIANTS = {  # name: (text transform, elements per work-item, work-group size)
    "generated (4 per item, group apart)": (None, 4, 128),
    "hoisted loads, 4 per item": (lambda s: hoisted(s, 4), 4, 128),
    "hoisted loads, 4 per item, block 256": (lambda s: hoisted(s, 4), 4, 256),
    "hoisted loads, 8 per item": (lambda s: hoisted(s, 8), 8, 128),
    "float4, 4 per item": (lambda s: vectorised(s, 1), 4, 128),
    "float4, 4 per item, block 256": (lambda s: vectorised(s, 1), 4, 256),
    "float4 x2, 8 per item": (lambda s: vectorised(s, 2), 8, 128),
    "float4 x2, 8 per item, block 256": (lambda s: vectorised(s, 2), 8, 256),
}


def main() -> None:
    ap = study_parser("hotpath", __doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 26)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    peers = Peers("cuda")
    host = inputs(args.n)
    rt = Runtime("cuda")
    lang_session.use_runtime(rt)
    sess = lang_session.session()
    dev = [anp.asarray(h) for h in host]
    out = black_scholes(anp, anp.erf, *dev)
    anp.flush()
    plan = sess.last_plan
    assert plan is not None and plan.kernels == 1 and plan.steps[0].per_item == 4
    step = plan.steps[0]
    generated = step.source
    reference = [o.get() for o in out]
    variants: dict[str, Any] = {}
    for name, (transform, per_item, block) in VARIANTS.items():
        src = generated if transform is None else transform(generated)
        step.source, step.fn = src, rt.raw(src)
        step.block, step.grid = block, -(-args.n // (block * per_item))
        fuse.prepare(plan)
        got = [o.get() for o in sess.replay_last()]
        same = all(np.array_equal(g, r) for g, r in zip(got, reference, strict=True))
        print(f"{name}: bit-identical {same}", flush=True)
        if OUT_DIR:
            with open(os.path.join(OUT_DIR, f"bs_loads_{len(variants)}.cu"), "w") as f:
                f.write(src)
        variants[name] = {"per_item": per_item, "block": block, "grid": step.grid, "identical": same,
                          "run": (src, block, step.grid)}
    from jax.scipy.special import erf as jerf

    jbs = peers.jax.jit(lambda s_, k_, t_: black_scholes(peers.jnp, jerf, s_, k_, t_))
    jargs = [peers.jnp.asarray(h) for h in host]
    keep: list[Any] = [jbs(*jargs)]
    fns: dict[str, Any] = {}
    for name, v in variants.items():
        src, block, grid = v.pop("run")
        fn = rt.raw(src)

        def go(fn: Any = fn, block: int = block, grid: int = grid) -> None:
            step.fn, step.block, step.grid = fn, block, grid
            fuse.prepare(plan)
            keep[:] = sess.replay_last()
        fns[name] = go
    fns["jax.jit"] = lambda: keep.__setitem__(slice(None), [jbs(*jargs)])
    times: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(args.rounds):
        names = list(fns)
        names = names[r % len(names):] + names[:r % len(names)]
        for name in names:
            fns[name]()
            peers.sync()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                fns[name]()
            peers.sync()
            times[name].append((time.perf_counter() - t0) * 1e3 / args.iters)
    rows = [{"variant": k, **variants.get(k, {}), "ms": float(np.median(v)), "min_ms": float(np.min(v)),
             "max_ms": float(np.max(v))} for k, v in times.items()]
    ref = next(r["ms"] for r in rows if r["variant"] == "jax.jit")
    for r in rows:
        r["vs_jax"] = r["ms"] / ref
    rows.sort(key=lambda r: r["ms"])
    tag = device_tag(rt.name)
    write_results(args.out, f"bs_loads_{tag}", {"n": args.n, "rounds": args.rounds, "iters": args.iters,
                                                "rows": rows},
                  table=rows, title=f"Black-Scholes' loads arranged ({tag}, {args.n} options)",
                  notes=__doc__.split("\n\n")[1], metadata=run_metadata())
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
