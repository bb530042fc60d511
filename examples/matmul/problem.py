"""Tiled matrix multiply C = A @ B (float32, row-major) as adaptune tuning problems.

    adaptune tune examples/matmul/problem.py                    # `problem`: OpenCL, sized for PoCL on a CPU
    adaptune tune examples/matmul/problem.py --backend cuda     # `problem_cuda`: 4096 x 4096 on a GPU

``problem_small`` (40 configurations at 128 x 128) is for quick end-to-end tests. The CUDA
problem is built on first access, because its NumPy reference (a 4096^3 product) takes seconds.
The kernel has no bounds checks; the constraints below are what makes that safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from adaptune.measure import KernelSpec
from adaptune.space import Space
from adaptune.tuning import Problem

HERE = Path(__file__).resolve().parent
KERNEL_NAME = "matmul_kernel"

#: Preconditions of kernel.cl / kernel.cu over the sizes M, N, K and the resource limits
#: MAX_THREADS (per block) and LOCAL_MEM (bytes of static local/shared memory).
CONSTRAINTS = [
    "block_size_x * block_size_y <= MAX_THREADS",
    "block_size_x * block_size_y >= MIN_THREADS",
    "tile_size_x % vector_width == 0",
    "N % (block_size_x * tile_size_x) == 0",
    "M % (block_size_y * tile_size_y) == 0",
    "K % loop_unroll_factor_k == 0",
    # the tiles only exist with use_shared_mem; without it one tile_size_k stands for all
    "use_shared_mem == 1 or tile_size_k == 16",
    "use_shared_mem == 0 or K % tile_size_k == 0",
    "use_shared_mem == 0 or tile_size_k % loop_unroll_factor_k == 0",
    "use_shared_mem == 0 or tile_size_k % vector_width == 0",
    "use_shared_mem == 0 or (block_size_y * tile_size_y + block_size_x * tile_size_x) * tile_size_k * 4 <= LOCAL_MEM",
]

#: A few hundred configurations; one runs in tens of ms at 256^2 on PoCL on a small CPU.
PARAMS_OPENCL: dict[str, list[int]] = {
    "block_size_x": [16, 32],
    "block_size_y": [2, 4, 8],
    "tile_size_x": [1, 2, 4],
    "tile_size_y": [1, 4],
    "vector_width": [1, 2, 4],
    "loop_unroll_factor_k": [1, 4],
    "use_shared_mem": [0, 1],
    "tile_size_k": [16],
}

#: Forty configurations, for tests of the tuning layers.
PARAMS_SMALL: dict[str, list[int]] = {
    "block_size_x": [8, 16],
    "block_size_y": [4, 8],
    "tile_size_x": [1, 2, 4],
    "tile_size_y": [1],
    "vector_width": [1, 2],
    "loop_unroll_factor_k": [1],
    "use_shared_mem": [0, 1],
    "tile_size_k": [16],
}

#: The GPU space (about 11,000 configurations): large enough that search strategies matter.
PARAMS_CUDA: dict[str, list[int]] = {
    "block_size_x": [8, 16, 32, 64],
    "block_size_y": [1, 2, 4, 8, 16, 32],
    "tile_size_x": [1, 2, 4, 8],
    "tile_size_y": [1, 2, 4, 8],
    "vector_width": [1, 2, 4],
    "loop_unroll_factor_k": [1, 2, 4, 8],
    "use_shared_mem": [0, 1],
    "tile_size_k": [8, 16, 32],
}

#: More than 64 accumulators per thread spills registers on every current NVIDIA GPU.
CUDA_EXTRA_CONSTRAINTS = ["tile_size_x * tile_size_y <= 64"]

DEFAULTS = {"block_size_x": 16, "block_size_y": 8, "tile_size_x": 1, "tile_size_y": 1, "vector_width": 1,
            "loop_unroll_factor_k": 1, "use_shared_mem": 0, "tile_size_k": 16}


def make_space(params: dict[str, list[int]], m: int, n: int, k: int, *, max_threads: int = 256,
               min_threads: int = 16, local_mem: int = 48 * 1024,
               extra_constraints: tuple[str, ...] = ()) -> Space:
    """The valid configurations for an M x K times K x N product under the given device limits."""
    defaults = {name: value for name, value in DEFAULTS.items() if value in params[name]}
    return Space(params, [*CONSTRAINTS, *extra_constraints], defaults=defaults,
                 constants={"M": m, "N": n, "K": k, "MAX_THREADS": max_threads, "MIN_THREADS": min_threads,
                            "LOCAL_MEM": local_mem})


def make_problem(m: int, n: int, k: int, space: Space, *, lang: str, name: str, seed: int = 0) -> Problem:
    """Random A and B, the float64 NumPy product as the answer, Kernel Tuner's launch rule."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.zeros((m, n), dtype=np.float32)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    arguments: list[Any] = [c, a, b, np.int32(m), np.int32(n), np.int32(k)]
    spec = KernelSpec(
        HERE / ("kernel.cl" if lang == "opencl" else "kernel.cu"), KERNEL_NAME, arguments,
        problem_size=(n, m),
        grid_div=(["block_size_x", "tile_size_x"], ["block_size_y", "tile_size_y"]),
        answer=[expected, None, None, None, None, None],
        # float32 sums of k products of N(0,1) numbers: typical error ~ k * 2^-24, so 2e-6 * k is ample
        atol=2e-6 * k, rtol=1e-4,
        lang=lang,
    )
    return Problem(name, spec, space)


problem = make_problem(256, 256, 256, make_space(PARAMS_OPENCL, 256, 256, 256),
                       lang="opencl", name="matmul_256")
problem_small = make_problem(128, 128, 128, make_space(PARAMS_SMALL, 128, 128, 128, max_threads=128),
                             lang="opencl", name="matmul_128_small")

CUDA_SIZE = 4096


def make_problem_cuda(size: int = CUDA_SIZE) -> Problem:
    """The GPU problem: 1024 threads per block at most, a full warp at least, 48 KiB static shared memory."""
    space = make_space(PARAMS_CUDA, size, size, size, max_threads=1024, min_threads=32, local_mem=48 * 1024,
                       extra_constraints=tuple(CUDA_EXTRA_CONSTRAINTS))
    return make_problem(size, size, size, space, lang="cuda", name=f"matmul_{size}")


def __getattr__(name: str) -> Any:
    """Build ``problem_cuda`` only when someone asks for it (PEP 562)."""
    if name == "problem_cuda":
        value = globals()["problem_cuda"] = make_problem_cuda()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
