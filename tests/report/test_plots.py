"""The tuning plot stays legible: no two tick labels of an axis overlap, whatever the spread of times."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from adaptune.records import Result, Status
from adaptune.report.plots import tuning_figure


def _results(low_ms: float, high_ms: float, n: int = 600) -> list[Result]:
    times = np.geomspace(low_ms, high_ms, n)[np.random.default_rng(0).permutation(n)]
    return [Result(config={"block_size_x": i}, status=Status.OK, time_ms=float(t)) for i, t in enumerate(times)]


@pytest.mark.parametrize("low,high", [(0.55, 110.0), (0.09, 1.8), (0.5, 0.9), (1e-3, 1e3)])
def test_no_tick_labels_overlap(low, high):
    fig = tuning_figure(_results(low, high))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    try:
        for ax in fig.axes:
            boxes = [t.get_window_extent(renderer) for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True)
                     if t.get_visible() and t.get_text()]
            assert len(boxes) >= 2, "an axis with fewer than two labels tells nothing"
            boxes.sort(key=lambda b: b.y0)
            for below, above in zip(boxes, boxes[1:], strict=False):
                assert above.y0 >= below.y1, f"tick labels overlap on {ax.get_title()!r} ({low}-{high} ms)"
    finally:
        plt.close(fig)
