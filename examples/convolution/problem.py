"""2-D convolution of a pre-padded image with a filter (Kernel Tuner's classic example) as adaptune problems.

    adaptune tune examples/convolution/problem.py                 # `problem`: OpenCL, 512^2, 7x7 filter (PoCL)
    adaptune tune examples/convolution/problem.py --backend cuda  # `problem_cuda`: 4096^2, 15x15 filter

``problem_small`` (a few dozen configurations at 128^2, 5x5) is for quick end-to-end tests. The CUDA
problem is built on first access (its 64 MiB input and reference take a moment). The filter size is
fixed per problem and reaches the kernel as the ``filter_width``/``filter_height`` defines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from scipy.signal import correlate

from adaptune.measure import KernelSpec
from adaptune.space import Space
from adaptune.tuning import Problem

HERE = Path(__file__).resolve().parent
KERNEL_NAME = "convolution_kernel"

#: Preconditions of kernel.cl / kernel.cu (no bounds checks) and resource limits over the image size
#: W x H, the filter size FW x FH, MAX_THREADS per block and LOCAL_MEM bytes of static local memory.
CONSTRAINTS = [
    "block_size_x * block_size_y <= MAX_THREADS",
    "block_size_x * block_size_y >= MIN_THREADS",
    "W % (block_size_x * tile_size_x) == 0",
    "H % (block_size_y * tile_size_y) == 0",
    # padding only changes anything with shared memory, and only when a warp spans several rows
    "use_padding == 0 or (use_shared_mem == 1 and block_size_x % 32 != 0)",
    "use_shared_mem == 0 or "
    "(block_size_y * tile_size_y + FH - 1) * (block_size_x * tile_size_x + FW - 1 + use_padding) * 4 <= LOCAL_MEM",
]

PARAMS_OPENCL: dict[str, list[int]] = {
    "block_size_x": [8, 16, 32, 64],
    "block_size_y": [1, 2, 4, 8, 16],
    "tile_size_x": [1, 2, 4],
    "tile_size_y": [1, 2, 4],
    "use_shared_mem": [0, 1],
    "use_padding": [0, 1],
}

PARAMS_SMALL: dict[str, list[int]] = {
    "block_size_x": [16, 32],
    "block_size_y": [4, 16],
    "tile_size_x": [1, 2],
    "tile_size_y": [1, 2],
    "use_shared_mem": [0, 1],
    "use_padding": [0, 1],
}

#: The GPU space, with ``read_only`` (__ldg) which only the CUDA kernel has.
PARAMS_CUDA: dict[str, list[int]] = {
    "block_size_x": [16, 32, 64, 128],
    "block_size_y": [1, 2, 4, 8, 16, 32],
    "tile_size_x": [1, 2, 4, 8],
    "tile_size_y": [1, 2, 4, 8],
    "use_shared_mem": [0, 1],
    "use_padding": [0, 1],
    "read_only": [0, 1],
}

DEFAULTS = {"block_size_x": 16, "block_size_y": 16, "tile_size_x": 1, "tile_size_y": 1, "use_shared_mem": 1,
            "use_padding": 0, "read_only": 0}


def make_space(params: dict[str, list[int]], width: int, height: int, filter_width: int, filter_height: int, *,
               max_threads: int = 256, min_threads: int = 16, local_mem: int = 48 * 1024) -> Space:
    """Valid configurations for a width x height output and a filter_width x filter_height filter."""
    defaults = {name: value for name, value in DEFAULTS.items() if name in params and value in params[name]}
    return Space(params, CONSTRAINTS, defaults=defaults,
                 constants={"W": width, "H": height, "FW": filter_width, "FH": filter_height,
                            "MAX_THREADS": max_threads, "MIN_THREADS": min_threads, "LOCAL_MEM": local_mem})


def make_problem(width: int, height: int, filter_width: int, filter_height: int, space: Space, *, lang: str,
                 name: str, seed: int = 0) -> Problem:
    """Random image and filter; the answer is SciPy's float64 cross-correlation over the valid region."""
    rng = np.random.default_rng(seed)
    image = rng.standard_normal((height + filter_height - 1, width + filter_width - 1), dtype=np.float32)
    filt = rng.standard_normal((filter_height, filter_width), dtype=np.float32)
    output = np.zeros((height, width), dtype=np.float32)
    expected = correlate(image.astype(np.float64), filt.astype(np.float64), mode="valid").astype(np.float32)
    arguments: list[Any] = [output, image, filt, np.int32(width), np.int32(height)]
    spec = KernelSpec(
        HERE / ("kernel.cl" if lang == "opencl" else "kernel.cu"), KERNEL_NAME, arguments,
        problem_size=(width, height),
        grid_div=(["block_size_x", "tile_size_x"], ["block_size_y", "tile_size_y"]),
        answer=[expected, None, None, None, None],
        # float32 sums of FW*FH products of N(0,1) numbers
        atol=1e-5 * filter_width * filter_height, rtol=1e-4,
        defines={"filter_width": filter_width, "filter_height": filter_height},
        lang=lang,
    )
    return Problem(name, spec, space)


problem = make_problem(512, 512, 7, 7, make_space(PARAMS_OPENCL, 512, 512, 7, 7),
                       lang="opencl", name="convolution_512_7x7")
problem_small = make_problem(128, 128, 5, 5, make_space(PARAMS_SMALL, 128, 128, 5, 5),
                             lang="opencl", name="convolution_128_5x5_small")


def make_problem_cuda(size: int = 4096, filter_size: int = 15) -> Problem:
    """The GPU problem: at most 1024 threads per block, at least a warp, 48 KiB static shared memory."""
    space = make_space(PARAMS_CUDA, size, size, filter_size, filter_size, max_threads=1024, min_threads=32)
    return make_problem(size, size, filter_size, filter_size, space, lang="cuda",
                        name=f"convolution_{size}_{filter_size}x{filter_size}")


def __getattr__(name: str) -> Any:
    """Build ``problem_cuda`` only when someone asks for it (PEP 562)."""
    if name == "problem_cuda":
        value = globals()["problem_cuda"] = make_problem_cuda()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
