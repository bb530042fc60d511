"""Policies (seed 001 Table 5.4) as an adaptune ``Space`` per schedule, pruned by the device's limits.

Get-Parameters: each stage contributes the parameters its schedule uses (a sequential level has none
but ``enable_unroll`` for its inner loop); a computation with several tunable stages prefixes them
``s<i>_``. Device constraints: block size <= the device's maximum work-group size, local memory per
work-group within the device's limit, warp-shuffle reductions only on CUDA.
"""

from __future__ import annotations

from typing import Any

from adaptune.lang.ndp.lower import Stage
from adaptune.space import Space

BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
GRAINS = (1, 2, 4, 8)
WARPS = (2, 4, 8, 16, 32)
DEFAULTS = {"block_size": 256, "grain_size": 4, "block_reduce_algo": "tree", "block_scan_algo": "blelloch",
            "execution_resource": "warp", "logical_warp_size": 32, "enable_unroll": 0}


def stage_params(stage: Stage, schedule: tuple[str, ...]) -> tuple[dict[str, list[Any]], list[str]]:
    """(parameters, constraints) of one stage under one schedule; names unprefixed."""
    kind = stage.kind
    p: dict[str, list[Any]] = {}
    c: list[str] = []
    top = schedule[0]
    if kind in ("map", "scatter"):
        if top != "sequential":
            p = {"block_size": list(BLOCK_SIZES), "grain_size": list(GRAINS)}
    elif kind == "reduce":
        if top != "sequential":
            p = {"block_size": list(BLOCK_SIZES), "grain_size": list(GRAINS), "block_reduce_algo": ["tree", "shuffle"]}
            c = ["block_reduce_algo == 'tree' or cuda == 1", f"block_size * {_bytes(stage)} <= local_mem"]
    elif kind == "scan":
        if top != "sequential":
            p = {"block_size": list(BLOCK_SIZES), "grain_size": list(GRAINS),
                 "block_scan_algo": ["blelloch", "hillis_steele"]}
            c = [f"block_size * (grain_size + 2) * {_bytes(stage)} <= local_mem"]
    elif kind in ("segreduce", "segmap"):
        outer, inner = schedule
        coop = "cooperative" if kind == "segreduce" else "independent"
        if inner == coop and outer != "sequential":
            p = {"block_size": list(BLOCK_SIZES), "execution_resource": ["warp", "block"],
                 "logical_warp_size": list(WARPS)}
            c = ["execution_resource == 'warp' or logical_warp_size == 32", "logical_warp_size <= block_size"]
        elif inner == coop:  # sequential outer: one work-group takes the rows in turn
            p = {"block_size": list(BLOCK_SIZES)}
        elif outer != "sequential":  # a thread per row
            p = {"block_size": list(BLOCK_SIZES), "enable_unroll": [0, 1]}
        else:
            p = {"enable_unroll": [0, 1]}
        if kind == "segreduce" and inner == coop:
            p["block_reduce_algo"] = ["tree", "shuffle"]
            c += ["block_reduce_algo == 'tree' or cuda == 1", f"block_size * {_bytes(stage)} <= local_mem"]
        if kind == "segmap" and outer == "sequential" and inner == coop:
            p["grain_size"] = list(GRAINS)
    if "block_size" in p:
        c.append("block_size <= max_wg")
    return p, c


def _bytes(stage: Stage) -> int:
    return 4


def space_for(stages: list[Stage], schedules: dict[int, tuple[str, ...]], limits: dict[str, int]) -> Space | None:
    """The policy Space of one variant (None when every stage is sequential and has nothing to tune)."""
    tunable = [s for s in stages if not s.fixed]
    prefix = len(tunable) > 1
    params: dict[str, list[Any]] = {}
    constraints: list[str] = []
    defaults: dict[str, Any] = {}
    for st in tunable:
        p, c = stage_params(st, schedules[st.index])
        pre = f"s{st.index}_" if prefix else ""
        for name, values in p.items():
            params[pre + name] = values
            defaults[pre + name] = DEFAULTS[name]
        for text in c:
            for name in p:
                text = _rename(text, name, pre + name)
            constraints.append(text)
    if not params:
        return None
    return Space(params, constraints=constraints, defaults=defaults, constants=dict(limits))


def _rename(text: str, name: str, new: str) -> str:
    import re

    return re.sub(rf"\b{name}\b", new, text) if new != name else text


def stage_policy(stage: Stage, config: dict[str, Any], prefixed: bool) -> dict[str, Any]:
    """This stage's policy values out of a variant configuration (defaults for fixed stages)."""
    pre = f"s{stage.index}_" if prefixed else ""
    out = dict(DEFAULTS)
    if not stage.fixed:
        for k, v in config.items():
            if k.startswith(pre):
                out[k[len(pre):]] = v
    return out
