"""Charts for study reports (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)


def plot_bars(path: str | Path, labels: Sequence[str], values: Sequence[float], *,
              errors: Sequence[float] | None = None, ylabel: str = "", title: str = "",
              log: bool = False, references: Sequence[float] = ()) -> Path:
    """A bar chart (one bar per label, optional error bars, a dashed line at each of ``references``) saved as
    PNG."""
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(labels) + 2), 3.5))
    ax.bar(range(len(values)), values, yerr=errors, capsize=3, color="tab:blue")
    for y in references:
        ax.axhline(y, color="tab:red", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_lines(path: str | Path, series: Mapping[str, tuple[Sequence[float], Sequence[float]]], *,
               xlabel: str = "", ylabel: str = "", title: str = "", logx: bool = False,
               logy: bool = False) -> Path:
    """One line per named ``(x, y)`` series, saved as PNG."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", label=label)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
