"""How long does the dashboard take to open a page when the store holds a million measurements?

Builds a SQLite store (in ``--out``) with one large run of ``--rows`` measurements of a 10-parameter
space (3 % failures with error text) beside a few small runs, then times, through the dashboard's own
code (the queries it sends through the store interface, and the plotly figures and grid rows it
builds from the answers), what each page needs: the front page's runs table, the run page (header,
trajectories, histogram, parameter views of the fastest 1,000), the first block of the configuration
table sorted by time, sorted by a parameter and filtered by status, the comparison page and the live
poll. Target: every page of the large run under one second (p50) on this 2-core host.

    python -m benchmarks.dashboard_scale.run [--rows 1000000] [--out out/dashboard_scale]
    python -m benchmarks.dashboard_scale.run --profile smoke      # 10,000 rows, seconds

Writes OUT/dashboard_scale_<rows>.{json,md}; the store is kept in OUT (git-ignored) for reuse.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

from adaptune.dashboard import layout
from adaptune.dashboard.queries import DashboardQueries
from adaptune.dashboard.server import RUN_PARTS
from adaptune.records import DeviceInfo, Result, Status
from adaptune.store import Store
from adaptune.store.base import RunKey
from benchmarks.harness import parse_study_args, run_metadata, study_parser, time_host, write_results

PARAMS = [f"p{i}" for i in range(10)]
TARGET_S = 1.0


def results(rows: int, seed: int = 0) -> Iterator[Result]:
    """``rows`` distinct configurations (parameter j is digit j of the row number), log-normal times."""
    rng = random.Random(seed)
    start = time.time() - rows * 0.01
    for i in range(rows):
        config = {p: (i // 10 ** j) % 10 for j, p in enumerate(PARAMS)}
        if rng.random() < 0.03:
            yield Result(config=config, status=Status.COMPILE_ERROR, time_ms=float("inf"),
                         error=f"error: kernel.cl:{i % 97}: p3={config['p3']} is refused", timestamp=start + i * 0.01)
        else:
            t = rng.lognormvariate(0.0, 0.4) * (1 + config["p0"] / 10)
            yield Result(config=config, status=Status.OK, time_ms=t, samples=[t], timestamp=start + i * 0.01)


def build(path: Path, rows: int) -> RunKey:
    """The store: one run of ``rows`` measurements and three small ones (reused when already built)."""
    device = DeviceInfo(name="synthetic device", platform="benchmark")
    space = {"params": {p: list(range(10)) for p in PARAMS}, "defaults": {p: 0 for p in PARAMS}}
    with Store(path) as store:
        large = store.run(device, "large", "scale", "default", space_desc=space)
        if store.count(problem_id=large.problem_id, device_id=large.device_id, input_id=large.input_id) < rows:
            store.put_stream(large, results(rows))
        for k in range(3):
            small = store.run(device, f"small_{k}", "scale", "default", space_desc=space)
            store.put_stream(small, results(200, seed=k + 1))
    return large


def pages(queries: DashboardQueries, run: RunKey) -> dict[str, object]:
    """What each page (or page action) asks and builds, as a callable to time."""
    view = queries.run_view(run)
    params = view.params if view else []
    return {
        "live poll (newest row id)": queries.version,
        "front page: runs table": queries.run_rows,
        "run page: layout": lambda: layout.run_page(queries.run_view(run)),
        **{f"run page: {part.__name__.removeprefix('run_')}": (lambda part=part: part(queries, run))
           for part in RUN_PARTS},
        "table: first block by time": lambda: queries.table_page(run, 0, 100, [], {}, params),
        "table: block 5,000 by time": lambda: queries.table_page(run, 5000, 5100, [], {}, params),
        "table: sorted by a parameter": lambda: queries.table_page(
            run, 0, 100, [{"colId": "p:p3", "sort": "desc"}], {}, params),
        "table: filtered by status": lambda: queries.table_page(
            run, 0, 100, [], {"status": {"filter": "compile_error"}}, params),
        "compare page": lambda: queries.compare(run.problem_id),
    }


def main(argv: list[str] | None = None) -> None:
    parser = study_parser("dashboard_scale", __doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="measurements of the large run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parse_study_args(parser, argv, smoke={"rows": 10_000, "repeats": 3})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    db = out / f"dashboard_scale_{args.rows}.db"
    t0 = time.perf_counter()
    run = build(db, args.rows)
    build_s = time.perf_counter() - t0
    table = []
    with Store(db) as store:
        queries = DashboardQueries(store)
        for name, fn in pages(queries, run).items():
            timing = time_host(fn, warmup=1, repeats=args.repeats)
            table.append({"page": name, "p50_ms": timing["p50"] * 1e3, "p90_ms": timing["p90"] * 1e3,
                          "max_ms": timing["max"] * 1e3, "under_1s": timing["p50"] < TARGET_S})
    data = {"rows": args.rows, "build_s": build_s, "target_s": TARGET_S, "pages": table,
            "all_under_target": all(r["under_1s"] for r in table)}
    path = write_results(out, f"dashboard_scale_{args.rows}", data, table=table,
                         title=f"Dashboard pages over a store of {args.rows:,} measurements",
                         metadata=run_metadata(device="host CPU (SQLite)"))
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
