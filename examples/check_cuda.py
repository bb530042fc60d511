"""Compile and run every example's kernel.cu with CuPy (NVRTC) for many configurations and compare with NumPy.

    python examples/check_cuda.py [--per-kernel 40] [--json out.json]

The CUDA twin of ``tests/test_examples_kernels.py`` for machines with an NVIDIA GPU (CI has none).
Configurations: the extremes of each CUDA space plus a seeded random sample of its valid
configurations, at sizes small enough to check quickly but large enough for every block/tile shape.
The spaces come from each ``problem.py``'s ``PARAMS_CUDA``/``CONSTRAINTS`` literals, read with
``ast.literal_eval`` (the file is not imported, so this needs only NumPy, CuPy and ``adaptune.space``).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from adaptune.space import Space  # noqa: E402


def literals(example: str) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` assignments of examples/<example>/problem.py, never executed."""
    tree = ast.parse((HERE / example / "problem.py").read_text())
    out: dict[str, Any] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and node.value is not None:
            try:
                out[target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def sample_configs(space: Space, per_kernel: int, seed: int) -> list[dict[str, Any]]:
    """First, last, default and a random sample of valid configurations."""
    idx = {0, len(space) - 1}
    default = space.default_index()
    if default is not None:
        idx.add(default)
    rng = np.random.default_rng(seed)
    idx.update(int(i) for i in space.sample(rng, min(per_kernel, len(space))))
    return [space.config(i) for i in sorted(idx)][: per_kernel + 3]


class Refused(Exception):
    """The driver refused the launch (e.g. too many registers for the block): a launch_error, not a wrong answer."""


def launch(cp: Any, example: str, name: str, defines: dict[str, int], grid: tuple[int, ...],
           block: tuple[int, ...], args: list[Any]) -> float:
    """Compile with ``defines``, launch once to warm up and once timed; returns ms of the timed launch."""
    source = "".join(f"#define {k} {int(v)}\n" for k, v in defines.items()) + (HERE / example / "kernel.cu").read_text()
    kernel = cp.RawModule(code=source, options=("-std=c++17",)).get_function(name)
    try:
        kernel(grid, block, tuple(args))
    except cp.cuda.driver.CUDADriverError as exc:
        if "OUT_OF_RESOURCES" in str(exc):
            raise Refused(str(exc)) from None
        raise
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    kernel(grid, block, tuple(args))
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop)


SEEDS = {"vector_add": 1, "matmul": 2, "convolution": 3, "reduction": 4}


def run_all(example: str, configs: list[dict[str, Any]], one: Any) -> list[dict[str, Any]]:
    """One row per configuration; a refused launch or a compile error is recorded and the rest go on."""
    rows = []
    for cfg in configs:
        row: dict[str, Any] = {"example": example, "config": cfg}
        try:
            row["ok"], row["ms"] = one(cfg)
        except Refused as exc:
            row.update(ok=True, refused=True, error=str(exc)[:300])
        except Exception as exc:
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:2000])
        rows.append(row)
    return rows


def check_vector_add(cp: Any, per_kernel: int) -> list[dict[str, Any]]:
    lit = literals("vector_add")
    space = Space(lit["PARAMS_CUDA"], ["block_size_x <= MAX_THREADS"], constants={"MAX_THREADS": 1024})
    n = 1_000_003
    a = cp.random.standard_normal(n, dtype=cp.float32)
    b = cp.random.standard_normal(n, dtype=cp.float32)
    want = cp.asnumpy(a + b)

    def one(cfg: dict[str, Any]) -> tuple[bool, float]:
        c = cp.full(n, cp.nan, dtype=cp.float32)
        grid = (math.ceil(n / (cfg["block_size_x"] * cfg["tile_size_x"])),)
        ms = launch(cp, "vector_add", "vector_add", cfg, grid, (cfg["block_size_x"],), [c, a, b, np.int32(n)])
        ok = bool(np.array_equal(cp.asnumpy(c), want))
        return ok, ms

    return run_all("vector_add", sample_configs(space, per_kernel, SEEDS["vector_add"]), one)


def check_matmul(cp: Any, per_kernel: int) -> list[dict[str, Any]]:
    lit = literals("matmul")
    m = n = k = 512
    space = Space(lit["PARAMS_CUDA"], [*lit["CONSTRAINTS"], *lit["CUDA_EXTRA_CONSTRAINTS"]],
                  constants={"M": m, "N": n, "K": k, "MAX_THREADS": 1024, "MIN_THREADS": 32, "LOCAL_MEM": 48 * 1024})
    a = cp.random.standard_normal((m, k), dtype=cp.float32)
    b = cp.random.standard_normal((k, n), dtype=cp.float32)
    want = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64)

    def one(cfg: dict[str, Any]) -> tuple[bool, float]:
        c = cp.full((m, n), cp.nan, dtype=cp.float32)
        grid = (n // (cfg["block_size_x"] * cfg["tile_size_x"]), m // (cfg["block_size_y"] * cfg["tile_size_y"]))
        ms = launch(cp, "matmul", "matmul_kernel", cfg, grid, (cfg["block_size_x"], cfg["block_size_y"]),
                    [c, a, b, np.int32(m), np.int32(n), np.int32(k)])
        ok = bool(np.allclose(cp.asnumpy(c), want, rtol=1e-4, atol=2e-6 * k))
        return ok, ms

    return run_all("matmul", sample_configs(space, per_kernel, SEEDS["matmul"]), one)


def check_convolution(cp: Any, per_kernel: int) -> list[dict[str, Any]]:
    from numpy.lib.stride_tricks import sliding_window_view

    lit = literals("convolution")
    w = h = 512
    fw = fh = 15
    space = Space(lit["PARAMS_CUDA"], lit["CONSTRAINTS"],
                  constants={"W": w, "H": h, "FW": fw, "FH": fh, "MAX_THREADS": 1024, "MIN_THREADS": 32,
                             "LOCAL_MEM": 48 * 1024})
    image = cp.random.standard_normal((h + fh - 1, w + fw - 1), dtype=cp.float32)
    filt = cp.random.standard_normal((fh, fw), dtype=cp.float32)
    windows = sliding_window_view(cp.asnumpy(image).astype(np.float64), (fh, fw))
    want = np.einsum("yxij,ij->yx", windows, cp.asnumpy(filt).astype(np.float64))

    def one(cfg: dict[str, Any]) -> tuple[bool, float]:
        out = cp.full((h, w), cp.nan, dtype=cp.float32)
        grid = (w // (cfg["block_size_x"] * cfg["tile_size_x"]), h // (cfg["block_size_y"] * cfg["tile_size_y"]))
        ms = launch(cp, "convolution", "convolution_kernel", {**cfg, "filter_width": fw, "filter_height": fh}, grid,
                    (cfg["block_size_x"], cfg["block_size_y"]), [out, image, filt, np.int32(w), np.int32(h)])
        ok = bool(np.allclose(cp.asnumpy(out), want, rtol=1e-4, atol=1e-5 * fw * fh))
        return ok, ms

    return run_all("convolution", sample_configs(space, per_kernel, SEEDS["convolution"]), one)


def check_reduction(cp: Any, per_kernel: int) -> list[dict[str, Any]]:
    lit = literals("reduction")
    n = 2**22 + 3
    space = Space(lit["PARAMS_CUDA"], lit["CONSTRAINTS"], constants={"N": n, "MAX_THREADS": 1024})
    x = cp.random.random(n, dtype=cp.float32)
    want = float(cp.asnumpy(x).astype(np.float64).sum())

    def one(cfg: dict[str, Any]) -> tuple[bool, float]:
        out = cp.zeros(1, dtype=cp.float32)
        partials = cp.zeros(cfg["num_blocks"], dtype=cp.float32)
        counter = cp.zeros(1, dtype=cp.uint32)
        # warm-up + timed launch: the second one only gets the sum if the first reset the counter
        ms = launch(cp, "reduction", "sum_floats", cfg, (cfg["num_blocks"],), (cfg["block_size_x"],),
                    [out, x, np.int32(n), partials, counter])
        got = float(cp.asnumpy(out)[0])
        if cfg["use_atomics"]:
            got /= 2.0  # both launches added into out[0]
        ok = abs(got - want) <= 1e-4 * want and int(cp.asnumpy(counter)[0]) == 0
        return bool(ok), ms

    return run_all("reduction", sample_configs(space, per_kernel, SEEDS["reduction"]), one)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kernel", type=int, default=40, help="random configurations per kernel")
    parser.add_argument("--json", type=Path, help="write every row (config, ok, ms) here")
    args = parser.parse_args()
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    for check in (check_vector_add, check_matmul, check_convolution, check_reduction):
        try:
            got = check(cp, args.per_kernel)
        except Exception as exc:  # a compile error names the example and stops nothing else
            got = [{"example": check.__name__.removeprefix("check_"), "config": None, "ok": False,
                    "error": f"{type(exc).__name__}: {exc}"[:2000]}]
        rows.extend(got)
        bad = [r for r in got if not r["ok"]]
        refused = sum(bool(r.get("refused")) for r in got)
        print(f"{got[0]['example']:12s} {len(got) - len(bad) - refused}/{len(got)} configurations correct, "
              f"{refused} launches refused by the driver", flush=True)
        for r in bad[:5]:
            print("   wrong:", r.get("config"), r.get("error", ""))
    summary = {"device": props["name"].decode(), "seconds": round(time.time() - t0, 1),
               "checked": len(rows), "wrong": sum(not r["ok"] for r in rows), "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, default=str))
    print(f"{summary['device']}: {summary['checked'] - summary['wrong']}/{summary['checked']} correct "
          f"in {summary['seconds']} s")
    return 1 if summary["wrong"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
