"""Plots people would rather see than read: the tuning trajectory and the spread of configurations."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptune.records import Result


def plot_tuning(results: list[Result], path: str | Path, title: str = "") -> Path:
    """Best-so-far time per evaluation (left) and every valid configuration's time, sorted (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    times = np.array([r.time_ms for r in results], dtype=float)
    best = np.minimum.accumulate(np.where(np.isfinite(times), times, np.inf))
    ok = np.sort(times[np.isfinite(times)])
    failed = int((~np.isfinite(times)).sum())

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    shown = np.isfinite(best)
    left.plot(np.arange(1, len(best) + 1)[shown], best[shown], drawstyle="steps-post", color="C0")
    left.set_xlabel("evaluation")
    left.set_ylabel("best time so far (ms)")
    left.set_title("search trajectory")
    left.grid(alpha=0.3)
    if ok.size:
        right.plot(np.arange(1, ok.size + 1), ok, ".", ms=3, color="C1")
        right.set_yscale("log")
        right.yaxis.set_major_formatter(ScalarFormatter())
        right.yaxis.set_minor_formatter(ScalarFormatter())
        right.axhline(ok[0], color="C2", lw=1, ls="--", label=f"best {ok[0]:.4g} ms")
        right.legend()
    right.set_xlabel("configuration rank")
    right.set_ylabel("time (ms)")
    right.set_title(f"{ok.size} valid, {failed} failed")
    right.grid(alpha=0.3, which="both")
    fig.suptitle(title or "adaptune tuning run")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

