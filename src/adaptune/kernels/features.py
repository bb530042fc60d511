"""Input features for the SpMV, histogram and sort variants (Nitro's sets), each computed on the device in
one kernel launch plus one small copy, with exact NumPy/SciPy references for tests.

Features return plain dicts of floats in a fixed key order, ready for a CodeVariant feature function.
"""

from __future__ import annotations

import math
import statistics
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptune.kernels import bfs as bfs_mod
from adaptune.kernels import histogram as hist_mod
from adaptune.kernels import sort as sort_mod
from adaptune.kernels import spmv as spmv_mod
from adaptune.kernels.device import Device

SPMV_FEATURES = ("n_rows", "nnz", "avg_nnz_per_row", "row_length_sd", "max_deviation", "ell_fill", "dia_fill")
HISTOGRAM_FEATURES = ("n", "bins", "key_bits", "n_per_bin", "subsample_sd", "collision_share", "neighbour_share")
BFS_NITRO_FEATURES = ("vertices", "edges", "avg_degree", "degree_sd", "max_deviation")
BFS_PROBE_FEATURES = ("probe_levels", "probe_dimension", "est_depth")
BFS_FEATURES = BFS_NITRO_FEATURES + BFS_PROBE_FEATURES
SORT_FEATURES = ("n", "key_bits", "is_float", "ascending_runs", "descent_share", "tie_share")

SPMV_SAMPLE_ROWS = 4096
DIA_ROW_CAP = 1024  # entries of a sampled row the DIA-fill estimate reads (spmv_kernels.c)
HISTOGRAM_SAMPLE = 4096  # Nitro: min(25 % of N, 10,000); ours at most 4096 (held in shared memory)
HISTOGRAM_SAMPLE_MAX = 4096
SORT_SAMPLE_PAIRS = 4096

_stamps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # device -> [buffer, generation]


@dataclass
class _Plan:
    """A feature computation launched on the device: the buffers to copy back and how to finish on the host."""

    buffers: list[Any]
    finish: Callable[[list[np.ndarray]], dict[str, float]]


class Pending:
    """Features whose kernels and copies to (pinned) host memory were queued on a side stream / without a
    blocking read; ``result()`` waits for them only when the choice is needed. Started with ``finish_early``,
    the host finishes them as soon as the copies land (a host function on the side stream, an OpenCL event
    callback: another thread, while the caller does other work) and ``value`` holds them; until then it is
    None, so a first call can check readiness with one attribute read."""

    def __init__(self, hosts: list[np.ndarray], wait: Callable[[], None], done: Callable[[], bool],
                 finish: Callable[[list[np.ndarray]], dict[str, float]], keep: Any = None) -> None:
        self.hosts, self._wait, self._done, self._finish = hosts, wait, done, finish
        self._keep = keep  # the device buffers, alive until the copies are waited for
        self.value: dict[str, float] | None = None

    def ready(self) -> bool:
        """True once the device has written the features (no waiting)."""
        return self.value is not None or self._done()

    def result(self) -> dict[str, float]:
        if self.value is not None:
            return self.value
        self._wait()
        return self._finish(self.hosts)

    @classmethod
    def finished(cls, value: dict[str, float]) -> Pending:
        """Features already on the host (kept with the object), in the Pending's shape."""
        pending = cls([], lambda: None, lambda: True, lambda hosts: value)
        pending.value = value
        return pending

    def finish_now(self, *_: Any) -> None:
        """Finish on the host once the copies have landed (what the early-finish callback runs; an error
        leaves ``value`` None, and ``result()`` then raises it on the caller's thread)."""
        try:
            self.value = self._finish(self.hosts)
        except Exception:  # raised again by result(), where the caller sees it
            self.value = None


def _features(obj: Any, key: Any, plan: Callable[[], _Plan], cached: bool) -> dict[str, float]:
    """Kept features, else prefetched ones (waited for), else computed now (launch, copy, finish)."""
    if cached and key in obj.extra:
        return dict(obj.extra[key])
    pending = obj.extra.pop(("pending", key), None)
    if pending is not None and cached:
        result = pending.result()
    else:
        p = plan()
        result = p.finish([obj.device.to_host(b) for b in p.buffers])
    obj.extra[key] = result
    return dict(result)


_side_streams: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # CupyDevice -> {high: stream}


def prefetch_features(obj: Any, *, after_caller: bool = True, high_priority: bool = False,
                      finish_early: bool = False) -> Pending | None:
    """Start computing the features of a DeviceMatrix, DeviceKeys or DeviceGraph without waiting for them
    (Nitro's ``fix_inputs``): on CUDA the kernels and an asynchronous copy to pinned memory go on a
    non-blocking side stream that first waits (on the device) for the caller's stream, so neither the host
    nor the caller's stream is held; on OpenCL the copy is enqueued without blocking. The next
    ``*_features(obj)`` (so the next dispatch) waits only for what is still running. Returns the Pending
    (None when the features are kept already). The object must not change until then. ``after_caller=False``
    skips the side stream's wait for work queued before on the caller's stream (only where the object's data
    is known to be on the device already, e.g. uploaded and synchronised). ``high_priority`` puts them on a
    side stream of the device's highest priority (CUDA), whose blocks the scheduler starts before those of
    work already queued on the caller's stream. ``finish_early`` finishes them on the host as soon as they
    land (``Pending.value``; see Pending)."""
    key, plan = _plan_for(obj)
    if key in obj.extra:
        return None
    pending = _start(obj.device, plan, after_caller, high_priority, finish_early)
    obj.extra[("pending", key)] = pending
    return pending


def kept_features(obj: Any) -> dict[str, float] | None:
    """The features kept with a DeviceMatrix, DeviceKeys or DeviceGraph (its default sample), else None."""
    key, _ = _plan_for(obj)
    kept = obj.extra.get(key)
    return None if kept is None else dict(kept)


def prefetch_sort_features(dev: Device, keys: Any, *, after_caller: bool = True, high_priority: bool = False,
                           finish_early: bool = False, sample_pairs: int = SORT_SAMPLE_PAIRS) -> Pending:
    """``prefetch_features`` for sort keys (a plain device array: nothing to keep the Pending with, so it is
    returned to the caller, who must not change the keys until it is finished)."""
    return _start(dev, lambda: _sort_plan(dev, keys, sample_pairs), after_caller, high_priority, finish_early)


def prefetch_buffers(dev: Any, launch: Callable[[], list[Any]], finish: Callable[[list[np.ndarray]], Any], *,
                     after_caller: bool = True, high_priority: bool = False, finish_early: bool = False) -> Pending:
    """``prefetch_features`` for any computation: ``launch()`` queues device work and returns the device arrays
    to copy back, ``finish(host copies)`` turns them into the value (on the host, as they land where
    ``finish_early``). On CUDA both run on the side stream; on OpenCL the copies are enqueued without blocking."""
    return _start(dev, lambda: _Plan(launch(), finish), after_caller, high_priority, finish_early)


def _start(dev: Any, plan: Callable[[], _Plan], after_caller: bool, high_priority: bool,
           finish_early: bool) -> Pending:
    cp = getattr(dev, "cp", None)
    if cp is not None:
        streams = _side_streams.setdefault(dev, {})
        side = streams.get(high_priority)
        if side is None:
            side = streams[high_priority] = _side_stream(cp, high_priority)
        if after_caller:
            side.wait_event(cp.cuda.get_current_stream().record())
        with side:
            p = plan()
            hosts = [_pinned(cp, b) for b in p.buffers]
            for b, h in zip(p.buffers, hosts, strict=True):
                cp.asnumpy(b, stream=side, out=h, blocking=False)
            event = side.record()
        pending = Pending(hosts, event.synchronize, lambda: bool(event.done), p.finish, p.buffers)
        if finish_early and hasattr(side, "launch_host_func"):  # on CUDA's host-function thread once the
            side.launch_host_func(pending.finish_now, None)    # copies are done (NumPy only, no CUDA call)
        return pending
    import pyopencl as cl

    p = plan()
    hosts = [np.empty(b.shape, b.dtype) for b in p.buffers]
    for b, h in zip(p.buffers, hosts, strict=True):
        cl.enqueue_copy(dev.queue, h, b.data, is_blocking=False)
    marker = cl.enqueue_marker(dev.queue)  # complete once everything queued before it is (in-order queue)
    pending = Pending(hosts, marker.wait, lambda: marker.command_execution_status == cl.command_execution_status.COMPLETE,
                      p.finish, p.buffers)
    if finish_early:
        marker.set_callback(cl.command_execution_status.COMPLETE, pending.finish_now)
    return pending


def _side_stream(cp: Any, high_priority: bool) -> Any:
    """A non-blocking stream, of the device's greatest priority where asked."""
    if not high_priority:
        return cp.cuda.Stream(non_blocking=True)
    greatest = -1 << 20  # CUDA clamps a priority beyond the device's range to its greatest
    try:
        return cp.cuda.Stream(non_blocking=True, priority=greatest)
    except TypeError:  # a CuPy without the priority argument: create it through the runtime
        ptr = cp.cuda.runtime.streamCreateWithPriority(cp.cuda.runtime.streamNonBlocking, greatest)
        return cp.cuda.ExternalStream(ptr)


def _pinned(cp: Any, like: Any) -> np.ndarray:
    import cupyx

    return cupyx.empty_pinned(like.shape, like.dtype)


def _plan_for(obj: Any) -> tuple[Any, Callable[[], _Plan]]:
    if isinstance(obj, spmv_mod.DeviceMatrix):
        return ("features", SPMV_SAMPLE_ROWS), lambda: _spmv_plan(obj, SPMV_SAMPLE_ROWS)
    if isinstance(obj, hist_mod.DeviceKeys):
        return ("features", HISTOGRAM_SAMPLE), lambda: _histogram_plan(obj, HISTOGRAM_SAMPLE)
    if isinstance(obj, bfs_mod.DeviceGraph):
        return "features", lambda: _bfs_plan(obj, True)
    raise TypeError(f"no device features for {type(obj).__name__} (DeviceMatrix, DeviceKeys or DeviceGraph)")


def spmv_features(m: spmv_mod.DeviceMatrix, sample_rows: int = SPMV_SAMPLE_ROWS, *,
                  cached: bool = True) -> dict[str, float]:
    """Average non-zeros a row, row-length SD, max deviation, ELL fill-in; DIA fill-in from the first
    DIA_ROW_CAP entries of `sample_rows` evenly spaced rows (a lower bound on the diagonal count; exact when
    sample_rows >= n_rows and no row is longer than the cap).

    A DeviceMatrix does not change once uploaded, so its features are kept with it (``m.extra``) and later
    calls cost nothing: an iterative solver multiplies one matrix many times. ``cached=False`` recomputes.
    Features started by ``prefetch_features`` are waited for instead of computed again.
    """
    return _features(m, ("features", sample_rows), lambda: _spmv_plan(m, sample_rows), cached)


def _spmv_plan(m: spmv_mod.DeviceMatrix, sample_rows: int) -> _Plan:
    dev = m.device
    n = m.n_rows
    stride = max(1, n // max(1, sample_rows))
    n_sample = min(n, -(-n // stride))
    state = _stamps.get(dev)
    need = n + m.n_cols
    if state is None or state[0].size < need or state[1] >= 2**32 - 1:
        state = [dev.zeros(max(need, 1024), np.uint32), 0]
        _stamps[dev] = state
    state[1] += 1
    grid = max(1, min(-(-n // spmv_mod.BLOCK), 4 * dev.multiprocessors))
    partials = dev.empty(3 * grid, np.float32)
    kernel = dev.kernel("spmv_kernels.c", "spmv_features", {"BLOCK": spmv_mod.BLOCK, "DIA_ROW_CAP": DIA_ROW_CAP})
    kernel(grid, spmv_mod.BLOCK, (m.indptr, m.indices, np.int32(n), np.int32(stride), np.int32(n_sample),
                                  state[0], np.uint32(state[1]), partials))

    def finish(hosts: list[np.ndarray]) -> dict[str, float]:
        p = hosts[0].astype(np.float64).reshape(grid, 3)
        avg = m.nnz / n
        max_len = float(p[:, 1].max())
        n_diags_est = float(p[:, 2].sum())
        return {
            "n_rows": float(n),
            "nnz": float(m.nnz),
            "avg_nnz_per_row": avg,
            "row_length_sd": float(np.sqrt(p[:, 0].sum() / n)),
            "max_deviation": max_len - avg,
            "ell_fill": max_len * n / max(m.nnz, 1),
            "dia_fill": n_diags_est * n / max(m.nnz, 1),
        }

    return _Plan([partials], finish)


def forget_spmv_features(m: spmv_mod.DeviceMatrix) -> None:
    """Drop the features kept with ``m`` (benchmarks use it to time a first call)."""
    for key in [k for k in m.extra if isinstance(k, tuple) and k[:1] == ("features",)]:
        del m.extra[key]


def spmv_features_reference(indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int]) -> dict[str, float]:
    """Exact features on the host (NumPy)."""
    n = shape[0]
    lengths = np.diff(indptr).astype(np.float64)
    nnz = int(indptr[-1])
    rows = np.repeat(np.arange(n), np.diff(indptr))
    first = (np.arange(nnz) - indptr[rows]) < DIA_ROW_CAP  # the kernel reads DIA_ROW_CAP entries a row
    n_diags = np.unique(indices[first].astype(np.int64) - rows[first]).size
    return {
        "n_rows": float(n),
        "nnz": float(nnz),
        "avg_nnz_per_row": nnz / n,
        "row_length_sd": float(lengths.std()),
        "max_deviation": float(lengths.max() - lengths.mean()),
        "ell_fill": float(lengths.max()) * n / max(nnz, 1),
        "dia_fill": n_diags * n / max(nnz, 1),
    }


def histogram_sample_plan(n: int, sample: int = HISTOGRAM_SAMPLE) -> tuple[int, int]:
    """(stride, count) of the sub-sample: min(25 % of n, sample) keys evenly spaced (count <= 4096)."""
    count = max(1, min(sample, HISTOGRAM_SAMPLE_MAX, n // 4 or 1))
    return max(1, n // count), count


def histogram_features(d: hist_mod.DeviceKeys, sample: int = HISTOGRAM_SAMPLE, *,
                       cached: bool = True) -> dict[str, float]:
    """N, bins, key width and N / bins from the host; from a sub-sample on the device (one block): spread
    relative to the bins, collision share (two sampled keys equal: what makes atomics contend) and
    neighbour share (a key equals the next one: runs). Kept with ``d`` (``d.extra``) unless ``cached=False``:
    a caller that changes the keys in place must pass ``cached=False`` or make a new DeviceKeys."""
    return _features(d, ("features", sample), lambda: _histogram_plan(d, sample), cached)


def _histogram_plan(d: hist_mod.DeviceKeys, sample: int) -> _Plan:
    dev = d.device
    stride, count = histogram_sample_plan(d.n, sample)
    out = dev.empty(4, np.float32)
    kernel = dev.kernel("histogram_kernels.c", "histogram_subsample_stats",
                        {"BLOCK": hist_mod.BLOCK, "KEY_BITS": d.key_bits, "BINS": d.bins})
    kernel(1, hist_mod.BLOCK, (d.words, np.uint32(d.n), np.uint32(stride), np.uint32(count), out))

    def finish(hosts: list[np.ndarray]) -> dict[str, float]:
        stats = hosts[0]
        return {
            "n": float(d.n),
            "bins": float(d.bins),
            "key_bits": float(d.key_bits),
            "n_per_bin": d.n / d.bins,
            "subsample_sd": float(stats[1]),
            "collision_share": float(stats[2]),
            "neighbour_share": float(stats[3]),
        }

    return _Plan([out], finish)


def forget_features(obj: Any) -> None:
    """Drop the features kept with a DeviceMatrix, DeviceKeys or DeviceGraph (the next call computes them)."""
    for key in [k for k in obj.extra if k == "features" or (isinstance(k, tuple) and k[:1] in (("features",),
                                                                                                ("pending",)))]:
        del obj.extra[key]


def histogram_features_reference(keys: np.ndarray, bins: int, sample: int = HISTOGRAM_SAMPLE) -> dict[str, float]:
    stride, count = histogram_sample_plan(keys.size, sample)
    pos = np.arange(count, dtype=np.int64) * stride
    s = keys[pos].astype(np.int64)
    nxt = pos + 1 < keys.size
    neighbours = np.sum(keys[pos[nxt] + 1].astype(np.int64) == s[nxt])
    return {
        "n": float(keys.size),
        "bins": float(bins),
        "key_bits": float(keys.dtype.itemsize * 8),
        "n_per_bin": keys.size / bins,
        "subsample_sd": float((s / bins).std()),
        "collision_share": float(np.mean(s == s[(np.arange(count) + count // 2) % count])),
        "neighbour_share": float(neighbours / count),
    }


PROBE_STARTS = 4  # bounded searches (blocks) of the structure probe, from evenly spaced vertices
PROBE_CAP = 2048  # vertices a probe search reaches before it stops
PROBE_LEVELS = 64  # levels a probe search runs at most
PROBE_EDGE_CAP = 256  # neighbours of a vertex a probe search reads
PROBE_SKIP = 1024  # a probe starts at the first vertex with an edge among this many from its place
_probe_stamps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # device -> [buffer, generation]


def bfs_features(g: bfs_mod.DeviceGraph, *, cached: bool = True, probe: bool = True) -> dict[str, float]:
    """Nitro's BFS features (vertices, edges, average degree, degree standard deviation, max deviation: one
    launch of the SpMV feature kernel over indptr) and, unless ``probe=False``, the structure probe's three
    (``bfs_probe``: a second launch): Nitro's five carry nothing about the diameter, which decides between
    sweeping every vertex, every edge or a queue a level. A graph is searched many times from different
    sources, so the features are kept with it (``g.extra``)."""
    return _features(g, "features", lambda: _bfs_plan(g, probe), cached)


def _bfs_plan(g: bfs_mod.DeviceGraph, probe: bool) -> _Plan:
    dev = g.device
    grid = max(1, min(-(-g.n // spmv_mod.BLOCK), 4 * dev.multiprocessors))
    partials = dev.empty(3 * grid, np.float32)
    kernel = dev.kernel("spmv_kernels.c", "spmv_features", {"BLOCK": spmv_mod.BLOCK})
    kernel(grid, spmv_mod.BLOCK, (g.indptr, g.indices, np.int32(g.n), np.int32(1), np.int32(0), g.size,
                                  np.uint32(1), partials))
    buffers = [partials] + ([_launch_probe(g)] if probe else [])

    def finish(hosts: list[np.ndarray]) -> dict[str, float]:
        p = hosts[0].astype(np.float64).reshape(grid, 3)
        avg = g.m / g.n
        result = {"vertices": float(g.n), "edges": float(g.m), "avg_degree": avg,
                  "degree_sd": float(np.sqrt(p[:, 0].sum() / g.n)), "max_deviation": float(p[:, 1].max()) - avg}
        if probe:
            result.update(probe_features(hosts[1].reshape(PROBE_STARTS, PROBE_LEVELS), g.n))
        return result

    return _Plan(buffers, finish)


def _launch_probe(g: bfs_mod.DeviceGraph) -> Any:
    """Launch the structure probe (PROBE_STARTS blocks); returns the device array of reached counts."""
    dev = g.device
    need = PROBE_STARTS * g.n
    state = _probe_stamps.get(dev)
    if state is None or state[0].size < need or state[1] >= 2**32 - 1:
        state = [dev.zeros(max(need, 1024), np.uint32), 0]
        _probe_stamps[dev] = state
    state[1] += 1
    out = dev.empty(PROBE_STARTS * PROBE_LEVELS, np.uint32)
    kernel = dev.kernel("bfs_kernels.c", "bfs_probe", {"BLOCK": bfs_mod.BLOCK, "PROBE_CAP": PROBE_CAP,
                                                       "PROBE_LEVELS": PROBE_LEVELS, "PROBE_EDGE_CAP": PROBE_EDGE_CAP,
                                                       "PROBE_SKIP": PROBE_SKIP})
    kernel(PROBE_STARTS, bfs_mod.BLOCK, (g.indptr, g.indices, np.uint32(g.n), state[0], np.uint32(state[1]), out))
    return out


def bfs_probe(g: bfs_mod.DeviceGraph) -> np.ndarray:
    """Reached counts of the structure probe, (PROBE_STARTS, PROBE_LEVELS): row s, column l = vertices within
    l + 1 levels of start s (evenly spaced starts), up to PROBE_CAP (exact: whole frontiers are expanded)."""
    return g.device.to_host(_launch_probe(g)).reshape(PROBE_STARTS, PROBE_LEVELS)


def bfs_probe_reference(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """The probe on the host: the same bounded searches (first PROBE_EDGE_CAP neighbours a vertex)."""
    n = len(indptr) - 1
    out = np.zeros((PROBE_STARTS, PROBE_LEVELS), np.uint32)
    for s in range(PROBE_STARTS):
        start = (s * 2 + 1) * n // (2 * PROBE_STARTS)
        for _ in range(PROBE_SKIP):
            if indptr[start + 1] != indptr[start]:
                break
            start = start + 1 if start + 1 < n else 0
        seen = {start}
        frontier = [start]
        total = 1
        for lev in range(PROBE_LEVELS):
            if not frontier or total >= PROBE_CAP:
                out[s, lev:] = total
                break
            nxt = []
            for v in frontier:
                for w in indices[indptr[v]:min(indptr[v + 1], indptr[v] + PROBE_EDGE_CAP)]:
                    if int(w) not in seen:
                        seen.add(int(w))
                        nxt.append(int(w))
            total += len(nxt)
            out[s, lev] = total
            frontier = nxt
    return out


def probe_features(reached: np.ndarray, n: int) -> dict[str, float]:
    """From the probe's reached counts: levels to PROBE_CAP vertices (or to the end of a small component),
    growth dimension d (reached ~ levels^d between the first level with >= 32 vertices and the last) and the
    depth it implies, levels x (n / reached)^(1/d) (the levels themselves where the component ended);
    medians over the starts. Plain Python over 4 x 64 counts: it runs on every first dispatch, and NumPy's
    per-call overhead made it 4-9x slower (same values)."""
    levels, dims, depths = [], [], []
    for row in np.asarray(reached).tolist():
        width = len(row)
        last = width - 1  # the last level that found something new
        for i in range(width):
            if row[i] >= PROBE_CAP or (i + 1 < width and row[i + 1] == row[i]):
                last = i
                break
        r_end, lv = float(row[last]), last + 1.0
        ended = r_end < PROBE_CAP and last < width - 1
        threshold = min(32.0, r_end)
        mid = next((i for i, v in enumerate(row) if v >= threshold), 0)
        r_mid = float(row[mid])
        if lv - (mid + 1) >= 1 and r_end > r_mid:
            d = math.log(r_end / r_mid) / math.log(lv / (mid + 1.0))
        else:
            d = 16.0  # everything within a level or two: exponential growth
        d = min(16.0, max(1.0, d))
        levels.append(lv)
        dims.append(d)
        depths.append(lv if ended else min(float(n), lv * (n / max(r_end, 1.0)) ** (1.0 / d)))
    return {"probe_levels": float(statistics.median(levels)), "probe_dimension": float(statistics.median(dims)),
            "est_depth": float(statistics.median(depths))}


def bfs_features_reference(indptr: np.ndarray, indices: np.ndarray | None = None) -> dict[str, float]:
    """Nitro's five exactly; with ``indices``, the probe's three from the host probe too."""
    deg = np.diff(indptr).astype(np.float64)
    result = {"vertices": float(deg.size), "edges": float(indptr[-1]), "avg_degree": float(deg.mean()),
              "degree_sd": float(deg.std()), "max_deviation": float(deg.max() - deg.mean())}
    if indices is not None:
        result.update(probe_features(bfs_probe_reference(indptr, indices), deg.size))
    return result


def sort_plan(n: int, sample_pairs: int = SORT_SAMPLE_PAIRS) -> tuple[int, int]:
    """(stride, n_pairs) of the sampled adjacent pairs."""
    if n < 2:
        return 1, 0
    stride = max(1, (n - 1) // max(1, sample_pairs))
    return stride, min(sample_pairs, (n - 1) // stride)


def sort_features(dev: Device, keys: Any, sample_pairs: int = SORT_SAMPLE_PAIRS) -> dict[str, float]:
    """N, key bits, float or not, and from sampled adjacent pairs: estimated ascending runs
    (1 + descents share x (n - 1), Nitro's NAscSeq), descent share and tie share."""
    p = _sort_plan(dev, keys, sample_pairs)
    return p.finish([dev.to_host(b) for b in p.buffers])


def _sort_plan(dev: Device, keys: Any, sample_pairs: int) -> _Plan:
    n = int(keys.size)
    stride, n_pairs = sort_plan(n, sample_pairs)
    buffers = [sort_mod.count_order_async(dev, keys, stride, n_pairs)] if n_pairs else []
    bits, is_float = float(np.dtype(keys.dtype).itemsize * 8), float(np.dtype(keys.dtype).kind == "f")

    def finish(hosts: list[np.ndarray]) -> dict[str, float]:
        descents, _, ties = (int(c) for c in hosts[0]) if hosts else (0, 0, 0)
        share = descents / n_pairs if n_pairs else 0.0
        return {
            "n": float(n),
            "key_bits": bits,
            "is_float": is_float,
            "ascending_runs": 1.0 + share * max(n - 1, 0),
            "descent_share": share,
            "tie_share": ties / n_pairs if n_pairs else 0.0,
        }

    return _Plan(buffers, finish)


def sort_features_reference(keys: np.ndarray, sample_pairs: int = SORT_SAMPLE_PAIRS) -> dict[str, float]:
    n = keys.size
    stride, n_pairs = sort_plan(n, sample_pairs)
    idx = np.arange(n_pairs, dtype=np.int64) * stride
    a, b = keys[idx], keys[idx + 1]
    down, up = b < a, a < b
    if keys.dtype.kind == "f":  # NaN orders after every number, as the kernels and NumPy's sort do
        down, up = down | (np.isnan(a) & ~np.isnan(b)), up | (np.isnan(b) & ~np.isnan(a))
    share = float(down.mean()) if n_pairs else 0.0
    return {
        "n": float(n),
        "key_bits": float(keys.dtype.itemsize * 8),
        "is_float": float(keys.dtype.kind == "f"),
        "ascending_runs": 1.0 + share * max(n - 1, 0),
        "descent_share": share,
        "tie_share": float((~down & ~up).mean()) if n_pairs else 0.0,
    }


def as_vector(features: dict[str, float], names: tuple[str, ...]) -> np.ndarray:
    return np.array([features[k] for k in names], dtype=np.float64)
