"""Backends in-process: define injection, OpenCL compile/copy/fill/launch on PoCL, device choice."""

from __future__ import annotations

import importlib.util
import threading

import numpy as np
import pytest

from adaptune.backends import (
    BackendError,
    CompileError,
    define_lines,
    inject_defines,
    list_devices,
    make_backend,
    name_expression,
)

ADD = """
__kernel void add(__global float *c, __global const float *a, const int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + OFFSET;
}
"""


@pytest.fixture(scope="module")
def ocl():
    return make_backend("opencl", 0)


def test_defines_format_like_kernel_tuner():
    text = define_lines({"flag": True, "off": False, "n": np.int64(7), "x": 0.1, "T": "float"})
    assert text == "#define flag 1\n#define off 0\n#define n 7\n#define x 0.1\n#define T float\n"
    assert inject_defines("body", {"a": 1}) == "#define a 1\n#line 1\nbody"
    assert inject_defines("body", {}) == "body"
    with pytest.raises(ValueError, match="not a C identifier"):
        define_lines({"bad name": 1})


def test_template_name_expression():
    assert name_expression("k", None) == "k"
    assert name_expression("k", [128, True, "float"]) == "k<128,true,float>"


def test_opencl_compiles_launches_and_times(ocl):
    kernel = ocl.compile(ADD, "add", {"OFFSET": 2.5})
    a = np.arange(100, dtype=np.float32)
    args = ocl.allocate([np.zeros(100, np.float32), a, np.int32(100)])
    ms = ocl.time_launch(kernel, (4, 1, 1), (32, 1, 1), args)
    assert ms > 0
    np.testing.assert_array_equal(ocl.copy_out(args[0]), a + 2.5)


def test_compiled_kernels_are_cached_per_source_and_defines(ocl):
    before = ocl.compiles
    k1 = ocl.compile(ADD, "add", {"OFFSET": 7})
    k2 = ocl.compile(ADD, "add", {"OFFSET": 7})
    k3 = ocl.compile(ADD, "add", {"OFFSET": 8})
    assert k1 is k2 and k3 is not k1
    assert ocl.compiles == before + 2
    _, ms, cached = ocl.compile_timed(ADD, "add", {"OFFSET": 8})
    assert cached and ms == 0.0


def test_compile_error_carries_the_log_with_user_line_numbers(ocl):
    with pytest.raises(CompileError) as info:
        ocl.compile("__kernel void k(__global float *x) {\n  x[0] = undefined_name;\n}\n", "k", {"A": 1})
    assert "undefined_name" in info.value.log and ":2:" in info.value.log
    with pytest.raises(CompileError, match="not found"):
        ocl.compile(ADD, "no_such_kernel", {"OFFSET": 1})


def test_device_copies_fill_and_kernel_limits(ocl):
    src = ocl.allocate([np.arange(16, dtype=np.int32)])[0]
    dst = ocl.empty_like(src)
    ocl.copy_device(dst, src)
    np.testing.assert_array_equal(ocl.copy_out(dst), np.arange(16))
    ocl.fill(dst, np.array([0x7F7F7F7F], np.int32))
    assert (ocl.copy_out(dst) == 0x7F7F7F7F).all()
    ocl.copy_in(dst, np.full(16, 3, np.int32))
    assert (ocl.copy_out(dst) == 3).all()
    kernel = ocl.compile(ADD, "add", {"OFFSET": 0})
    limits = ocl.limits()
    assert 0 < ocl.kernel_max_threads(kernel) <= limits.max_threads_per_block
    info = ocl.device_info()
    assert info.platform.startswith("opencl:") and info.properties["max_work_group_size"] == limits.max_threads_per_block


def test_an_empty_array_argument_is_held_and_read_back_empty(ocl):
    """Kernel Tuner passes empty arrays on (its spmv.py example makes one when an int32 product wraps to 0)."""
    empty, full = ocl.allocate([np.zeros(0, np.float32), np.full(16, 5, np.float32)])
    ocl.fill(empty, np.array([1.0], np.float32))
    ocl.copy_in(empty, np.zeros(0, np.float32))
    ocl.copy_device(ocl.empty_like(empty), empty)
    back = ocl.copy_out(empty)
    assert back.shape == (0,) and back.dtype == np.float32
    kernel = ocl.compile(ADD, "add", {"OFFSET": 0})
    ocl.launch(kernel, (1, 1, 1), (16, 1, 1), [full, empty, np.int32(0)])  # n = 0: nothing read or written
    ocl.synchronize()
    assert (ocl.copy_out(full) == 5).all()


def test_bad_arguments_and_devices_give_one_clear_error(ocl):
    with pytest.raises(TypeError, match="np.int32"):
        ocl.allocate([3])
    with pytest.raises(BackendError, match="available"):
        make_backend("opencl", 99)
    with pytest.raises(ValueError, match="unknown backend"):
        make_backend("vulkan")


def test_device_selection_by_name(ocl):
    name = ocl.device_info().name
    assert make_backend("opencl", name.split()[0].lower()).device_info().name == name


def test_list_devices_has_opencl_and_the_host():
    kinds = {backend for backend, _, _ in list_devices()}
    assert {"opencl", "python"} <= kinds


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy installed: covered on a GPU")
def test_cuda_without_cupy_says_what_to_install():
    with pytest.raises(BackendError, match=r"adaptune\[cuda\]"):
        make_backend("cuda", 0)


def test_a_warm_up_that_fails_is_tried_once(ocl):
    class Broken(type(ocl)):
        warm_up_source = "__kernel void adaptune_warm_up(void) { this does not compile }"
        builds = 0

        def _build(self, *args, **kwargs):
            Broken.builds += 1
            return super()._build(*args, **kwargs)

    backend = Broken(0)
    for _ in range(3):  # CUDA's timed launches ask again while the kernel is missing
        backend.warm_up()
    assert backend.warm_up_kernel is None and Broken.builds == 1
    ocl.warm_up()
    assert ocl.warm_up_kernel is not None  # the real one builds


def test_a_caller_asking_for_the_warm_up_while_it_builds_waits_for_its_kernel(ocl):
    # the worker builds it in a thread and reports ready meanwhile; a held launch asking for it must get the kernel
    started, release = threading.Event(), threading.Event()

    class Slow(type(ocl)):
        builds = 0

        def _build(self, *args, **kwargs):
            Slow.builds += 1
            started.set()
            release.wait(10)
            return super()._build(*args, **kwargs)

    backend = Slow(0)
    builder = threading.Thread(target=backend.warm_up)
    builder.start()
    assert started.wait(10)
    seen = []
    asker = threading.Thread(target=lambda: (backend.warm_up(), seen.append(backend.warm_up_kernel)))
    asker.start()
    asker.join(0.2)
    assert asker.is_alive()  # waiting for the build, not returning without the kernel
    release.set()
    builder.join(10)
    asker.join(10)
    assert Slow.builds == 1 and seen and seen[0] is not None
