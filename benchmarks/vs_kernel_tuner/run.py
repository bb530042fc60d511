"""Side by side: the same problem brute-forced by adaptune and by Kernel Tuner, same repeats, one run.

Reports each tool's wall time, the ratio, both best configurations, and how the other tool timed each
best (to judge "same best within measurement noise"). Writes OUT/vs_kernel_tuner_<backend>.{json,md}
(default OUT: out/vs_kernel_tuner/; the committed runs are in benchmarks/vs_kernel_tuner/results/).

    python -m benchmarks.vs_kernel_tuner.run benchmarks/vs_kernel_tuner/specs/matmul_pocl_t1.json --backend opencl
    python -m benchmarks.vs_kernel_tuner.run benchmarks/vs_kernel_tuner/specs/matmul_h100_t1.json --backend cuda
    python -m benchmarks.vs_kernel_tuner.run --profile smoke     # 2 matmul configurations on PoCL, 1 repeat
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from adaptune.measure import KernelSpec
from adaptune.tuning import tune
from adaptune.tuning.spec_file import load_problem
from benchmarks.harness import parse_study_args, run_metadata, study_parser, write_results

HERE = Path(__file__).resolve().parent
SMOKE = {"spec": str(HERE / "specs" / "matmul_smoke_t1.json"), "repeats": 1}  # 2 configurations


def kernel_tuner_run(problem, backend: str, repeats: int, device: int) -> tuple[float, dict, list[dict]]:
    """Brute force with Kernel Tuner's own tune_kernel (its T1 entry point fails for OpenCL).

    The clock includes importing Kernel Tuner, as adaptune's includes starting its worker process.
    """
    start = time.perf_counter()
    import kernel_tuner

    if backend == "cuda":
        _pad_cupy_uuid()

    spec: KernelSpec = problem.spec
    source = spec.source.read_text() if isinstance(spec.source, Path) else spec.source
    tune_params = {p.name: list(p.values) for p in problem.space.params}
    grid = spec.grid_div or ((spec.block_size_names[0],), (spec.block_size_names[1],), (spec.block_size_names[2],))
    grid = tuple(grid) + ((),) * (3 - len(grid))  # a 1-D kernel names one grid divisor
    kw = dict(grid_div_x=list(grid[0]) or None, grid_div_y=list(grid[1]) or None,
              grid_div_z=list(grid[2]) or None)
    restrictions = [c for c in problem.space.constraint_texts if isinstance(c, str)] or None
    lang = "OpenCL" if backend == "opencl" else "CuPy"
    answer = list(spec.answer) if isinstance(spec.answer, (list, tuple)) else None
    results, env = kernel_tuner.tune_kernel(
        spec.name, source, spec.problem_size, list(spec.arguments), tune_params, restrictions=restrictions,
        answer=answer, atol=spec.atol, lang=lang, device=device, iterations=repeats, quiet=True,
        compiler_options=list(spec.compiler_options) or None, block_size_names=list(spec.block_size_names),
        strategy="brute_force", **kw)
    wall = time.perf_counter() - start
    ok = [r for r in results if isinstance(r.get("time"), (int, float)) and math.isfinite(r["time"])]
    best = min(ok, key=lambda r: r["time"])
    return wall, {k: best[k] for k in tune_params} | {"time_ms": best["time"]}, ok


def _pad_cupy_uuid() -> None:
    """Work around a peer bug: CuPy cuts a device UUID at its first zero byte, and Kernel Tuner's CuPy
    backend then fails in ``uuid.UUID(bytes=...)``. Pad it back to 16 bytes (only the benchmark does this)."""
    import cupy

    original = cupy.cuda.runtime.getDeviceProperties

    def padded(device: int) -> dict:
        props = original(device)
        props["uuid"] = bytes(props.get("uuid", b"")).ljust(16, b"\0")[:16]
        return props

    cupy.cuda.runtime.getDeviceProperties = padded


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("vs_kernel_tuner", __doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?", default=str(HERE / "specs" / "matmul_pocl_t1.json"),
                    help="T1 .json file or problem .py file (default: the PoCL matmul of the committed run)")
    ap.add_argument("--backend", choices=("opencl", "cuda"), default="opencl")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--discard-factor", type=float, default=2.0,
                    help="adaptune's racing factor (0: every configuration gets every repeat, as Kernel Tuner)")
    ap.add_argument("--db", help="keep adaptune's database here (default: a temporary file)")
    args = parse_study_args(ap, argv, smoke=SMOKE)

    problem = load_problem(args.spec, backend=args.backend)
    # Neither tool may profit from the other's (or an earlier run's) compiled binaries: PoCL's kernel
    # and PyOpenCL's caches are off, and each tool gets an empty CuPy cache directory.
    os.environ["POCL_KERNEL_CACHE"] = "0"
    os.environ["PYOPENCL_NO_CACHE"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CUPY_CACHE_DIR"] = str(Path(tmp) / "cupy_adaptune")
        start = time.perf_counter()
        ours = tune(problem, "brute_force", repeats=args.repeats, backend=args.backend, device=args.device,
                    db=args.db or str(Path(tmp) / "bench.db"), progress=False,
                    discard_factor=args.discard_factor or None)
        ours_wall = time.perf_counter() - start
        os.environ["CUPY_CACHE_DIR"] = str(Path(tmp) / "cupy_kernel_tuner")
        kt_wall, kt_best, kt_results = kernel_tuner_run(problem, args.backend, args.repeats, args.device)

    names = [p.name for p in problem.space.params]
    kt_by_key = {tuple(r[n] for n in names): r["time"] for r in kt_results}
    ours_by_key = {tuple(r.config[n] for n in names): r.time_ms for r in ours.results if r.ok}
    ours_best_key = tuple(ours.best[n] for n in names)
    kt_best_key = tuple(kt_best[n] for n in names)
    meta = run_metadata(device=ours.device.name)
    commit = meta["commit"]
    row = {
        "problem": problem.name, "backend": args.backend, "device": ours.device.name,
        "date": meta["date"][:10], "commit": commit, "repeats": args.repeats,
        "valid_configs": len(problem.space), "discard_factor": args.discard_factor or None,
        "adaptune": {"wall_s": ours_wall, "evaluated": ours.evaluated, "failed": ours.failed,
                     "best": ours.best, "best_time_ms": ours.best_time_ms,
                     "kt_time_of_our_best_ms": kt_by_key.get(ours_best_key)},
        "kernel_tuner": {"wall_s": kt_wall, "evaluated": len(kt_results), "best": kt_best,
                         "best_time_ms": kt_best["time_ms"],
                         "our_time_of_kt_best_ms": ours_by_key.get(kt_best_key)},
        "wall_ratio": ours_wall / kt_wall,
    }
    a, k = row["adaptune"], row["kernel_tuner"]
    same = ours_best_key == kt_best_key
    noise = (a["kt_time_of_our_best_ms"] or math.inf) / k["best_time_ms"]
    row["same_best"] = same
    row["our_best_under_kt_timing_vs_kt_best"] = noise
    print(f"{'tool':<14}{'wall (s)':>10}{'best (ms)':>12}  best configuration")
    print(f"{'adaptune':<14}{a['wall_s']:>10.1f}{a['best_time_ms']:>12.4f}  {ours.best}")
    print(f"{'Kernel Tuner':<14}{k['wall_s']:>10.1f}{k['best_time_ms']:>12.4f}  {kt_best}")
    print(f"wall ratio adaptune/KT = {row['wall_ratio']:.3f}; same best: {same}; "
          f"KT timed our best at {noise:.3f}x its own best")

    stem = f"vs_kernel_tuner_{args.backend}"
    write_results(args.out, stem, json.loads(json.dumps(row, default=_jsonable)), metadata=meta, table=(
        f"# adaptune vs Kernel Tuner — brute force, {problem.name}, {args.backend}\n\n"
        f"Device: {row['device']} · date {row['date']} · commit {commit} · {args.repeats} repeats · "
        f"{row['valid_configs']} valid configurations · adaptune racing factor {args.discard_factor or 'off'} "
        "(a configuration whose first timed run is that many times slower than the best so far gets no more "
        "repeats; Kernel Tuner runs every repeat)\n\n"
        "| tool | wall (s) | best (ms) | best configuration |\n|---|---:|---:|---|\n"
        f"| adaptune | {a['wall_s']:.1f} | {a['best_time_ms']:.4f} | {ours.best} |\n"
        f"| Kernel Tuner 1.5 | {k['wall_s']:.1f} | {k['best_time_ms']:.4f} | {kt_best} |\n\n"
        f"Wall-time ratio adaptune / Kernel Tuner: **{row['wall_ratio']:.3f}**. Same best configuration: {same}; "
        f"Kernel Tuner's own timing of adaptune's best is {noise:.3f}x its best.\n"
        f"Command: `python -m benchmarks.vs_kernel_tuner.run {args.spec} --backend {args.backend} "
        f"--repeats {args.repeats} --discard-factor {args.discard_factor}`\n"))


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)


if __name__ == "__main__":
    main()
