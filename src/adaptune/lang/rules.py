"""The untuned reduction rule (kept apart from ``reduce`` so a plain flush never imports the adaptive layer)."""

from __future__ import annotations

from typing import Any

from adaptune.lang.codegen import ReduceShape


def default_choice(rs: ReduceShape, runtime: Any) -> tuple[str, dict[str, int]]:
    """The untuned rule: many groups per output then a second pass for few long reductions (``grid_stride``
    on a GPU, ``two_pass`` on a CPU or when strided), one work-item per output when the reduced axis is
    strided (neighbouring work-items then read neighbouring addresses), a segment of a work-group per output
    for short contiguous rows, a work-group per output for long ones."""
    block = min(256, runtime.max_block)
    # few long contiguous reductions: on a GPU the whole grid sweeps the array with 4 loads in flight per
    # work-item; on a CPU (OpenCL/PoCL: a work-group is one thread) contiguous chunks per group are faster
    sweep = ("grid_stride", {"block": block, "unroll": 4}) if getattr(runtime, "kind", "") == "cuda" else \
        ("two_pass", {"block": block})
    if rs.n_out == 1:
        return sweep if rs.length > 4 * block else ("tree", {"block": block})
    if rs.stride != 1 or rs.length <= 16:
        if rs.n_out < 64 * runtime.multiprocessors and rs.length > 64 * block:
            return "two_pass", {"block": block}
        return "thread_per_output", {"block": block}
    if rs.length <= 256:
        seg = min(32, max(2, 1 << (max(rs.length // 4, 1) - 1).bit_length()))
        return "segmented", {"block": block, "seg": seg}
    if rs.n_out < 4 * runtime.multiprocessors:
        return sweep
    return "tree", {"block": block}
