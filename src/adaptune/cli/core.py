"""Core commands: tune, show, import, export, devices, plot."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import warnings
from pathlib import Path

from rich.console import Console
from rich.table import Table

STRATEGY_HELP = "search strategy (see `adaptune.search.STRATEGIES`; default brute_force)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="tune a kernel: SPEC is a T1 .json file or a .py file defining `problem`")
    p.add_argument("spec", help="a T1 .json file, or a .py file defining `problem` (e.g. examples/matmul/problem.py)")
    p.add_argument("--strategy", default="brute_force", help=STRATEGY_HELP)
    p.add_argument("--max-evals", type=int, help="stop after this many configurations (default: no limit)")
    p.add_argument("--max-seconds", type=float, help="stop after this many seconds of wall clock (default: no limit)")
    p.add_argument("--repeats", type=int, default=7, help="timed runs of each configuration")
    p.add_argument("--backend", choices=("opencl", "cuda", "python"), default="opencl",
                   help="where kernels run (OpenCL: PoCL on any CPU)")
    p.add_argument("--device", default="0", help="device index or name")
    p.add_argument("--db", default="adaptune.db", help="results database: SQLite file or SQLAlchemy URL")
    p.add_argument("--seed", type=int, help="seed of the search strategy (default: a fresh random seed)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds before one configuration is killed")
    p.add_argument("--observe", action="append", default=[], help="observer, e.g. nvml (read-only; may be repeated; default: none)")
    p.add_argument("--discard-factor", type=float, default=2.0,
                   help="stop repeating a configuration whose first run is this many times slower than the "
                        "best so far (0: measure every repeat)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar (it is drawn only on a terminal anyway)")
    p.add_argument("--plot", help="also write a PNG plot of the run (default: no plot)")
    p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="measure on Ray actors (one per GPU; docs/distributed.md): the cluster at ADDRESS "
                        "(e.g. auto, head:6379), or a local one when no address is given (default: no Ray)")
    p.add_argument("--workers", type=int, help="parallel measurement workers (Ray actors, or local devices "
                                                "from --device on without --ray; default: one)")
    p.set_defaults(func=_tune)

    p = sub.add_parser("show", help="list what a results database holds")
    p.add_argument("--db", default="adaptune.db", help="results database: SQLite file or SQLAlchemy URL")
    p.add_argument("--problem", help="only this problem (default: every problem)")
    p.add_argument("--top", type=int, default=5, help="best configurations listed per problem")
    p.add_argument("--pareto", action="store_true",
                   help="the Pareto front of time vs energy per call (needs measurements with --observe nvml)")
    p.add_argument("--objectives", default="time,energy",
                   help="with --pareto: two objectives, built-in names or expressions (default time,energy)")
    p.add_argument("--plot", help="with --pareto: also write the front as a PNG (default: no plot)")
    p.set_defaults(func=_show)

    p = sub.add_parser("import", help="import a Kernel Tuner cache (.json, .json.gz, open form) or T4 file")
    p.add_argument("file", help="the file to import")
    p.add_argument("--db", default="adaptune.db", help="results database: SQLite file or SQLAlchemy URL")
    p.add_argument("--name", help="problem name (default: the file's kernel name)")
    p.set_defaults(func=_import)

    p = sub.add_parser("export", help="export stored measurements of one problem")
    p.add_argument("--db", default="adaptune.db", help="results database: SQLite file or SQLAlchemy URL")
    p.add_argument("--problem", required=True, help="name of the problem, as `adaptune show` lists it")
    p.add_argument("--format", choices=("kt", "t4", "csv"), default="kt",
                   help="Kernel Tuner cache, T4 results file, or CSV (one table, with device and input columns)")
    p.add_argument("-o", "--output", required=True,
                   help="file to write; with several devices or inputs, one file each, named after them")
    p.add_argument("--device", help="export only this device (id or name as `adaptune show` lists it; "
                                    "default: every device, one file each)")
    p.add_argument("--input", help="export only this input (id or name; default: every input, one file each)")
    p.set_defaults(func=_export)

    p = sub.add_parser("devices", help="list the devices adaptune can tune on")
    p.set_defaults(func=_devices)

    p = sub.add_parser("plot", help="plot a stored tuning run (PNG)")
    p.add_argument("--db", default="adaptune.db", help="results database: SQLite file or SQLAlchemy URL")
    p.add_argument("--problem", help="the problem to plot (default: the last one stored)")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.set_defaults(func=_plot)


def _device_arg(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _tune(args: argparse.Namespace) -> int:
    from adaptune.tuning import TuningFailedWarning, tune
    from adaptune.tuning.spec_file import load_problem

    problem = load_problem(args.spec, backend=args.backend)
    with warnings.catch_warnings():  # a failed run is reported below, as an error with an exit code
        warnings.simplefilter("ignore", TuningFailedWarning)
        report = tune(problem, args.strategy, max_evals=args.max_evals, max_seconds=args.max_seconds,
                      repeats=args.repeats, backend=args.backend, device=_device_arg(args.device), db=args.db,
                      seed=args.seed, progress=not (args.json or args.quiet), timeout_s=args.timeout,
                      observers=tuple(args.observe), discard_factor=args.discard_factor or None,
                      executor="ray" if args.ray is not None else None, address=args.ray or None,
                      n_parallel=args.workers)
    if args.plot:
        from adaptune.report.plots import plot_tuning

        plot_tuning(report.results, args.plot, title=f"{problem.name} on {report.device.name}")
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print_report(report)
    summary = report.failure_summary()
    if summary:
        print(f"adaptune tune: error: {summary}", file=sys.stderr)
        return 1
    return 0


def print_report(report, k: int = 5, console: Console | None = None) -> None:
    """Top-k table plus the speed-up of the best over the default configuration."""
    console = console or Console()
    table = Table(title=f"{report.problem} on {report.device.name}: top {k} of {report.evaluated} evaluated")
    table.add_column("rank", justify="right")
    table.add_column("time (ms)", justify="right")
    table.add_column("configuration")
    for rank, r in enumerate(report.top(k), 1):
        table.add_row(str(rank), f"{r.time_ms:.4f}", " ".join(f"{k}={v}" for k, v in r.config.items()))
    console.print(table)
    speedup = report.speedup_over_default
    console.print(f"evaluated {report.evaluated} ({report.failed} failed, {report.reused} reused from the store) "
                  f"in {report.wall_s:.1f} s")
    if math.isfinite(speedup):
        console.print(f"best {report.best_time_ms:.4f} ms vs default {report.default_time_ms:.4f} ms: "
                      f"[bold]{speedup:.2f}x[/bold] speed-up over the default configuration")
    console.print(f"database: {report.db}")


def _open_store(path: str):
    from adaptune.store import Store

    if "://" not in path and not Path(path).exists():
        raise FileNotFoundError(f"no such database: {path}")
    return Store(path)


def _problem_rows(store, name: str | None) -> list[dict]:
    problems = store.problems()
    if name is not None:
        problems = [p for p in problems if p["name"] == name]
        if not problems:
            raise KeyError(f"no problem named {name!r} in the database")
    return problems


def _show(args: argparse.Namespace) -> int:
    if args.pareto:
        return _show_pareto(args)
    console = Console()
    store = _open_store(args.db)
    try:
        devices = {d["id"]: d for d in store.devices()}
        for prob in _problem_rows(store, args.problem):
            rows = [(d["name"], r) for d in devices.values()
                    for r in store.results(problem_id=prob["id"], device_id=d["id"])]
            ok = sorted(((name, r) for name, r in rows if r.ok), key=lambda row: row[1].time_ms)
            table = Table(title=f"{prob['name']} ({len(rows)} measurements, {len(rows) - len(ok)} failed)")
            table.add_column("time (ms)", justify="right")
            table.add_column("device")
            table.add_column("configuration")
            for name, r in ok[: args.top]:
                table.add_row(f"{r.time_ms:.4f}", name, " ".join(f"{k}={v}" for k, v in r.config.items()))
            console.print(table)
        console.print("devices: " + ", ".join(f"{d['name']} ({d['platform']})" for d in devices.values()))
    finally:
        store.close()
    return 0


def _show_pareto(args: argparse.Namespace) -> int:
    from adaptune.adaptive.objectives import ObjectiveError, energy_vs_time, objective, pareto

    names = [n.strip() for n in args.objectives.split(",") if n.strip()]
    if len(names) != 2:
        raise ValueError(f"--objectives takes two objectives separated by a comma, got {args.objectives!r}")
    ox, oy = objective(names[0]), objective(names[1])
    console = Console()
    store = _open_store(args.db)
    try:
        for prob in _problem_rows(store, args.problem):
            results = store.results(problem_id=prob["id"])
            try:
                front = pareto(results, ox, oy)
            except ObjectiveError as exc:
                raise ObjectiveError(f"problem {prob['name']!r}: {exc}") from None
            console.print(f"{prob['name']}: Pareto front of {ox.name} vs {oy.name} "
                          f"({len(front)} of {len(results)} measurements)", soft_wrap=True)
            table = Table()
            table.add_column(f"{ox.name} ({ox.unit})" if ox.unit else ox.name, justify="right")
            table.add_column(f"{oy.name} ({oy.unit})" if oy.unit else oy.name, justify="right")
            table.add_column("configuration")
            for r in front:
                table.add_row(f"{ox(r):.6g}", f"{oy(r):.6g}", " ".join(f"{k}={v}" for k, v in r.config.items()))
            console.print(table)
            if (ox.name, oy.name) == ("time", "energy"):
                cmp = energy_vs_time(results)
                console.print(f"energy-optimal saves {100 * cmp['energy_saved_fraction']:.1f} % energy per call "
                              f"against the time-optimal configuration, at {100 * cmp['time_cost_fraction']:+.1f} % "
                              "time", soft_wrap=True)
            if args.plot:
                from adaptune.report.plots import plot_pareto

                console.print(f"wrote {plot_pareto(results, args.plot, ox, oy, title=prob['name'])}")
    finally:
        store.close()
    return 0


def _import(args: argparse.Namespace) -> int:
    from adaptune.store import load_recorded

    recorded = load_recorded(args.file)
    store = _open_store_create(args.db)
    try:
        ids = recorded.to_store(store, name=args.name)
    finally:
        store.close()
    print(f"imported {len(recorded.results)} measurements of {recorded.kernel_name} "
          f"({recorded.device_name}) into {args.db} as problem {ids[1]}")
    return 0


def _open_store_create(path: str):
    from adaptune.store import Store

    return Store(path)


def _export(args: argparse.Namespace) -> int:
    from adaptune.store import RecordedSpace, write_recorded

    store = _open_store(args.db)
    try:
        recorded = [RecordedSpace.from_store(store, device_id=d, problem_id=p, input_id=i)
                    for p, d, i in _export_triples(store, args.problem, args.device, args.input)]
    finally:
        store.close()
    if args.format == "csv":  # one table: a device and an input column tell the rows apart
        _write_csv(args.output, recorded)
        print(f"wrote {sum(len(r.results) for r in recorded)} measurements "
              f"({len(recorded)} device/input pairs) to {args.output}")
        return 0
    paths = [args.output] if len(recorded) == 1 else [_pair_path(args.output, r) for r in recorded]
    if len(set(paths)) < len(paths):  # same device and input in two problem rows: number them
        paths = [_pair_path(args.output, r, n) for n, r in enumerate(recorded, 1)]
    for r, path in zip(recorded, paths, strict=True):
        write_recorded(path, r, args.format)
        print(f"wrote {len(r.results)} measurements ({r.device_name}, input {r.meta['input_name']}) to {path}")
    return 0


def _export_triples(store, name: str, device: str | None, input_name: str | None) -> list[tuple[int, int, int]]:
    """(problem, device, input) ids to export: every measured one of the problems called ``name`` (their
    spaces may differ), or those ``--device``/``--input`` name by id or name."""
    devices = {d["id"]: d["name"] for d in store.devices()}
    triples, inputs = [], {}
    for prob in _problem_rows(store, name):
        inputs.update({i["id"]: i["name"] for i in store.inputs(prob["id"])})
        triples += [(prob["id"], d, i) for d, i in store.measured_pairs(prob["id"])]
    for option, text, names, pos in (("--device", device, devices, 1), ("--input", input_name, inputs, 2)):
        if text is None:
            continue
        keep = [t for t in triples if text in (str(t[pos]), names.get(t[pos]))]
        if not keep:
            known = ", ".join(sorted({f"{t[pos]} ({names.get(t[pos])})" for t in triples}))
            raise KeyError(f"{option} {text!r} matches none of the measured ones: {known}")
        triples = keep
    if not triples:
        raise ValueError(f"problem {name!r} has no measurements to export")
    return triples


def _pair_path(output: str, recorded, number: int | None = None) -> str:
    """``matmul_t4.json`` -> ``matmul_t4.<device>.<input>.json``: one file per device and input."""
    path = Path(output)
    base, _, ext = path.name.partition(".")
    parts = [recorded.device_name, str(recorded.meta["input_name"]), *([str(number)] if number else [])]
    slug = ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", t).strip("_") for t in parts)
    return str(path.with_name(f"{base}.{slug}" + (f".{ext}" if ext else "")))


def _write_csv(path: str, recorded: list) -> None:
    import csv

    names = list(dict.fromkeys(n for r in recorded for n in r.params))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["device", "input", *names, "status", "time_ms", "compile_ms", "samples"])
        for rec in recorded:
            for r in rec.results:
                w.writerow([rec.device_name, rec.meta["input_name"], *(r.config.get(n) for n in names),
                            str(r.status), r.time_ms if math.isfinite(r.time_ms) else "", r.compile_ms,
                            " ".join(f"{s:.6g}" for s in r.samples)])


def _devices(args: argparse.Namespace) -> int:
    from adaptune.backends import list_devices

    table = Table(title="devices")
    for col in ("backend", "index", "name", "platform", "driver"):
        table.add_column(col)
    for backend, index, info in list_devices():
        table.add_row(backend, str(index), info.name, info.platform, info.driver)
    Console().print(table)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from adaptune.report.plots import plot_tuning

    store = _open_store(args.db)
    try:
        prob = _problem_rows(store, args.problem)[-1]
        results = sorted(store.results(problem_id=prob["id"]), key=lambda r: r.timestamp)
    finally:
        store.close()
    plot_tuning(results, args.output, title=prob["name"])
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
