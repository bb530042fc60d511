"""A cached plan replayed as one CUDA graph launch while it binds the values it was captured with.

A graph bakes in its kernels' arguments: the buffers' addresses and the scalars' values. So a plan is captured
the second time the same arguments come -- the bound leaves and scalars, and the addresses of the outputs it
allocates for this launch -- and replayed while they come again; otherwise it launches kernel by kernel. A loop
that updates its arrays in place binds the same buffers every step; one that makes new arrays each step (the
n-body step's new state) gets its outputs from CuPy's memory pool, which hands back the blocks freed a step
before: its addresses cycle through a few sets, so a few graphs are kept per plan. Where the addresses never
repeat, keying them is given up after ``GIVE_UP_AFTER`` launches without a replay. Used by ``anp.jit``'s
replays and by the session's cache hits.
"""

from __future__ import annotations

from typing import Any

from adaptune.lang import fuse
from adaptune.lang.runtime import Runtime

GRAPHS_PER_PLAN = 4  # address sets kept per plan (a loop making new arrays each step cycles through two)
SEEN_KEYS = 64  # argument sets remembered once (captured the second time one comes)
GIVE_UP_AFTER = 32  # launches in a row without a replay: the addresses do not repeat, stop computing keys


def binding(vals: list[Any], n_leaves: int, scalars: bool = True) -> tuple:
    """What a graph bakes in of the bound values ``vals`` ([leaf buffers..., scalars...]): the leaves'
    addresses and (``scalars``) the scalars' bits (bits, not values: -0.0 and 0.0, or two NaNs, differ)."""
    address = Runtime.address
    if not scalars:
        return tuple([address(v) for v in vals[:n_leaves]])
    return (*[address(v) for v in vals[:n_leaves]], *[s.tobytes() for s in vals[n_leaves:]])


def graphable(plan: fuse.Plan, runtime: Runtime) -> bool:
    """Whether a graph can replay ``plan``: CUDA, and kernels to launch."""
    return runtime.graphs and bool(plan.launches)


class GraphReplay:
    """The captured graphs of one plan, by the arguments each was captured with."""

    __slots__ = ("graphs", "seen", "misses", "usable")

    def __init__(self) -> None:
        self.graphs: dict[tuple, Any] = {}
        self.seen: set[tuple] = set()
        self.misses = 0
        self.usable = True

    def launch(self, plan: fuse.Plan, vals: list[Any], runtime: Runtime, key: tuple) -> list[Any]:
        """Launch ``plan`` on ``vals`` (as ``fuse.launch``); ``key`` identifies the bound arguments (leaf
        addresses, scalar bits): with the addresses of the outputs allocated here, an equal key replays."""
        vals = fuse.allocate(plan, vals, runtime)
        if plan.allocs:
            address = runtime.address
            key = (*key, *[address(vals[i]) for i, _, _ in plan.allocs])
        graph = self.graphs.get(key)
        if graph is None and key in self.seen:
            try:
                graph = runtime.capture(lambda: fuse.launch_allocated(plan, vals))
            except Exception:  # capture refused (driver, pool): never try again for this plan
                self.usable = False
            else:
                if len(self.graphs) >= GRAPHS_PER_PLAN:
                    del self.graphs[next(iter(self.graphs))]  # the oldest
                self.graphs[key] = graph
        if graph is not None:
            self.misses = 0
            runtime.launch_graph(graph)
            return plan.roots(vals)
        if len(self.seen) >= SEEN_KEYS:
            self.seen.clear()
        self.seen.add(key)
        self.misses += 1
        if self.misses > GIVE_UP_AFTER:
            self.usable = False
        fuse.launch_allocated(plan, vals)
        return plan.roots(vals)
