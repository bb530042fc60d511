"""Sum of a float array in one launch (grid-stride loads, local-memory tree, atomics or last-block
second pass) as adaptune tuning problems.

    adaptune tune examples/reduction/problem.py                 # `problem`: OpenCL, 2^22 floats (PoCL)
    adaptune tune examples/reduction/problem.py --backend cuda  # `problem_cuda`: 2^26 floats on a GPU

The launch has ``num_blocks`` groups whatever the block size (Kernel Tuner's ``problem_size =
"num_blocks"`` idiom); each thread strides over the array. ``problem_small`` is for quick tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from adaptune.measure import KernelSpec
from adaptune.space import Space
from adaptune.tuning import Problem

HERE = Path(__file__).resolve().parent
KERNEL_NAME = "sum_floats"

#: Block sizes are powers of two (the tree needs it); no thread may be left without a full vector load.
CONSTRAINTS = [
    "block_size_x <= MAX_THREADS",
    "num_blocks * block_size_x * elements_per_thread * vector_width <= N",
]

PARAMS_OPENCL: dict[str, list[int]] = {
    "block_size_x": [32, 128, 1024],
    "elements_per_thread": [1, 2, 4, 8],
    "vector_width": [1, 2, 4],
    "num_blocks": [8, 64, 512, 4096],
    "use_atomics": [0, 1],
}
PARAMS_SMALL: dict[str, list[int]] = {
    "block_size_x": [128, 256],
    "elements_per_thread": [1, 4],
    "vector_width": [1, 4],
    "num_blocks": [16, 512],
    "use_atomics": [0, 1],
}
PARAMS_CUDA: dict[str, list[int]] = {
    "block_size_x": [32, 64, 128, 256, 512, 1024],
    "elements_per_thread": [1, 2, 4, 8, 16],
    "vector_width": [1, 2, 4],
    "num_blocks": [128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    "use_atomics": [0, 1],
}
DEFAULTS = {"block_size_x": 128, "elements_per_thread": 1, "vector_width": 1, "num_blocks": 512, "use_atomics": 1}


def make_space(params: dict[str, list[int]], n: int, *, max_threads: int = 1024) -> Space:
    bad = [b for b in params["block_size_x"] if b & (b - 1)]
    if bad:
        raise ValueError(f"block_size_x values {bad} are not powers of two; the tree reduction needs them")
    defaults = {name: value for name, value in DEFAULTS.items() if value in params[name]}
    return Space(params, CONSTRAINTS, defaults=defaults, constants={"N": n, "MAX_THREADS": max_threads})


def make_problem(n: int, space: Space, *, lang: str, name: str, seed: int = 0) -> Problem:
    """Uniform [0, 1) data (no cancellation, so a relative tolerance is meaningful); float64 NumPy sum."""
    rng = np.random.default_rng(seed)
    x = rng.random(n, dtype=np.float32)
    out = np.zeros(1, dtype=np.float32)
    partials = np.zeros(int(space.column("num_blocks").max()), dtype=np.float32)
    counter = np.zeros(1, dtype=np.uint32)
    expected = np.array([x.astype(np.float64).sum()], dtype=np.float32)
    spec = KernelSpec(
        HERE / ("kernel.cl" if lang == "opencl" else "kernel.cu"), KERNEL_NAME,
        [out, x, np.int32(n), partials, counter],
        problem_size="num_blocks", grid_div=([1],),
        answer=[expected, None, None, None, None], atol=0.0, rtol=1e-4,
        # out[0] must start at 0 for the atomic variant: restore every array before each launch
        # and do not poison out with NaN before the checked run.
        restore_inputs=True, poison_outputs=False,
        lang=lang,
    )
    return Problem(name, spec, space)


problem = make_problem(2**22, make_space(PARAMS_OPENCL, 2**22), lang="opencl", name="reduction_2^22")
problem_small = make_problem(100_003, make_space(PARAMS_SMALL, 100_003), lang="opencl",
                             name="reduction_100003_small")


def make_problem_cuda(n: int = 2**26) -> Problem:
    return make_problem(n, make_space(PARAMS_CUDA, n), lang="cuda", name=f"reduction_{n}")


def __getattr__(name: str) -> Any:
    """Build ``problem_cuda`` only when someone asks for it (PEP 562)."""
    if name == "problem_cuda":
        value = globals()["problem_cuda"] = make_problem_cuda()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
