"""Pure rules of the measure layer: geometry, defines, verification, statistics, settings."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from adaptune.measure import KernelSpec, MeasureSettings, median_ci, poison_value, runners, time_callable
from adaptune.measure.geometry import SpecError, kernel_defines, launch_geometry, template_args
from adaptune.measure.runners import racing_time
from adaptune.measure.timing import collect, median_is_known, settle
from adaptune.measure.verify import check
from adaptune.records import Result, Status

ARGS = [np.zeros(10, np.float32), np.int32(10)]


def spec(**kw) -> KernelSpec:
    kw.setdefault("problem_size", 1000)
    return KernelSpec("__kernel void k(__global float *x, int n) {}", "k", ARGS, **kw)


def test_grid_is_problem_size_over_block_rounded_up():
    g = launch_geometry(spec(), {"block_size_x": 128})
    assert g.grid == (8, 1, 1) and g.block == (128, 1, 1) and g.problem_size == (1000, 1, 1)


def test_default_block_is_kernel_tuners():
    assert launch_geometry(spec(), {}).block == (256, 1, 1)


def test_grid_div_lists_names_and_expressions():
    s = spec(problem_size=(1000, "rows"), grid_div=(["block_size_x", "tile"], ["block_size_y * 2"], []))
    g = launch_geometry(s, {"block_size_x": 32, "block_size_y": 4, "tile": 4, "rows": 64})
    assert g.grid == (8, 8, 1) and g.block == (32, 4, 1)


def test_2d_default_divides_each_dimension_by_its_block():
    g = launch_geometry(spec(problem_size=(100, 50)), {"block_size_x": 16, "block_size_y": 8})
    assert g.grid == (7, 7, 1)


def test_geometry_callable_and_problem_size_callable():
    s = spec(problem_size=lambda c: c["n"], geometry=lambda c: ((c["n"] // 64,), (64,)))
    g = launch_geometry(s, {"n": 512})
    assert g.grid == (8, 1, 1) and g.block == (64, 1, 1) and g.problem_size == (512, 1, 1)


def test_dynamic_shared_memory_size_follows_the_config():
    g = launch_geometry(spec(shared_mem="block_size_x * 4"), {"block_size_x": 128})
    assert g.shared_mem == 512
    assert launch_geometry(spec(), {"block_size_x": 128}).shared_mem == 0


def test_shared_memory_on_opencl_is_refused_as_a_spec_error():
    from adaptune.measure.runners import KernelRunner

    runner = KernelRunner(spec(shared_mem=64), "opencl", MeasureSettings(), 0)
    try:
        with pytest.raises(SpecError, match="needs the cuda backend"):
            runner.prepare({"block_size_x": 32})
    finally:
        runner.close()


def test_geometry_errors_name_the_cause():
    with pytest.raises(SpecError, match="'tile'"):
        launch_geometry(spec(grid_div=(["block_size_x * tile"],)), {"block_size_x": 32})
    with pytest.raises(SpecError, match="not an integer"):
        launch_geometry(spec(grid_div=(["block_size_x / 3"],)), {"block_size_x": 32})
    with pytest.raises(SpecError, match="not allowed"):
        launch_geometry(spec(grid_div=(["__import__('os')"],)), {"block_size_x": 32})


def test_defines_hold_params_sizes_and_spare_template_params():
    s = spec(defines={"ALPHA": 2.0}, template_params=["block_size_x"])
    config = {"block_size_x": 64, "unroll": True, "T": "float"}
    d = kernel_defines(s, config, launch_geometry(s, config))
    assert d["unroll"] is True and d["T"] == "float" and d["ALPHA"] == 2.0
    assert d["problem_size_x"] == 1000 and d["grid_size_x"] == 16 and d["block_size_y"] == 1
    assert "block_size_x" not in d  # it is a template argument; a #define would clobber its name
    assert template_args(s, config) == [64]
    clash = spec(defines={"unroll": 1})
    with pytest.raises(SpecError, match="clashes"):
        kernel_defines(clash, config, launch_geometry(clash, config))


def test_spec_validation():
    with pytest.raises(TypeError, match="np.int32"):
        KernelSpec("", "k", [np.zeros(3), 5])
    with pytest.raises(ValueError, match="answer has 1 entries"):
        KernelSpec("", "k", ARGS, answer=[None])
    with pytest.raises(ValueError, match="only the cuda backend"):
        KernelSpec("", "k", ARGS, lang="opencl", template_params=["a"])
    with pytest.raises(ValueError, match="repeats"):
        MeasureSettings(repeats=0)
    with pytest.raises(ValueError, match="unknown observers"):
        MeasureSettings(observers=("rapl",))


def test_source_from_a_path_infers_the_language(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("extern \"C\" __global__ void k() {}")
    s = KernelSpec(path, "k", [])
    assert s.lang == "cuda" and "__global__" in s.source_text
    with pytest.raises(FileNotFoundError, match="not found"):
        KernelSpec(tmp_path / "missing.cl", "k", [])


def test_poison_patterns():
    assert np.isnan(poison_value(np.float32)[0]) and np.isnan(poison_value(np.complex64)[0].real)
    assert poison_value(np.int32)[0] == 0x7F7F7F7F and poison_value(np.uint8)[0] == 0x7F


def test_check_reports_where_and_how_much():
    exp = np.arange(6, dtype=np.float32)
    got = exp.copy()
    got[4] = np.nan
    msg = check([got, None], [exp, None], 1e-6, 1e-5)
    assert "1 of 6 values differ" in msg and "first at 4" in msg and "not finite" in msg
    assert check([exp + 1e-7], [exp], 1e-6, 0.0) is None
    assert "output 0" in check([exp + 1e-3], [exp], [1e-6], [0.0])
    assert check([exp + 1e-3], [exp], [1e-2], [0.0]) is None  # per-output tolerance
    assert "shape" in check([exp[:3]], [exp], 1e-6, 1e-5)
    assert check([np.arange(4)], [np.arange(4)], 0, 0) is None
    assert "differ" in check([np.arange(4)], [np.arange(1, 5)], 10, 10)  # ints are compared exactly
    assert check([exp], lambda outs: bool(outs[0].sum() == 15), 0, 0) is None
    assert "raised ZeroDivisionError" in check([exp], lambda outs: 1 / 0, 0, 0)


def test_median_ci_and_adaptive_stop():
    samples = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.0, 1.01, 0.99]
    lo, hi = median_ci(samples)
    assert lo <= np.median(samples) <= hi
    assert median_is_known(samples, 0.02) and not median_is_known([1.0, 2.0, 3.0, 4.0, 5.0], 0.02)
    steady = iter([1.0] * 200)
    assert len(collect(lambda: next(steady), "auto", min_repeats=5)) == 5
    noisy = iter(np.random.default_rng(0).lognormal(0, 1, 500))
    assert len(collect(lambda: float(next(noisy)), "auto", max_repeats=30, max_seconds=60)) == 30


def test_time_callable_counts_repeats_and_calls_sync():
    calls = []
    samples = time_callable(lambda x: sum(range(x)), (1000,), repeats=4, warmup=2, sync=lambda: calls.append(1))
    assert len(samples) == 4 and all(s > 0 and math.isfinite(s) for s in samples)
    assert len(calls) == 6


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="pynvml installed")
def test_nvml_without_pynvml_says_what_to_install():
    from adaptune.measure import NVMLObserver, ObserverError

    with pytest.raises(ObserverError, match=r"adaptune\[cuda\]"):
        NVMLObserver(0)


@pytest.mark.parametrize(("cores", "c_threads", "nvrtc_threads"), [(2, 2, 2), (16, 14, 8), (64, 62, 8), (128, 64, 8)])
def test_compile_threads_scale_with_cores_only_where_each_build_is_a_compiler_process(
        monkeypatch, cores, c_threads, nvrtc_threads):
    # the C backend's builds are g++/nvcc processes (threads only wait); NVRTC and OpenCL build inside the worker
    monkeypatch.setattr(runners.os, "cpu_count", lambda: cores)
    assert runners.compile_threads("c") == c_threads
    assert runners.compile_threads("cuda") == runners.compile_threads("opencl") == nvrtc_threads


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_the_checks_fast_path_agrees_with_isclose_everywhere(dtype):
    # the fast path (two temporaries) decides only where all is close; NaN, infinities, integers, mixed precision
    # and complex values are judged as numpy.isclose judges them
    rng = np.random.default_rng(5)
    expected = rng.standard_normal(4096).astype(dtype)
    cases = {"equal": expected.copy(), "within": expected + (1e-6 * expected).astype(dtype),
             "outside": expected + dtype(0.5), "nan": expected.copy(), "inf": expected.copy(),
             "int": np.rint(expected).astype(np.int32)}
    cases["nan"][7] = np.nan
    cases["inf"][3] = np.inf
    both_inf = expected.copy()
    both_inf[3] = np.inf
    for got, exp in [*((g, expected) for g in cases.values()), (cases["inf"], both_inf), (expected, both_inf),
                     (expected, cases["nan"]), (both_inf[:0], expected[:0]),
                     (expected.astype(np.complex64), expected.astype(np.complex64))]:
        atol, rtol = (1e-3, 1e-3) if dtype == np.float16 else (1e-6, 1e-5)
        with np.errstate(invalid="ignore"):
            want = bool(np.isclose(got, exp, atol=atol, rtol=rtol).all())
        assert (check([got], [exp], atol, rtol) is None) == want


def test_racing_needs_two_runs_far_behind_to_give_up():
    far_behind = lambda ms: ms > 2.0  # noqa: E731 - an incumbent of 1 ms and a factor of 2
    hiccup = iter([5.0, 1.1, 1.0, 1.2, 1.0])  # one slow run of a good configuration: measured in full
    assert collect(lambda: next(hiccup), 5, give_up=far_behind) == [5.0, 1.1, 1.0, 1.2, 1.0]
    slow = iter([5.0, 4.0, 4.5])
    assert collect(lambda: next(slow), 5, give_up=far_behind) == [5.0, 4.0]
    assert collect(lambda: 5.0, 1, give_up=far_behind) == [5.0]
    auto = iter([5.0, 1.0] + [1.0] * 10)
    assert len(collect(lambda: next(auto), "auto", min_repeats=5, give_up=far_behind)) >= 5  # measured on


def test_an_incumbent_races_with_its_first_two_runs_as_a_candidate_is_judged_on_its_own():
    warmed = Result({"b": 1}, Status.OK, 1.0, samples=[3.0, 2.5, 1.0, 1.0, 1.0])  # slow runs just after a build
    assert racing_time(warmed) == 2.5
    assert racing_time(Result({"b": 2}, Status.OK, 1.0)) == 1.0  # no samples kept: its time
    assert racing_time(Result({"b": 3}, Status.COMPILE_ERROR, math.inf)) == math.inf


def test_warm_up_settles_once_a_window_of_runs_stops_getting_faster():
    # PoCL on two cores after a build (a plain PyOpenCL loop): ~10 runs down a slope, with spikes on the way
    sloped = [4.37, 8.22, 4.47, 5.92, 3.89, 3.44, 3.11, 2.87, 2.63, 2.58, 3.65, 2.57, 2.55, 3.1, 4.87, 2.9]
    runs = iter(sloped)
    assert settle(lambda: next(runs)) == 12
    assert settle(lambda: 1.0) == 6  # a steady device: the least it takes
    assert settle(lambda: 400.0) == 2  # a long kernel: the time cap
    assert settle(lambda: 1e-3) == 6
