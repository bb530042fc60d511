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
MATMUL_CONFIGS = [  # includes several vectors per thread (tile_size_x > vector_width > 1), with and without tiles
    {**MATMUL_BASE, "block_size_x": 1, "block_size_y": 1},
    {**MATMUL_BASE, "block_size_x": 32, "block_size_y": 2, "tile_size_x": 4, "vector_width": 2,
     "loop_unroll_factor_k": 4},
    {**MATMUL_BASE, "block_size_x": 8, "block_size_y": 8, "tile_size_x": 8, "tile_size_y": 2, "vector_width": 4,
     "loop_unroll_factor_k": 2},
    {**MATMUL_BASE, "block_size_x": 8, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 2, "vector_width": 2,
     "loop_unroll_factor_k": 2, "use_shared_mem": 1, "tile_size_k": 8},
    {**MATMUL_BASE, "block_size_x": 16, "block_size_y": 8, "tile_size_x": 8, "tile_size_y": 4, "vector_width": 4,
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


# --- problem files ------------------------------------------------------------------------------
#
# These need the tuning layers (adaptune.measure, adaptune.tuning). They run each problem's own
# kernel, arguments, launch rule and answer through PyOpenCL directly, so a mistake in a problem file
# (wrong argument order, geometry, tolerance or reference) shows here without the tuner.

EXAMPLE_NAMES = ["vector_add", "matmul", "convolution", "reduction"]


def load_problem_module(example: str):
    pytest.importorskip("adaptune.measure", reason="adaptune.measure is not importable yet")
    pytest.importorskip("adaptune.tuning", reason="adaptune.tuning is not importable yet")
    import importlib.util
    import sys

    path = EXAMPLES / example / "problem.py"
    name = f"adaptune_example_test_{example}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def kt_geometry(spec, config: dict[str, Any]) -> tuple[tuple[int, ...], list[str]]:
    """Grid in blocks by Kernel Tuner's rule, computed here independently of adaptune.measure."""
    sizes = spec.problem_size if isinstance(spec.problem_size, tuple | list) else [spec.problem_size]
    grid = []
    for dim, size in enumerate(sizes):
        size = config[size] if isinstance(size, str) else int(size)
        divisors = spec.grid_div[dim] if spec.grid_div else [f"block_size_{'xyz'[dim]}"]
        div = math.prod(config[d] if isinstance(d, str) else int(d) for d in divisors)
        grid.append(-(-size // div))
    return tuple(grid)


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_problem_file_builds_and_stays_cheap_to_import(example):
    from adaptune.space import Space
    from adaptune.tuning import Problem

    module = load_problem_module(example)
    for attr in ("problem", "problem_small"):
        problem = getattr(module, attr)
        assert isinstance(problem, Problem)
        assert isinstance(problem.space, Space)
        assert len(problem.space) > 0
        assert problem.space.default_index() is not None, f"{attr}: the default configuration is not valid"
        assert problem.spec.lang == "opencl"
    assert 4 <= len(module.problem_small.space) <= 60
    assert "problem_cuda" not in vars(module), "problem_cuda must be built lazily (GPU-sized arrays)"
    assert module.make_problem_cuda.__doc__ is None or isinstance(module.make_problem_cuda.__doc__, str)


def test_space_sizes_are_what_the_readme_says():
    sizes = {ex: len(load_problem_module(ex).problem.space) for ex in EXAMPLE_NAMES}
    assert 200 <= sizes["matmul"] <= 500, sizes
    assert 200 <= sizes["convolution"] <= 500, sizes
    assert 20 <= len(load_problem_module("matmul").problem_small.space) <= 48


@pytest.mark.parametrize("example,kwargs", [
    ("vector_add", {"n": 1000}),
    ("matmul", {"size": 512}),
    ("convolution", {"size": 256, "filter_size": 15}),
    ("reduction", {"n": 2**20}),
])
def test_cuda_problem_builds_at_small_size(example, kwargs):
    problem = load_problem_module(example).make_problem_cuda(**kwargs)
    assert problem.spec.lang == "cuda"
    assert str(problem.spec.source).endswith("kernel.cu")
    assert len(problem.space) > 0


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_problem_answer_agrees_with_the_kernel(queue, example):
    """Default, first, last and two random valid configurations of ``problem`` give the problem's answer."""
    problem = load_problem_module(example).problem
    spec, space = problem.spec, problem.space
    rng = np.random.default_rng(7)
    picks = {space.default_index(), 0, len(space) - 1, *(int(i) for i in space.sample(rng, 2))}
    outputs = [i for i, want in enumerate(spec.answer) if want is not None]
    for index in sorted(picks):
        config = {**space.config(index), **(spec.defines or {})}
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in spec.arguments]
        got = run_kernel(queue, example, spec.name, config, kt_geometry(spec, space.config(index)), args, outputs)
        for i, out in zip(outputs, got, strict=True):
            want = np.asarray(spec.answer[i])
            atol = spec.atol if isinstance(spec.atol, float | int) else spec.atol[i]
            rtol = spec.rtol if isinstance(spec.rtol, float | int) else spec.rtol[i]
            np.testing.assert_allclose(out.reshape(want.shape), want, atol=atol, rtol=rtol,
                                       err_msg=f"{example} {space.config(index)}")


# --- T1 files -----------------------------------------------------------------------------------

T1_FILES = [EXAMPLES / ex / f for ex in ("matmul", "convolution") for f in ("t1.json", "t1_cuda.json")]


@pytest.mark.parametrize("path", T1_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_t1_file_is_well_formed(path):
    import json

    doc = json.loads(path.read_text())
    kernel = doc["KernelSpecification"]
    source = (path.parent / kernel["KernelFile"]).read_text()
    assert kernel["KernelName"] in source
    for param in doc["ConfigurationSpace"]["TuningParameters"]:
        assert param["Name"] in source, f"{param['Name']} is not used by {kernel['KernelFile']}"
        assert json.loads(param["Values"]), param
    names = {p["Name"] for p in doc["ConfigurationSpace"]["TuningParameters"]}
    for cond in doc["ConfigurationSpace"]["Conditions"]:
        assert set(cond["Parameters"]) <= names


@pytest.mark.parametrize("path", T1_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_t1_file_is_what_make_t1_writes(path):
    """The committed T1 files match their problem.py (run `python examples/make_t1.py` after a change)."""
    load_problem_module("matmul")  # skips until the tuning layers import
    import sys

    sys.path.insert(0, str(EXAMPLES))
    try:
        import make_t1
    finally:
        sys.path.remove(str(EXAMPLES))
    assert path.read_text() == make_t1.render(make_t1.documents()[path])


@pytest.mark.parametrize("example", ["matmul", "convolution"])
def test_t1_space_equals_problem_space(example):
    """adaptune's T1 loader sees the same space as the Python problem file."""
    module = load_problem_module(example)
    t1_problem = pytest.importorskip("adaptune.tuning.t1_problem", reason="the T1 loader is not importable yet")
    problem = t1_problem.problem_from_t1(EXAMPLES / example / "t1.json")
    ours = module.problem.space
    assert len(problem.space) == len(ours)
    assert {ours.key(c) for c in ours.configs()} == {
        ",".join(str(c[n]) for n in ours.names) for c in problem.space.configs()}
