"""P-DFS intensities from Nsight Compute counters: which proxies each benchmark's kernels exercise.

Nitro's P-DFS (Algorithm 1) asks, per kernel and input, how intense each application proxy is: a proxy
at intensity phi (0..5) is a kernel with about phi x 20 % of its instructions of the proxy's kind, and a
model maps a variant's profile to phi per proxy. Without proxy kernels profiled at every intensity we
apply that definition to the counters directly (``results/counters/``, ``ncu --csv`` on the H100):

- **SP-GFLOP** = 5 x FFMA thread instructions / (``sm__inst_executed`` x 32). ``sm__inst_executed``
  counts warp instructions, x 32 their threads (an upper bound: partial warps make the share low).
  Only FFMA is counted (the metric set has no FADD/FMUL), so this is a lower bound on the FP32 share.
- **ATOMIC** = 5 x (global ``atom`` + ``red`` L1 tag-set accesses) / ``sm__inst_executed``. A warp
  atomic touching several sectors counts once per set access, so a scattered atomic can count more
  than once (capped at 1). Shared-memory atomics are not in these metrics: they show in SH-MEM-BW.
- **SH-MEM-BW** = 5 x shared-memory wavefronts (``l1tex__data_pipe_lsu_wavefronts_mem_shared``) /
  ``sm__inst_executed``: one wavefront per conflict-free shared access, more with bank conflicts
  (capped at 1), as Nitro's proxy counts shared load/store transactions.
- **MEM-BW** = DRAM throughput in % of peak / 20. Not an instruction share: a judgement that a kernel
  at 100 % of DRAM bandwidth is as memory-bound as a MEM-BW proxy at phi 5 (Nitro's MEM-BW model reads
  transaction and throughput counters, not a share either).
- **LAUNCH** = 5 x the share of the benchmark's wall time that is launch overhead:
  n x L / (n x L + sum of kernel durations), L the device's measured launch latency (``launch_us`` in
  ``data/devices/proxy_features.json``, 5.1 us on the H100). Nitro has no launch proxy (ours is added,
  ``PROXY_FEATURES_MEASURED``); the overhead share is the reading of its definition for it, a judgement.

SP-GFLOP, ATOMIC and SH-MEM-BW are per launch and averaged weighted by kernel time (``gpu__time_duration``),
MEM-BW likewise; so a benchmark's phi is what its GPU time is spent on. ncu serialises launches, locks
clocks and flushes caches, so durations are longer than in the timed runs: LAUNCH is, if anything, low.

Only the kernels of the variants the device study compares count (``variant``): input-feature kernels
(``feature``: ``spmv_features``, ``histogram_subsample_stats``, ``bfs_probe``, ``count_order``) and
library kernels (``library``: cuSPARSE, CUB; left out of the study as they are NumPy on PoCL) are listed
but not averaged. The counters are the H100's; like Nitro (profiles from one source architecture) the
intensities stand for every device.

    python -m benchmarks.transfer.counters [CSV.GZ ...] [--out DIR]   # default: the committed H100 files
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import time
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from adaptune.adaptive.transfer import PROXY_FEATURES_MEASURED, p_dfs
from benchmarks.harness import finish_study, parse_study_args, study_meta, study_parser
from benchmarks.harness.cli import device_tag
from benchmarks.transfer.devices import INTENSITY

ROOT = Path(__file__).resolve().parents[2]
COUNTERS = Path(__file__).resolve().parent / "results" / "counters"
DEFAULT_FILES = ("counters_suite_h100.csv.gz", "counters_sort_h100.csv.gz", "counters_bfs_h100.csv.gz")
PROXIES = ("MEM-BW", "SH-MEM-BW", "ATOMIC", "SP-GFLOP", "LAUNCH")
WARP = 32
NEEDED = ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
          "l1tex__t_set_accesses_pipe_lsu_mem_global_op_atom.sum",
          "l1tex__t_set_accesses_pipe_lsu_mem_global_op_red.sum",
          "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "sm__inst_executed.sum", "gpu__time_duration.sum")
# kernel name pattern -> (benchmark, role); first match wins
KERNELS: tuple[tuple[str, str, str], ...] = (
    (r"^spmv_features$", "spmv", "feature"), (r"cusparse", "spmv", "library"), (r"^spmv_", "spmv", "variant"),
    (r"^histogram_subsample_stats$", "histogram", "feature"), (r"^histogram_", "histogram", "variant"),
    (r"^count_order$", "sort", "feature"), (r"DeviceRadixSort", "sort", "library"),
    (r"^(sort_tiles|merge_pass|bitonic_step|bitonic_tile_steps|reverse_copy)$", "sort", "variant"),
    (r"^bfs_probe$", "bfs", "feature"), (r"^bfs_", "bfs", "variant"),
)


class CountersError(ValueError):
    """A counters file that cannot be read (not gzip, no ncu header, a value that is not a number)."""


@dataclass
class Launch:
    """One profiled kernel launch: its name, launch shape and metric values (Metric Name -> float)."""

    source: str
    launch_id: str
    kernel: str
    block: str
    grid: str
    metrics: dict[str, float] = field(default_factory=dict)


def classify(kernel: str) -> tuple[str, str]:
    """(benchmark, role) of a kernel name; ("other", "other") for CuPy helpers and the like."""
    for pattern, bench, role in KERNELS:
        if re.search(pattern, kernel):
            return bench, role
    return "other", "other"


def _number(text: str, where: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        raise CountersError(f"{where}: metric value {text!r} is not a number") from None


def _csv_lines(path: Path) -> Iterator[str]:
    """The CSV lines of an ncu log (the profiled program's own output is interleaved: lines not starting
    with a quote are skipped)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", newline="") as fh:
            for line in fh:
                if line.startswith('"'):
                    yield line
    except (OSError, EOFError, zlib.error) as e:
        raise CountersError(f"{path.name}: cannot read ({e})") from None


def read_launches(path: str | Path) -> list[Launch]:
    """Stream one ``ncu --csv`` file (long format: one row per launch per metric) into launches, in order."""
    path = Path(path)
    launches: dict[tuple[str, str], Launch] = {}
    rows = csv.reader(_csv_lines(path))
    header = next(rows, None)
    if header is None or "Metric Value" not in header or "Kernel Name" not in header:
        raise CountersError(f"{path.name}: no ncu --csv header (ID, Kernel Name, ..., Metric Value)")
    col = {name: i for i, name in enumerate(header)}
    for n, row in enumerate(rows, 2):
        if len(row) != len(header):
            raise CountersError(f"{path.name}: CSV row {n} has {len(row)} fields, the header {len(header)}")
        key = (row[col["Process ID"]], row[col["ID"]])
        launch = launches.get(key)
        if launch is None:
            launch = launches[key] = Launch(path.name, "/".join(key), row[col["Kernel Name"]],
                                            row[col["Block Size"]], row[col["Grid Size"]])
        launch.metrics[row[col["Metric Name"]]] = _number(row[col["Metric Value"]], f"{path.name} row {n}")
    return list(launches.values())


def launch_shares(m: dict[str, float]) -> dict[str, float]:
    """Per-launch intensities 0..5 of the instruction-share proxies and MEM-BW (see the module docstring)."""
    inst = m["sm__inst_executed.sum"]
    atomics = m["l1tex__t_set_accesses_pipe_lsu_mem_global_op_atom.sum"] + \
        m["l1tex__t_set_accesses_pipe_lsu_mem_global_op_red.sum"]
    share = {"SP-GFLOP": m["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"] / (WARP * inst) if inst else 0.0,
             "ATOMIC": atomics / inst if inst else 0.0,
             "SH-MEM-BW": m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] / inst if inst else 0.0,
             "MEM-BW": m["dram__throughput.avg.pct_of_peak_sustained_elapsed"] / 100}
    return {p: 5 * min(1.0, max(0.0, s)) for p, s in share.items()}


def intensities(launches: Iterable[Launch], launch_us: float) -> dict[str, float]:
    """A benchmark's proxy intensities 0..5: time-weighted mean of the per-launch ones, LAUNCH from the
    overhead share of wall time."""
    launches = list(launches)
    if not launches:
        raise CountersError("no launches to average")
    for la in launches:
        missing = [m for m in NEEDED if m not in la.metrics]
        if missing:
            raise CountersError(f"{la.source}: launch {la.launch_id} ({la.kernel}) lacks {', '.join(missing)}")
    ns = [la.metrics["gpu__time_duration.sum"] for la in launches]
    total = sum(ns)
    if total <= 0:
        raise CountersError("the launches' durations sum to zero")
    out = dict.fromkeys(PROXIES, 0.0)
    for la, d in zip(launches, ns, strict=True):
        for p, phi in launch_shares(la.metrics).items():
            out[p] += phi * d / total
    overhead = len(launches) * launch_us * 1e3
    out["LAUNCH"] = 5 * overhead / (overhead + total)
    return out


def launch_latency_us(path: Path, tag: str) -> float:
    """The measured launch latency of the device whose short tag (``h100``) the counters files carry."""
    table = json.loads(path.read_text())["devices"]
    found = [v["proxies"]["launch_us"] for name, v in table.items() if device_tag(name) == tag]
    if not found:
        raise SystemExit(f"no measured launch latency for a {tag} device in {path}")
    return float(found[0])


def summarise(launches: list[Launch], launch_us: float) -> dict:
    """Per benchmark: intensities over its variant kernels, the hand-set ones, P-DFS picks with both, the
    per-launch vote, and a per-kernel table (every role)."""
    by_bench: dict[str, list[Launch]] = defaultdict(list)
    kernels: dict[str, dict[str, list[Launch]]] = defaultdict(lambda: defaultdict(list))
    for la in launches:
        bench, role = classify(la.kernel)
        kernels[bench][la.kernel].append(la)
        if role == "variant":
            by_bench[bench].append(la)
    out: dict = {}
    for bench in sorted(by_bench, key=list(INTENSITY).index):
        own = by_bench[bench]
        phi = intensities(own, launch_us)
        per_launch = [launch_shares(la.metrics) | {"LAUNCH": 5 * launch_us * 1e3 / (
            launch_us * 1e3 + la.metrics["gpu__time_duration.sum"])} for la in own]
        per_kernel = {}
        for k, las in kernels[bench].items():
            role = classify(k)[1]
            row = {"role": role, "launches": len(las),
                   "time_us": sum(la.metrics.get("gpu__time_duration.sum", 0.0) for la in las) / 1e3}
            if all(all(m in la.metrics for m in NEEDED) for la in las):
                row["intensity"] = intensities(las, launch_us)
            per_kernel[k] = row
        out[bench] = {"intensity": phi, "hand_set": INTENSITY[bench], "launches": len(own),
                      "kernel_time_us": sum(la.metrics["gpu__time_duration.sum"] for la in own) / 1e3,
                      "p_dfs_counters": p_dfs([phi], proxy_features=PROXY_FEATURES_MEASURED, per_input=2),
                      "p_dfs_hand_set": p_dfs([INTENSITY[bench]], proxy_features=PROXY_FEATURES_MEASURED, per_input=2),
                      "p_dfs_per_launch_vote": p_dfs(per_launch, proxy_features=PROXY_FEATURES_MEASURED, per_input=2),
                      "kernels": per_kernel}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = study_parser("transfer", __doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=[str(COUNTERS / f) for f in DEFAULT_FILES],
                    help="ncu --csv files (.csv or .csv.gz; default: the committed H100 suite, sort and BFS files)")
    ap.add_argument("--proxies", default=str(ROOT / "data" / "devices" / "proxy_features.json"),
                    help="measured proxies, for the device's launch latency")
    ap.add_argument("--device", default="h100", help="short tag of the device the counters come from")
    args = parse_study_args(ap, argv)
    t0 = time.perf_counter()
    launch_us = launch_latency_us(Path(args.proxies), args.device)
    launches: list[Launch] = []
    try:
        for f in args.files:
            launches += read_launches(f)
        benchmarks = summarise(launches, launch_us)
    except CountersError as e:
        raise SystemExit(str(e)) from None
    data = {"device": args.device, "launch_us": launch_us, "files": [Path(f).name for f in args.files],
            "benchmarks": benchmarks}
    finish_study(args.out, "counters_intensity", data, markdown=markdown,
                 meta=study_meta("benchmarks.transfer.counters", t0))


def markdown(data: dict) -> str:
    m = data["meta"]
    lines = ["# P-DFS intensities from Nsight Compute counters vs the hand-set ones", "",
             f"- counters: {', '.join(data['files'])} ({data['device']}); launch latency {data['launch_us']:.2f} us",
             f"- date {m['date']}, commit {m['commit']}; definitions: `benchmarks/transfer/counters.py`",
             "- intensity 0..5 = 5 x share of instructions of the kind (MEM-BW: DRAM % of peak / 20; LAUNCH: "
             "5 x launch-overhead share of wall time), time-weighted over the variant kernels' launches", "",
             "| benchmark | launches | " + " | ".join(f"{p} counters / hand" for p in PROXIES)
             + " | P-DFS counters | P-DFS hand-set | P-DFS per-launch vote |",
             "|---|---|" + "---|" * (len(PROXIES) + 3)]
    for b, v in data["benchmarks"].items():
        lines.append(f"| {b} | {v['launches']} | " + " | ".join(
            f"{v['intensity'][p]:.2f} / {v['hand_set'][p]}" for p in PROXIES)
            + f" | {', '.join(v['p_dfs_counters'])} | {', '.join(v['p_dfs_hand_set'])} "
              f"| {', '.join(v['p_dfs_per_launch_vote'])} |")
    lines += ["", "Per kernel (variant kernels make the row above; feature and library kernels are shown, "
              "not averaged):", "", "| benchmark | kernel | role | launches | time (us) | " + " | ".join(PROXIES)
              + " |", "|---|---|---|---|---|" + "---|" * len(PROXIES)]
    for b, v in data["benchmarks"].items():
        for k, row in v["kernels"].items():
            name = k if len(k) <= 48 else k[:45] + "..."
            phi = row.get("intensity")
            cells = " | ".join(f"{phi[p]:.2f}" for p in PROXIES) if phi else " | ".join("-" for _ in PROXIES)
            lines.append(f"| {b} | `{name}` | {row['role']} | {row['launches']} | {row['time_us']:.0f} | {cells} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
