"""Plots people would rather see than read: the tuning trajectory and the spread of configurations."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptune.records import Result


def plot_tuning(results: list[Result], path: str | Path, title: str = "") -> Path:
    """Best-so-far time per evaluation (left) and every valid configuration's time, sorted (right)."""
    import matplotlib.pyplot as plt

    fig = tuning_figure(results, title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tuning_figure(results: list[Result], title: str = ""):
    """The figure of :func:`plot_tuning`, not yet saved (tests read its tick labels)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

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
        if ok[-1] >= 10 * ok[0]:  # a log axis where times span a decade or more
            right.set_yscale("log")
            # labels at 1, 2 and 5 of each decade over a few decades, at powers of ten beyond:
            # labelled minor ticks overlap on a wide range
            decades = np.log10(ok[-1] / ok[0])
            right.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades < 2.5 else (1.0,)))
            right.yaxis.set_major_formatter(FormatStrFormatter("%g"))
            right.yaxis.set_minor_formatter(NullFormatter())
        right.axhline(ok[0], color="C2", lw=1, ls="--", label=f"best {ok[0]:.4g} ms")
        right.legend()
    right.set_xlabel("configuration rank")
    right.set_ylabel("time (ms)")
    right.set_title(f"{ok.size} valid, {failed} failed")
    right.grid(alpha=0.3, which="both")
    fig.suptitle(title or "adaptune tuning run")
    fig.tight_layout()
    return fig



def plot_pareto(results: list[Result], path: str | Path, x: str = "time", y: str = "energy",
                title: str = "") -> Path:
    """Every successful configuration by two objectives (default time vs energy per call), the Pareto
    front joined, and the optimum of each objective marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from adaptune.adaptive.objectives import objective, pareto_front, values

    ox, oy = objective(x), objective(y)
    pts = np.stack([values(results, ox), values(results, oy)], axis=1)
    ok = np.isfinite(pts).all(axis=1)
    if not ok.any():
        raise ValueError(f"no measurement has both {ox.name!r} and {oy.name!r}")
    front = pareto_front(pts)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ax.plot(pts[ok, 0], pts[ok, 1], ".", ms=4, color="0.6", label=f"{int(ok.sum())} configurations")
    ax.plot(pts[front, 0], pts[front, 1], "o-", ms=5, color="C3", label=f"Pareto front ({len(front)})")
    ix, iy = int(np.nanargmin(np.where(ok, pts[:, 0], np.inf))), int(np.nanargmin(np.where(ok, pts[:, 1], np.inf)))
    ax.plot(*pts[ix], "s", ms=9, mfc="none", color="C0", label=f"{ox.name}-optimal")
    ax.plot(*pts[iy], "D", ms=9, mfc="none", color="C2", label=f"{oy.name}-optimal")
    ax.set_xlabel(f"{ox.name} ({ox.unit})" if ox.unit else ox.name)
    ax.set_ylabel(f"{oy.name} ({oy.unit})" if oy.unit else oy.name)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or f"{ox.name} vs {oy.name}")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
