"""The Dash app: routing, callbacks and live updates over one read-only store.

Dash serves plotly.js, AG Grid and its own React bundle from the installed packages
(``serve_locally``), so the page works offline. Live updates are a 2-second timer that asks the store
for its newest row id; plots and tables are read again only when it moved. A store that cannot be
opened or read gives a page saying why (the store's one-line message), never a traceback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from dash import Dash, Input, Output, State, dcc, html, no_update

from adaptune.dashboard import figures as F
from adaptune.dashboard import layout as L
from adaptune.dashboard.queries import DashboardQueries, parse_run_path, row_dict
from adaptune.dashboard.selection import SavedModel, selection
from adaptune.store import Store, StoreError
from adaptune.store.base import RunKey
from adaptune.store.db import is_sqlite_file

ASSETS = Path(__file__).resolve().parent / "assets"
READ_ERRORS = (StoreError, KeyError, OSError, ValueError)


class StoreSource:
    """Opens the store on first use and again after a failure, so a page shows the error and a later
    reload recovers once the database is back. An SQLite file is opened read-only (SQLite refuses every
    write) and must exist: the dashboard never creates or changes a database."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._queries: DashboardQueries | None = None
        self._lock = threading.Lock()

    def queries(self) -> DashboardQueries:
        with self._lock:
            if self._queries is None:
                self._queries = DashboardQueries(self._open())
            return self._queries

    def _open(self) -> Store:
        if "://" in self.target:
            return Store(self.target)
        path = Path(self.target).expanduser()
        if not is_sqlite_file(path):
            what = "is not an SQLite database" if path.exists() else "does not exist"
            raise StoreError(f"{self.target} {what}: give the database a tuning run wrote to "
                             "(a file, or a postgresql:// URL)")
        try:
            return Store(f"sqlite:///file:{quote(str(path.resolve()))}?mode=ro&uri=true")
        except StoreError as exc:
            cause = str(exc).split(": ", 1)[-1].removeprefix("cannot open: ").removeprefix("cannot write: ")
            if "readonly database" in cause:
                cause = ("it is not an adaptune database of this version (one written by an older adaptune is "
                         "upgraded by any command that writes to it, e.g. adaptune show)")
            raise StoreError(f"{self.target}: {cause}") from exc

    def reset(self) -> None:
        with self._lock:
            if self._queries is not None:
                self._queries.store.close()
            self._queries = None


def _label(target: str) -> str:
    """The store as the header names it: a path, or a URL without its password."""
    if "://" in target:
        try:
            return sa.engine.make_url(target).render_as_string(hide_password=True)
        except sa.exc.ArgumentError:
            return target
    return target


def create_app(target: str, *, models: Sequence[str | Path] = (), refresh_ms: int = 2000) -> Dash:
    """The dashboard over the store at ``target`` (path or URL); ``models``: saved code-variant models."""
    source = StoreSource(str(target))
    loaded: dict[str, SavedModel] = {}
    model_errors: list[str] = []
    for path in models:
        try:
            model = SavedModel.load(path)
            loaded[f"{model.name} ({Path(path).name})"] = model
        except (OSError, ValueError) as exc:
            model_errors.append(str(exc))
    app = Dash(__name__, assets_folder=str(ASSETS), title="adaptune dashboard", update_title=None,
               suppress_callback_exceptions=True, serve_locally=True)
    app.layout = L.shell(_label(str(target)), refresh_ms)
    _register(app, source, loaded, model_errors)
    return app


def _guard(source: StoreSource, fallback: Callable[[str], Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Run a callback; a store that cannot be read answers ``fallback(message)`` and is reopened next time."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any) -> Any:
            try:
                return fn(*args)
            except READ_ERRORS as exc:
                source.reset()
                return fallback(str(exc))
        inner.__name__ = fn.__name__
        return inner
    return wrap


def next_version(seen: Any, latest: int) -> Any:
    """The page's next version (``no_update``: none) from the one it has and the store's newest row id: the id,
    and whether a poll has passed since it moved. Views redraw when it moves and once more when it settles: a
    redraw asked for while the server was busy can be lost (Dash drops a response that a newer request overtook;
    a refresh that failed leaves the old view), and the settling one, asked for once the writes have stopped,
    makes the page end on what the store holds."""
    if not isinstance(seen, dict):  # the page's first poll: its views have just been drawn
        return {"id": latest, "settled": True}
    if seen.get("id") != latest:
        return {"id": latest, "settled": False}
    return no_update if seen.get("settled") else {"id": latest, "settled": True}


def _register(app: Dash, source: StoreSource, models: dict[str, SavedModel], model_errors: list[str]) -> None:
    @app.callback(Output("version", "data"), Output("live", "children"), Output("live", "className"),
                  Input("tick", "n_intervals"), State("version", "data"))
    def poll(_n: int | None, seen: dict[str, Any] | None) -> tuple[Any, str, str]:
        try:
            latest = source.queries().version()
        except READ_ERRORS:
            source.reset()
            return no_update, "store unreadable", "live down"
        return next_version(seen, latest), f"live · newest row {latest}", "live"

    @app.callback(Output("page", "children"), Input("url", "pathname"))
    def route(path: str | None) -> Any:
        path = path or "/"
        try:
            queries = source.queries()
            if path == "/":
                return L.home_page()
            run = parse_run_path(path)
            if run is not None:
                view = queries.run_view(run)
                if view is None:
                    return L.error_page("No such run", f"the store holds no run at {path}")
                return L.run_page(view)
            parts = path.strip("/").split("/")
            if len(parts) == 2 and parts[1].isdigit() and parts[0] in ("problem", "inputs"):
                problem_id = int(parts[1])
                name = queries.problem_name(problem_id)
                if parts[0] == "problem":
                    return L.compare_page(name, problem_id, queries.compare_runs(problem_id))
                devices = [{"id": d.id, "name": d.name} for d in queries.store.devices() if d.measurements]
                return L.inputs_page(name, problem_id, devices,
                                     [k for k, m in models.items() if m.name == name] or [])
            return L.error_page("Page not found", f"nothing is served at {path}")
        except KeyError as exc:
            return L.error_page("Not found", str(exc).strip("'\""))
        except READ_ERRORS as exc:
            source.reset()
            return L.error_page("Cannot read the store", str(exc))

    # ------------------------------------------------------------------ problems and runs
    @app.callback(Output("runs-grid", "rowData"), Output("problem-links", "children"),
                  Input("version", "data"), Input("runs-grid", "id"))
    @_guard(source, lambda msg: ([], [html.P(msg, className="error-text")]))
    def home(_version: Any, _grid: str) -> tuple[Any, Any]:
        queries = source.queries()
        named: dict[str, int] = {}  # one entry per name: its pages cover every problem of that name
        for p in queries.store.problems():
            if p.measurements:
                named.setdefault(p.name, p.id)
        problems = [{"id": pid, "name": name} for name, pid in named.items()]
        return queries.run_rows(), L.problem_links(problems)

    @app.callback(Output("url", "pathname"), Input("runs-grid", "cellClicked"), prevent_initial_call=True)
    def open_run(cell: dict[str, Any] | None) -> Any:
        row_id = (cell or {}).get("rowId")
        return row_id if isinstance(row_id, str) and parse_run_path(row_id) else no_update

    # ------------------------------------------------------------------ one run
    # four callbacks, so that what is cheap (header, parameter views) shows at once and what scans the
    # whole run (trajectory, histogram) follows; Dash sends them as parallel requests
    def run_callback(outputs: list[Output], content: Callable[[DashboardQueries, RunKey], tuple[Any, ...] | None],
                     failed: Callable[[str], tuple[Any, ...]]) -> None:
        @app.callback(*outputs, Input("version", "data"), Input("run-key", "data"))
        @_guard(source, failed)
        def update(_version: Any, key: list[int]) -> Any:
            found = content(source.queries(), RunKey(*key)) or failed("this run is no longer in the store")
            return found[0] if len(outputs) == 1 else found  # Dash wants one output's value bare
        update.__name__ = f"run_{content.__name__}"

    def figures_failed(n: int) -> Callable[[str], tuple[Any, ...]]:
        return lambda msg: tuple(F.empty("", msg) for _ in range(n))

    run_callback([Output("run-header", "children"), Output("best-code", "children")], run_header,
                 lambda msg: ([html.P(msg, className="error-text")], no_update))
    run_callback([Output("fig-trajectory-evals", "figure"), Output("fig-trajectory-time", "figure")],
                 run_trajectory, figures_failed(2))
    run_callback([Output("fig-spread", "figure")], run_spread, figures_failed(1))
    run_callback([Output("fig-parcoords", "figure"), Output("fig-params", "figure"),
                  Output("energy-section", "children")], run_parameters,
                 lambda msg: (F.empty("", msg), F.empty("", msg), []))

    @app.callback(Output("config-grid", "getRowsResponse"), Input("config-grid", "getRowsRequest"),
                  State("run-key", "data"), State("run-params", "data"), prevent_initial_call=True)
    @_guard(source, lambda msg: {"rowData": [], "rowCount": 0})
    def config_rows(request: dict[str, Any] | None, key: list[int], params: list[str]) -> Any:
        if not request:
            return no_update
        rows, total = source.queries().table_page(RunKey(*key), request.get("startRow", 0),
                                                  request.get("endRow", 100), request.get("sortModel") or [],
                                                  request.get("filterModel") or {}, params)
        return {"rowData": rows, "rowCount": total}

    # new rows in the store: the grid asks the store again for the blocks it shows (sort, filter, scroll kept)
    app.clientside_callback(
        """function(version, id) {
            try { const api = dash_ag_grid.getApi(id); if (api) { api.refreshInfiniteCache(); } } catch (e) {}
            return window.dash_clientside.no_update;
        }""",
        Output("config-grid-refreshed", "data"), Input("version", "data"), State("config-grid", "id"),
        prevent_initial_call=True)

    # ------------------------------------------------------------------ compare
    @app.callback(Output("fig-compare-evals", "figure"), Output("fig-compare-time", "figure"),
                  Output("fig-devices", "figure"), Output("fig-inputs", "figure"), Output("compare-runs", "children"),
                  Input("version", "data"), Input("problem-id", "data"))
    @_guard(source, lambda msg: (*(F.empty("", msg) for _ in range(4)), no_update))
    def compare(_version: Any, problem_id: int) -> tuple[Any, ...]:
        data = source.queries().compare(problem_id)
        return (F.best_so_far(data["curves"], x="evaluation", title="best so far of every run, by evaluation"),
                F.best_so_far(data["curves"], x="elapsed_s", title="best so far of every run, by wall time"),
                F.best_per_group(data["devices"], title="best time per device", by="device"),
                F.best_per_group(data["inputs"], title="best time per input", by="input"),
                [html.Li(dcc.Link(r["label"], href=r["path"])) for r in data["runs"]])

    # ------------------------------------------------------------------ per-input selection
    @app.callback(Output("fig-oracle", "figure"), Output("fig-choices", "figure"), Output("inputs-summary", "children"),
                  Output("inputs-grid", "columnDefs"), Output("inputs-grid", "rowData"),
                  Input("inputs-device", "value"), Input("inputs-model", "value"), Input("version", "data"),
                  State("problem-id", "data"))
    @_guard(source, lambda msg: (F.empty("", msg), F.empty("", msg), [html.P(msg, className="error-text")], [], []))
    def inputs(device_id: int | None, model_name: str | None, _version: Any, problem_id: int) -> tuple[Any, ...]:
        if device_id is None:
            nothing = F.empty("", "no device measured this problem")
            return nothing, nothing, [], [], []
        data = selection(source.queries().store, problem_id, int(device_id), models.get(model_name or ""))
        rows = data["rows"]
        feature_names = sorted({k for r in rows for k in r["features"]})
        columns = [{"field": "name", "headerName": "input", "minWidth": 160},
                   {"field": "family", "headerName": "family", "width": 110}, {"field": "oracle", "headerName": "oracle variant"},
                   {"field": "oracle_ms", "headerName": "oracle (ms)", "width": 120, "valueFormatter": L.NUMBER}]
        if model_name:
            columns += [{"field": "chosen", "headerName": "model's choice"},
                        {"field": "chosen_fraction", "headerName": "fraction of oracle", "width": 150}]
        columns += [{"field": "fixed_fraction", "headerName": f"best fixed: {data['fixed']}", "minWidth": 170}]
        columns += [{"field": f"f.{k}", "headerName": k, "width": 120} for k in feature_names]
        grid = [{**{k: v for k, v in r.items() if k != "features"},
                 **{f"f.{k}": v for k, v in r["features"].items()}} for r in rows]
        stats = [L.stat("inputs", str(len(rows))), L.stat("best fixed", data["fixed"])]
        chosen = [r["chosen_fraction"] for r in rows if r["chosen_fraction"] is not None]
        if chosen:
            stats.append(L.stat("model: mean fraction of oracle", f"{sum(chosen) / len(chosen):.3f}"))
        for fam in data["families"]:
            value = fam["chosen_fraction"] if fam["chosen_fraction"] is not None else fam["fixed_fraction"]
            stats.append(L.stat(f"family {fam['family']} ({fam['inputs']})", f"{value:.3f}"))
        for err in model_errors:
            stats.append(html.P(err, className="error-text"))
        return (F.oracle_fraction(rows, title="fraction of oracle per input"),
                F.choice_matrix(rows, title="chosen against oracle variant"), stats, columns, grid)


def run_header(queries: DashboardQueries, run: RunKey) -> tuple[Any, ...] | None:
    """Names, counts, speed-up and the best configuration as code (None when there is no such run)."""
    view = queries.run_view(run)
    return None if view is None else (L.run_header(view), L.best_config_code(view))


def run_trajectory(queries: DashboardQueries, run: RunKey) -> tuple[Any, ...] | None:
    """Best so far against evaluations and against wall time."""
    view = queries.run_view(run)
    if view is None:
        return None
    trajectory = {view.device: queries.trajectory(run, view.started)}
    return (F.best_so_far(trajectory, x="evaluation", title="best so far, by evaluation"),
            F.best_so_far(trajectory, x="elapsed_s", title="best so far, by wall time"))


def run_spread(queries: DashboardQueries, run: RunKey) -> tuple[Any, ...] | None:
    """Every measurement's time (a histogram the store counts) and the failures by kind."""
    view = queries.run_view(run)
    if view is None:
        return None
    failures = {k: n for k, n in view.counts.items() if k != "ok"}
    return (F.spread(queries.histogram(run), failures, title="spread of all measurements"),)


def run_parameters(queries: DashboardQueries, run: RunKey) -> tuple[Any, ...] | None:
    """Parallel coordinates, time against each parameter and the energy front, over the fastest configurations."""
    view = queries.run_view(run)
    if view is None:
        return None
    fastest = queries.fastest(run)
    rows = [row_dict(s) for s in fastest]
    ok = view.counts.get("ok", 0)
    sample = f"the {len(rows)} fastest of {ok}" if len(rows) < ok else f"all {len(rows)} successful"
    points, front = queries.energy(fastest)
    energy = [html.H2("Energy"), dcc.Graph(id="fig-energy", config=L.GRAPH_CONFIG,
                                           figure=F.pareto(points, front, title="time against energy per call: "
                                                                                 "Pareto front"))]
    return (F.parallel_coordinates(rows, view.params, title=f"parallel coordinates ({sample} configurations)"),
            F.time_per_parameter(rows, view.params, title="time against each parameter"),
            energy if points else [])


RUN_PARTS = (run_header, run_trajectory, run_spread, run_parameters)
"""What the run page draws above its table, one callback each."""


def serve(target: str, *, host: str = "127.0.0.1", port: int = 8080, models: Sequence[str | Path] = ()) -> None:
    """Serve the dashboard until interrupted (Flask's threaded server: a local tool, not a public site)."""
    app = create_app(target, models=models)
    app.run(host=host, port=port, debug=False)
