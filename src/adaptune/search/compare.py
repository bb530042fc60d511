"""Side-by-side comparison of strategies (ours and Kernel Tuner's) on recorded spaces.

Every (space, strategy, repeat) is one task in a process pool. Ours run through ``Replay``; Kernel
Tuner's run through its own simulation mode (``tune_kernel(simulation_mode=True, cache=...)``) with
``max_fevals`` as the budget and a restriction that admits exactly the recorded configurations, so both
search the same space and count evaluations the same way (distinct configurations, failures included).
Kernel Tuner's evaluation order is mapped back onto the record, so both are scored by the same code.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.progress import BestSoFarProgress
from adaptune.search.base import STRATEGIES, Budget
from adaptune.search.methodology import aggregate, best_so_far_curve, score
from adaptune.search.replay import Replay
from adaptune.store import FormatError, load_recorded
from adaptune.store.files import read_text
from adaptune.store.kt_cache import recorded_to_kt_text

OURS, KERNEL_TUNER = "adaptune", "kernel_tuner"


@dataclass
class Cell:
    """One strategy on one space: what its repeats reached."""

    space: str
    strategy: str
    source: str
    repeats: int
    max_evals: int
    optimum: float
    mean_best: float
    mean_fraction_of_optimum: float
    min_fraction_of_optimum: float
    score: float
    mean_curve: list[float]
    ms_per_ask: float | None = None

    @property
    def label(self) -> str:
        return self.strategy if self.source == OURS else f"kt:{self.strategy}"


@dataclass
class Comparison:
    """All cells of a comparison, plus the settings that produced them."""

    settings: dict[str, Any]
    cells: list[Cell] = field(default_factory=list)

    def labels(self) -> list[str]:
        return list(dict.fromkeys(c.label for c in self.cells))

    def spaces(self) -> list[str]:
        return list(dict.fromkeys(c.space for c in self.cells))

    def cell(self, space: str, label: str) -> Cell | None:
        return next((c for c in self.cells if c.space == space and c.label == label), None)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per strategy: score and fraction of optimum averaged over spaces, and the worst space."""
        out: dict[str, dict[str, float]] = {}
        for label in self.labels():
            cells = [c for c in self.cells if c.label == label]
            out[label] = {"score": aggregate([c.score for c in cells]),
                          "mean_fraction_of_optimum": aggregate([c.mean_fraction_of_optimum for c in cells]),
                          "worst_space_fraction": min(c.mean_fraction_of_optimum for c in cells)}
        return out

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings, "summary": self.summary(), "cells": [asdict(c) for c in self.cells]}


# -- workers (module level so they pickle) -------------------------------------------------------------
@lru_cache(maxsize=16)
def _replay(path: str) -> Replay:
    return Replay.from_file(path)


def _run_ours(path: str, strategy: str, max_evals: int, seed: int) -> tuple[list[float], float]:
    rp = _replay(path)
    tr = rp.run(strategy, Budget(max_evals=max_evals), seed=seed)
    return tr.values.tolist(), 1000.0 * tr.wall_seconds / max(len(tr), 1)


@lru_cache(maxsize=16)
def _kt_inputs(path: str) -> tuple[bytes, dict[str, Any]]:
    """The space as a complete Kernel Tuner cache, JSON bytes and parsed: the file's own text when it is
    one (Kernel Tuner does not read .gz), else the recorded space written as one (a T4 file, an unterminated
    cache, an adaptune database), so Kernel Tuner's strategies search every file ours can."""
    try:
        text = read_text(path)
        data = json.loads(text)
    except (FormatError, json.JSONDecodeError):
        data = None
    if not (isinstance(data, dict) and "tune_params" in data and "cache" in data):
        text = recorded_to_kt_text(load_recorded(path))
        data = json.loads(text)
    return text.encode(), data


def _run_kernel_tuner(path: str, strategy: str, max_evals: int, seed: int) -> tuple[list[float], None]:
    from kernel_tuner import tune_kernel

    rp = _replay(path)
    raw, data = _kt_inputs(path)
    names = list(data["tune_params"])
    recorded = {tuple(c[n] for n in names) for c in rp.space.configs()}

    def recorded_config(*args: Any) -> bool:
        # Kernel Tuner passes a dict, or (through python-constraint) the values positionally
        if len(args) == 1 and isinstance(args[0], dict):
            return tuple(args[0][n] for n in names) in recorded
        return tuple(args) in recorded

    np.random.seed(seed)  # Kernel Tuner's strategies draw from the global generators
    random.seed(seed)
    with warnings.catch_warnings(), tempfile.TemporaryDirectory(prefix="adaptune_kt_") as tmp:
        warnings.simplefilter("ignore")
        cache_file = os.path.join(tmp, "cache.json")  # a private copy: KT may append to its cache
        Path(cache_file).write_bytes(raw)
        results, _ = tune_kernel(data.get("kernel_name", "kernel"), "/* replayed */", data.get("problem_size", 1),
                                 [], data["tune_params"], restrictions=recorded_config, cache=cache_file,
                                 simulation_mode=True, strategy=strategy,
                                 strategy_options={"max_fevals": max_evals}, quiet=True, verbose=False)
    values, seen = [], set()
    for r in results:
        config = {n: r[n] for n in names}
        i = rp.space.find(config)
        if i is None or i in seen:
            continue
        seen.add(i)
        values.append(float(rp.values[i]))
    return values[:max_evals], None


def _task(kind: str, path: str, strategy: str, max_evals: int, seed: int) -> tuple[list[float], float | None]:
    runner = _run_ours if kind == OURS else _run_kernel_tuner
    return runner(path, strategy, max_evals, seed)


# -- the comparison ------------------------------------------------------------------------------------
def compare(paths: list[str | Path], strategies: list[str], kernel_tuner: list[str] | None = None, *,
            repeats: int = 25, kt_repeats: int | None = None, max_evals: int = 100, seed: int = 0,
            jobs: int | None = None, baseline: str = "paper", progress: bool = True) -> Comparison:
    """Run every strategy ``repeats`` times on every recorded space and score them side by side."""
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategy {', '.join(unknown)}; known: {', '.join(sorted(STRATEGIES))}")
    kernel_tuner = list(kernel_tuner or [])
    if kernel_tuner:
        try:
            from kernel_tuner.interface import strategy_map
        except ImportError as e:
            raise ValueError("--kernel-tuner needs the kernel_tuner package installed") from e
        bad = [s for s in kernel_tuner if s not in strategy_map]
        if bad:
            raise ValueError(f"unknown Kernel Tuner strategy {', '.join(bad)}; known: {', '.join(strategy_map)}")
    kt_repeats = repeats if kt_repeats is None else kt_repeats
    spaces = {str(p): Replay.from_file(p) for p in paths}  # fails early, naming a bad file
    if kernel_tuner:
        for p in spaces:
            _kt_inputs(p)  # Kernel Tuner's side reads every file too, before anything runs
    tasks = [(OURS, p, s, r) for p in spaces for s in strategies for r in range(repeats)]
    tasks += [(KERNEL_TUNER, p, s, r) for p in spaces for s in kernel_tuner for r in range(kt_repeats)]
    out: dict[tuple[str, str, str], list[tuple[list[float], float | None]]] = {}
    jobs = jobs or min(len(tasks), os.cpu_count() or 1)

    best_fraction = 0.0
    with BestSoFarProgress("replaying", len(tasks), enabled=progress, best_label="best fraction of optimum") as bar, \
            ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_task, kind, p, s, max_evals, seed * 100_003 + r): (kind, p, s)
                   for kind, p, s, r in tasks}
        for fut in as_completed(futures):
            key = futures[fut]
            values, ms = fut.result()
            out.setdefault(key, []).append((values, ms))
            finite = [v for v in values if math.isfinite(v)]
            if finite:
                best_fraction = max(best_fraction, spaces[key[1]].optimum / min(finite))
            bar.advance(best_text=f"{best_fraction:.3f}")

    cmp = Comparison(settings={"spaces": list(spaces), "strategies": strategies, "kernel_tuner": kernel_tuner,
                               "repeats": repeats, "kt_repeats": kt_repeats, "max_evals": max_evals,
                               "seed": seed, "baseline": baseline, "window": [1, max_evals]})
    for (kind, p, s), runs in sorted(out.items()):
        cmp.cells.append(_cell(spaces[p], p, s, kind, runs, max_evals, baseline))
    return cmp


def _cell(rp: Replay, path: str, strategy: str, kind: str, runs: list[tuple[list[float], float | None]],
          max_evals: int, baseline: str) -> Cell:
    traces = [np.asarray(v, dtype=float) for v, _ in runs]
    bests = np.array([t[np.isfinite(t)].min() if np.isfinite(t).any() else math.inf for t in traces])
    fractions = np.where(np.isfinite(bests), rp.optimum / bests, 0.0)
    finite = rp.values[np.isfinite(rp.values)]
    length = min(max_evals, len(rp.values))
    curve = np.mean([best_so_far_curve(t, length, float(finite.max())) for t in traces], axis=0)
    asks = [ms for _, ms in runs if ms is not None]
    return Cell(space=rp.name or path, strategy=strategy, source=kind, repeats=len(traces), max_evals=max_evals,
                optimum=rp.optimum, mean_best=float(np.mean(bests)),
                mean_fraction_of_optimum=float(np.mean(fractions)),
                min_fraction_of_optimum=float(np.min(fractions)),
                score=score(traces, rp.values, (1, length), baseline), mean_curve=curve.tolist(),
                ms_per_ask=float(np.mean(asks)) if asks else None)


def plot_comparison(cmp: Comparison, path: str | Path) -> Path:
    """Mean best-so-far (as fraction of optimum) per strategy, one panel per space, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spaces = cmp.spaces()
    cols = min(3, len(spaces))
    rows = math.ceil(len(spaces) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, space in zip(axes.flat, spaces, strict=False):
        for label in cmp.labels():
            c = cmp.cell(space, label)
            if c is None:
                continue
            y = c.optimum / np.asarray(c.mean_curve)
            ax.plot(np.arange(1, len(y) + 1), y, label=label, ls="-" if c.source == OURS else "--")
        ax.set_title(space, fontsize=9)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("optimum / mean best so far")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(spaces):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
