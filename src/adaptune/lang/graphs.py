"""A cached plan replayed as one CUDA graph launch while it binds the values it was captured with.

A graph bakes in its kernels' arguments: the buffers' addresses and the scalars' values. So a plan is
captured only when it allocates nothing per call (every result written in place, intermediates pooled) and
the second time the same arguments come (a loop updating its arrays in place), and replayed only while they
stay the same; otherwise it launches kernel by kernel. Used by ``anp.jit``'s replays and by the session's
cache hits.
"""

from __future__ import annotations

from typing import Any

from adaptune.lang import fuse
from adaptune.lang.runtime import Runtime


def binding(vals: list[Any], n_leaves: int, scalars: bool = True) -> tuple:
    """What a graph bakes in of the bound values ``vals`` ([leaf buffers..., scalars...]): the leaves'
    addresses and (``scalars``) the scalars' bits (bits, not values: -0.0 and 0.0, or two NaNs, differ)."""
    address = Runtime.address
    if not scalars:
        return tuple([address(v) for v in vals[:n_leaves]])
    return (*[address(v) for v in vals[:n_leaves]], *[s.tobytes() for s in vals[n_leaves:]])


def graphable(plan: fuse.Plan, runtime: Runtime) -> bool:
    """Whether a graph can replay ``plan``: CUDA, and nothing allocated per launch."""
    return runtime.graphs and not any(step[4] for step in plan.fast)


class GraphReplay:
    """The captured graph of one plan and the arguments it was captured with."""

    __slots__ = ("graph", "graph_key", "seen_key", "usable")

    def __init__(self) -> None:
        self.graph: Any = None
        self.graph_key: tuple | None = None
        self.seen_key: tuple | None = None
        self.usable = True

    def launch(self, plan: fuse.Plan, vals: list[Any], runtime: Runtime, key: tuple) -> list[Any]:
        """Launch ``plan`` on ``vals`` (as ``fuse.launch``); ``key`` identifies the bound arguments (leaf
        addresses, scalar bits): equal keys replay the graph."""
        if key == self.graph_key:
            runtime.launch_graph(self.graph)
            return plan.roots(vals)  # results are leaves: written in place
        if key == self.seen_key:
            try:
                self.graph = runtime.capture(lambda: fuse.launch(plan, list(vals), runtime))
                self.graph_key = key
            except Exception:  # capture refused (driver, pool): never try again for this plan
                self.usable = False
                return fuse.launch(plan, vals, runtime)
            runtime.launch_graph(self.graph)
            return plan.roots(vals)
        self.seen_key = key
        return fuse.launch(plan, vals, runtime)
