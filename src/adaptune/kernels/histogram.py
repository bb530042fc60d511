"""Histogram variants for 8/16/32-bit keys and 16 ... 65,536 bins (keys >= bins are ignored, as CUB's
HistogramEven over [0, bins) does).

Why these: which variant wins moves with the number of bins (privatised shared-memory copies stop fitting
beyond a few thousand bins, and with many bins global atomics rarely collide), with contention (constant or
skewed data serialise atomics on one address: interleaved copies a block, run aggregation or sorting help)
and with key width and size (bytes read, launch and merge overheads).

- `global`: one global atomic a key.
- `global_runs`: a thread walks consecutive keys and adds each run of equal keys with one atomic.
- `shared`, `shared_x8`, `shared_x32`: a privatised histogram a block in shared memory with 1 / 8 / 32
  interleaved copies (copy = thread % copies), merged into the global one at the end.
- `sort`: tiles of 4096 keys bitonic-sorted in shared memory, two atomics a run.
- `cub` (library default): CUB's DeviceHistogram::HistogramEven through CuPy (what cupy.bincount calls).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.kernels.device import Device

BLOCK = 256
ALGORITHMS = {"global": (0, 1), "global_runs": (1, 1), "shared": (2, 1), "shared_x8": (2, 8),
              "shared_x32": (2, 32), "sort": (3, 1)}
KEY_DTYPES = {np.dtype(np.uint8): 8, np.dtype(np.uint16): 16, np.dtype(np.uint32): 32}
SHARED_WORDS = 8192  # privatised copies must fit in 32 KB of shared memory (bins x copies words)
MAX_BINS = 1 << 20
BLOCKS_PER_SM = 4
TILE_WORDS = {0: BLOCK * 4, 1: BLOCK * 4, 2: BLOCK * 4}  # ALGO 3: 4096 keys a tile


class HistogramConstraintError(ValueError):
    """A variant cannot run with this many bins (its privatised copies do not fit in shared memory)."""


@dataclass
class DeviceKeys:
    """Keys on a device, readable as 32-bit words (padded to a whole word), with their bin count."""

    device: Device
    n: int
    key_bits: int
    bins: int
    words: Any  # device array whose buffer holds the packed keys
    raw: Any  # the keys as given (typed view)
    extra: dict[str, Any] = field(default_factory=dict)


def upload(device: Device, keys, bins: int) -> DeviceKeys:
    """Wrap 1-D uint8/uint16/uint32 keys (NumPy, or CuPy for a CuPy device) for `bins` bins."""
    dtype = np.dtype(keys.dtype)
    if dtype not in KEY_DTYPES or keys.ndim != 1:
        raise ValueError(f"histogram keys must be a 1-D uint8, uint16 or uint32 array, got {dtype} with "
                         f"{keys.ndim} dims")
    bins = int(bins)
    if not 1 <= bins <= MAX_BINS:
        raise ValueError(f"bins must be in 1..{MAX_BINS}, got {bins}")
    n = int(keys.size)
    if n == 0:
        raise ValueError("histogram input is empty")
    if n >= 2**31:
        raise ValueError(f"{n} keys exceed the 32-bit index range of the kernels")
    xp = device.xp
    kpw = 32 // KEY_DTYPES[dtype]
    if n % kpw:
        padded = xp.zeros(n + (-n) % kpw, dtype=dtype)
        padded[:n] = keys
        keys_padded = padded
    else:
        keys_padded = keys
    arr = device.asarray(keys_padded) if isinstance(keys_padded, np.ndarray) else keys_padded
    words = arr.view(np.uint32)
    raw = device.asarray(keys) if isinstance(keys, np.ndarray) else keys
    return DeviceKeys(device, n, KEY_DTYPES[dtype], bins, words, raw)


def shared_words(name: str, bins: int) -> int:
    algo, repl = ALGORITHMS[name]
    return bins * repl if algo == 2 else 0


def available(d: DeviceKeys, name: str) -> bool:
    """Constraint per variant: privatised copies must fit in shared memory; `cub` needs CuPy."""
    if name == "cub":
        return True
    return shared_words(name, d.bins) <= SHARED_WORDS


def histogram(d: DeviceKeys, name: str, out=None):
    """Run one kernel variant; returns the `bins` uint32 counts on the device (out is zeroed first)."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown histogram variant {name!r}; known: {', '.join(ALGORITHMS)}")
    if not available(d, name):
        raise HistogramConstraintError(f"{name} needs {shared_words(name, d.bins)} shared words for {d.bins} "
                                       f"bins (at most {SHARED_WORDS})")
    dev = d.device
    algo, repl = ALGORITHMS[name]
    defines = {"BLOCK": BLOCK, "ALGO": algo, "REPL": repl, "KEY_BITS": d.key_bits, "BINS": d.bins}
    kernel = dev.kernel("histogram_kernels.c", "histogram_keys", defines)
    if out is None:
        out = dev.zeros(d.bins, np.uint32)
    else:
        dev.fill_zero(out)
    kpw = 32 // d.key_bits
    n_words = -(-d.n // kpw)
    tile_words = TILE_WORDS.get(algo, 4096 // kpw)
    n_tiles = -(-n_words // tile_words)
    grid = max(1, min(n_tiles, BLOCKS_PER_SM * dev.multiprocessors))
    kernel(grid, BLOCK, (d.words, np.uint32(d.n), out))
    return out


def cub(d: DeviceKeys, out=None):
    """The library default: CUB HistogramEven over [0, bins) through CuPy (NumPy's bincount on OpenCL,
    tests only). Returns CuPy's int64 counts (kept with the keys, reused across calls)."""
    dev = d.device
    if dev.xp is np:
        host = dev.to_host(d.raw)[: d.n].astype(np.int64)
        counts = np.bincount(host[host < d.bins], minlength=d.bins).astype(np.uint32)
        return dev.asarray(counts)
    counts = d.extra.get("cub_out")
    if counts is None:
        counts = d.extra["cub_out"] = dev.xp.zeros(d.bins, np.int64)
    try:
        from cupy.cuda import cub as cupy_cub
    except ImportError:  # no CUB in this CuPy build: CuPy's own bincount (recorded, so reports can say so)
        d.extra["cub_fallback"] = True
        counts[...] = dev.xp.bincount(d.raw[d.raw < d.bins], minlength=d.bins)[: d.bins]
        return counts
    cupy_cub.device_histogram(d.raw, counts, d.bins + 1)
    return counts


def variants() -> dict[str, Callable[..., Any]]:
    """Every variant by name (kernels first, the library last)."""
    table: dict[str, Callable[..., Any]] = {
        name: (lambda d, out=None, _n=name: histogram(d, _n, out)) for name in ALGORITHMS}
    table["cub"] = cub
    return table


def reference(keys: np.ndarray, bins: int) -> np.ndarray:
    """Exact counts on the host (keys >= bins ignored)."""
    keys = np.asarray(keys).astype(np.int64)
    return np.bincount(keys[keys < bins], minlength=bins)[:bins]
