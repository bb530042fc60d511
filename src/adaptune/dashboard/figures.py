"""Plotly figures of the dashboard, built from plain rows (the store's answers), never from the store itself.

Every name that reaches a figure goes through ``text()``: plotly.js renders a few HTML-like tags in
labels (``<b>``, ``<br>``, ``<a>``), so a problem called ``<script>…`` is escaped to show as written.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf")
LOG_SPAN = 20.0
CATEGORIES = 16
"""A parameter with at most this many distinct values is drawn as evenly spaced categories."""
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"


def time_axis(values: Sequence[float]) -> str:
    """Log scale where times span more than ``LOG_SPAN``x, linear otherwise (plotly's log ticks inside one
    decade read as bare digits)."""
    finite_values = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not finite_values:
        return "linear"
    return "log" if max(finite_values) / min(finite_values) > LOG_SPAN else "linear"


def text(value: Any) -> str:
    """A value as plotly shows it literally (its own tags escaped)."""
    return html.escape(str(value), quote=False)


def _base(fig: go.Figure, title: str, *, height: int = 320) -> go.Figure:
    fig.update_layout(title={"text": text(title), "x": 0.01, "font": {"size": 15}}, height=height,
                      margin={"l": 60, "r": 20, "t": 48, "b": 48}, template="plotly_white",
                      font={"family": FONT, "size": 12}, legend={"font": {"size": 11}})
    return fig


def empty(title: str, message: str) -> go.Figure:
    """A figure that says why there is nothing to plot (instead of empty axes)."""
    fig = go.Figure()
    fig.add_annotation(text=text(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 14, "color": "#666"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _base(fig, title)


def best_so_far(curves: Mapping[str, Sequence[Mapping[str, Any]]], *, x: str, title: str,
                height: int = 320) -> go.Figure:
    """Best time so far, one step line per curve; ``x`` is ``"evaluation"`` or ``"elapsed_s"``."""
    if not any(curves.values()):
        return empty(title, "no successful measurement yet")
    fig = go.Figure()
    for i, (name, points) in enumerate(curves.items()):
        xs = [p[x] for p in points]
        ys = [p["best_ms"] for p in points]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", line={"shape": "hv", "width": 2},
                                 marker={"size": 6}, name=text(name), showlegend=len(curves) > 1,
                                 line_color=COLORS[i % len(COLORS)],
                                 hovertemplate=f"{x}: %{{x:.4g}}<br>best: %{{y:.4g}} ms<extra></extra>"))
    fig.update_xaxes(title=("evaluation" if x == "evaluation" else "wall time since start (s)"))
    fig.update_yaxes(title="best time so far (ms)",
                     type=time_axis([p["best_ms"] for points in curves.values() for p in points]))
    out = _base(fig, title, height=height)
    # curves fall from the left: the top right corner is free for the legend
    out.update_layout(legend={"x": 0.99, "xanchor": "right", "y": 0.99, "yanchor": "top",
                              "bgcolor": "rgba(255,255,255,0.85)", "bordercolor": "#e1e4ea", "borderwidth": 1})
    return out


def spread(bins: Sequence[Mapping[str, Any]], failures: Mapping[str, int], *, title: str) -> go.Figure:
    """How all measurements spread: a histogram of time (log bins, counted in SQL) and the failures by kind."""
    if not bins and not failures:
        return empty(title, "no measurement yet")
    if not failures:
        fig = make_subplots(rows=1, cols=1, subplot_titles=("successful (none failed)",))
    else:
        fig = make_subplots(rows=1, cols=2, column_widths=[0.78, 0.22], horizontal_spacing=0.1,
                            subplot_titles=("successful", "failed, by kind"))
    if bins:
        centres = [math.sqrt(b["lo_ms"] * b["hi_ms"]) for b in bins]
        widths = [b["hi_ms"] - b["lo_ms"] for b in bins]
        fig.add_trace(go.Bar(x=centres, y=[b["count"] for b in bins], width=widths, marker_color=COLORS[0],
                             name="configurations", showlegend=False,
                             customdata=[[b["lo_ms"], b["hi_ms"]] for b in bins],
                             hovertemplate="%{customdata[0]:.4g}–%{customdata[1]:.4g} ms: %{y}<extra></extra>"),
                      row=1, col=1)
        fig.update_xaxes(type=time_axis([bins[0]["lo_ms"], bins[-1]["hi_ms"]]), title="time (ms)", row=1, col=1)
        fig.update_yaxes(title="configurations", row=1, col=1)
    if failures:
        kinds = sorted(failures)
        fig.add_trace(go.Bar(x=[text(k) for k in kinds], y=[failures[k] for k in kinds], marker_color=COLORS[3],
                             showlegend=False, hovertemplate="%{x}: %{y}<extra></extra>"), row=1, col=2)
    return _base(fig, title)


def _axis_values(values: Sequence[Any]) -> tuple[list[float], dict[str, Any]]:
    """Parameter values as positions on an axis: a few distinct values (a tuning space's usual powers of two)
    are evenly spaced categories in their natural order, named by their values; many numbers stay numbers."""
    distinct = set(values)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in distinct)
    if numeric and len(distinct) > CATEGORIES:
        return [float(v) for v in values], {}
    names = sorted(distinct, key=(lambda v: (float(v), 0)) if numeric else (lambda v: (0, str(v))))
    index = {v: i for i, v in enumerate(names)}
    return [float(index[v]) for v in values], {"tickvals": list(range(len(names))),
                                               "ticktext": [text(n) for n in names]}


def parallel_coordinates(rows: Sequence[Mapping[str, Any]], params: Sequence[str], *, title: str) -> go.Figure:
    """One line per configuration through every parameter to its time (darker = faster)."""
    rows = [r for r in rows if r.get("time_ms") is not None]
    if not rows or not params:
        return empty(title, "no successful measurement yet")
    dims = []
    for p in params:
        values, ticks = _axis_values([r["config"].get(p) for r in rows])
        span = {"range": [-0.3, len(ticks["tickvals"]) - 0.7]} if ticks else {}
        dims.append({"label": text(p), "values": values, **ticks, **span})
    times = [r["time_ms"] for r in rows]
    dims.append({"label": "time (ms)", "values": times})
    fig = go.Figure(go.Parcoords(dimensions=dims, line={"color": [math.log10(t) for t in times],
                                                        "colorscale": "Viridis_r", "showscale": False},
                                 labelfont={"size": 12}, tickfont={"size": 10}))
    out = _base(fig, title, height=380)
    out.update_layout(margin={"l": 70, "r": 80, "t": 110, "b": 30})
    return out


def time_per_parameter(rows: Sequence[Mapping[str, Any]], params: Sequence[str], *, title: str) -> go.Figure:
    """Time against each parameter (one small panel per parameter, log time axis)."""
    rows = [r for r in rows if r.get("time_ms") is not None]
    if not rows or not params:
        return empty(title, "no successful measurement yet")
    cols = min(4, len(params))
    nrows = math.ceil(len(params) / cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=[text(p) for p in params],
                        horizontal_spacing=0.06, vertical_spacing=0.16 if nrows > 1 else 0.1)
    times = [r["time_ms"] for r in rows]
    for i, p in enumerate(params):
        values, ticks = _axis_values([r["config"].get(p) for r in rows])
        row, col = i // cols + 1, i % cols + 1
        fig.add_trace(go.Scatter(x=values, y=times, mode="markers", showlegend=False,
                                 marker={"size": 6, "opacity": 0.6, "color": COLORS[i % len(COLORS)]},
                                 hovertemplate=f"{text(p)}=%{{x}}<br>%{{y:.4g}} ms<extra></extra>"),
                      row=row, col=col)
        fig.update_xaxes(row=row, col=col, **({"tickmode": "array", **ticks} if ticks else {}))
        fig.update_yaxes(type=time_axis(times), row=row, col=col, showticklabels=col == 1)
    fig.update_yaxes(title="time (ms)", col=1)
    return _base(fig, title, height=230 * nrows + 70)


def best_per_group(groups: Sequence[Mapping[str, Any]], *, title: str, by: str) -> go.Figure:
    """Best time of one problem per device (or per input): one bar each, log scale."""
    groups = [g for g in groups if g.get("best_ms") is not None]
    if not groups:
        return empty(title, "no successful measurement yet")
    names = [text(g["name"]) for g in groups]
    fig = go.Figure(go.Bar(x=names, y=[g["best_ms"] for g in groups], marker_color=COLORS[2],
                           customdata=[[g.get("evaluations", 0)] for g in groups],
                           hovertemplate="%{x}<br>best %{y:.4g} ms<br>%{customdata[0]} evaluations<extra></extra>"))
    fig.update_xaxes(title=by)
    fig.update_yaxes(title="best time (ms)", rangemode="tozero")
    return _base(fig, title)


def pareto(rows: Sequence[Mapping[str, Any]], front: Sequence[Mapping[str, Any]], *, title: str) -> go.Figure:
    """Every configuration's time against its energy, the non-dominated ones joined."""
    if not rows:
        return empty(title, "no energy was recorded for this run")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[r["time_ms"] for r in rows], y=[r["energy"] for r in rows], mode="markers",
                             name="configurations", marker={"color": COLORS[7], "size": 6, "opacity": 0.6},
                             hovertemplate="%{x:.4g} ms, %{y:.4g} J<extra></extra>"))
    fig.add_trace(go.Scatter(x=[r["time_ms"] for r in front], y=[r["energy"] for r in front],
                             mode="lines+markers", name="Pareto front", line={"shape": "hv", "color": COLORS[3]},
                             marker={"size": 9}, hovertemplate="%{x:.4g} ms, %{y:.4g} J<extra></extra>"))
    fig.update_xaxes(title="time (ms)")
    fig.update_yaxes(title="energy per call (J)")
    return _base(fig, title, height=360)


def oracle_fraction(inputs: Sequence[Mapping[str, Any]], *, title: str) -> go.Figure:
    """Fraction of the oracle reached per test input: the model's choice and the best fixed variant."""
    if not inputs:
        return empty(title, "no input of this problem has measurements")
    names = [text(i["name"]) for i in inputs]
    fig = go.Figure()
    if any(i.get("chosen_fraction") is not None for i in inputs):
        fig.add_trace(go.Bar(x=names, y=[i.get("chosen_fraction") for i in inputs], name="model's choice",
                             marker_color=COLORS[0], hovertemplate="%{x}: %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Bar(x=names, y=[i.get("fixed_fraction") for i in inputs], name="best fixed variant",
                         marker_color=COLORS[7], hovertemplate="%{x}: %{y:.3f}<extra></extra>"))
    fig.update_yaxes(title="fraction of oracle", range=[0, 1.05])
    fig.update_layout(barmode="group")
    return _base(fig, title, height=340)


def choice_matrix(inputs: Sequence[Mapping[str, Any]], *, title: str) -> go.Figure:
    """How often the model chose each variant against the oracle's variant (the diagonal is right)."""
    pairs = [(i["oracle"], i["chosen"]) for i in inputs if i.get("chosen")]
    if not pairs:
        return empty(title, "no model given: start the dashboard with --model FILE.json")
    labels = sorted({a for pair in pairs for a in pair})
    index = {name: k for k, name in enumerate(labels)}
    counts = [[0] * len(labels) for _ in labels]
    for oracle, chosen in pairs:
        counts[index[oracle]][index[chosen]] += 1
    names = [text(n) for n in labels]
    fig = go.Figure(go.Heatmap(z=counts, x=names, y=names, colorscale="Blues", showscale=False, text=counts,
                               texttemplate="%{text}", hovertemplate="oracle %{y}, chosen %{x}: %{z}<extra></extra>"))
    fig.update_xaxes(title="model's choice")
    fig.update_yaxes(title="oracle", autorange="reversed")
    return _base(fig, title, height=340)
