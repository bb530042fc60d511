"""A prior over a tuning space from the launch-configuration model, for the ``warm`` strategy.

``warm`` (search/warm.py) takes one number per valid configuration (lower = predicted better) and asks
the best-ranked configurations first. Here that number comes from the LS-CAT forest: every configuration
is mapped to the nearest of LS-CAT's 20 block shapes (by thread count, then aspect, as
:func:`adaptune.predict.first_config`; for 1-D kernels twin shapes of one thread count are averaged) and
scored ``-log`` of the shape's predicted relative
performance, so the whole ranking of the 20 shapes is used, not just the top one.

The model knows block shapes only. For the other parameters an optional, documented rule breaks ties:
per-thread work parameters (names with ``tile``, ``unroll``, ``vector_width``, ``elements_per_thread``)
prefer the geometric middle of their range — moderate work a thread, neither the extreme of 1 nor the
largest tile. It is a hand rule, weighted below the block-shape term (``work_weight``), and switches
(two-valued parameters) are left to ``warm``'s per-mode spreading.

For a single *first configuration* (:func:`first_pick`, :func:`launch_first`) a second hand rule is
added: 0/1 switches that name an optional optimisation (``use_*`` such as ``use_shared_mem``/``use_shmem``,
``use_padding``, ``use_atomics``, and ``read_only``) prefer 1 — whoever wrote the kernel offered them
because they are meant to help. Both hand rules were written after seeing the four H100 example spaces
(``data/lscat_h100/examples_h100.json``), so those examples are no independent test of them; the
recorded convolution spaces of six other GPUs (``benchmarks/lscat/first_config_hub.py``) are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptune.predict import corpus
from adaptune.predict.predictor import BLOCK_NAMES, shape_scores

WORK_PARAM = re.compile(r"tile|unroll|vector_width|elements_per_thread|work_per_thread", re.I)
SWITCH_ON = re.compile(r"^use_|^read_only$", re.I)


def _shape_perf(bx: int, by: int, perf: np.ndarray, two_d: bool) -> float:
    """Predicted relative performance of the LS-CAT shape nearest to block (bx, by): by thread count, then
    aspect. A 1-D kernel runs (b, b) exactly as (b*b, 1), so there twins are averaged."""
    t = math.log2(max(bx * by, 1))
    if not two_d:
        counts = sorted({sx * sy for sx, sy in corpus.SHAPES}, key=lambda c: abs(math.log2(c) - t))
        return float(np.mean([perf[i] for i, (sx, sy) in enumerate(corpus.SHAPES) if sx * sy == counts[0]]))
    best, best_key = 0, None
    for i, (sx, sy) in enumerate(corpus.SHAPES):
        key = (abs(math.log2(sx * sy) - t), abs(math.log2(bx) - math.log2(sx)))
        if best_key is None or key < best_key:
            best, best_key = i, key
    return float(perf[best])


def work_penalty(space: Any) -> np.ndarray:
    """Per valid configuration: mean distance of the work parameters from the geometric middle of their
    range, in units of the range's log2 width (0 = middle, 0.5 = an extreme); 0 without such parameters."""
    names = [n for n in space.names if WORK_PARAM.search(n) and n not in BLOCK_NAMES]
    configs = list(space.configs())
    out = np.zeros(len(configs))
    usable = []
    for n in names:
        vals = [c[n] for c in configs]
        if all(isinstance(v, int | float) and v > 0 for v in vals) and len(set(vals)) > 2:
            usable.append((n, math.log2(min(vals)), math.log2(max(vals))))
    for i, c in enumerate(configs):
        if usable:
            out[i] = float(np.mean([abs(math.log2(c[n]) - (lo + hi) / 2) / max(hi - lo, 1e-9)
                                    for n, lo, hi in usable]))
    return out


def switch_penalty(space: Any) -> np.ndarray:
    """Per valid configuration: the share of optimisation switches (0/1 parameters named ``use_*`` or
    ``read_only``) that are off; 0 without such parameters."""
    configs = list(space.configs())
    names = [n for n in space.names if SWITCH_ON.search(n)
             and {c[n] for c in configs} == {0, 1}]
    if not names:
        return np.zeros(len(configs))
    return np.array([float(np.mean([1 - int(c[n]) for n in names])) for c in configs])


def space_prior(space: Any, perf: Sequence[float], two_d: bool, work_weight: float = 0.1,
                switch_weight: float = 0.0) -> np.ndarray:
    """One value per valid configuration of ``space`` (lower = predicted better) from the 20 predicted
    relative performances ``perf`` (corpus.SHAPES order), the work-parameter rule and (``switch_weight``
    > 0) the switch rule."""
    if "block_size_x" not in space.names:
        raise ValueError(f"space has no block_size_x parameter; parameters are {space.names}")
    perf = np.clip(np.asarray(perf, dtype=float), 1e-3, None)
    shape_term = np.array([-math.log(_shape_perf(c["block_size_x"], c.get("block_size_y", 1), perf, two_d))
                           for c in space.configs()])
    out = shape_term + work_weight * work_penalty(space)
    if switch_weight:
        out = out + switch_weight * switch_penalty(space)
    return out


def first_pick(space: Any, perf: Sequence[float], two_d: bool, work_weight: float = 0.1,
               switch_weight: float = 0.1) -> dict[str, Any]:
    """The single configuration to try first: the best of :func:`space_prior` with both hand rules."""
    return space.config(int(np.argmin(space_prior(space, perf, two_d, work_weight, switch_weight))))


def launch_prior(space: Any, source: str, name: str, args: Sequence[Any] | None = None, *,
                 size: int | None = None, work_weight: float = 0.1, **kw: Any) -> np.ndarray:
    """The prior for ``make_strategy("warm", space, prior=...)`` / ``tune(..., strategy="warm",
    strategy_options={"prior": ...})`` of CUDA kernel ``name`` in ``source``."""
    perf = shape_scores(source, name, args, size=size, **kw)
    return space_prior(space, perf, corpus.is_2d(source), work_weight)


def launch_first(space: Any, source: str, name: str, args: Sequence[Any] | None = None, *,
                 size: int | None = None, **kw: Any) -> dict[str, Any]:
    """A first configuration of ``space`` for CUDA kernel ``name`` in ``source`` that sets every parameter
    (block shape from the model, the rest from the hand rules of :func:`first_pick`)."""
    perf = shape_scores(source, name, args, size=size, **kw)
    return first_pick(space, perf, corpus.is_2d(source))
