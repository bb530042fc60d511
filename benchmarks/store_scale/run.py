"""The store at scale: time and peak memory of import, show, export, the dashboard's queries and a resume
lookup, on synthetic stores of 10^4 ... 10^7 measurements in SQLite and PostgreSQL.

Every command runs in its own process; its wall time is measured around it and its peak resident memory is
GNU time's (``/usr/bin/time``). Query latencies are measured inside one process (``queries.py``): a cold
first call, then warm repeats.

    python -m benchmarks.store_scale.run                      # regular: 10^4 .. 10^6, both stores
    python -m benchmarks.store_scale.run --profile large      # up to 10^7 (SQLite), 10^6 (PostgreSQL)
    python -m benchmarks.store_scale.run --profile smoke      # 10^4 and 10^5, what CI runs
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import finish_study, markdown_table, parse_study_args, study_meta, study_parser
from benchmarks.store_scale.synthetic import KERNEL, write_cache

STUDY = "store_scale"
SIZES = {"smoke": [10_000, 100_000], "regular": [10_000, 100_000, 1_000_000],
         "large": [10_000, 100_000, 1_000_000, 10_000_000]}
TARGETS = {"import_rows_per_s": 50_000, "export_rows_per_s": 100_000, "peak_mb": 500, "query_s": 0.2,
           "memory_growth": 2.0}
"""Issue 30's targets at 10^7 measurements on a 2-core machine."""
SCANS = frozenset({"page sorted by a parameter", "page filtered by a parameter", "time histogram",
                   "last page (failures)"})
"""The four queries that read a whole run until 2c05126 (no index on parameter values; the histogram and the
failures' page walked the run's rows). Since schema 3 they read per-run summary tables (``run_param_counts``,
``run_time_bins``) and an index range; the report and plot still show them apart."""
BASELINE = {"commit": "b14383e", "rows": 691_200, "import": (41.2, 2100), "show --top 3": (18.8, 1700),
            "export csv": (19.6, 1700)}
"""Seconds and peak MB before the store interface (issue 30, measured on the same kind of 2-core host)."""


GNU_TIME = shutil.which("time") if Path("/usr/bin/time").exists() else None


def _spawn(argv: list[str], env: dict[str, str], stdout: Any, stderr: Any) -> dict[str, Any]:
    """Run ``argv``; its wall seconds, peak resident memory (MB) and exit code.

    The memory comes from GNU time, which forks the command from its own small process: a child spawned
    straight from this (large) Python process would report this process's size as its own high-water mark
    (Linux keeps ``maxrss`` across exec). Without GNU time the memory is not measured (NaN)."""
    t0 = time.perf_counter()
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        wrapped = [GNU_TIME, "-f", "%M %U %S", "-o", report.name, *argv] if GNU_TIME else argv
        proc = subprocess.run(wrapped, env=env, stdout=stdout, stderr=stderr, check=False)
        wall = time.perf_counter() - t0
        text = report.read().strip().splitlines()
    fields = text[-1].split() if GNU_TIME and text else []
    peak, cpu = (float(fields[0]) / 1024, float(fields[1]) + float(fields[2])) if len(fields) == 3 else (
        float("nan"), float("nan"))
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": peak, "returncode": proc.returncode,
            "memory_from": "GNU time" if GNU_TIME else "unavailable"}


def command(name: str, argv: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    """One measured command, its output in ``log``; a failure is recorded, not raised."""
    with log.open("ab") as sink:
        sink.write(f"\n$ {' '.join(argv)}\n".encode())
        sink.flush()
        result = _spawn(argv, env, sink, sink)
    print(f"  {name}: {result['wall_s']:.2f} s ({result['cpu_s']:.2f} s CPU), {result['peak_mb']:.0f} MB"
          + ("" if result["returncode"] == 0 else f" (exit {result['returncode']}, see {log})"), flush=True)
    return result


@contextlib.contextmanager
def postgres_server(folder: Path) -> Iterator[str]:
    from adaptune.distributed import local_postgres

    with local_postgres(folder) as url:
        yield url


def fresh_database(server: str, name: str) -> str:
    import sqlalchemy as sa

    from adaptune.store.sql import engine_url

    admin = sa.create_engine(engine_url(server), isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return sa.engine.make_url(server).set(database=name).render_as_string(hide_password=False)


def one_size(kind: str, rows: int, cache: Path, work: Path, server: str | None, repeats: int,
             env: dict[str, str]) -> dict[str, Any]:
    """Import, show, export, queries and resume for one store of ``rows`` measurements."""
    target = fresh_database(server, f"scale_{rows}") if kind == "postgresql" else str(work / f"scale_{rows}.db")
    py = sys.executable
    log = work / f"{kind}_{rows}.log"
    out: dict[str, Any] = {"store": kind, "rows": rows}
    print(f"{kind}, {rows:,} rows:", flush=True)
    out["import"] = command("import", [py, "-m", "adaptune", "import", str(cache), "--db", target, "--quiet"], env, log)
    out["show --top 10"] = command("show", [py, "-m", "adaptune", "show", "--db", target, "--top", "10"], env, log)
    csv = work / "export.csv"
    out["export csv"] = command("export", [py, "-m", "adaptune", "export", "--db", target, "--problem", KERNEL,
                                           "--format", "csv", "-o", str(csv)], env, log)
    csv.unlink(missing_ok=True)
    queries_file = work / "queries.json"
    with queries_file.open("wb") as sink, log.open("ab") as errors:
        out["queries process"] = _spawn([py, "-m", "benchmarks.store_scale.queries", target, str(repeats)], env,
                                        sink, errors)
    answer = json.loads(queries_file.read_text() or "{}")
    out["rows_stored"] = answer.get("rows_stored")  # what the store holds after the import: must be ``rows``
    out["queries"] = {name: {"cold_s": q["cold_s"], "median_s": statistics.median(q["warm_s"]),
                             "max_s": max(q["warm_s"]), "median_cpu_s": statistics.median(q["warm_cpu_s"])}
                      for name, q in answer.get("queries", {}).items()}
    slowest = max(out["queries"].items(), key=lambda kv: kv[1]["median_s"], default=("-", {"median_s": 0}))
    print(f"  queries: slowest {slowest[0]} {slowest[1]['median_s'] * 1e3:.1f} ms, "
          f"{out['queries process']['peak_mb']:.0f} MB", flush=True)
    if kind == "sqlite":
        out["database_mb"] = Path(target).stat().st_size / 2 ** 20
        for suffix in ("", "-wal", "-shm"):
            Path(target + suffix).unlink(missing_ok=True)
    return out


def summarise(data: dict[str, Any]) -> dict[str, Any]:
    """Rates, targets met or missed at the largest size, and memory growth from 10^5 up."""
    verdicts = {}
    for kind in data["stores"]:
        points = sorted((p for p in data["points"] if p["store"] == kind), key=lambda p: p["rows"])
        if not points:
            continue
        last = points[-1]
        for p in points:
            p["import_rows_per_s"] = p["rows"] / p["import"]["wall_s"]
            p["export_rows_per_s"] = p["rows"] / p["export csv"]["wall_s"]
            p["import_rows_per_cpu_s"] = p["rows"] / p["import"]["cpu_s"]
            p["export_rows_per_cpu_s"] = p["rows"] / p["export csv"]["cpu_s"]
        peaks = {name: [p[name]["peak_mb"] for p in points if p["rows"] >= 100_000]
                 for name in ("import", "show --top 10", "export csv", "queries process")}
        growth = {name: (max(v) / min(v) if v and min(v) > 0 else None) for name, v in peaks.items()}
        slow = {q: v["median_s"] for q, v in last["queries"].items() if v["median_s"] > TARGETS["query_s"]}
        verdicts[kind] = {
            "largest_rows": last["rows"],
            "import_rows_per_s": round(last["import_rows_per_s"]),
            "import_ok": last["import_rows_per_s"] >= TARGETS["import_rows_per_s"]
            and last["import"]["peak_mb"] <= TARGETS["peak_mb"],
            "import_rows_per_cpu_s": round(last["import_rows_per_cpu_s"]),
            "export_rows_per_s": round(last["export_rows_per_s"]),
            "export_rows_per_cpu_s": round(last["export_rows_per_cpu_s"]),
            "export_ok": last["export_rows_per_s"] >= TARGETS["export_rows_per_s"]
            and last["export csv"]["peak_mb"] <= TARGETS["peak_mb"],
            "queries_over_200ms": slow,
            "memory_growth_from_1e5": growth,
            "memory_flat": all(g is not None and g <= TARGETS["memory_growth"] for g in growth.values()),
        }
    return verdicts


def markdown(data: dict[str, Any]) -> str:
    rows = []
    for p in sorted(data["points"], key=lambda p: (p["store"], p["rows"])):
        rows.append({"store": p["store"], "rows": f"{p['rows']:,}",
                     "import s": p["import"]["wall_s"], "import CPU s": p["import"]["cpu_s"],
                     "import rows/s": round(p["import_rows_per_s"]),
                     "import MB": round(p["import"]["peak_mb"]),
                     "show s (CLI)": p["show --top 10"]["wall_s"], "show MB": round(p["show --top 10"]["peak_mb"]),
                     "export csv s": p["export csv"]["wall_s"], "export CPU s": p["export csv"]["cpu_s"],
                     "export rows/s": round(p["export_rows_per_s"]),
                     "export MB": round(p["export csv"]["peak_mb"]),
                     "slowest query ms": 1e3 * max(q["median_s"] for q in p["queries"].values()),
                     "queries MB": round(p["queries process"]["peak_mb"])})
    qrows = []
    for p in sorted(data["points"], key=lambda p: (p["store"], p["rows"])):
        if p["rows"] != max(x["rows"] for x in data["points"] if x["store"] == p["store"]):
            continue
        for name, q in p["queries"].items():
            qrows.append({"store": p["store"], "rows": f"{p['rows']:,}", "query": name,
                          "median ms": 1e3 * q["median_s"], "median CPU ms": 1e3 * q["median_cpu_s"],
                          "cold ms": 1e3 * q["cold_s"],
                          "≤ 200 ms": "yes" if q["median_s"] <= TARGETS["query_s"] else "**no**",
                          "reads": "summaries + index walk" if name in SCANS else "index / counts"})
    b = BASELINE
    text = [f"# The store at scale ({data['profile']} profile)", "",
            "Commands in their own process (wall time including Python start-up; CPU time, user + system, of the "
            "process and the reader process an import forks, and the larger peak resident memory of the two, from GNU "
            "time); queries timed inside one process (median of warm "
            "calls, wall and this process's CPU). The host was shared (load average in `meta`): wall times carry "
            "the contention, CPU times much less. PostgreSQL runs on the same 2 cores; its server's CPU and "
            "memory are not counted. One run of N measurements (one imported "
            "Kernel Tuner cache of 10 parameters), the worst case for the per-run queries.", "",
            markdown_table(rows, digits=3),
            "## Each query at the largest size", "", markdown_table(qrows, digits=3),
            "## Targets at the largest size", "",
            markdown_table([{"store": k, **{key: (json.dumps(v) if isinstance(v, dict) else v)
                                            for key, v in verdict.items()}}
                            for k, verdict in data["verdicts"].items()], digits=3),
            f"Baseline ({b['commit']}, {b['rows']:,} rows): import {b['import'][0]} s / {b['import'][1]} MB, "
            f"show --top 3 {b['show --top 3'][0]} s / {b['show --top 3'][1]} MB, export csv "
            f"{b['export csv'][0]} s / {b['export csv'][1]} MB.", ""]
    return "\n".join(text)


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = {"sqlite": "-", "postgresql": "--"}
    for kind in data["stores"]:
        points = sorted((p for p in data["points"] if p["store"] == kind), key=lambda p: p["rows"])
        if not points:
            continue
        xs = [p["rows"] for p in points]
        for name, color in (("import", "C0"), ("export csv", "C1"), ("show --top 10", "C2")):
            ax_t.plot(xs, [p[name]["wall_s"] for p in points], styles[kind], color=color, marker="o",
                      label=f"{name} ({kind})")
            ax_m.plot(xs, [p[name]["peak_mb"] for p in points], styles[kind], color=color, marker="o",
                      label=f"{name} ({kind})")
        for scans, color, what in ((False, "C3", "slowest indexed query"),
                                   (True, "C5", "slowest of the 4 former whole-run reads")):
            ax_t.plot(xs, [max(q["median_s"] for name, q in p["queries"].items() if (name in SCANS) == scans)
                           for p in points], styles[kind], color=color, marker="s", label=f"{what} ({kind})")
        ax_t.plot(xs, [p["queries"]["resume lookup (1000 configs)"]["median_s"] for p in points], styles[kind],
                  color="C4", marker="^", label=f"resume lookup, 1000 configs ({kind})")
    ax_t.axhline(TARGETS["query_s"], color="grey", lw=0.8, ls=":")
    ax_m.axhline(TARGETS["peak_mb"], color="grey", lw=0.8, ls=":")
    for ax, label in ((ax_t, "seconds"), (ax_m, "peak memory of the process (MB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measurements in the store")
        ax.set_ylabel(label)
    ax_t.legend(fontsize=6)
    ax_m.legend(fontsize=6)
    fig.suptitle("adaptune store: cost against rows (dotted: targets)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> Path:
    parser = study_parser(STUDY, __doc__)
    parser.add_argument("--stores", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--sizes", help="comma-separated row counts (default: the profile's)")
    parser.add_argument("--max-postgresql", type=float, default=1e6,
                        help="largest PostgreSQL store (the server shares the 2 cores; default 1e6)")
    parser.add_argument("--repeats", type=int, default=5, help="warm calls per query")
    parser.add_argument("--work", help="folder for the caches and databases (default: a temporary one)")
    parser.add_argument("--report-only", help="rewrite the report and plot of an earlier store_scale.json "
                                              "(nothing is measured)")
    parser.add_argument("--add-to", help="an earlier store_scale.json whose points this run adds to (a larger "
                                         "size run later, on the same host)")
    args = parse_study_args(parser, argv)
    started = time.perf_counter()
    if args.report_only:
        data = json.loads(Path(args.report_only).read_text())
        data["verdicts"] = summarise(data)
        return finish_study(args.out, STUDY, data, markdown=markdown, plot=plot)
    sizes = [int(float(s)) for s in args.sizes.split(",")] if args.sizes else SIZES[args.profile]
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    work = Path(args.work or tempfile.mkdtemp(prefix="store_scale_"))
    work.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), str(root),
                                                        os.environ.get("PYTHONPATH", "")]))
    data: dict[str, Any] = {"profile": args.profile, "stores": stores, "sizes": sizes, "targets": TARGETS,
                            "baseline": BASELINE, "points": []}
    if args.add_to:
        earlier = json.loads(Path(args.add_to).read_text())
        data["points"] = [p for p in earlier["points"] if p["rows"] not in sizes or p["store"] not in stores]
        data["stores"] = sorted(set(earlier["stores"]) | set(stores))
        data["earlier_run"] = earlier.get("metadata", {})
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(postgres_server(work / "pg")) if "postgresql" in stores else None
        for rows in sizes:
            cache = write_cache(work / f"cache_{rows}.json", rows)
            data.setdefault("cache_mb", {})[rows] = cache.stat().st_size / 2 ** 20
            for kind in stores:
                if kind == "postgresql" and rows > args.max_postgresql:
                    continue
                data["points"].append(one_size(kind, rows, cache, work, server, args.repeats, env))
            cache.unlink()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    data["verdicts"] = summarise(data)
    return finish_study(args.out, STUDY, data, markdown=markdown, plot=plot,
                        meta=study_meta(f"benchmarks.{STUDY}.run", started, argv))


if __name__ == "__main__":
    main()
