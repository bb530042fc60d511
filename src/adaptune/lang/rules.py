"""The untuned reduction rule (kept apart from ``reduce`` so a plain flush never imports the adaptive layer)."""

from __future__ import annotations

from typing import Any

from adaptune.lang.codegen import ReduceShape, column_applies


def default_choice(rs: ReduceShape, runtime: Any) -> tuple[str, dict[str, int]]:
    """The untuned rule: many groups per output then a second pass for few long reductions (``grid_stride``
    on a GPU, ``two_pass`` on a CPU or when strided), one work-item per output when the reduced axis is
    strided (neighbouring work-items then read neighbouring addresses), a segment of a work-group per output
    for short contiguous rows, a work-group per output for long ones.

    On CUDA three cases follow H100 measurements of the very kernels named (lang_h100*.md): rows of <= 16
    and rows of 257-1024 elements take ``segmented`` (0.102 and 0.094 ms vs 0.138 and 0.197 for the general
    rule on 4 Mi x 16 and 128 Ki x 512 sums), and strided reductions with fewer outputs than about 128 per
    multiprocessor take ``segmented`` with 8 lanes (8192 x 8192 axis 0: 0.106 vs 0.232 ms with a work-item
    per output, which then leaves most of the GPU idle)."""
    block = min(256, runtime.max_block)
    gpu = getattr(runtime, "kind", "") == "cuda"
    # few long contiguous reductions: on a GPU the whole grid sweeps the array with 4 loads in flight per
    # work-item; on a CPU (OpenCL/PoCL: a work-group is one thread) contiguous chunks per group are faster
    sweep = ("grid_stride", {"block": block, "unroll": 4}) if gpu else ("two_pass", {"block": block})
    if rs.n_out == 1:
        return sweep if rs.length > 4 * block else ("tree", {"block": block})
    if rs.stride != 1:
        if column_applies(rs, block) and 4 * rs.n_out <= block and rs.length > 64 * block:
            return "column", {"block": block}  # few outputs over a leading axis: whole rows per group
        if rs.n_out < 64 * runtime.multiprocessors and rs.length > 64 * block:
            return "two_pass", {"block": block}
        if gpu and rs.n_out < 128 * runtime.multiprocessors and rs.length >= 64:
            return "segmented", {"block": 128, "seg": 8}
        return "thread_per_output", {"block": block}
    if rs.length <= 16:
        return ("segmented", {"block": 128, "seg": 4}) if gpu else ("thread_per_output", {"block": block})
    if rs.length <= (1024 if gpu else 256):
        seg = min(32, max(2, 1 << (max(rs.length // 4, 1) - 1).bit_length()))
        return "segmented", {"block": block, "seg": seg}
    if rs.n_out < 4 * runtime.multiprocessors:
        return sweep
    return "tree", {"block": block}
