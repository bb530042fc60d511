"""Distributed tuning benchmarks: parallel workers, a shared PostgreSQL store, parallel asks.

    python benchmarks/distributed.py cpu     # this machine: Ray 1 vs 2 PoCL workers, 4 writers PG vs SQLite
    python benchmarks/distributed.py replay  # auto with 2 asks in flight vs 1 on the recorded spaces
    python benchmarks/distributed.py gpu     # 2 GPUs: the matmul CUDA problem on 1 vs 2 Ray actors

Every part writes its numbers into benchmarks/results/distributed.json (merged, so parts run on different
machines share one file) and a line into the markdown summary. A part that fails records its error.
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SRC = str(ROOT / "src")


def _commit() -> str:
    env = os.environ.get("ADAPTUNE_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _host() -> dict:
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": _commit(),
            "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} CPUs",
            "python": platform.python_version()}


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
                  seed: int, address: str | None = None, use_ray: bool = True) -> dict:
    """The same fixed set of configurations (seeded random order, all of them or ``max_evals``) measured on
    1, 2, ... workers: wall time, speed-up, and whether the best configuration is the same."""
    from adaptune.tuning import tune

    runs = []
    for n in counts:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            rep = tune(problem, "random", max_evals=max_evals, repeats=repeats, backend=backend,
                       db=str(Path(tmp) / "w.db"), seed=seed, progress=False,
                       executor="ray" if use_ray else "local", n_parallel=n, address=address)
            wall = time.perf_counter() - t0
        keys = sorted(problem.space.key(r.config) for r in rep.results)
        runs.append({"workers": n, "wall_s": wall, "evaluated": rep.evaluated, "failed": rep.failed,
                     "best": rep.best, "best_time_ms": rep.best_time_ms, "device": rep.device.name,
                     "kinds": 1 + len(rep.others), "configs_hash": hash(tuple(keys)) & 0xFFFFFFFF,
                     "times": {problem.space.key(r.config): r.time_ms for r in rep.results if r.ok}})
        print(f"  {n} worker(s): {wall:.1f} s, {rep.evaluated} evaluated, best {rep.best_time_ms:.4f} ms "
              f"{rep.best}", flush=True)
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
    print(json.dumps({"seconds": time.perf_counter() - t0, "retries": store.retries}))
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
            "wall_s": wall, "writes_per_s": writes / wall,
            "mean_writer_s": float(np.mean([s["seconds"] for s in stats])) if stats else None,
            "retries": sum(s["retries"] for s in stats), "connections_killed": kills, "errors": errors}


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


def _replay_one(args: tuple) -> dict:
    path, variants, repeats, max_evals = args
    from adaptune.search.base import Budget
    from adaptune.search.replay import Replay

    rp = Replay.from_file(path)
    out = {}
    for label, n_parallel, opts in variants:
        curves = [_fraction_curve(rp.run("auto", Budget(max_evals=max_evals), seed=s, n_parallel=n_parallel,
                                         **opts).values, rp.optimum, max_evals) for s in range(repeats)]
        c = np.asarray(curves)
        out[label] = {"mean_fraction_per_eval": c.mean(0).round(4).tolist(),
                      "mean_fraction": float(c.mean()), "final_fraction": float(c[:, -1].mean()),
                      "final_fraction_sd": float(c[:, -1].std())}
    return {"space": rp.name, "size": len(rp.space), **out}


def bench_replay(repeats: int, max_evals: int, jobs: int) -> dict:
    from concurrent.futures import ProcessPoolExecutor

    spaces = sorted((ROOT / "data" / "benchmark_hub" / "convolution_milo").glob("*.json.gz"))
    variants = [("1 worker", 1, {}), ("2 workers, constant liar", 2, {"liar": "min"}),
                ("2 workers, no liar", 2, {})]
    tasks = [(str(p), variants, repeats, max_evals) for p in spaces]
    with ProcessPoolExecutor(jobs) as pool:
        per_space = list(pool.map(_replay_one, tasks))
    summary = {}
    for label, _, _ in variants:
        summary[label] = {"mean_fraction": float(np.mean([s[label]["mean_fraction"] for s in per_space])),
                          "final_fraction": float(np.mean([s[label]["final_fraction"] for s in per_space]))}
    for s in per_space:
        print(f"  {s['space']}: " + ", ".join(f"{lab}: {s[lab]['mean_fraction']:.3f}/{s[lab]['final_fraction']:.3f}"
                                            for lab, _, _ in variants), flush=True)
    return {"repeats": repeats, "max_evals": max_evals, "strategy": "auto", "summary": summary,
            "spaces": per_space}


# ------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=("cpu", "store", "workers", "replay", "gpu"))
    ap.add_argument("--out", default=str(RESULTS / "distributed.json"))
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--max-evals", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sample", type=int, default=300, help="gpu: configurations measured per run")
    ap.add_argument("--local", action="store_true", help="gpu/workers: local threads instead of Ray")
    args = ap.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
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
                sys.path.insert(0, str(ROOT / "examples" / "matmul"))
                from adaptune.tuning.spec_file import load_problem

                problem = load_problem(ROOT / "examples" / "matmul" / "problem.py")
                data = bench_workers(problem, "opencl", (1, 2), args.max_evals, 3, 0, use_ray=not args.local)
                _merge(out, "cpu_workers", {"problem": problem.name, "space": len(problem.space),
                                            "executor": "local" if args.local else "ray", **data})
            elif part == "replay":
                data = bench_replay(args.repeats, args.max_evals, args.jobs)
                _merge(out, "replay", data)
            elif part == "gpu":
                from adaptune.tuning.spec_file import load_problem

                problem = load_problem(ROOT / "examples" / "matmul" / "problem.py", backend="cuda")
                use_ray = not args.local
                try:
                    if use_ray:
                        import ray

                        ray.init(num_cpus=8, num_gpus=2, include_dashboard=False, log_to_driver=False,
                                 object_store_memory=300 * 2**20)
                except Exception as exc:  # no Ray on this machine: local threads, said so in the results
                    print(f"  Ray unavailable ({exc}); local threads instead", flush=True)
                    use_ray = False
                data = bench_workers(problem, "cuda", (1, 2), args.sample, 7, 0, use_ray=use_ray)
                two = data["runs"][1]
                _merge(out, "gpu", {"problem": problem.name, "space": len(problem.space), "sample": args.sample,
                                    "executor": "ray" if use_ray else "local", **data,
                                    "speedup_2gpu": two["speedup"], "same_best": two["same_best"]})
        except Exception as exc:  # one part failing must not lose the others
            traceback.print_exc()
            _merge(out, f"{part}_error", {"error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
