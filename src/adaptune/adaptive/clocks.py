"""The clock as a tunable parameter, chosen from recorded measurements (Nitro ch. 4: ⟨variant, frequency⟩).

A clock is one more parameter of a space (``with_clock``: Kernel Tuner's name ``nvml_gr_clock`` by
default, so its caches with a clock column load as they are). Choosing it is pure selection over
measurements that carry the clock column: the best clock per variant (configuration without the clock)
and the best ⟨variant, clock⟩ pair for an objective, e.g. energy per call. Nitro trains two classifiers,
one for the variant and one for the frequency (``split_labels`` gives their labels).

Measuring at a clock means locking the GPU's clocks, which this project never does: the only code that
could (``adaptune.measure.observers.ClockControl``) refuses unless the user passes
``allow_clock_changes=True`` and runs as root.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adaptune.adaptive.objectives import Objective, objective
from adaptune.records import Result

CLOCK_PARAMS = ("nvml_gr_clock", "sm_clock_mhz", "gpu_clock_mhz")
"""Names recognised as a clock parameter (Kernel Tuner's first)."""


def with_clock(params: Mapping[str, Sequence[Any]], clocks: Sequence[int], name: str = "nvml_gr_clock") -> dict:
    """Space parameters with a clock parameter added (MHz, highest first: the default is full speed)."""
    if name in params:
        raise ValueError(f"the space already has a parameter named {name!r}")
    if not clocks or any(int(c) <= 0 for c in clocks):
        raise ValueError(f"clocks must be positive MHz values, got {list(clocks)}")
    return {**{k: list(v) for k, v in params.items()}, name: sorted({int(c) for c in clocks}, reverse=True)}


def clock_param(results: Sequence[Result]) -> str:
    """The clock parameter of recorded results (``ValueError`` when they have none)."""
    names = set().union(*(r.config for r in results)) if results else set()
    for n in CLOCK_PARAMS:
        if n in names:
            return n
    raise ValueError(f"these measurements have no clock parameter (one of {', '.join(CLOCK_PARAMS)}); "
                     f"their parameters: {', '.join(sorted(names)) or 'none'}")


def _variant_key(config: Mapping[str, Any], clock: str) -> tuple:
    return tuple(sorted((k, v) for k, v in config.items() if k != clock))


def select_clock(results: Sequence[Result], spec: str | Objective | Callable[..., float] = "energy",
                 ) -> dict[str, Any]:
    """Best clock per variant and best ⟨variant, clock⟩ overall for an objective, from measurements.

    Returns ``{"clock_param", "objective", "best": {config, clock, value}, "per_variant": [{variant, clock,
    value, at_max_clock, saved_fraction}]}`` where ``saved_fraction`` is how much of the objective the
    chosen clock saves against the highest measured clock of the same variant.
    """
    clock = clock_param(results)
    obj = objective(spec)
    groups: dict[tuple, list[Result]] = {}
    for r in results:
        groups.setdefault(_variant_key(r.config, clock), []).append(r)
    per_variant = []
    best: dict[str, Any] | None = None
    for key, rs in groups.items():
        scored = [(obj(r), r) for r in rs]
        ok = [(v, r) for v, r in scored if math.isfinite(v)]
        if not ok:
            continue
        v, r = min(ok, key=lambda t: t[0])
        top_v, top_r = max(ok, key=lambda t: t[1].config[clock])
        row = {"variant": dict(key), "clock": r.config[clock], "value": v,
               "max_clock": top_r.config[clock], "at_max_clock": top_v,
               "saved_fraction": 1.0 - v / top_v if top_v > 0 else 0.0}
        per_variant.append(row)
        if best is None or v < best["value"]:
            best = {"config": dict(r.config), "clock": r.config[clock], "value": v}
    if best is None:
        raise ValueError(f"no successful measurement to choose a clock by {obj.name!r}")
    return {"clock_param": clock, "objective": obj.name, "best": best, "per_variant": per_variant}


def split_labels(labels: Sequence[Mapping[str, Any]], clock: str) -> tuple[list[dict], list[Any]]:
    """Nitro's split of joint ⟨variant, frequency⟩ labels into T_v and T_f: one label list per classifier."""
    return [{k: v for k, v in lab.items() if k != clock} for lab in labels], [lab[clock] for lab in labels]
