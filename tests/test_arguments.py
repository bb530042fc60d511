"""Arguments are checked against the kernel's parameter list before anything is launched."""

from __future__ import annotations

import numpy as np
import pytest

import adaptune as at
from adaptune.backends.signature import ArgumentMismatchError, kernel_parameters
from adaptune.kernels.device import source_text

VADD = """
/* a comment with __kernel void vadd(int nonsense) */
__kernel void vadd(__global const float *restrict a, __global const float *b,
                   __global float *c, const int n) { }
"""
CUDA = """
template <typename T> __device__ T twice(T x) { return 2 * x; }
extern "C" __global__ void __launch_bounds__(256, 2) saxpy(const float a, const float* __restrict__ x,
                                                            float *y, unsigned long long n, double2 *pairs) { }
"""


def _spec(source, name, args, **kw):
    return at.KernelSpec(source, name, args, problem_size=16, **kw)


def test_opencl_and_cuda_parameter_lists_are_read():
    params = kernel_parameters(VADD, "vadd")
    assert [(p.name, p.pointer, str(p.dtype)) for p in params] == [
        ("a", True, "float32"), ("b", True, "float32"), ("c", True, "float32"), ("n", False, "int32")]
    params = kernel_parameters(CUDA, "saxpy")
    assert [(p.name, p.pointer, str(p.dtype)) for p in params] == [
        ("a", False, "float32"), ("x", True, "float32"), ("y", True, "float32"), ("n", False, "uint64"),
        ("pairs", True, "float64")]
    assert kernel_parameters(VADD, "missing") is None


def test_the_dialects_typedefs_are_resolved():
    source = source_text("spmv_kernels.c")
    params = kernel_parameters(source, "spmv_csr_scalar")
    assert params is not None and all(p.dtype is not None for p in params if p.type_text != "real_t")
    assert {str(p.dtype) for p in params if p.type_text in ("u32", "i32")} <= {"uint32", "int32"}


def test_a_float64_array_for_a_float_pointer_is_refused_naming_the_parameter():
    x = np.zeros(16)
    with pytest.raises(ArgumentMismatchError, match=r"parameter 1 \(b: float \*\).*expects float32 but argument 1 is float64"):
        _spec(VADD, "vadd", [x.astype(np.float32), x, x.astype(np.float32), np.int32(16)])


def test_wrong_count_and_scalar_width_are_refused():
    f = np.zeros(16, np.float32)
    with pytest.raises(ArgumentMismatchError, match=r"takes 4 parameters \(float \* a, .*\) but 3 arguments"):
        _spec(VADD, "vadd", [f, f, f])
    with pytest.raises(ArgumentMismatchError, match=r"parameter 3 \(n: int\).*expects int32 but argument 3 is int64"):
        _spec(VADD, "vadd", [f, f, f, np.int64(16)])
    with pytest.raises(ArgumentMismatchError, match="is a pointer but argument 0 is a float32"):
        _spec(VADD, "vadd", [np.float32(1), f, f, np.int32(16)])


def test_unknown_types_are_left_alone_and_the_check_can_be_switched_off():
    source = "typedef struct { float x; } pt;\n__kernel void k(__global pt *p, T scale) { }"
    _spec(source, "k", [np.zeros(4, np.float64), np.float64(1)])  # struct and unknown T: unchecked
    f = np.zeros(16)
    _spec(VADD, "vadd", [f, f, f, np.int64(16)], check_arguments=False)
