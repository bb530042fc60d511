"""Distributed tuning benchmarks: parallel workers, a shared PostgreSQL store, parallel asks.

    python -m benchmarks.distributed.run cpu     # this machine: Ray 1 vs 2 PoCL workers, 4 writers PG vs SQLite
    python -m benchmarks.distributed.run replay  # auto with 2 asks in flight vs 1 on the recorded spaces
    python -m benchmarks.distributed.run gpu     # 2 GPUs: the matmul CUDA problem on 1 vs 2 Ray actors

    python -m benchmarks.distributed.run replay --profile smoke   # seconds: 2 repeats, 20 evaluations

Every part writes its numbers into OUT/distributed.json (default OUT: out/distributed/; merged, so parts run
on different machines share one file) and a line into the markdown summary; ``report`` rewrites the
markdown from the JSON. A part that fails records its error. The committed run is
benchmarks/distributed/results/.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from benchmarks.harness import git_commit, parse_study_args, study_parser

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")


def _host() -> dict:
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
            "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} CPUs",
            "python": platform.python_version(), "load_average_1min": round(os.getloadavg()[0], 2)}


def _merge(out: Path, part: str, data: dict) -> None:
    """Put one part's numbers into the results file (and the headline keys at the top level)."""
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc[part] = {**_host(), **data}
    for key in ("speedup_2gpu", "same_best", "lost_rows", "duplicated_rows"):
        if key in data:
            doc[key] = data[key] if key not in ("lost_rows", "duplicated_rows") else (
                doc.get(key, 0) if isinstance(doc.get(key), int) else 0) + data[key]
    out.write_text(json.dumps(doc, indent=1, default=str) + "\n")


# ------------------------------------------------------------------------------------ parallel measuring
def bench_workers(problem, backend: str, counts: tuple[int, ...], max_evals: int | None, repeats: int,
                  seed: int, address: str | None = None, use_ray: bool = True,
                  max_seconds: float | None = None, partial=None) -> dict:
    """The same fixed set of configurations (seeded random order, all of them or ``max_evals``) measured on
    1, 2, ... workers: wall time, speed-up, and whether the best configuration is the same."""
    from adaptune.tuning import tune

    runs = []
    for n in counts:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            rep = tune(problem, "random", max_evals=max_evals, repeats=repeats, backend=backend,
                       db=str(Path(tmp) / "w.db"), seed=seed, progress=False, max_seconds=max_seconds,
                       executor="ray" if use_ray else "local", n_parallel=n, address=address)
            wall = time.perf_counter() - t0
        keys = sorted(problem.space.key(r.config) for r in rep.results)
        runs.append({"workers": n, "wall_s": wall, "evaluated": rep.evaluated, "failed": rep.failed,
                     "best": rep.best, "best_time_ms": rep.best_time_ms, "device": rep.device.name,
                     "kinds": 1 + len(rep.others), "configs_hash": hash(tuple(keys)) & 0xFFFFFFFF,
                     "times": {problem.space.key(r.config): r.time_ms for r in rep.results if r.ok}})
        runs[-1]["capped"] = bool(max_evals and rep.evaluated < max_evals)  # max_seconds ended it first
        print(f"  {n} worker(s): {wall:.1f} s, {rep.evaluated} evaluated, best {rep.best_time_ms:.4f} ms "
              f"{rep.best}", flush=True)
        if partial is not None:  # a run that is killed later must not take this one with it
            partial({"runs_so_far": [{k: v for k, v in r.items() if k != "times"} for r in runs]})
    base = runs[0]
    for r in runs:
        r["speedup"] = base["wall_s"] / r["wall_s"]
        r["same_best"] = r["best"] == base["best"]
        r["same_configs"] = r["configs_hash"] == base["configs_hash"]
        # how far apart the two bests are in the other run's own measurement (noise vs real difference)
        key_b = problem.space.key(base["best"]) if base["best"] else None
        r["base_best_in_this_run_ms"] = r["times"].get(key_b) if key_b else None
    for r in runs:
        del r["times"]
    return {"runs": runs}


def bench_compile_fanout(problem, backend: str, sample: int, compile_workers: int, seed: int = 0) -> dict:
    """One measuring worker, compiling ahead itself vs fed binaries by ``compile_workers`` CPU-only actors:
    wall time, how many kernels came as binaries, and whether the best configuration is the same."""
    from adaptune.distributed import RayExecutor
    from adaptune.tuning import tune

    runs = []
    for n in (0, compile_workers):
        executor = RayExecutor(n_workers=1, compile_workers=n)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            rep = tune(problem, "random", max_evals=sample, repeats=7, backend=backend, seed=seed,
                       db=str(Path(tmp) / "c.db"), progress=False, executor=executor)
            wall = time.perf_counter() - t0
        stats = executor.final_stats[0] if executor.final_stats else {}
        runs.append({"compile_workers": n, "wall_s": wall, "evaluated": rep.evaluated, "failed": rep.failed,
                     "best": rep.best, "best_time_ms": rep.best_time_ms, "worker_stats": stats,
                     "compile_ms_sum": sum(r.compile_ms for r in rep.results)})
        print(f"  compile workers {n}: {wall:.1f} s, {rep.evaluated} evaluated, {rep.failed} failed, best "
              f"{rep.best_time_ms:.4f} ms, worker {stats}", flush=True)
    runs[1]["same_best"] = runs[1]["best"] == runs[0]["best"]
    return {"runs": runs}


# ------------------------------------------------------------------------------------ concurrent writers
WRITER = textwrap.dedent("""
    import json, sys, time
    from adaptune.records import DeviceInfo, Result
    from adaptune.store import Store
    url, who, n, shared = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    store = Store(url)
    d = store.device(DeviceInfo(name="bench", platform="bench", driver="1"))
    p = store.problem("writers", "h")
    i = store.input(p, "n")
    t0 = time.perf_counter()
    for k in range(n):
        key = k if k < shared else 1_000_000 * (who + 1) + k
        store.put(d, p, i, Result.from_samples({"k": key, "who": 0}, [float(k % 97) + 1.0]))
    print(json.dumps({"seconds": time.perf_counter() - t0, "retries": store.retries,
                      "reconnects": store.reconnects}))
""")


def _writers(url: str, n_writers: int, n: int, shared: int, kill_every_s: float | None) -> dict:
    from adaptune.distributed import terminate_other_connections

    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, str(w), str(n), str(shared)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(n_writers)]
    kills = 0
    while any(p.poll() is None for p in procs):
        time.sleep(kill_every_s or 0.05)
        if kill_every_s:
            kills += terminate_other_connections(url)
    wall = time.perf_counter() - t0
    outs = [p.communicate() for p in procs]
    errors = [err[-500:] for p, (_, err) in zip(procs, outs, strict=True) if p.returncode != 0]
    stats = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs if o.strip()]
    from adaptune.store import Store

    with Store(url) as store:
        rows = store.count()
        keys = {r.config["k"] for r in store.results()}
    expected = {k for k in range(shared)} | {1_000_000 * (w + 1) + k for w in range(n_writers)
                                            for k in range(shared, n)}
    writes = n_writers * n
    return {"writers": n_writers, "writes": writes, "rows": rows, "expected_rows": len(expected),
            "lost_rows": len(expected - keys), "duplicated_rows": rows - len(keys),
            "wall_s": wall,  # includes starting 4 Python processes
            # throughput while writing: all writes over the longest writer's own writing time
            "writes_per_s": writes / max(s["seconds"] for s in stats) if stats else None,
            "mean_writer_s": float(np.mean([s["seconds"] for s in stats])) if stats else None,
            "retries": sum(s["retries"] for s in stats),
            "reconnects": sum(s["reconnects"] for s in stats), "connections_killed": kills, "errors": errors}


def bench_store(n_writers: int = 4, n: int = 300, shared: int = 100) -> dict:
    """4 processes writing one database at once: PostgreSQL, PostgreSQL with its connections killed every
    0.5 s, and an SQLite file (the default)."""
    from adaptune.distributed import local_postgres

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        out["sqlite"] = _writers(str(Path(tmp) / "w.db"), n_writers, n, shared, None)
        print(f"  sqlite: {out['sqlite']['writes_per_s']:.0f} writes/s", flush=True)
        with local_postgres(Path(tmp) / "pg") as url:
            import sqlalchemy as sa

            from adaptune.store.db import engine_url

            admin = sa.create_engine(engine_url(url), isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(sa.text("CREATE DATABASE w1"))
                conn.execute(sa.text("CREATE DATABASE w2"))
            admin.dispose()
            base = sa.engine.make_url(url)
            for name, db, kill in (("postgresql", "w1", None), ("postgresql_killed_connections", "w2", 0.5)):
                out[name] = _writers(base.set(database=db).render_as_string(hide_password=False),
                                     n_writers, n, shared, kill)
                print(f"  {name}: {out[name]['writes_per_s']:.0f} writes/s, lost {out[name]['lost_rows']}, "
                      f"duplicated {out[name]['duplicated_rows']}, retries {out[name]['retries']}", flush=True)
    return out


# ------------------------------------------------------------------------------------ replay
def _fraction_curve(trace_values: np.ndarray, optimum: float, n: int) -> np.ndarray:
    best = np.minimum.accumulate(trace_values)
    frac = np.where(np.isfinite(best), optimum / best, 0.0)
    if len(frac) < n:
        frac = np.concatenate([frac, np.full(n - len(frac), frac[-1] if len(frac) else 0.0)])
    return frac[:n]


_REPLAYS: dict[str, object] = {}  # per worker process: each recorded space is parsed once


def _replay_chunk(args: tuple) -> tuple[str, str, int, list[list[float]]]:
    """One space x variant x a few seeds: the fraction-of-optimum curves (a unit of parallel work)."""
    path, label, n_parallel, opts, seeds, max_evals = args
    from adaptune.search.base import Budget
    from adaptune.search.replay import Replay

    rp = _REPLAYS.get(path)
    if rp is None:
        rp = _REPLAYS[path] = Replay.from_file(path)
    curves = [_fraction_curve(rp.run("auto", Budget(max_evals=max_evals), seed=s, n_parallel=n_parallel,
                                     **opts).values, rp.optimum, max_evals).tolist() for s in seeds]
    return rp.name, label, len(rp.space), curves


def bench_replay(repeats: int, max_evals: int, jobs: int) -> dict:
    from concurrent.futures import ProcessPoolExecutor

    spaces = sorted((ROOT / "data" / "benchmark_hub" / "convolution_milo").glob("*.json.gz"))
    variants = [("1 worker", 1, {}), ("2 workers, constant liar", 2, {"liar": "min"}),
                ("2 workers, no liar", 2, {})]
    chunk = 5
    tasks = [(str(p), label, n, opts, list(range(k, min(k + chunk, repeats))), max_evals)
             for p in spaces for label, n, opts in variants for k in range(0, repeats, chunk)]
    by_space: dict[str, dict] = {}
    with ProcessPoolExecutor(jobs) as pool:
        for name, label, size, curves in pool.map(_replay_chunk, tasks, chunksize=3):
            entry = by_space.setdefault(name, {"space": name, "size": size})
            entry.setdefault(label, []).extend(curves)
    per_space = []
    for name in sorted(by_space):
        entry = by_space[name]
        for label, _, _ in variants:
            c = np.asarray(entry[label])
            entry[label] = {"mean_fraction_per_eval": c.mean(0).round(4).tolist(), "mean_fraction": float(c.mean()),
                            "final_fraction": float(c[:, -1].mean()), "final_fraction_sd": float(c[:, -1].std()),
                            "repeats": len(c)}
        per_space.append(entry)
    summary = {}
    for label, _, _ in variants:
        summary[label] = {"mean_fraction": float(np.mean([s[label]["mean_fraction"] for s in per_space])),
                          "final_fraction": float(np.mean([s[label]["final_fraction"] for s in per_space]))}
    for s in per_space:
        print(f"  {s['space']}: " + ", ".join(f"{lab}: {s[lab]['mean_fraction']:.3f}/{s[lab]['final_fraction']:.3f}"
                                            for lab, _, _ in variants), flush=True)
    return {"repeats": repeats, "max_evals": max_evals, "strategy": "auto", "summary": summary,
            "spaces": per_space}


# ------------------------------------------------------------------------------------ report
def write_report(doc: dict, md: Path, png: Path) -> None:
    """The markdown summary (and the replay curves as a PNG) from the merged results."""
    lines = ["# Distributed tuning: parallel workers, shared PostgreSQL store, parallel asks", ""]
    lines += [f"Headline: speedup_2gpu = {doc.get('speedup_2gpu')}, same_best = {doc.get('same_best')}, "
              f"lost_rows = {doc.get('lost_rows')}, duplicated_rows = {doc.get('duplicated_rows')} "
              "(lost/duplicated summed over the PostgreSQL writer runs).", ""]
    if "gpu" in doc:
        g = doc["gpu"]
        lines += [f"## {g['problem']} on 1 vs 2 GPUs ({g['executor']} executor)", "",
                  f"- {g['date']}, commit {g['commit']}, {g['machine']}; device {g['runs'][0]['device']}",
                  f"- the same {g['sample']} configurations (a seeded random sample of the {g['space']}-"
                  "configuration space, every one measured: brute force over the sample), 7 repeats each", "",
                  "| GPUs | wall (s) | speed-up | evaluated | failed | best (ms) | same best | same configs |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in g["runs"]:
            lines.append(f"| {r['workers']} | {r['wall_s']:.1f} | {r['speedup']:.2f} | {r['evaluated']} | "
                         f"{r['failed']} | {r['best_time_ms']:.4f} | {r['same_best']} | {r['same_configs']} |")
        lines.append("")
    for g in doc.get("gpu_previous", []):
        r1, r2 = g["runs"][0], g["runs"][1]
        lines += [f"- earlier run ({g['date']}, commit {g['commit']}, {g['sample']} configurations): "
                  f"{r1['wall_s']:.1f} s vs {r2['wall_s']:.1f} s, speed-up {r2['speedup']:.2f}, same best "
                  f"{r2['same_best']}" + (f"; {g['note']}" if g.get("note") else "")]
    if doc.get("gpu_previous"):
        lines.append("")
    if "labelling" in doc:
        lb = doc["labelling"]
        c = lb["comparisons"]["2"]
        lines += ["## GPU-suite labelling on 1 vs 2 GPUs (ray_map: one actor per GPU)", "",
                  f"- {lb['date']}, commit {lb['commit']}; {lb['cluster']}; benchmarks {', '.join(lb['benchmarks'])}: "
                  "every training input x every variant, checked and timed by the suite's own `measure_input`; "
                  "inputs travel as specs and are built on the actor's GPU; every process compiles its own "
                  "kernels (CuPy cache in memory)", "",
                  "| GPUs | wall (s) | inputs | speed-up |", "|---|---|---|---|"]
        for r in lb["runs"]:
            sp = 1.0 if r["workers"] == 1 else lb["comparisons"][str(r["workers"])]["speedup"]
            lines.append(f"| {r['workers']} | {r['wall_s']:.1f} | {r['inputs']} | {sp:.2f} |")
        lines += ["", f"Same best variant on {c['same_best_fraction']:.1%} of inputs; of the others, "
                  f"{c['different_best_within_5pct']} are within 5 % in the 1-GPU run's own times (near-ties). "
                  f"Time of one (input, variant) on 2 GPUs / on 1: median {c['time_ratio_median']:.3f}, "
                  f"5th-95th percentile {c['time_ratio_p05']:.3f}-{c['time_ratio_p95']:.3f}.", ""]
        for prev in doc.get("labelling_previous", []):
            cp = prev["comparisons"]["2"]
            lines += [f"- earlier run ({prev['date']}, commit {prev['commit']}): speed-up {cp['speedup']:.2f} — "
                      f"{prev.get('note', '')}", ""]
    if "compile_fanout" in doc:
        cf = doc["compile_fanout"]
        lines += ["## Compilation fanned out to CPU-only actors (1 GPU)", "",
                  f"- {cf['date']}, commit {cf['commit']}, {cf['machine']}; {cf['problem']}, the same "
                  f"{cf['sample']} random configurations, 7 repeats; CuPy's kernel cache in memory only", "",
                  "| compile actors | wall (s) | evaluated | failed | kernels compiled by the measuring worker | "
                  "loaded as binaries | compile ms summed over results | best (ms) | same best |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in cf["runs"]:
            st = r["worker_stats"]
            lines.append(f"| {r['compile_workers']} | {r['wall_s']:.1f} | {r['evaluated']} | {r['failed']} | "
                         f"{st.get('compiles')} | {st.get('loaded_binaries')} | {r['compile_ms_sum']:.0f} | "
                         f"{r['best_time_ms']:.4f} | {r.get('same_best', '-')} |")
        lines.append("")
    if "gpu_attempt" in doc and "gpu" not in doc:
        g = doc["gpu_attempt"]
        lines += ["## 2 GPUs: not measured", "", f"- {g['date']}, commit {g['commit']}, {g['machine']}",
                  f"- {g['outcome']}", f"- log: {g['log']}", ""]
    if "cpu_workers" in doc:
        c = doc["cpu_workers"]
        lines += [f"## {c['problem']} on 1 vs 2 PoCL workers ({c['executor']} executor, CPU)", "",
                  f"- {c['date']}, commit {c['commit']}, {c['machine']}, load average {c.get('load_average_1min')} "
                  "(a machine shared with other jobs)",
                  "- both workers share one OpenCL device (the CPU's cores): each kernel competes with the other "
                  "worker's, so times measured in parallel are inflated and the best can differ; parallel "
                  "measurement is meant for separate devices (one actor per GPU)", "",
                  "| workers | wall (s) | speed-up | evaluated | same configs | best (ms) | same best |",
                  "|---|---|---|---|---|---|---|"]
        for r in c["runs"]:
            lines.append(f"| {r['workers']} | {r['wall_s']:.1f} | {r['speedup']:.2f} | {r['evaluated']} | "
                         f"{r['same_configs']} | {r['best_time_ms']:.4f} | {r['same_best']} |")
        lines.append("")
    if "store" in doc:
        st = doc["store"]
        lines += ["## 4 concurrent writer processes: PostgreSQL vs SQLite", "",
                  f"- {st['date']}, commit {st['commit']}, {st['machine']}, load average "
                  f"{st.get('load_average_1min')}; PostgreSQL {'16 (pgserver)'} on this machine; each writer stores 300 results one "
                  "transaction each, 100 keys shared by all writers", "",
                  "| store | writes/s | rows | expected | lost | duplicated | retries | connections killed |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, r in st["results"].items():
            lines.append(f"| {name} | {r['writes_per_s']:.0f} | {r['rows']} | {r['expected_rows']} | "
                         f"{r['lost_rows']} | {r['duplicated_rows']} | {r['retries']} | {r['connections_killed']} |")
        lines.append("")
    if "replay" in doc:
        rp = doc["replay"]
        labels = list(rp["summary"])
        lines += [f"## auto with 2 asks in flight vs 1 (replay, {rp['repeats']} repeats, {rp['max_evals']} "
                  "evaluations)", "", f"- {rp['date']}, commit {rp['commit']}, {rp['machine']}",
                  "- cell: mean fraction of optimum over evaluations 1..N (area under the curve) / at N",
                  "- spread: standard deviation of the fraction at N over the repeats, per space and variant: "
                  + ", ".join(f"{min(s[lab]['final_fraction_sd'] for s in rp['spaces']):.3f}.."
                              f"{max(s[lab]['final_fraction_sd'] for s in rp['spaces']):.3f} ({lab})"
                              for lab in labels),
                  f"- {rp.get('note', '')}", "",
                  "| space | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
        for sp in rp["spaces"]:
            lines.append(f"| {sp['space']} | " + " | ".join(
                f"{sp[lab]['mean_fraction']:.3f} / {sp[lab]['final_fraction']:.3f}" for lab in labels) + " |")
        lines.append("| mean | " + " | ".join(f"{rp['summary'][lab]['mean_fraction']:.3f} / "
                                               f"{rp['summary'][lab]['final_fraction']:.3f}" for lab in labels) + " |")
        lines.append("")
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, axes = plt.subplots(1, len(rp["spaces"]), figsize=(3 * len(rp["spaces"]), 3), sharey=True)
            for ax, sp in zip(np.atleast_1d(axes), rp["spaces"], strict=True):
                for lab in labels:
                    ax.plot(np.arange(1, rp["max_evals"] + 1), sp[lab]["mean_fraction_per_eval"], label=lab)
                ax.set_title(sp["space"].split("/")[-1], fontsize=9)
                ax.set_xlabel("evaluations")
            np.atleast_1d(axes)[0].set_ylabel("fraction of optimum")
            np.atleast_1d(axes)[0].legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(png, dpi=100)
            lines.append(f"![fraction of optimum per evaluation]({png.name})")
        except Exception as exc:  # the plot is a convenience; the numbers above are the result
            lines.append(f"(plot failed: {exc})")
    errors = {k: v for k, v in doc.items() if k.endswith("_error")}
    for k, v in errors.items():
        lines += [f"- {k}: {v['error']}"]
    md.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = study_parser("distributed", __doc__.splitlines()[0])
    ap.add_argument("part", choices=("cpu", "store", "workers", "replay", "gpu", "compile", "report"))
    ap.add_argument("--compile-workers", type=int, default=8, help="compile: CPU-only compile actors")
    ap.add_argument("--backend", default="cuda", help="compile: cuda, or opencl for a PoCL pilot")
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--max-evals", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sample", type=int, default=150, help="gpu: configurations measured per run")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="gpu: end a run after this long (then the runs measured different sets: see 'capped')")
    ap.add_argument("--local", action="store_true", help="gpu/workers: local threads instead of Ray")
    args = parse_study_args(ap, argv, smoke={"repeats": 2, "max_evals": 20, "sample": 10, "jobs": 1})
    out = Path(args.out) / "distributed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.part == "report":
        write_report(json.loads(out.read_text()), out.with_suffix(".md"), out.with_suffix(".png"))
        return 0
    parts = {"cpu": ("store", "workers")}.get(args.part, (args.part,))
    for part in parts:
        print(f"== {part}", flush=True)
        try:
            if part == "store":
                data = bench_store()
                pg = [v for k, v in data.items() if k.startswith("postgresql")]
                _merge(out, "store", {"results": data, "lost_rows": sum(v["lost_rows"] for v in pg),
                                      "duplicated_rows": sum(v["duplicated_rows"] for v in pg)})
            elif part == "workers":
                from adaptune.tuning.spec_file import load_problem

                problem = load_problem(ROOT / "examples" / "matmul" / "problem.py")
                data = bench_workers(problem, "opencl", (1, 2), args.max_evals, 3, 0, use_ray=not args.local)
                _merge(out, "cpu_workers", {"problem": problem.name, "space": len(problem.space),
                                            "executor": "local" if args.local else "ray", **data})
            elif part == "replay":
                data = bench_replay(args.repeats, args.max_evals, args.jobs)
                _merge(out, "replay", data)
            elif part == "compile":
                import ray

                from adaptune.tuning.spec_file import load_problem

                problem = load_problem(ROOT / "examples" / "matmul" / "problem.py", backend=args.backend)
                ray.init(include_dashboard=False, log_to_driver=False)
                data = bench_compile_fanout(problem, args.backend, args.sample, args.compile_workers)
                _merge(out, "compile_fanout", {"problem": problem.name, "sample": args.sample, **data})
            elif part == "gpu":
                from adaptune.tuning.spec_file import load_problem

                problem = load_problem(ROOT / "examples" / "matmul" / "problem.py", backend="cuda")
                use_ray = not args.local
                try:
                    if use_ray:
                        import ray

                        ray.init(num_cpus=8, num_gpus=2, include_dashboard=False, log_to_driver=False,
                                 object_store_memory=2 * 2**30)
                except Exception as exc:  # no Ray on this machine: local threads, said so in the results
                    print(f"  Ray unavailable ({exc}); local threads instead", flush=True)
                    use_ray = False
                def partial(d: dict) -> None:
                    _merge(out, "gpu_partial", d)

                try:
                    data = bench_workers(problem, "cuda", (1, 2), args.sample, 7, 0, use_ray=use_ray,
                                         max_seconds=args.max_seconds, partial=partial)
                except Exception as exc:
                    if not use_ray:
                        raise
                    traceback.print_exc()
                    print(f"  Ray run failed ({exc}); local threads instead", flush=True)
                    use_ray = False
                    data = bench_workers(problem, "cuda", (1, 2), args.sample, 7, 0, use_ray=False,
                                         max_seconds=args.max_seconds, partial=partial)
                    data["ray_error"] = f"{type(exc).__name__}: {exc}"
                two = data["runs"][1]
                if two.get("capped") or data["runs"][0].get("capped"):
                    two["same_best"] = None  # different sets of configurations: no comparison of bests
                _merge(out, "gpu", {"problem": problem.name, "space": len(problem.space), "sample": args.sample,
                                    "executor": "ray" if use_ray else "local", **data,
                                    "speedup_2gpu": two["speedup"], "same_best": two["same_best"]})
        except Exception as exc:  # one part failing must not lose the others
            traceback.print_exc()
            _merge(out, f"{part}_error", {"error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
