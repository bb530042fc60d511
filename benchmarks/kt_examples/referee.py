"""The referee: Kernel Tuner re-times both tools' best configurations of each tuned kernel on its own clock.

Each tool's best time in its own run is the minimum over noisy means, so it is biased low, and each tool's
clock prefers its own best (the winner's curse): on examples whose configurations are all within noise, the
in-run check ("Kernel Tuner's time of adaptune's best within 3 % of Kernel Tuner's best") judges the noise.
The referee is a third fresh process that runs the example script unchanged with Kernel Tuner; every
``tune_kernel`` call is replayed with the call's own arguments, its ``tune_params`` narrowed to exactly one
configuration (no search, no cache), alternating Kernel Tuner's best and adaptune's best over several rounds
(A B, B A, A B, ...), and the two are compared by their medians over rounds of the call's objective.
Nothing crosses between the tools: the referee gets only the two configurations, as JSON.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

TOLERANCE = 0.03
TOOLS = ("kernel_tuner", "adaptune")
#: arguments the replay drops: it times two fixed configurations, with no search and nothing read from a cache
NO_SEARCH = {"strategy": None, "strategy_options": None, "cache": None, "quiet": True, "verbose": False}


def pairs_to_judge(kt_calls: list[dict[str, Any]], our_calls: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Per ``tune_kernel`` call (in order): both tools' best configurations, or None where there is nothing to
    judge (a tool found none, or the calls tuned different kernels)."""
    pairs: list[dict[str, Any] | None] = []
    for k, a in zip(kt_calls, our_calls, strict=False):
        same_kernel = k["kernel"] == a["kernel"]
        pairs.append({"kernel": k["kernel"], "kernel_tuner": k["best"], "adaptune": a["best"]}
                     if same_kernel and k["best"] and a["best"] else None)
    return pairs


def narrowed(tune_params: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, list[Any]]:
    """``tune_params`` with each parameter's one value of ``config`` (as the script gave it: the JSON record
    holds numbers as numbers and anything else as its text)."""
    out = {}
    for name, values in tune_params.items():
        wanted = config[name]
        match = [v for v in values if v == wanted or str(v) == str(wanted)]
        if not match:
            raise LookupError(f"{name}={wanted!r} is not among the call's values {list(values)!r}")
        out[name] = match[:1]
    return out


def replay_call(tune: Callable[..., Any], call: dict[str, Any], pair: dict[str, Any] | None, rounds: int,
                objective: tuple[str, bool]) -> tuple[dict[str, Any], Any]:
    """Re-time the pair with ``tune`` (Kernel Tuner's ``tune_kernel``) and the call's own arguments; returns the
    referee's record and what the script gets back (the last round's results of both configurations)."""
    name, higher = objective
    record: dict[str, Any] = {"kernel": call["kernel_name"], "objective": name, "higher_is_better": higher,
                              "configs": pair, "replayed": False}
    if pair is None:
        record["why"] = "nothing to judge: a tool found no best for this call (the call runs as the script wrote it)"
        return record, tune(**call)
    if call.get("simulation_mode"):
        record["why"] = "simulation_mode: the call's times come from a cache, nothing to re-time"
        return record, tune(**call)
    if pair["kernel_tuner"] == pair["adaptune"]:
        record["why"] = "the same configuration: nothing to re-time"
        return record, tune(**{**call, **NO_SEARCH, "tune_params": narrowed(call["tune_params"], pair["adaptune"])})
    try:
        params = {tool: narrowed(call["tune_params"], pair[tool]) for tool in TOOLS}
    except (LookupError, TypeError) as exc:
        record["why"] = f"cannot narrow the call's tune_params to the pair: {exc}"
        return record, tune(**call)
    record["rounds"] = []
    for i in range(rounds):
        values, outputs, env = {}, [], None
        for tool in TOOLS if i % 2 == 0 else TOOLS[::-1]:
            results, env = tune(**{**call, **NO_SEARCH, "tune_params": params[tool]})
            values[tool] = _value(results, name)
            outputs.extend(results)
        record["rounds"].append(values)
    record.update(verdict(record["rounds"], higher))
    return record, (outputs, env)


def _value(results: list[dict[str, Any]], name: str) -> float | str:
    """The one configuration's objective, or why Kernel Tuner has none (its error text)."""
    if len(results) != 1:
        return f"{len(results)} results (the call's restrictions exclude it)" if not results else "several results"
    value = results[0].get(name)
    if isinstance(value, int | float) and math.isfinite(float(value)):
        return float(value)
    return str(value if value is not None else results[0].get("time"))[:200]


def verdict(rounds: list[dict[str, Any]], higher: bool) -> dict[str, Any]:
    """Medians over rounds, their spread, the paired per-round ratios, whether adaptune's best is within 3 % of
    Kernel Tuner's (lower objective: adaptune/KT <= 1.03; higher: KT/adaptune <= 1.03), and whether every round
    alone says the same (``rounds_agree``: where not, the noise is as large as the difference judged)."""
    failed = {tool: next((r[tool] for r in rounds if isinstance(r[tool], str)), None) for tool in TOOLS}
    if any(failed.values()):
        why = "; ".join(f"Kernel Tuner could not time {tool}'s best: {text}" for tool, text in failed.items() if text)
        return {"replayed": False, "why": why}
    series = {tool: [r[tool] for r in rounds] for tool in TOOLS}
    medians = {tool: statistics.median(v) for tool, v in series.items()}
    paired = [r["adaptune"] / r["kernel_tuner"] for r in rounds if r["kernel_tuner"] > 0]
    ratio = medians["adaptune"] / medians["kernel_tuner"] if medians["kernel_tuner"] > 0 else math.inf
    def within(r: float) -> bool:
        return (1 / r if higher and r > 0 else r) <= 1 + TOLERANCE

    return {"replayed": True, "medians": medians,
            "spread": {tool: [min(v), max(v)] for tool, v in series.items()},
            "adaptune_over_kernel_tuner": ratio,
            "paired_ratio": {"median": statistics.median(paired), "min": min(paired), "max": max(paired)}
            if paired else None,
            "within_3pct": within(ratio), "rounds_agree": len({within(r) for r in paired}) == 1}


def read_pairs(path: Path) -> list[dict[str, Any] | None]:
    return json.loads(path.read_text())
