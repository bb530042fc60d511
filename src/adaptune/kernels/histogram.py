"""256-bin histogram variants of 8-bit data: {global atomics, shared-memory privatised atomics,
sort-then-run-length} x {even-share grid, dynamic work-queue grid}, plus the library's bincount.

Why six: atomics contend when the data are skewed (few values), so privatisation or sorting wins there,
while plain global atomics win on uniform data; a dynamic grid balances tiles whose cost varies (images
with flat and busy regions) at the price of a queue atomic per tile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptune.kernels.device import Device

BINS = 256
BLOCK = 256
ALGORITHMS = {"global": 0, "shared": 1, "sort": 2}
TILE_WORDS = {"global": 1024, "shared": 1024, "sort": 256}  # sort tiles: 1024 bytes sorted in shared memory
BLOCKS_PER_SM = 4


@dataclass
class DeviceBytes:
    """8-bit data on a device, readable as 32-bit words (padded to a multiple of 4 bytes)."""

    device: Device
    n_bytes: int
    words: Any  # device array whose buffer holds >= 4 * ceil(n / 4) bytes
    raw: Any  # the uint8 view (the original array when no padding was needed)


def upload(device: Device, data) -> DeviceBytes:
    """Wrap uint8 data (NumPy, or CuPy for a CuPy device); copies only to pad to a multiple of 4."""
    if data.dtype != np.uint8 or data.ndim != 1:
        raise ValueError(f"histogram input must be a 1-D uint8 array, got {data.dtype} with {data.ndim} dims")
    n = int(data.size)
    if n == 0:
        raise ValueError("histogram input is empty")
    xp = device.xp
    if n % 4:
        padded = xp.zeros(n + (-n) % 4, dtype=np.uint8)
        padded[:n] = xp.asarray(data) if xp is not np else data
        data = padded
    arr = device.asarray(data) if isinstance(data, np.ndarray) else data
    return DeviceBytes(device, n, arr, arr)


def histogram(d: DeviceBytes, algorithm: str, dynamic: bool, out=None, queue=None):
    """Run one variant; returns the 256 uint32 counts on the device (out is zeroed first)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown histogram algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    dev = d.device
    tile_words = TILE_WORDS[algorithm]
    defines = {"BLOCK": BLOCK, "ALGO": ALGORITHMS[algorithm], "DYNAMIC": int(dynamic), "TILE_WORDS": tile_words}
    kernel = dev.kernel("histogram_kernels.c", "histogram256", defines)
    if out is None:
        out = dev.zeros(BINS, np.uint32)
    else:
        dev.fill_zero(out)
    if queue is None:
        queue = dev.zeros(1, np.uint32)
    elif dynamic:
        dev.fill_zero(queue)
    n_words = (d.n_bytes + 3) // 4
    n_tiles = (n_words + tile_words - 1) // tile_words
    grid = max(1, min(n_tiles, BLOCKS_PER_SM * dev.multiprocessors))
    kernel(grid, BLOCK, (d.words, np.uint32(d.n_bytes), out, queue))
    return out


def bincount(d: DeviceBytes, out=None, queue=None):
    """The library default (cupy.bincount / numpy.bincount)."""
    dev = d.device
    if dev.xp is np:  # OpenCL device: NumPy on the host copy (tests only)
        counts = dev.asarray(np.bincount(dev.to_host(d.raw)[: d.n_bytes], minlength=BINS).astype(np.uint32))
    else:
        counts = dev.xp.bincount(d.raw[: d.n_bytes], minlength=BINS)
    if out is not None:
        out[...] = counts.astype(np.uint32)
        return out
    return counts


def variants() -> dict[str, Callable[..., Any]]:
    """The six kernel variants by name: '<algorithm>_<even|dynamic>'."""
    table: dict[str, Callable[..., Any]] = {}
    for algorithm in ALGORITHMS:
        for dynamic in (False, True):
            name = f"{algorithm}_{'dynamic' if dynamic else 'even'}"
            table[name] = lambda d, out=None, queue=None, _a=algorithm, _dyn=dynamic: histogram(d, _a, _dyn, out, queue)
    return table
