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
    p.add_argument("--device", default=None, help="device index or name, as `adaptune devices` lists them "
                   "(default: OpenCL: the first that can compile a kernel; CUDA: device 0)")
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

    p = sub.add_parser("import", help="import a Kernel Tuner cache (.json, .json.gz, open form), T4 or CSV file, "
                                      "or another adaptune database")
    p.add_argument("file", help="the file to import")
    p.add_argument("--db", default="adaptune.db", help="results database: SQLite file or SQLAlchemy URL")
    p.add_argument("--name", help="problem name (default: the file's kernel name)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--chunk-size", type=int, default=10_000,
                   help="entries per transaction (a killed import keeps every whole chunk, or nothing of a bulk load "
                        "of a large file into an empty run; default 10000)")
    p.set_defaults(func=_import)

    p = sub.add_parser("export", help="export stored measurements of one problem")
    p.add_argument("--db", default="adaptune.db", help="results database: SQLite file or SQLAlchemy URL")
    p.add_argument("--problem", required=True, help="name of the problem, as `adaptune show` lists it")
    p.add_argument("--format", choices=("kt", "t4", "csv"), default="kt",
                   help="Kernel Tuner cache, T4 results file, or CSV")
    p.add_argument("-o", "--output", required=True,
                   help="file to write; with several devices or inputs, one file each, named after them")
    p.add_argument("--device", help="export only this device (id or name as `adaptune show` lists it; "
                                    "default: every device, one file each)")
    p.add_argument("--input", help="export only this input (id or name; default: every input, one file each)")
    p.set_defaults(func=_export)

    p = sub.add_parser("devices", help="list the devices adaptune can tune on, with their state")
    p.add_argument("--check", action="store_true",
                   help="exit 1 with one line naming the cause and the fix when no OpenCL device can compile "
                        "(default: off, list only)")
    p.set_defaults(func=_devices)

    p = sub.add_parser("plot", help="plot a stored tuning run (PNG)")
    p.add_argument("--db", default="adaptune.db", help="results database: SQLite file or SQLAlchemy URL")
    p.add_argument("--problem", help="the problem to plot (default: the last one stored)")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.set_defaults(func=_plot)


def _device_arg(text: str | None) -> int | str | None:
    """``--device``: an index, a name, or None (the backend's own choice)."""
    return int(text) if text is not None and text.isdigit() else text


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


def _problem_rows(store, name: str | None) -> list:
    problems = store.problems(name)
    if name is not None and not problems:
        raise KeyError(f"no problem named {name!r} in the database")
    return problems


def _show(args: argparse.Namespace) -> int:
    """Per problem: its counts and its ``--top`` fastest results, each read by an indexed query."""
    if args.pareto:
        return _show_pareto(args)
    console = Console()
    store = _open_store(args.db)
    try:
        devices = {d.id: d for d in store.devices()}
        names: dict[int, str] = {}
        for prob in _problem_rows(store, args.problem):
            table = Table(title=f"{prob.name} ({prob.measurements} measurements, {prob.failed} failed)")
            table.add_column("time (ms)", justify="right")
            table.add_column("device")
            table.add_column("input")
            table.add_column("configuration")
            top = store.top(prob.id, args.top)
            if top and len({s.run.input_id for s in top}) > 0:
                names.update({i.id: i.name for i in store.inputs(prob.id)})
            for s in top:
                r = s.result
                table.add_row(f"{r.time_ms:.4f}", devices[s.run.device_id].name, names.get(s.run.input_id, ""),
                              " ".join(f"{k}={v}" for k, v in r.config.items()))
            console.print(table)
        console.print("devices: " + ", ".join(f"{d.name} ({d.platform})" for d in devices.values()))
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
            results = store.results(problem_id=prob.id)
            try:
                front = pareto(results, ox, oy)
            except ObjectiveError as exc:
                raise ObjectiveError(f"problem {prob.name!r}: {exc}") from None
            console.print(f"{prob.name}: Pareto front of {ox.name} vs {oy.name} "
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

                console.print(f"wrote {plot_pareto(results, args.plot, ox, oy, title=prob.name)}")
    finally:
        store.close()
    return 0


def _import(args: argparse.Namespace) -> int:
    """Streamed: one transaction per chunk, memory flat in the size of the file (adaptune.store.importer)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    from adaptune.store import Store
    from adaptune.store.importer import import_file

    path = Path(args.file)
    size = path.stat().st_size if path.is_file() and path.suffix != ".gz" else None
    bar = Progress(TextColumn(f"importing {path.name}"), BarColumn(), DownloadColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), disable=args.quiet or not sys.stderr.isatty(), transient=True)
    with Store(args.db) as store, bar:
        task = bar.add_task("import", total=size)
        report = import_file(store, path, name=args.name, chunk_size=max(1, args.chunk_size),
                             progress=lambda n: bar.update(task, completed=n))
    problems = sorted({run.problem_id for run in report.runs})
    print(f"{report.summary()} into {args.db} as problem {', '.join(map(str, problems))}")
    return 0


def _export(args: argparse.Namespace) -> int:
    """Streamed from the store to the file a chunk at a time (adaptune.store.exporter): every device and input
    of the problem, one file each, or those ``--device``/``--input`` name."""
    from adaptune.store.exporter import export_run

    store = _open_store(args.db)
    try:
        runs = _export_runs(store, args.problem, args.device, args.input)
        devices = {d.id: d.name for d in store.devices()}
        inputs = {i.id: i.name for prob in _problem_rows(store, args.problem) for i in store.inputs(prob.id)}
        paths = [args.output] if len(runs) == 1 else [
            _pair_path(args.output, devices[r.device_id], inputs.get(r.input_id, str(r.input_id))) for r in runs]
        if len(set(paths)) < len(paths):  # same device and input in two problem rows: number them
            paths = [_pair_path(args.output, devices[r.device_id], inputs.get(r.input_id, ""), n)
                     for n, r in enumerate(runs, 1)]
        for run, path in zip(runs, paths, strict=True):
            n = export_run(store, run, path, args.format)
            print(f"wrote {n} measurements ({devices[run.device_id]}, input {inputs.get(run.input_id)}) to {path}")
    finally:
        store.close()
    return 0


def _export_runs(store, name: str, device: str | None, input_name: str | None) -> list:
    """The runs to export: every measured one of the problems called ``name`` (their spaces may differ), or
    those ``--device``/``--input`` name by id or name."""
    devices = {d.id: d.name for d in store.devices()}
    runs, inputs = [], {}
    for prob in _problem_rows(store, name):
        inputs.update({i.id: i.name for i in store.inputs(prob.id)})
        runs += [r.run for r in store.runs(prob.id)]
    for option, text, names, field in (("--device", device, devices, "device_id"),
                                       ("--input", input_name, inputs, "input_id")):
        if text is None:
            continue
        keep = [r for r in runs if text in (str(getattr(r, field)), names.get(getattr(r, field)))]
        if not keep:
            known = ", ".join(sorted({f"{getattr(r, field)} ({names.get(getattr(r, field))})" for r in runs}))
            raise KeyError(f"{option} {text!r} matches none of the measured ones: {known}")
        runs = keep
    if not runs:
        raise ValueError(f"problem {name!r} has no measurements to export")
    return runs


def _pair_path(output: str, device: str, input_name: str, number: int | None = None) -> str:
    """``matmul_t4.json`` -> ``matmul_t4.<device>.<input>.json``: one file per device and input."""
    path = Path(output)
    base, _, ext = path.name.partition(".")
    parts = [device, input_name, *([str(number)] if number else [])]
    slug = ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", t).strip("_") for t in parts)
    return str(path.with_name(f"{base}.{slug}" + (f".{ext}" if ext else "")))


def _devices(args: argparse.Namespace) -> int:
    from adaptune.backends import list_devices
    from adaptune.backends.opencl import select_device as select_opencl_device

    if args.check:
        select_opencl_device(None)  # raises NoUsableDeviceError (one line, exit 1) when none can compile
    table = Table(title="devices")
    for col in ("backend", "index", "name", "platform", "driver", "state"):
        table.add_column(col)
    for backend, index, info in list_devices():
        table.add_row(backend, str(index), info.name, info.platform, info.driver, info.properties.get("state", "ok"))
    Console().print(table)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from adaptune.report.plots import plot_tuning

    store = _open_store(args.db)
    try:
        prob = _problem_rows(store, args.problem)[-1]
        results = sorted(store.results(problem_id=prob.id), key=lambda r: r.timestamp)
    finally:
        store.close()
    plot_tuning(results, args.output, title=prob.name)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
