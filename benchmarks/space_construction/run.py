"""Search-space construction: adaptune's vectorised enumeration against Kernel Tuner 1.5.

The peer is ``kernel_tuner.searchspace.Searchspace`` built exactly as ``tune_kernel`` builds it
(framework "PythonConstraint", solver "PC_OptimizedBacktrackingSolver", python-constraint2
parsing the restriction strings, ``max_threads=1024`` adding the block-size product limit).
It needs no GPU, so this is the fairest peer there is.

Every build runs in a fresh child process (same interpreter, same imports) so peak memory can be
reported and a slow peer can be stopped: a peer run that passes ``--peer-timeout`` (default
300 s) is recorded as skipped. Both sides must produce the same set of valid configurations;
the benchmark compares the sorted mixed-radix codes of the two sets, not only their counts.

    python -m benchmarks.space_construction.run                    # all sizes, writes out/space_construction/
    python -m benchmarks.space_construction.run --profile smoke    # 10^4 and 10^5 only, 1 build each
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import resource
import statistics
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from benchmarks.harness import parse_study_args, run_metadata, study_parser, write_results

BLOCK_LIMIT = "block_size_x * block_size_y <= 1024"  # Kernel Tuner adds this itself from max_threads

# Spaces modelled on Kernel Tuner's own examples and the BAT benchmark suite.
CASES: list[dict[str, Any]] = [
    {
        "name": "convolution",
        "scale": "1e4",
        "params": {
            "block_size_x": [16 * i for i in range(1, 9)], "block_size_y": [2**i for i in range(6)],
            "tile_size_x": list(range(1, 9)), "tile_size_y": list(range(1, 9)),
            "read_only": [0, 1], "use_padding": [0, 1],
        },
        "constraints": [
            "block_size_x * block_size_y >= 64", BLOCK_LIMIT,
            "tile_size_x * tile_size_y <= 32",
            "use_padding == 0 or block_size_x % 32 != 0",
            "(block_size_x * tile_size_x + 16) * (block_size_y * tile_size_y + 16) * 4 <= 49152",
        ],
    },
    {
        "name": "hotspot",
        "scale": "1e5",
        "params": {
            "block_size_x": [1, 2, 4, 8, 16] + [32 * i for i in range(1, 33)], "block_size_y": [2**i for i in range(6)],
            "tile_size_x": list(range(1, 7)), "tile_size_y": list(range(1, 7)),
            "temporal_tiling_factor": list(range(1, 9)), "sh_power": [0, 1],
        },
        "constraints": [
            "block_size_x * block_size_y >= 32", BLOCK_LIMIT,
            "(block_size_x * tile_size_x + temporal_tiling_factor * 2) * "
            "(block_size_y * tile_size_y + temporal_tiling_factor * 2) * (2 + sh_power) * 4 <= 48 * 1024",
            "temporal_tiling_factor <= tile_size_x * tile_size_y + 2",
        ],
    },
    {
        "name": "gemm (CLBlast xgemm)",
        "scale": "1e6",
        "params": {
            "MWG": [16, 32, 64, 128, 256], "NWG": [16, 32, 64, 128, 256], "KWG": [16, 32, 64],
            "MDIMC": [8, 16, 32], "NDIMC": [8, 16, 32], "MDIMA": [8, 16, 32], "NDIMB": [8, 16, 32],
            "KWI": [2, 8], "VWM": [1, 2, 4, 8], "VWN": [1, 2, 4, 8], "STRM": [0], "STRN": [0],
            "SA": [0, 1], "SB": [0, 1],
        },
        "constraints": [
            "MWG % (MDIMC * VWM) == 0", "NWG % (NDIMC * VWN) == 0",
            "MWG % (MDIMA * VWM) == 0", "NWG % (NDIMB * VWN) == 0",
            "KWG % ((MDIMC * NDIMC) / MDIMA) == 0", "KWG % ((MDIMC * NDIMC) / NDIMB) == 0",
        ],
    },
    {
        "name": "convolution (large)",
        "scale": "1e7",
        "params": {
            "block_size_x": [16 * i for i in range(1, 41)], "block_size_y": [2**i for i in range(6)],
            "tile_size_x": list(range(1, 17)), "tile_size_y": list(range(1, 17)),
            "read_only": [0, 1], "use_padding": [0, 1], "use_shmem": [0, 1],
            "vector": [1, 2, 4, 8], "loop_unroll": [0, 1, 2, 4, 8],
        },
        "constraints": [
            "block_size_x * block_size_y >= 32", BLOCK_LIMIT,
            "use_shmem == 0 or (block_size_x * tile_size_x + 16) * (block_size_y * tile_size_y + 16) * 4 <= 49152",
            "vector <= tile_size_x", "loop_unroll <= tile_size_y",
        ],
    },
    {
        "name": "gemm (large)",
        "scale": "1e7",
        "params": {
            "MWG": [16, 32, 64, 128, 256, 512], "NWG": [16, 32, 64, 128, 256, 512], "KWG": [16, 32, 64, 128],
            "MDIMC": [8, 16, 32], "NDIMC": [8, 16, 32], "MDIMA": [8, 16, 32], "NDIMB": [8, 16, 32],
            "KWI": [2, 8], "VWM": [1, 2, 4, 8, 16], "VWN": [1, 2, 4, 8, 16], "STRM": [0, 1], "STRN": [0, 1],
            "SA": [0, 1], "SB": [0, 1],
        },
        "constraints": [
            "MWG % (MDIMC * VWM) == 0", "NWG % (NDIMC * VWN) == 0",
            "MWG % (MDIMA * VWM) == 0", "NWG % (NDIMB * VWN) == 0",
            "KWG % ((MDIMC * NDIMC) / MDIMA) == 0", "KWG % ((MDIMC * NDIMC) / NDIMB) == 0",
        ],
    },
]


def codes_digest(codes: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(codes, dtype=np.int64).tobytes()).hexdigest()[:16]


def build_adaptune(case: dict[str, Any]) -> tuple[int, np.ndarray]:
    from adaptune.space import Space

    space = Space(case["params"], case["constraints"])
    return len(space), space.codes


def build_kernel_tuner(case: dict[str, Any]) -> tuple[int, np.ndarray]:
    from kernel_tuner.searchspace import Searchspace

    restrictions = [c for c in case["constraints"] if c != BLOCK_LIMIT]
    ss = Searchspace(case["params"], restrictions, 1024)
    return ss.size, tuples_to_codes(case["params"], ss.list)


def tuples_to_codes(params: dict[str, list], rows: list[tuple]) -> np.ndarray:
    """Mixed-radix rank of each configuration tuple, sorted (not timed)."""
    sizes = [len(v) for v in params.values()]
    positions = [{v: i for i, v in enumerate(vals)} for vals in params.values()]
    table = np.array([[pos[v] for pos, v in zip(positions, row, strict=True)] for row in rows], dtype=np.int64)
    if len(table) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.ravel_multi_index(table.T, sizes))


def _child(builder_name: str, case: dict[str, Any], repeats: int, queue: Any) -> None:
    builder = {"adaptune": build_adaptune, "kernel_tuner": build_kernel_tuner}[builder_name]
    import kernel_tuner.searchspace  # noqa: F401

    import adaptune.space  # noqa: F401  imports are not part of construction time

    baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            n, codes = builder(case)
        except Exception as e:
            queue.put(("error", f"{type(e).__name__}: {e}"))
            return
        times.append(time.perf_counter() - start)
        queue.put(("progress", times[-1]))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put(("done", {"times_s": times, "n_valid": n, "digest": codes_digest(codes),
                        "baseline_rss_mib": baseline_kib / 1024, "peak_rss_mib": peak_kib / 1024}))


def run_isolated(builder_name: str, case: dict[str, Any], repeats: int, timeout_s: float) -> dict[str, Any]:
    """Run one builder ``repeats`` times in a fresh process; stop it after ``timeout_s`` seconds."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(builder_name, case, repeats, queue))
    proc.start()
    deadline = time.monotonic() + timeout_s
    result: dict[str, Any] | None = None
    while result is None and time.monotonic() < deadline:
        try:
            kind, payload = queue.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
        except Exception:  # queue.Empty
            if not proc.is_alive():
                break
            continue
        if kind == "done":
            result = payload
        elif kind == "error":
            proc.join()
            return {"skipped": f"failed: {payload}"}
    if result is None:
        proc.terminate()
        proc.join()
        alive = "timed out" if time.monotonic() >= deadline else f"exited with code {proc.exitcode}"
        return {"skipped": f"{alive} after {timeout_s:.0f} s limit" if alive == "timed out" else alive}
    proc.join()
    result["median_s"] = statistics.median(result["times_s"])
    result["min_s"] = min(result["times_s"])
    return result


def report(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Search-space construction: adaptune vs Kernel Tuner 1.5",
        "",
        f"- device: {meta['device']} ({meta['cpus']} CPUs visible, shared machine)",
        f"- date: {meta['date']}",
        f"- commit: {meta['commit']}",
        f"- peer: {meta['peer']}",
        f"- timing: median of {meta['repeats']} builds in a fresh process per tool "
        f"(1 build for the peer at Cartesian size >= 10^6); imports excluded",
        "",
        "| space | Cartesian | valid | constraints | adaptune s | Kernel Tuner s | speed-up | same set | peak RSS MiB (ours / KT) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: |",
    ]
    for r in rows:
        ours, peer = r["adaptune"], r["kernel_tuner"]
        peer_s = f"{peer['median_s']:.3f}" if "median_s" in peer else f"skipped ({peer['skipped']})"
        ratio = f"{r['speedup']:.1f}x" if r.get("speedup") else "-"
        same = {True: "yes", False: "**NO**", None: "-"}[r.get("same_set")]
        rss = f"{ours['peak_rss_mib']:.0f} / " + (f"{peer['peak_rss_mib']:.0f}" if "peak_rss_mib" in peer else "-")
        lines.append(f"| {r['name']} | {r['cartesian']:,} | {ours['n_valid']:,} | {r['n_constraints']} | "
                     f"{ours['median_s']:.3f} | {peer_s} | {ratio} | {same} | {rss} |")
    lines += ["", "Both tools build the same case one after the other, each in a fresh process. The machine is",
              "shared with other jobs, so absolute times (and the ratios, by up to about 2x) vary between runs;",
              "'same set' compares the sorted mixed-radix codes of both valid sets, not only their sizes.",
              "", "Reproduce: `.venv/bin/python -m benchmarks.space_construction.run`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("space_construction", __doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peer-timeout", type=float, default=300.0, help="seconds before a peer run is skipped")
    ap.add_argument("--quick", action="store_true", help="only the two smallest spaces")
    args = parse_study_args(ap, argv, smoke={"quick": True, "repeats": 1})
    cases = CASES[:2] if args.quick else CASES
    console = Console()
    rows: list[dict[str, Any]] = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("building spaces", total=2 * len(cases))
        for case in cases:
            cartesian = int(np.prod([len(v) for v in case["params"].values()]))
            progress.update(task, description=f"adaptune: {case['name']} ({cartesian:,} points)")
            ours = run_isolated("adaptune", case, args.repeats, 600.0)
            progress.advance(task)
            peer_repeats = 1 if cartesian >= 10**6 else args.repeats
            progress.update(task, description=f"Kernel Tuner: {case['name']} ({cartesian:,} points); "
                                              f"adaptune took {ours.get('median_s', float('nan')):.3f} s")
            peer = run_isolated("kernel_tuner", case, peer_repeats, args.peer_timeout)
            progress.advance(task)
            row = {"name": case["name"], "scale": case["scale"], "cartesian": cartesian,
                   "n_constraints": len(case["constraints"]), "constraints": case["constraints"],
                   "params": case["params"], "adaptune": ours, "kernel_tuner": peer}
            if "median_s" in ours and "median_s" in peer:
                row["speedup"] = peer["median_s"] / ours["median_s"]
                row["same_set"] = ours["digest"] == peer["digest"] and ours["n_valid"] == peer["n_valid"]
            rows.append(row)

    table = Table(title="Search-space construction (median seconds)")
    for col in ("space", "Cartesian", "valid", "adaptune s", "Kernel Tuner s", "speed-up", "same set"):
        table.add_column(col, justify="right" if col not in ("space", "same set") else "left")
    for r in rows:
        peer = r["kernel_tuner"]
        table.add_row(r["name"], f"{r['cartesian']:,}", f"{r['adaptune'].get('n_valid', 0):,}",
                      f"{r['adaptune'].get('median_s', float('nan')):.3f}",
                      f"{peer['median_s']:.3f}" if "median_s" in peer else peer.get("skipped", "-"),
                      f"{r['speedup']:.1f}x" if "speedup" in r else "-", str(r.get("same_set", "-")))
    console.print(table)
    if any(r.get("same_set") is False for r in rows):
        console.print("[red]adaptune and Kernel Tuner disagree on a valid set[/red]")
    run = run_metadata(device="CPU (no GPU needed)")
    meta = {"device": run["cpu"], "cpus": mp.cpu_count(), "date": run["date"], "commit": run["commit"],
            "python": run["python"], "numpy": np.__version__,
            "peer": f"kernel_tuner {run['packages'].get('kernel_tuner', '?')} Searchspace (PythonConstraint, "
                    f"PC_OptimizedBacktrackingSolver, max_threads=1024)",
            "repeats": args.repeats, "peer_timeout_s": args.peer_timeout}
    stem = "space_construction" + ("_quick" if args.quick else "")
    path = write_results(args.out, stem, {"meta": meta, "cases": rows}, table=report(rows, meta), metadata=run)
    console.print(f"wrote {path} and .md")


if __name__ == "__main__":
    main()
