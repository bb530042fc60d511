"""Measure the LS-CAT working set on a CUDA device: 20 block shapes x several matrix sizes per kernel.

    python -m benchmarks.lscat.measure --work data/lscat_work --out $OUT --sizes 240,1016,2024 --deadline-s 420

NVRTC compiles cubins in a process pool (all cores) while one measuring worker process runs kernels one
at a time (so timings never share the GPU). A crashed CUDA context (out-of-bounds access) or a hang
costs only its kernel: the worker is replaced by a warm standby. Rows and per-kernel records are
appended to CSV files under --out as they come, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import json
import multiprocessing as mp
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from adaptune.predict import harness

ROW_FIELDS = ["kernel", "size", "bx", "by", "time_us", "status", "time2_us"]
KERNEL_FIELDS = ["kernel", "repo", "function", "two_d", "status", "error", "occ_block", "num_regs",
                 "shared_size_bytes", "local_size_bytes", "const_size_bytes", "max_threads_per_block",
                 "measure_s"]


def _compile(item: dict, cubin_dir: str) -> tuple[str, str | None, str]:
    from adaptune.predict import nvrtc
    path = os.path.join(cubin_dir, item["id"].replace("/", "_") + ".cubin")
    if os.path.exists(path):  # compiled by an earlier call on this machine
        return item["id"], path, ""
    try:
        data = nvrtc.compile_source(item["source"], item["function"], "cubin")
    except nvrtc.NvrtcError as exc:  # compile failures are results
        return item["id"], None, (str(exc).splitlines() or [repr(exc)])[0][:300]
    except Exception as exc:  # noqa: BLE001 - NVRTC bindings unusable here: the worker compiles via CuPy
        return item["id"], "", repr(exc)[:300]
    with open(path, "wb") as f:
        f.write(data)
    return item["id"], path, ""


class Workers:
    """One active measuring process and standbys (imported, no CUDA context); a dead or hung active one is
    replaced by a standby, which creates its context and warms up only then, when nothing else is timed."""

    def __init__(self, sizes: list[int], budget_s: float, standbys: int = 3, rule: str = "2xy",
                 passes: int = 1, batches: int = 3, batch_ms: float = 0.05) -> None:
        self.ctx = mp.get_context("spawn")
        self.sizes, self.budget_s, self.rule, self.passes = sizes, budget_s, rule, passes
        self.batches, self.batch_ms = batches, batch_ms
        self.active = self._start()
        self.standby = [self._start() for _ in range(standbys)]
        self.dead: list = []
        self.restarts = 0

    def _start(self) -> tuple:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=harness.worker_main, args=(child, self.sizes, self.budget_s, self.rule, self.passes,
                                                                        self.batches, self.batch_ms),
                                daemon=True)
        proc.start()
        child.close()
        return proc, parent, False

    def _ready(self, w: tuple, timeout: float) -> tuple:
        """Make ``w`` the measuring worker: started (imports, on the CPU) and then warmed up on the GPU, which
        a standby never does while another worker is timing."""
        proc, conn, ready = w
        if not ready:
            for want in ("ready", "warm"):
                if not conn.poll(timeout):
                    raise RuntimeError(f"worker did not become {want}")
                tag, _ = conn.recv()
                assert tag == want, tag
                if want == "ready":
                    conn.send("warm")
        return proc, conn, True

    def _replace(self) -> None:
        proc, conn, _ = self.active
        if proc.is_alive():
            proc.kill()
        conn.close()
        self.dead.append(proc)  # reaped at close(); joining here would stall on context teardown
        self.active = self.standby.pop(0)
        self.standby.append(self._start())
        self.restarts += 1

    def run(self, item: dict, cubin: str | None, timeout_s: float) -> dict:
        self.active = self._ready(self.active, 120)
        proc, conn, _ = self.active
        conn.send((item, cubin))
        try:
            if conn.poll(timeout_s):
                _tag, res = conn.recv()
                if res["status"] in harness.FATAL:
                    self._replace()
                return res
            status, err = "hang", f"no result in {timeout_s:.0f} s"
        except (EOFError, OSError) as exc:
            status, err = "died", f"worker died: {exc!r} exitcode={proc.exitcode}"
        self._replace()
        return {"id": item["id"], "rows": [], "attrs": {}, "occ_block": None, "status": status, "error": err}

    def close(self) -> None:
        for proc in self.dead:
            proc.join(1)
        for proc, conn, _ in (self.active, *self.standby):
            with contextlib.suppress(OSError):
                conn.send(None)
            proc.join(2)
            if proc.is_alive():
                proc.kill()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="data/lscat_work")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "out/lscat"), "run"),
                    help="folder (default $OUT/run, or out/lscat/run)")
    ap.add_argument("--sizes", default="240,1016,2024")
    ap.add_argument("--deadline-s", type=float, default=420.0, help="stop starting kernels after this long")
    ap.add_argument("--kernel-timeout-s", type=float, default=3.0)
    ap.add_argument("--kernel-budget-s", type=float, default=2.0)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--abort-after", type=int, default=40, help="stop if none of the first N kernels ran ok")
    ap.add_argument("--skip", type=int, default=0, help="skip the first N kernels of the working set")
    ap.add_argument("--exclude", default="", help="file of kernel ids to leave out (measured in an earlier run)")
    ap.add_argument("--include", default="", help="file of kernel ids: measure only these (e.g. re-measure a run's "
                                                  "kernels with other timing settings, to compare noise on one set)")
    ap.add_argument("--rule", default="4xy+64k", help="buffer sizing rule (corpus.BUFFER_RULES)")
    ap.add_argument("--passes", type=int, default=2, help="interleaved timing sweeps over the 20 shapes")
    ap.add_argument("--batches", type=int, default=3, help="batches of back-to-back launches a measurement (median)")
    ap.add_argument("--batch-us", type=float, default=50.0, help="about this long a batch (at most 20 launches)")
    ap.add_argument("--standbys", type=int, default=6, help="warm measuring workers waiting for a crash")
    a = ap.parse_args(argv)
    t0 = time.time()
    sizes = [int(s) for s in a.sizes.split(",")]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    items = [json.loads(line) for line in (Path(a.work) / "workset.jsonl").read_text().splitlines()]
    items = items[a.skip:]
    if a.exclude:
        seen = set(Path(a.exclude).read_text().split())
        items = [it for it in items if it["id"] not in seen]
    if a.include:
        wanted = set(Path(a.include).read_text().split())
        items = [it for it in items if it["id"] in wanted]
    if a.limit:
        items = items[:a.limit]
    cubin_dir = "/tmp/lscat_cubin"
    os.makedirs(cubin_dir, exist_ok=True)

    rows_f = open(out / "rows.csv", "w", newline="")  # noqa: SIM115 - appended to as kernels finish
    kern_f = open(out / "kernels.csv", "w", newline="")  # noqa: SIM115
    rows_w, kern_w = csv.writer(rows_f), csv.DictWriter(kern_f, KERNEL_FIELDS)
    rows_w.writerow(ROW_FIELDS)
    kern_w.writeheader()
    counts: dict[str, int] = {}

    def record(item: dict, res: dict, secs: float) -> None:
        counts[res["status"]] = counts.get(res["status"], 0) + 1
        attrs = res.get("attrs") or {}
        kern_w.writerow({"kernel": item["id"], "repo": item["repo"], "function": item["function"],
                         "two_d": int(bool(item.get("two_d"))), "status": res["status"],
                         "error": res.get("error", "")[:200], "occ_block": res.get("occ_block"),
                         **{k: attrs.get(k) for k in KERNEL_FIELDS[7:12]}, "measure_s": round(secs, 3)})
        for size, bx, by, t, st, *t2 in res.get("rows", []):
            rows_w.writerow([item["id"], size, bx, by, t, st, t2[0] if t2 else None])
        rows_f.flush()
        kern_f.flush()

    # Compile everything first (all cores), then close the pool: the measuring worker and the standbys
    # that replace crashed workers then have the CPU to themselves.
    workers = Workers(sizes, a.kernel_budget_s, a.standbys, a.rule, a.passes, a.batches, a.batch_us / 1000.0)  # they start meanwhile
    compiled: dict[str, tuple[str | None, str]] = {}
    with ProcessPoolExecutor(a.jobs) as pool:
        for fut in as_completed([pool.submit(_compile, it, cubin_dir) for it in items]):
            kid, path, err = fut.result()
            compiled[kid] = (path, err)
    print(f"{time.time() - t0:6.0f}s compiled {len(compiled)}: "
          f"{sum(p is None for p, _ in compiled.values())} NVRTC errors", flush=True)
    done = 0
    for item in items:
        if time.time() - t0 > a.deadline_s:
            print(f"deadline reached after {done} kernels", flush=True)
            break
        path, err = compiled[item["id"]]
        if path is None:
            record(item, {"status": "compile_error", "error": err}, 0.0)
            continue
        ts = time.time()
        res = workers.run(item, path or None, a.kernel_timeout_s)
        if done < 5 or res["status"] != "ok" and done < 20:
            print(item["id"], item["function"], res["status"], res.get("error", "")[:120],
                  res.get("attrs", {}).get("num_regs"), res.get("occ_block"), res.get("rows", [])[:2], flush=True)
        record(item, res, time.time() - ts)
        done += 1
        if done == a.abort_after and not counts.get("ok"):
            print(f"no kernel measured ok in the first {done}: stopping", flush=True)
            break
        if done % 200 == 0:
            print(f"{time.time() - t0:6.0f}s measured {done}: {counts} restarts={workers.restarts}", flush=True)
    workers.close()
    rows_f.close()
    kern_f.close()
    with open(out / "rows.csv", "rb") as src, gzip.open(out / "lscat_h100_rows.csv.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(out / "rows.csv")
    summary = {"kernels_attempted": sum(counts.values()), "status_counts": counts, "sizes": sizes,
               "buffer_rule": a.rule, "passes": a.passes, "batches": a.batches, "batch_us": a.batch_us, "kernel_timeout_s": a.kernel_timeout_s,
               "kernel_budget_s": a.kernel_budget_s,
               "restarts": workers.restarts, "wall_s": round(time.time() - t0, 1)}
    try:
        import cupy as cp
        props = cp.cuda.runtime.getDeviceProperties(0)
        summary.update(device=props["name"].decode(), cupy=cp.__version__,
                       driver=cp.cuda.runtime.driverGetVersion(), runtime=cp.cuda.runtime.runtimeGetVersion())
    except Exception as exc:  # noqa: BLE001
        summary["device_error"] = repr(exc)
    summary["date_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "run_summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
