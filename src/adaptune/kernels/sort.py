"""Sorting variants for 1-D keys (int32, int64, float32, float64; NaNs sort last, as in NumPy).

Kernels of our own in the portable dialect: a merge sort (bitonic tiles in shared memory, then merge-path
passes) and a bitonic sort; a presorted-aware sort (one counting pass; sorted input is copied, non-increasing
input reversed, anything else radix-sorted); and the libraries: CuPy's sort (CUB radix) and PyTorch's sort.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from adaptune.kernels.device import Device

BLOCK = 256
TILE = 2 * BLOCK
ITEMS = 8
KEY_TYPES = {
    np.dtype(np.int32): ("i32", "0x7fffffff"),
    np.dtype(np.int64): ("i64", "0x7fffffffffffffff"),
    np.dtype(np.float32): ("float", "F32_NAN"),
    np.dtype(np.float64): ("double", "F64_NAN"),
}


def key_defines(dtype) -> dict[str, Any]:
    dtype = np.dtype(dtype)
    if dtype not in KEY_TYPES:
        raise ValueError(f"sort keys must be int32, int64, float32 or float64, got {dtype}")
    key_t, key_max = KEY_TYPES[dtype]
    defines = {"KEY_T": key_t, "KEY_MAX": key_max, "BLOCK": BLOCK, "ITEMS": ITEMS}
    if dtype.kind == "f":
        defines["KEY_IS_FLOAT"] = 1
    return defines


def _kernel(dev: Device, dtype, name: str, locality: bool = False):
    defines = key_defines(dtype)
    if locality:
        defines["LOCALITY"] = 1
    return dev.kernel("sort_kernels.c", name, defines)


def _check(keys) -> int:
    if keys.ndim != 1:
        raise ValueError(f"sort keys must be 1-D, got {keys.ndim} dims")
    n = int(keys.size)
    if n >= 2**31:
        raise ValueError(f"{n} keys exceed the 32-bit index range of the kernels")
    return n


def merge_sort(dev: Device, keys, locality: bool = False) -> Any:
    """Stable merge sort: tiles of TILE keys sorted in shared memory, then log2(n / TILE) merge passes;
    with `locality`, a pass copies each pair of runs that is already in order (nearly sorted keys)."""
    n = _check(keys)
    src = dev.empty(n, keys.dtype)
    dev.copy(keys, src)
    if n <= 1:
        return src
    _kernel(dev, keys.dtype, "sort_tiles")(-(-n // TILE), BLOCK, (src, np.uint32(n)))
    if n <= TILE:
        return src
    dst = dev.empty(n, keys.dtype)
    merge = _kernel(dev, keys.dtype, "merge_pass", locality)
    width = TILE
    grid = -(-n // (BLOCK * ITEMS))
    while width < n:
        merge(grid, BLOCK, (src, dst, np.uint32(n), np.uint32(width)))
        src, dst = dst, src
        width *= 2
    return src


def bitonic_sort(dev: Device, keys) -> Any:
    """Bitonic sort over the next power of two (padded with the largest key); returns the first n keys."""
    n = _check(keys)
    p = max(TILE, 1 << max(0, (n - 1).bit_length()))
    buf = dev.empty(p, keys.dtype)
    buf[:n] = keys
    if p > n:
        buf[n:].fill(_max_key(keys.dtype))
    _kernel(dev, keys.dtype, "sort_tiles")(p // TILE, BLOCK, (buf, np.uint32(p)))
    step = _kernel(dev, keys.dtype, "bitonic_step")
    tile_steps = _kernel(dev, keys.dtype, "bitonic_tile_steps")
    k = 2 * TILE
    while k <= p:
        j = k // 2
        while j >= TILE:
            step(-(-(p // 2) // BLOCK), BLOCK, (buf, np.uint32(p // 2), np.uint32(k), np.uint32(j)))
            j //= 2
        tile_steps(p // TILE, BLOCK, (buf, np.uint32(k)))
        k *= 2
    return buf[:n]


def _max_key(dtype) -> Any:
    dtype = np.dtype(dtype)
    return np.nan if dtype.kind == "f" else np.iinfo(dtype).max


def count_order(dev: Device, keys, stride: int = 1, n_pairs: int | None = None) -> np.ndarray:
    """[descents, ascents, ties] over pairs (s * stride, s * stride + 1); exact with stride 1."""
    return dev.to_host(count_order_async(dev, keys, stride, n_pairs))


def count_order_async(dev: Device, keys, stride: int = 1, n_pairs: int | None = None) -> Any:
    """``count_order`` launched, its three counts left on the device (read them when needed)."""
    n = _check(keys)
    if n_pairs is None:
        n_pairs = max(0, (n - 1) // stride)
    counts = dev.zeros(3, np.uint32)
    if n_pairs > 0:
        grid = max(1, min(-(-n_pairs // BLOCK), 8 * dev.multiprocessors))
        _kernel(dev, keys.dtype, "count_order")(grid, BLOCK, (keys, np.uint32(stride), np.uint32(n_pairs), counts))
    return counts


def reverse(dev: Device, keys) -> Any:
    n = _check(keys)
    out = dev.empty(n, keys.dtype)
    grid = max(1, min(-(-n // BLOCK), 8 * dev.multiprocessors))
    _kernel(dev, keys.dtype, "reverse_copy")(grid, BLOCK, (keys, out, np.uint32(n)))
    return out


def library_sort(dev: Device, keys) -> Any:
    """cupy.sort (CUB radix sort) on CUDA; on an OpenCL device NumPy's sort of a host copy (tests only)."""
    if dev.xp is np:
        return dev.asarray(np.sort(dev.to_host(keys)))
    return dev.xp.sort(keys)


def torch_sort(dev: Device, keys) -> Any:
    """PyTorch's sort on the same memory (zero-copy through DLPack)."""
    import torch

    return torch.sort(torch.from_dlpack(keys)).values


def presorted_sort(dev: Device, keys) -> Any:
    """Count order exactly (one pass): copy if sorted, reverse if non-increasing, else the library sort."""
    descents, ascents, _ = count_order(dev, keys)
    if descents == 0:
        out = dev.empty(keys.size, keys.dtype)
        dev.copy(keys, out)
        return out
    if ascents == 0:
        return reverse(dev, keys)
    return library_sort(dev, keys)


def locality_sort(dev: Device, keys) -> Any:
    """Merge sort whose passes copy runs already in order (ModernGPU's locality sort, simplified)."""
    return merge_sort(dev, keys, locality=True)


def variants(with_torch: bool = True, with_locality: bool = True) -> dict[str, Callable[[Device, Any], Any]]:
    """Sort variants by name. `locality` was added after the round-2 H100 run (not measured there)."""
    table: dict[str, Callable[[Device, Any], Any]] = {
        "cub_radix": library_sort,
        "merge": merge_sort,
        "bitonic": bitonic_sort,
        "presorted_radix": presorted_sort,
    }
    if with_torch:
        table["torch_sort"] = torch_sort
    if with_locality:
        table["locality"] = locality_sort
    return table
