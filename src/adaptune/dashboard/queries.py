"""What each page asks the store, through the store interface only (``adaptune.store.base.BaseStore``).

Every answer is bounded: summaries, one page, the improving points of a trajectory, a histogram
counted by the store, the fastest ``SAMPLE`` configurations for the parameter views. Nothing here
reads a whole run, so a run of a million measurements opens as fast as one of a hundred.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adaptune.adaptive.objectives import metrics, pareto
from adaptune.records import Status
from adaptune.store.base import PAGE_COLUMNS, BaseStore, RunKey, StoredResult

SAMPLE = 1000
"""Configurations the parameter views and the energy front plot at most (the fastest ones)."""
PARAM_PREFIX = "p:"
"""Table columns of parameters: a prefix AG Grid does not read as a path (it reads dots as nesting)."""


def finite(value: float) -> float | None:
    """JSON has no infinity: a time that does not exist is None."""
    return float(value) if value is not None and math.isfinite(value) else None


def run_path(run: RunKey) -> str:
    return f"/run/{run.problem_id}/{run.device_id}/{run.input_id}"


def parse_run_path(path: str) -> RunKey | None:
    """``/run/<problem>/<device>/<input>`` as a run key (None for anything else)."""
    parts = path.strip("/").split("/")
    if len(parts) != 4 or parts[0] != "run" or not all(p.isdigit() for p in parts[1:]):
        return None
    problem_id, device_id, input_id = (int(p) for p in parts[1:])
    return RunKey(device_id, problem_id, input_id)


def row_dict(stored: StoredResult) -> dict[str, Any]:
    """A stored result as a table row: plain JSON values, parameters under ``config``."""
    r = stored.result
    return {"id": stored.id, "status": str(r.status), "time_ms": finite(r.time_ms), "config": dict(r.config),
            "compile_ms": round(float(r.compile_ms), 3), "timestamp": r.timestamp, "error": r.error or ""}


@dataclass(frozen=True)
class RunView:
    """Everything the run page shows above the table, read in a handful of bounded queries."""

    run: RunKey
    problem: str
    device: str
    input: str
    params: list[str]
    counts: dict[str, int]
    evaluations: int
    best: dict[str, Any] | None
    default: dict[str, Any] | None
    started: float | None


class DashboardQueries:
    """The dashboard's questions, answered by a :class:`BaseStore`; pure reads."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    # ---------------------------------------------------------------- problems and runs
    def version(self) -> int:
        """The newest row id: a page redraws only when it moved (live updates)."""
        return self.store.latest_id()

    def run_rows(self) -> list[dict[str, Any]]:
        """One row per run for the front page: counts, failures by kind, best, speed-up over the default."""
        defaults = {}
        rows = []
        for s in self.store.runs():
            if s.run.problem_id not in defaults:
                defaults[s.run.problem_id] = self._defaults(s.run.problem_id)
            default = self._time_of(s.run, defaults[s.run.problem_id])
            best = finite(s.best_time_ms)
            failures = {k: n for k, n in sorted(s.counts.items()) if k != str(Status.OK)}
            rows.append({
                "problem": s.problem, "device": s.device, "input": s.input, "evaluations": s.measurements,
                "failed": s.failed, "failures": ", ".join(f"{k} {n}" for k, n in failures.items()),
                "best_ms": best, "default_ms": default,
                "speedup": round(default / best, 3) if best and default else None,
                "path": run_path(s.run),
            })
        return rows

    def _defaults(self, problem_id: int) -> dict[str, Any] | None:
        defaults = self.store.problem_info(problem_id).space.get("defaults")
        return dict(defaults) if isinstance(defaults, Mapping) and defaults else None

    def _time_of(self, run: RunKey, config: Mapping[str, Any] | None) -> float | None:
        if config is None:
            return None
        found = self.store.get(*run, config)
        return finite(found.time_ms) if found is not None else None

    # ---------------------------------------------------------------- one run
    def run_view(self, run: RunKey) -> RunView | None:
        """The run's names and summary, or None when the store holds no such run."""
        found = self.store.runs(problem_id=run.problem_id, device_id=run.device_id)
        summary = next((s for s in found if s.run == run), None)
        if summary is None:
            return None
        info = self.store.problem_info(run.problem_id)
        params = list(info.space.get("params", {}))
        top = self.store.top(run.problem_id, 1, device_id=run.device_id, input_id=run.input_id)
        first = self.store.page(run, limit=1, order_by="id").rows
        defaults = self._defaults(run.problem_id)
        default = self.store.get(*run, defaults) if defaults else None
        if not params and top:
            params = list(top[0].result.config)
        return RunView(run=run, problem=summary.problem, device=summary.device, input=summary.input,
                       params=params, counts=dict(summary.counts), evaluations=summary.measurements,
                       best=row_dict(top[0]) if top else None,
                       default=({"config": defaults, "time_ms": finite(default.time_ms) if default else None}
                                if defaults else None),
                       started=first[0].result.timestamp if first else None)

    def trajectory(self, run: RunKey, started: float | None) -> list[dict[str, Any]]:
        """The improving evaluations, with wall time since the run's first measurement; the curve is held
        flat to the last evaluation so that a run still searching shows how long it has gone on."""
        t = self.store.trajectory(run)
        start = started if started is not None else (t.points[0].timestamp if t.points else 0.0)
        points = [{"evaluation": p.evaluation, "elapsed_s": max(0.0, p.timestamp - start), "best_ms": p.best_ms}
                  for p in t.points]
        if points and t.evaluations > points[-1]["evaluation"]:
            points.append({**points[-1], "evaluation": t.evaluations})
        return points

    def histogram(self, run: RunKey) -> list[dict[str, Any]]:
        return [{"lo_ms": b.low, "hi_ms": b.high, "count": b.count}
                for b in self.store.time_histogram(run) if b.count]

    def fastest(self, run: RunKey, limit: int = SAMPLE) -> list[StoredResult]:
        """The fastest successful configurations (all of a small run): what the parameter views plot."""
        return self.store.page(run, limit=limit, status=Status.OK).rows

    def table_page(self, run: RunKey, start: int, end: int, sort: Sequence[Mapping[str, Any]],
                   filters: Mapping[str, Any], params: Sequence[str]) -> tuple[list[dict[str, Any]], int]:
        """One block of the configuration table, from AG Grid's sort and filter models."""
        order_by, descending = "time_ms", False
        if sort:
            column = str(sort[0].get("colId", "time_ms"))
            column = column.removeprefix(PARAM_PREFIX)
            if column in PAGE_COLUMNS or column in params:
                order_by, descending = column, sort[0].get("sort") == "desc"
        try:
            status, where = _filters(filters, params)
        except ValueError:  # a status that does not exist matches nothing
            return [], 0
        page = self.store.page(run, offset=max(0, int(start)), limit=max(1, int(end) - int(start)),
                               order_by=order_by, descending=descending, status=status, where=where)
        return [_flat(row_dict(s)) for s in page.rows], page.total

    # ---------------------------------------------------------------- one problem
    def problem_name(self, problem_id: int) -> str:
        return self.store.problem_info(problem_id).name

    def _named(self, problem_id: int) -> tuple[list[int], list[Any]]:
        """The ids of the problems with this one's name (one kernel at several sizes is several problems)
        and their runs."""
        ids = [p.id for p in self.store.problems(name=self.problem_name(problem_id))] or [problem_id]
        return ids, [s for pid in ids for s in self.store.runs(problem_id=pid)]

    @staticmethod
    def _label(s: Any, several: bool) -> str:
        return f"{s.device} · {s.input}" + (f" · #{s.run.problem_id}" if several else "")

    def compare_runs(self, problem_id: int) -> list[dict[str, str]]:
        """Links to every run of the problems with this one's name."""
        ids, runs = self._named(problem_id)
        return [{"label": self._label(s, len(ids) > 1), "path": run_path(s.run)} for s in runs]

    def compare(self, problem_id: int) -> dict[str, Any]:
        """Every run of the problems with this one's name (trajectories on one plot), and the best per device
        and per input."""
        ids, runs = self._named(problem_id)
        several = len(ids) > 1
        curves = {self._label(s, several): self.trajectory(s.run, None) for s in runs}
        devices: dict[str, dict[str, Any]] = {}
        inputs = []
        for pid in ids:
            for g in self.store.device_summaries(pid):
                best = devices.setdefault(g.name, {"name": g.name, "best_ms": None, "evaluations": 0})
                best["evaluations"] += g.measurements
                if finite(g.best_time_ms) is not None and (best["best_ms"] is None or g.best_time_ms < best["best_ms"]):
                    best["best_ms"] = g.best_time_ms
            inputs += [{"name": g.name + (f" · #{pid}" if several else ""), "best_ms": finite(g.best_time_ms),
                        "evaluations": g.measurements} for g in self.store.input_summaries(pid)]
        return {"curves": curves, "devices": list(devices.values()), "inputs": inputs,
                "runs": [{"label": self._label(s, several), "path": run_path(s.run)} for s in runs]}

    @staticmethod
    def energy(stored: Sequence[StoredResult]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Time and energy per call of every plotted configuration that recorded energy (the objectives'
        own reading of the observers), and which of them lie on the Pareto front."""
        with_energy = [s.result for s in stored if "energy_per_call_j" in metrics(s.result)]
        points = [{"time_ms": r.time_ms, "energy": metrics(r)["energy_per_call_j"], "config": dict(r.config)}
                  for r in with_energy]
        front = [{"time_ms": r.time_ms, "energy": metrics(r)["energy_per_call_j"], "config": dict(r.config)}
                 for r in pareto(with_energy)] if with_energy else []
        return points, front


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A table row with each parameter as its own column (``p:<name>``) and JSON-safe values."""
    out = {k: v for k, v in row.items() if k != "config"}
    for k, v in row["config"].items():
        out[PARAM_PREFIX + k] = v if isinstance(v, (int, float, str, bool)) or v is None else json.dumps(v)
    return out


def _filters(model: Mapping[str, Any], params: Sequence[str]) -> tuple[str | None, dict[str, Any]]:
    """AG Grid's filter model as the store's page filters: status equals, parameter equals."""
    status = None
    where: dict[str, Any] = {}
    for column, spec in (model or {}).items():
        if not isinstance(spec, Mapping):
            continue
        value = spec.get("filter")
        if column == "status" and value:
            status = str(Status(str(value).strip().lower()))
        name = column.removeprefix(PARAM_PREFIX)
        if name in params and value is not None and value != "":
            where[name] = _typed(value)
    return status, where


def _typed(value: Any) -> Any:
    """A filter typed into the grid as the stored parameter's type (numbers stay numbers)."""
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else float(value)
    text = str(value).strip()
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
