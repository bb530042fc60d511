"""Breadth-first search variants (levels from one source) on a symmetric graph in CSR, driven a level at a
time from the host (one launch and one 4-byte read a level).

Why several: which one wins depends on the degree distribution and the diameter (Nitro's BFS features).
- `topdown_thread` / `topdown_warp`: every vertex is checked each level, a thread (or 32 threads) a vertex:
  no queue to maintain, cheap on small-diameter graphs with big frontiers; the warp form reads long
  neighbour lists coalesced.
- `queue_thread` / `queue_warp`: work-efficient frontier queues (a visited bitmap claims each vertex once):
  best when frontiers are small (meshes, roads, deep trees).
- `edge_parallel`: a thread an edge each level: even work whatever the degree skew.
- `bottom_up`: unvisited vertices look for a parent and stop at the first: cheap on huge frontiers.
- `direction_optimising` (Beamer et al.): queue top-down while the frontier is small, bottom-up while it is
  large (the default: what graph libraries do).
- `topdown_batched` / `edge_batched`: the same sweeps, but BATCH levels are launched before the host reads
  the level counts (one copy of BATCH words): a level then costs a launch instead of a launch plus a
  round trip, which wins on meshes, roads and deep trees (hundreds of levels) and loses up to BATCH - 1
  idle sweeps on small-world graphs (a handful of levels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.kernels.device import Device

BLOCK = 256
WARP = 32
UNVISITED = 0xFFFFFFFF
ALPHA = 14.0  # switch to bottom-up when frontier edges exceed m / ALPHA (Beamer's heuristic)
BETA = 24.0  # back to top-down when the frontier is below n / BETA
BLOCKS_PER_SM = 8
BATCH = 16  # levels launched between two reads of the level counts (batched variants)


@dataclass
class DeviceGraph:
    """A symmetric graph on a device: CSR (indptr, indices), the edge sources (COO rows) for the
    edge-parallel variant, and the per-search buffers (levels, visited bitmap, queues, level counts)."""

    device: Device
    n: int
    m: int  # stored (directed) edges: each undirected edge twice
    indptr: Any
    indices: Any
    src: Any
    level: Any
    visited: Any
    queues: tuple[Any, Any]
    counts: Any
    size: Any
    extra: dict[str, Any] = field(default_factory=dict)


def upload(device: Device, indptr, indices) -> DeviceGraph:
    """Put a symmetric CSR graph (canonical: sorted, no duplicates, no self-loops needed) on the device."""
    xp = device.xp
    n = len(indptr) - 1
    if n < 1:
        raise ValueError("a graph needs at least one vertex (indptr of length >= 2)")
    m = int(indptr[-1])
    if m >= 2**31 or n >= 2**31:
        raise ValueError(f"{n} vertices / {m} edges exceed the 32-bit index range of the kernels")
    if len(indices) != m:
        raise ValueError(f"indices has {len(indices)} entries, indptr[-1] says {m}")
    ip = xp.asarray(indptr, dtype=np.int32)
    ix = xp.asarray(indices, dtype=np.int32)
    src = xp.searchsorted(ip[1:], xp.arange(m, dtype=np.int32), side="right").astype(np.int32)

    def put(a):
        return device.asarray(a) if isinstance(a, np.ndarray) else a

    queues = (device.empty(n, np.uint32), device.empty(n, np.uint32))
    return DeviceGraph(device, n, m, put(ip), put(ix), put(src), device.empty(n, np.uint32),
                       device.empty(-(-n // 32), np.uint32), queues, device.empty(n + 2 + BATCH, np.uint32),
                       device.empty(1, np.uint32))


def _read(dev: Device, array, index: int) -> int:
    """One word from the device (a sync): the host loop's only transfer a level."""
    if dev.xp is np:
        return int(array[index:index + 1].get()[0])
    return int(array[index])


def _read_many(dev: Device, array, lo: int, hi: int) -> np.ndarray:
    """Words [lo, hi) in one copy (CuPy and PyOpenCL arrays both slice and `get`)."""
    return array[lo:hi].get()


def _grid(dev: Device, items: int, per_block: int) -> int:
    return max(1, min(-(-items // per_block), BLOCKS_PER_SM * dev.multiprocessors))


def _start(g: DeviceGraph, source: int) -> None:
    if not 0 <= source < g.n:
        raise ValueError(f"source {source} is not a vertex of a graph with {g.n} vertices")
    dev = g.device
    dev.fill_zero(g.counts)
    init = dev.kernel("bfs_kernels.c", "bfs_init", {"BLOCK": BLOCK})
    init(_grid(dev, g.n, BLOCK), BLOCK, (g.level, g.visited, np.uint32(g.n), np.uint32(g.visited.size),
                                         np.uint32(source), g.queues[0]))


def _sweep(g: DeviceGraph, source: int, name: str, defines: dict[str, Any], edges: bool = False,
           batch: int = 1) -> Any:
    """Level loop for the variants that check every vertex (or edge) each level; with batch > 1, `batch`
    levels are launched between reads (levels past the last one find no vertex and change nothing)."""
    dev = g.device
    _start(g, source)
    kernel = dev.kernel("bfs_kernels.c", name, {"BLOCK": BLOCK, **defines})
    items = g.m if edges else g.n * defines.get("VEC", 1)
    grid = _grid(dev, items, BLOCK)
    first = g.src if edges else g.indptr
    count = g.m if edges else g.n
    cur = 0
    if batch > 1:
        while True:
            for i in range(batch):
                kernel(grid, BLOCK, (first, g.indices, g.level, np.uint32(count), np.uint32(cur + i), g.counts))
            found = _read_many(dev, g.counts, cur + 1, cur + 1 + batch)
            if (found == 0).any():
                return g.level
            cur += batch
    while True:
        kernel(grid, BLOCK, (first, g.indices, g.level, np.uint32(count), np.uint32(cur), g.counts))
        if _read(dev, g.counts, cur + 1) == 0:
            return g.level
        cur += 1


def topdown_thread(g: DeviceGraph, source: int) -> Any:
    return _sweep(g, source, "bfs_topdown_group", {"VEC": 1})


def topdown_warp(g: DeviceGraph, source: int) -> Any:
    return _sweep(g, source, "bfs_topdown_group", {"VEC": WARP})


def edge_parallel(g: DeviceGraph, source: int) -> Any:
    return _sweep(g, source, "bfs_edge", {}, edges=True)


def topdown_batched(g: DeviceGraph, source: int) -> Any:
    return _sweep(g, source, "bfs_topdown_group", {"VEC": 1}, batch=BATCH)


def edge_batched(g: DeviceGraph, source: int) -> Any:
    return _sweep(g, source, "bfs_edge", {}, edges=True, batch=BATCH)


def bottom_up(g: DeviceGraph, source: int) -> Any:
    return _sweep(g, source, "bfs_bottomup", {})


def _queue_level(g: DeviceGraph, vec: int, cur: int, size: int, flip: int) -> int:
    dev = g.device
    kernel = dev.kernel("bfs_kernels.c", "bfs_queue", {"BLOCK": BLOCK, "VEC": vec})
    kernel(_grid(dev, size * vec, BLOCK), BLOCK,
           (g.indptr, g.indices, g.level, g.visited, g.queues[flip], np.uint32(size), g.queues[1 - flip],
            np.uint32(cur), g.counts))
    return _read(dev, g.counts, cur + 1)


def _queued(g: DeviceGraph, source: int, vec: int) -> Any:
    _start(g, source)
    cur, size, flip = 0, 1, 0
    while size:
        size = _queue_level(g, vec, cur, size, flip)
        cur, flip = cur + 1, 1 - flip
    return g.level


def queue_thread(g: DeviceGraph, source: int) -> Any:
    return _queued(g, source, 1)


def queue_warp(g: DeviceGraph, source: int) -> Any:
    return _queued(g, source, WARP)


def direction_optimising(g: DeviceGraph, source: int) -> Any:
    """Queue top-down (a thread a vertex) while frontier edges < m / ALPHA, bottom-up while the frontier
    is above n / BETA; the frontier's edges are estimated as its size x the average degree."""
    dev = g.device
    _start(g, source)
    avg = g.m / g.n
    bottom = dev.kernel("bfs_kernels.c", "bfs_bottomup", {"BLOCK": BLOCK})
    collect = dev.kernel("bfs_kernels.c", "bfs_collect", {"BLOCK": BLOCK})
    cur, size, flip, top_down = 0, 1, 0, True
    while size:
        if top_down and size * avg > g.m / ALPHA:
            top_down = False
        elif not top_down and size < g.n / BETA:
            dev.fill_zero(g.size)
            collect(_grid(dev, g.n, BLOCK), BLOCK, (g.level, g.visited, np.uint32(g.n), np.uint32(cur),
                                                    g.queues[flip], g.size))
            top_down = True
        if top_down:
            size = _queue_level(g, 1, cur, size, flip)
            flip = 1 - flip
        else:
            bottom(_grid(dev, g.n, BLOCK), BLOCK, (g.indptr, g.indices, g.level, np.uint32(g.n), np.uint32(cur),
                                                   g.counts))
            size = _read(dev, g.counts, cur + 1)
        cur += 1
    return g.level


def variants() -> dict[str, Callable[[DeviceGraph, int], Any]]:
    """Every BFS variant by name; each returns the device array of levels (UNVISITED where unreached)."""
    return {"topdown_thread": topdown_thread, "topdown_warp": topdown_warp, "queue_thread": queue_thread,
            "queue_warp": queue_warp, "edge_parallel": edge_parallel, "bottom_up": bottom_up,
            "direction_optimising": direction_optimising, "topdown_batched": topdown_batched,
            "edge_batched": edge_batched}


def reference_levels(indptr: np.ndarray, indices: np.ndarray, source: int) -> np.ndarray:
    """Levels by SciPy (breadth_first_order predecessors, depths by pointer jumping); UNVISITED unreached."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order

    n = len(indptr) - 1
    a = sp.csr_matrix((np.ones(len(indices), np.int8), indices, indptr), shape=(n, n))
    order, pred = breadth_first_order(a, source, directed=True, return_predecessors=True)
    anc = pred.astype(np.int64)
    depth = np.where(anc >= 0, 1, 0).astype(np.int64)
    reached = np.zeros(n, bool)
    reached[order] = True
    while True:
        live = anc >= 0
        if not live.any():
            break
        idx = np.nonzero(live)[0]
        depth[idx] += depth[anc[idx]]
        anc[idx] = anc[anc[idx]]
    levels = np.full(n, UNVISITED, np.uint32)
    levels[reached] = depth[reached].astype(np.uint32)
    return levels
