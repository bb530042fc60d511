"""The pages' components: Dash HTML, graphs and AG Grid tables, with the ids the callbacks fill.

Text reaches the page as React text nodes and grid cells as text, so names and error messages are
shown as written, never interpreted as HTML.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import dash_ag_grid as dag
from dash import dcc, html

from adaptune.dashboard.queries import PARAM_PREFIX, RunView

GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
PARAMETER_SORT_LIMIT = 100_000
"""Above this many measurements a run's table sorts and filters by indexed columns only (time, status, id)."""
NUMBER = {"function": "params.value == null ? '—' : d3.format('.4~g')(params.value)"}
RUN_COLUMNS = [
    {"field": "problem", "headerName": "problem", "minWidth": 180, "flex": 2},
    {"field": "device", "headerName": "device", "minWidth": 180, "flex": 2},
    {"field": "input", "headerName": "input", "flex": 1},
    {"field": "evaluations", "headerName": "evaluations", "filter": "agNumberColumnFilter", "width": 120},
    {"field": "failed", "headerName": "failed", "filter": "agNumberColumnFilter", "width": 95},
    {"field": "failures", "headerName": "failures by kind", "flex": 2},
    {"field": "best_ms", "headerName": "best (ms)", "filter": "agNumberColumnFilter", "width": 120,
     "valueFormatter": NUMBER},
    {"field": "speedup", "headerName": "× over default", "filter": "agNumberColumnFilter", "width": 135,
     "valueFormatter": {"function": "params.value == null ? '—' : d3.format('.3~f')(params.value) + '×'"}},
]


def shell(store_label: str, refresh_ms: int = 2000) -> html.Div:
    """What every page shares: header with navigation, the page body, the live-update timer."""
    return html.Div([
        dcc.Location(id="url"),
        html.Header([
            dcc.Link("adaptune", href="/", className="brand"),
            html.Nav([dcc.Link("problems and runs", href="/")]),
            html.Span(store_label, className="store-label", title="the store this dashboard reads"),
            html.Span(id="live", className="live"),
        ], className="topbar"),
        html.Main(id="page"),
        dcc.Interval(id="tick", interval=refresh_ms),
        dcc.Store(id="version"),
    ])


def error_page(title: str, message: str) -> html.Div:
    """A clear page for a store that cannot be read or a page that does not exist."""
    return html.Div([html.H1(title), html.P(message, className="error-text", id="error-text"),
                     html.P(dcc.Link("back to the problems and runs", href="/"))], className="error-page")


def graph(graph_id: str, height: int = 320) -> dcc.Graph:
    return dcc.Graph(id=graph_id, config=GRAPH_CONFIG, style={"minHeight": f"{height}px"})


def home_page() -> html.Div:
    return html.Div([
        html.H1("Problems and runs"),
        html.P("A run is one problem measured on one device for one input. Click a row to open it; "
               "sort and filter by any column. New runs appear here while they are being tuned.",
               className="lead"),
        dag.AgGrid(id="runs-grid", columnDefs=RUN_COLUMNS, rowData=[],
                   defaultColDef={"sortable": True, "filter": True, "resizable": True},
                   dashGridOptions={"rowSelection": {"mode": "singleRow", "checkboxes": False,
                                                     "enableClickSelection": True},
                                    "animateRows": False, "domLayout": "autoHeight"},
                   getRowId="params.data.path", className="ag-theme-quartz", style={"height": None}),
        html.Div(id="problem-links", className="problem-links"),
    ])


def problem_links(problems: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Links to each problem's comparison and per-input pages (names as text)."""
    if not problems:
        return []
    items = [html.Li([html.Span(p["name"], className="name"), " — ",
                      dcc.Link("compare runs", href=f"/problem/{p['id']}"), " · ",
                      dcc.Link("per-input selection", href=f"/inputs/{p['id']}")]) for p in problems]
    return [html.H2("Problems"), html.Ul(items)]


def stat(label: str, value: str, stat_id: str | None = None) -> html.Div:
    return html.Div([html.Div(label, className="stat-label"),
                     html.Div(value, className="stat-value", **({"id": stat_id} if stat_id else {}))],
                    className="stat")


def run_header(view: RunView) -> list[Any]:
    """Names, counts and speed-up of a run (refreshed with the plots)."""
    best = view.best["time_ms"] if view.best else None
    default = view.default["time_ms"] if view.default else None
    failed = {k: n for k, n in sorted(view.counts.items()) if k != "ok"}
    stats = [
        stat("evaluations", str(view.evaluations), "stat-evaluations"),
        stat("failed", ", ".join(f"{k} {n}" for k, n in failed.items()) or "none"),
        stat("best", f"{best:.4g} ms" if best is not None else "—", "stat-best"),
        stat("default", f"{default:.4g} ms" if default is not None else "—"),
        stat("speed-up over default", f"{default / best:.2f}×" if best and default else "—"),
    ]
    return [html.Div([html.Span("device ", className="muted"), view.device, html.Span("  ·  input ", className="muted"),
                      view.input, "  ·  ", dcc.Link("compare runs of this problem",
                                                      href=f"/problem/{view.run.problem_id}")],
                     className="subtitle"),
            html.Div(stats, className="stats")]


def best_config_code(view: RunView) -> str:
    """The best configuration as Python a user pastes into a script."""
    if view.best is None:
        return "# no configuration of this run succeeded yet"
    config = json.dumps(view.best["config"], indent=4, sort_keys=False)
    return (f"# {view.problem} on {view.device}: {view.best['time_ms']:.4g} ms\n"
            f"best_config = {config}\n")


def run_page(view: RunView) -> html.Div:
    by_parameter = view.evaluations <= PARAMETER_SORT_LIMIT
    table_columns = [
        {"field": "id", "headerName": "#", "width": 80, "filter": False},
        {"field": "status", "headerName": "status", "width": 130, "filter": "agTextColumnFilter",
         "filterParams": {"filterOptions": ["equals"], "maxNumConditions": 1}},
        {"field": "time_ms", "headerName": "time (ms)", "width": 120, "filter": False,
         "valueFormatter": NUMBER},
        *[{"field": PARAM_PREFIX + p, "headerName": p, "width": 130, "sortable": by_parameter,
           "filter": "agTextColumnFilter" if by_parameter else False,
           "filterParams": {"filterOptions": ["equals"], "maxNumConditions": 1}} for p in view.params],
        {"field": "compile_ms", "headerName": "compile (ms)", "width": 125, "filter": False},
        {"field": "error", "headerName": "error", "flex": 1, "minWidth": 260, "filter": False, "sortable": False,
         "tooltipField": "error"},
    ]
    return html.Div([
        html.H1(view.problem, id="run-title"),
        html.Div(run_header(view), id="run-header"),
        html.Div([graph("fig-trajectory-evals"), graph("fig-trajectory-time")], className="grid2"),
        graph("fig-spread"),
        graph("fig-parcoords", 360),
        graph("fig-params", 300),
        html.Div(id="energy-section"),
        html.H2("Best configuration"),
        html.Div([html.Pre(best_config_code(view), id="best-code", className="code"),
                  dcc.Clipboard(target_id="best-code", title="copy", className="copy")], className="code-box"),
        html.H2("Configurations"),
        html.P("Sorted and filtered by the store, one block at a time. Filter status or a parameter by "
               "value (e.g. status = compile_error); hover an error to read it whole."
               + ("" if by_parameter else f" Sorting and filtering by a parameter read the whole run: off above "
                                          f"{PARAMETER_SORT_LIMIT:,} measurements."), className="muted"),
        dag.AgGrid(id="config-grid", columnDefs=table_columns, rowModelType="infinite",
                   defaultColDef={"sortable": True, "resizable": True},
                   dashGridOptions={"cacheBlockSize": 100, "maxBlocksInCache": 20, "tooltipShowDelay": 200,
                                    "rowBuffer": 10},
                   className="ag-theme-quartz", style={"height": "420px"}),
        dcc.Store(id="run-key", data=list(view.run)),
        dcc.Store(id="config-grid-refreshed"),
        dcc.Store(id="run-params", data=view.params),
    ])


def compare_page(problem: str, problem_id: int, runs: Sequence[Mapping[str, str]]) -> html.Div:
    return html.Div([
        html.H1(problem, id="compare-title"),
        html.Div(["Every run of this problem on one plot, and the problem across devices and inputs. ",
                  dcc.Link("Per-input selection", href=f"/inputs/{problem_id}"), "."], className="subtitle"),
        html.Div([graph("fig-compare-evals"), graph("fig-compare-time")], className="grid2"),
        html.Div([graph("fig-devices"), graph("fig-inputs")], className="grid2"),
        html.H2("Runs"),
        html.Ul([html.Li(dcc.Link(r["label"], href=r["path"])) for r in runs], id="compare-runs"),
        dcc.Store(id="problem-id", data=problem_id),
    ])


def inputs_page(problem: str, problem_id: int, devices: Sequence[Mapping[str, Any]],
                models: Sequence[str]) -> html.Div:
    return html.Div([
        html.H1(problem, id="inputs-title"),
        html.Div("Per-input selection: the oracle (best measured variant) of each input, the best single "
                 "variant for all inputs, and a trained model's choice.", className="subtitle"),
        html.Div([
            html.Label(["device ", dcc.Dropdown(id="inputs-device", clearable=False,
                                                options=[{"label": d["name"], "value": d["id"]} for d in devices],
                                                value=devices[0]["id"] if devices else None)]),
            html.Label(["model ", dcc.Dropdown(id="inputs-model", options=[{"label": m, "value": m} for m in models],
                                               value=models[0] if models else None,
                                               placeholder="no model given (--model FILE.json)")]),
        ], className="controls"),
        html.Div(id="inputs-summary", className="stats"),
        html.Div([graph("fig-oracle", 340), graph("fig-choices", 340)], className="grid2 wide-left"),
        html.H2("Per input"),
        dag.AgGrid(id="inputs-grid", columnDefs=[], rowData=[], getRowId="params.data.name",
                   defaultColDef={"sortable": True, "filter": True, "resizable": True},
                   className="ag-theme-quartz", style={"height": "360px"}),
        dcc.Store(id="problem-id", data=problem_id),
    ])
