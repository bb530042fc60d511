"""Vector add c = a + b as adaptune tuning problems: the "hello world" of GPU autotuning.

    adaptune tune examples/vector_add/problem.py                 # `problem`: OpenCL, 2^22 floats (PoCL)
    adaptune tune examples/vector_add/problem.py --backend cuda  # `problem_cuda`: 2^26 floats on a GPU

``problem_small`` is a handful of configurations for quick end-to-end tests. The CUDA problem
(three 256 MiB arrays) is built on first access.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from adaptune.measure import KernelSpec
from adaptune.space import Space
from adaptune.tuning import Problem

HERE = Path(__file__).resolve().parent
KERNEL_NAME = "vector_add"

PARAMS_OPENCL: dict[str, list[int]] = {
    "block_size_x": [16, 32, 64, 128, 256, 512, 1024],
    "tile_size_x": [1, 2, 4, 8],
}
PARAMS_SMALL: dict[str, list[int]] = {"block_size_x": [64, 256], "tile_size_x": [1, 2, 4, 8]}
PARAMS_CUDA: dict[str, list[int]] = {
    "block_size_x": [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 480, 512,
                     544, 576, 608, 640, 672, 704, 736, 768, 800, 832, 864, 896, 928, 960, 992, 1024],
    "tile_size_x": [1, 2, 4, 8, 16],
}
DEFAULTS = {"block_size_x": 256, "tile_size_x": 1}


def make_space(params: dict[str, list[int]], *, max_threads: int = 1024) -> Space:
    """Any block size up to the device's limit; the kernel checks bounds, so n need not divide."""
    return Space(params, ["block_size_x <= MAX_THREADS"], defaults=DEFAULTS,
                 constants={"MAX_THREADS": max_threads})


def make_problem(n: int, space: Space, *, lang: str, name: str, seed: int = 0) -> Problem:
    """Random a and b; the answer is NumPy's a + b (exact in float32, so compared tightly)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    c = np.zeros(n, dtype=np.float32)
    spec = KernelSpec(
        HERE / ("kernel.cl" if lang == "opencl" else "kernel.cu"), KERNEL_NAME, [c, a, b, np.int32(n)],
        problem_size=n, grid_div=(["block_size_x", "tile_size_x"],),
        answer=[a + b, None, None, None], atol=0.0, rtol=0.0, lang=lang,
    )
    return Problem(name, spec, space)


problem = make_problem(2**22, make_space(PARAMS_OPENCL), lang="opencl", name="vector_add_2^22")
problem_small = make_problem(100_003, make_space(PARAMS_SMALL), lang="opencl", name="vector_add_100003_small")


def make_problem_cuda(n: int = 2**26) -> Problem:
    return make_problem(n, make_space(PARAMS_CUDA), lang="cuda", name=f"vector_add_{n}")


def __getattr__(name: str) -> Any:
    """Build ``problem_cuda`` only when someone asks for it (PEP 562)."""
    if name == "problem_cuda":
        value = globals()["problem_cuda"] = make_problem_cuda()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
