"""Objectives other than time (Nitro, seed 001 ch. 4): energy, power, their products, user aggregations.

Every objective maps one measurement (a ``Result``: its median time and what the observers read around
its timed runs) to one number to *minimise*. Energy per call is the NVML total-energy counter's delta
over the timed runs divided by the number of runs (``energy_j`` / len(samples)); average power is that
energy over the wall time of the runs (``power_w``); peak power the highest power sample taken during
them (``power_peak_w``, from the nvml observer's sampling thread).

Nitro's throughput/energy metrics are maximised; for a fixed amount of work W, throughput T = W / t, so

    max T/E  <=> min t*E (EDP)        max T/E^2 <=> min t*E^2       max T^2/E <=> min t^2*E (ED2P)
    max T/P  <=> min t*P              max T/P^2 <=> min t*P^2       max T^2/P <=> min t^2*P

and all of them are offered under their Nitro names. A user aggregation is either a Python callable of
the metrics dict, or an expression over metric names in the restricted language of constraints (never
``eval``): ``"time_ms * energy_j ** 2"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptune.records import Result
from adaptune.space.safe_expr import compile_vector


class ObjectiveError(ValueError):
    """An objective cannot be evaluated: unknown name, bad expression or a metric that was not measured."""


POWER_ALIASES = ("power_w", "nvml_power", "ps_power", "power")
ENERGY_PER_CALL_ALIASES = ("nvml_energy", "energy", "ps_energy")
"""Kernel Tuner's observers' names: average power (W) and energy of one kernel call (J)."""


def metrics(result: Result) -> dict[str, float]:
    """The numbers one measurement offers to objectives: time_ms, the observers' readings, numeric
    configuration values, and the derived ``power_w`` / ``energy_per_call_j`` under one name whatever
    observer recorded them (adaptune's NVML counter; when it did not advance, the sampled power
    integrated over the window; Kernel Tuner's ``nvml_power``/``nvml_energy``; with power alone,
    energy per call = power x time)."""
    out: dict[str, float] = {}
    for k, v in {**(result.config or {}), **(result.observers or {})}.items():
        if isinstance(v, bool | int | float | np.integer | np.floating):
            out[k] = float(v)
    out["time_ms"] = float(result.time_ms)
    runs = len([s for s in result.samples if s is not None and math.isfinite(s)]) or 1
    if "power_w" not in out:
        for k in POWER_ALIASES:
            if k in out:
                out["power_w"] = out[k]
                break
    if out.get("energy_j", 0.0) > 0:  # 0: the counter did not advance over a too short window
        out["energy_per_call_j"] = out["energy_j"] / runs
    else:
        for k in ENERGY_PER_CALL_ALIASES:
            if k in out:
                out["energy_per_call_j"] = out[k]
                break
        else:
            if out.get("energy_sampled_j", 0.0) > 0:  # adaptune's sampled power integrated over the window
                out["energy_per_call_j"] = out["energy_sampled_j"] / runs
            elif "power_w" in out:
                out["energy_per_call_j"] = out["power_w"] * out["time_ms"] / 1e3
    return out


@dataclass(frozen=True)
class Objective:
    """A named function of a measurement's metrics, minimised; ``needs`` names the metrics it reads."""

    name: str
    fn: Callable[[Mapping[str, float]], float]
    needs: tuple[str, ...] = ()
    unit: str = ""

    def __call__(self, result: Result) -> float:
        """The objective of one measurement; ``inf`` for a failure, ``ObjectiveError`` for a missing metric."""
        if not result.ok or not math.isfinite(result.time_ms):
            return math.inf
        m = metrics(result)
        missing = [n for n in self.needs if n not in m]
        if missing:
            raise ObjectiveError(f"objective {self.name!r} needs {', '.join(missing)}, which this measurement "
                                 f"of {result.config} lacks (measure with observers=('nvml',))")
        v = float(self.fn(m))
        return v if math.isfinite(v) else math.inf


def _t(m: Mapping[str, float]) -> float:
    return m["time_ms"] / 1e3


def _e(m: Mapping[str, float]) -> float:
    return m["energy_per_call_j"]


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("time", lambda m: m["time_ms"], (), "ms"),
    Objective("energy", _e, ("energy_per_call_j",), "J"),
    Objective("power", lambda m: m["power_w"], ("power_w",), "W"),
    Objective("peak_power", lambda m: m["power_peak_w"], ("power_peak_w",), "W"),
    Objective("edp", lambda m: _t(m) * _e(m), ("energy_per_call_j",), "J s"),
    Objective("ed2p", lambda m: _t(m) ** 2 * _e(m), ("energy_per_call_j",), "J s^2"),
    Objective("T/E", lambda m: _t(m) * _e(m), ("energy_per_call_j",), "J s"),
    Objective("T/E2", lambda m: _t(m) * _e(m) ** 2, ("energy_per_call_j",), "J^2 s"),
    Objective("T2/E", lambda m: _t(m) ** 2 * _e(m), ("energy_per_call_j",), "J s^2"),
    Objective("T/P", lambda m: _t(m) * m["power_peak_w"], ("power_peak_w",), "W s"),
    Objective("T/P2", lambda m: _t(m) * m["power_peak_w"] ** 2, ("power_peak_w",), "W^2 s"),
    Objective("T2/P", lambda m: _t(m) ** 2 * m["power_peak_w"], ("power_peak_w",), "W s^2"),
)}
"""Built-in objectives by name (Nitro's T/P metrics use the peak power, as its 'maximum power')."""


def expression_objective(text: str, name: str | None = None) -> Objective:
    """A user aggregation written as an expression over metric names, e.g. ``"time_ms * energy_j ** 2"``."""
    try:
        compiled, used = compile_vector(text, None, what="objective")
    except ValueError as exc:
        raise ObjectiveError(f"objective expression {text!r}: {exc}") from None

    def fn(m: Mapping[str, float]) -> float:
        value, bad = compiled({k: np.float64(v) for k, v in m.items()})
        if bad is not None and bool(np.any(bad)):
            return math.inf
        return float(value)

    return Objective(name or text, fn, tuple(dict.fromkeys(used)))


def objective(spec: str | Objective | Callable[[Mapping[str, float]], float]) -> Objective:
    """An objective from a built-in name, an expression, an ``Objective`` or a callable of the metrics."""
    if isinstance(spec, Objective):
        return spec
    if callable(spec):
        return Objective(getattr(spec, "__name__", "custom"), spec)
    if spec in OBJECTIVES:
        return OBJECTIVES[spec]
    if isinstance(spec, str) and any(c in spec for c in "*/+-()") or spec.endswith(("_j", "_w", "_ms", "_mhz")):
        return expression_objective(spec)
    raise ObjectiveError(f"unknown objective {spec!r}; built in: {', '.join(OBJECTIVES)} "
                         "(or an expression over metric names, e.g. 'time_ms * energy_per_call_j')")


def values(results: Sequence[Result], spec: str | Objective | Callable[..., float]) -> np.ndarray:
    """The objective of every measurement (inf for failures)."""
    obj = objective(spec)
    return np.array([obj(r) for r in results], dtype=float)


def best(results: Sequence[Result], spec: str | Objective | Callable[..., float]) -> Result:
    """The measurement that minimises an objective (Nitro's aggregation function picks one tuple)."""
    v = values(results, spec)
    if not np.isfinite(v).any():
        raise ObjectiveError(f"no successful measurement to rank by {objective(spec).name!r}")
    return results[int(np.argmin(v))]


def pareto_front(points: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated rows of ``points`` (n, k), every column minimised, sorted by column 0.

    A row is dominated when another is <= in every column and < in one. Rows with a non-finite value
    are never on the front.
    """
    p = np.asarray(points, dtype=float)
    if p.ndim != 2:
        raise ValueError(f"pareto_front: points must be (n, k), got shape {p.shape}")
    ok = np.flatnonzero(np.isfinite(p).all(axis=1))
    front = []
    for i in ok:
        dominated = np.all(p[ok] <= p[i], axis=1) & np.any(p[ok] < p[i], axis=1)
        if not dominated.any():
            front.append(i)
    front = np.asarray(front, dtype=np.int64)
    return front[np.lexsort(p[front].T[::-1])] if len(front) else front


def pareto(results: Sequence[Result], x: str = "time", y: str = "energy") -> list[Result]:
    """The measurements on the Pareto front of two objectives (default time vs energy per call)."""
    pts = np.stack([values(results, x), values(results, y)], axis=1)
    return [results[int(i)] for i in pareto_front(pts)]


def energy_vs_time(results: Sequence[Result], energy: str | Objective = "energy") -> dict[str, Any]:
    """The time-optimal and the energy-optimal configuration side by side, with the energy saved."""
    e = objective(energy)
    t_best, e_best = best(results, "time"), best(results, e)
    e_t, e_e = e(t_best), e(e_best)
    return {
        "time_optimal": {"config": t_best.config, "time_ms": t_best.time_ms, "energy_per_call_j": e_t,
                         "power_w": metrics(t_best).get("power_w")},
        "energy_optimal": {"config": e_best.config, "time_ms": e_best.time_ms, "energy_per_call_j": e_e,
                           "power_w": metrics(e_best).get("power_w")},
        "energy_saved_fraction": 1.0 - e_e / e_t if e_t > 0 else 0.0,
        "time_cost_fraction": e_best.time_ms / t_best.time_ms - 1.0,
    }


def cost_matrix(results_by_input: Sequence[Mapping[str, Result]], labels: Sequence[str],
                spec: str | Objective | Callable[..., float]) -> np.ndarray:
    """(inputs, labels) matrix of an objective, the ``costs`` a selection model trains on: per-input
    selection for energy instead of time (``adaptune.adaptive.models.fit_model``); a label not measured
    on an input counts as failed (inf)."""
    obj = objective(spec)
    return np.array([[obj(row[lab]) if lab in row else math.inf for lab in labels] for row in results_by_input],
                    dtype=float)
