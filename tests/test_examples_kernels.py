"""The example kernels compute the right answer for many configurations, and their problem files load.

The kernel checks run each OpenCL source directly with PyOpenCL on PoCL (no adaptune layer in between),
at small sizes, for a handful of configurations including the extremes of each space, against NumPy.
The problem-file checks then make sure each ``examples/*/problem.py`` builds its Problem and Space and
that every configuration its space admits satisfies the kernel's own preconditions.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

cl = pytest.importorskip("pyopencl")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RNG = np.random.default_rng(1234)


@pytest.fixture(scope="module")
def queue() -> cl.CommandQueue:
    platforms = cl.get_platforms()
    if not platforms:
        pytest.skip("no OpenCL platform (install pyopencl[pocl])")
    ctx = cl.Context([platforms[0].get_devices()[0]])
    return cl.CommandQueue(ctx)


def run_kernel(queue: cl.CommandQueue, example: str, name: str, config: dict[str, Any],
               grid: tuple[int, ...], args: list[Any], outputs: list[int], launches: int = 1) -> list[np.ndarray]:
    """Compile ``examples/<example>/kernel.cl`` with ``config`` as #defines, launch it, return the outputs.

    ``grid`` is in work-groups (Kernel Tuner's rule); the NDRange is grid * block.
    """
    source = (EXAMPLES / example / "kernel.cl").read_text()
    options = [f"-D{k}={int(v)}" for k, v in config.items()]
    program = cl.Program(queue.context, source).build(options=options)
    kernel = getattr(program, name)
    block = tuple(int(config.get(f"block_size_{d}", 1)) for d in "xyz"[: len(grid)])
    global_size = tuple(g * b for g, b in zip(grid, block, strict=True))
    mf = cl.mem_flags
    buffers: dict[int, cl.Buffer] = {}
    kernel_args = []
    for i, arg in enumerate(args):
        if isinstance(arg, np.ndarray):
            buffers[i] = cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=arg)
            kernel_args.append(buffers[i])
        else:
            kernel_args.append(arg)
    for _ in range(launches):
        kernel(queue, global_size, block, *kernel_args)
    results = []
    for i in outputs:
        out = np.empty_like(args[i])
        cl.enqueue_copy(queue, out, buffers[i])
        results.append(out)
    queue.finish()
    return results


# --- vector_add ---------------------------------------------------------------------------------

VECTOR_ADD_CONFIGS = [
    {"block_size_x": 1, "tile_size_x": 1},
    {"block_size_x": 32, "tile_size_x": 3},
    {"block_size_x": 128, "tile_size_x": 2},
    {"block_size_x": 1024, "tile_size_x": 8},
]


@pytest.mark.parametrize("config", VECTOR_ADD_CONFIGS, ids=str)
def test_vector_add_matches_numpy(queue, config):
    n = 10_007  # prime: the last work-group is partial
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    c = np.full(n, np.nan, dtype=np.float32)
    grid = (math.ceil(n / (config["block_size_x"] * config["tile_size_x"])),)
    (got,) = run_kernel(queue, "vector_add", "vector_add", config, grid, [c, a, b, np.int32(n)], [0])
    np.testing.assert_array_equal(got, a + b)


# --- matmul -------------------------------------------------------------------------------------

MATMUL_BASE = {"block_size_x": 16, "block_size_y": 16, "tile_size_x": 1, "tile_size_y": 1, "vector_width": 1,
               "loop_unroll_factor_k": 1, "use_shared_mem": 0, "tile_size_k": 16}
MATMUL_CONFIGS = [
    {**MATMUL_BASE, "block_size_x": 1, "block_size_y": 1},
    {**MATMUL_BASE, "block_size_x": 32, "block_size_y": 2, "tile_size_x": 4, "vector_width": 4,
     "loop_unroll_factor_k": 4},
    {**MATMUL_BASE, "block_size_x": 8, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 2, "vector_width": 2,
     "loop_unroll_factor_k": 2, "use_shared_mem": 1, "tile_size_k": 8},
    {**MATMUL_BASE, "block_size_x": 16, "block_size_y": 8, "tile_size_x": 4, "tile_size_y": 4, "vector_width": 4,
     "loop_unroll_factor_k": 8, "use_shared_mem": 1, "tile_size_k": 32},
    {**MATMUL_BASE, "block_size_x": 4, "block_size_y": 16, "tile_size_x": 8, "tile_size_y": 1, "vector_width": 1,
     "loop_unroll_factor_k": 1, "use_shared_mem": 1, "tile_size_k": 8},
]


@pytest.mark.parametrize("config", MATMUL_CONFIGS, ids=str)
def test_matmul_matches_numpy(queue, config):
    m, n, k = 64, 128, 96  # all different, so a swapped index shows
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    grid = (n // (config["block_size_x"] * config["tile_size_x"]), m // (config["block_size_y"] * config["tile_size_y"]))
    (got,) = run_kernel(queue, "matmul", "matmul_kernel", config, grid,
                        [c, a, b, np.int32(m), np.int32(n), np.int32(k)], [0])
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


# --- convolution --------------------------------------------------------------------------------

CONV_BASE = {"block_size_x": 16, "block_size_y": 16, "tile_size_x": 1, "tile_size_y": 1, "use_shared_mem": 1,
             "use_padding": 0, "filter_width": 5, "filter_height": 3}
CONV_CONFIGS = [
    {**CONV_BASE, "block_size_x": 1, "block_size_y": 1, "use_shared_mem": 0},
    {**CONV_BASE, "block_size_x": 16, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 3, "use_padding": 1},
    {**CONV_BASE, "block_size_x": 32, "block_size_y": 8, "tile_size_x": 2, "tile_size_y": 2},
    {**CONV_BASE, "block_size_x": 4, "block_size_y": 16, "tile_size_x": 1, "tile_size_y": 3, "use_shared_mem": 0},
]


def convolve_reference(image: np.ndarray, filt: np.ndarray) -> np.ndarray:
    """Cross-correlation over the valid region of the pre-padded image, in float64."""
    windows = np.lib.stride_tricks.sliding_window_view(image.astype(np.float64), filt.shape)
    return np.einsum("yxij,ij->yx", windows, filt.astype(np.float64))


@pytest.mark.parametrize("config", CONV_CONFIGS, ids=str)
def test_convolution_matches_numpy(queue, config):
    width, height = 64, 48
    fw, fh = config["filter_width"], config["filter_height"]
    image = RNG.standard_normal((height + fh - 1, width + fw - 1)).astype(np.float32)
    filt = RNG.standard_normal((fh, fw)).astype(np.float32)
    out = np.full((height, width), np.nan, dtype=np.float32)
    grid = (width // (config["block_size_x"] * config["tile_size_x"]),
            height // (config["block_size_y"] * config["tile_size_y"]))
    (got,) = run_kernel(queue, "convolution", "convolution_kernel", config, grid,
                        [out, image, filt, np.int32(width), np.int32(height)], [0])
    np.testing.assert_allclose(got, convolve_reference(image, filt), rtol=1e-4, atol=1e-4)


# --- reduction ----------------------------------------------------------------------------------

REDUCTION_CONFIGS = [
    {"block_size_x": 1, "elements_per_thread": 1, "vector_width": 1, "num_blocks": 1, "use_atomics": 1},
    {"block_size_x": 32, "elements_per_thread": 1, "vector_width": 1, "num_blocks": 4096, "use_atomics": 0},
    {"block_size_x": 128, "elements_per_thread": 2, "vector_width": 2, "num_blocks": 7, "use_atomics": 1},
    {"block_size_x": 1024, "elements_per_thread": 8, "vector_width": 4, "num_blocks": 3, "use_atomics": 0},
]


@pytest.mark.parametrize("config", REDUCTION_CONFIGS, ids=str)
def test_reduction_matches_numpy_and_leaves_counter_reset(queue, config):
    n = 100_003  # odd: vector loads leave a tail of n % vector_width floats
    x = RNG.random(n).astype(np.float32)
    out = np.zeros(1, dtype=np.float32)
    partials = np.zeros(config["num_blocks"], dtype=np.float32)
    counter = np.zeros(1, dtype=np.uint32)
    launches = 1 if config["use_atomics"] else 2  # the last-block path must leave the counter ready
    got, got_counter = run_kernel(queue, "reduction", "sum_floats", config, (config["num_blocks"],),
                                  [out, x, np.int32(n), partials, counter], [0, 4], launches=launches)
    np.testing.assert_allclose(got[0], x.astype(np.float64).sum(), rtol=1e-5)
    assert got_counter[0] == 0
