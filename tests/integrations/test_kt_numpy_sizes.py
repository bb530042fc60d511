"""Kernel Tuner's examples pass NumPy scalars where Python ints are expected (``problem_size = numpy.int32(n)``
in its ``spmv.py``): the drop-in takes them as Kernel Tuner does."""

from __future__ import annotations

import numpy as np

from adaptune.integrations.kernel_tuner import tune_kernel
from adaptune.store.recorded import problem_size_name
from tests.integrations.kt_kernels import VECTOR_ADD


def test_problem_size_names_of_numpy_scalars_and_tuples():
    assert problem_size_name(np.int32(4096)) == "4096"
    assert problem_size_name((np.int64(64), 32)) == "64x32"
    assert problem_size_name([]) == problem_size_name(None) == problem_size_name("") == "default"


def test_a_numpy_int32_problem_size_tunes(kt_env, vector_args):
    size, args, expected = vector_args
    results, _ = tune_kernel("vector_add", VECTOR_ADD, np.int32(size), args, {"block_size_x": [32, 64]},
                               answer=[expected, None, None, None], quiet=True, iterations=2)
    assert [r["block_size_x"] for r in results] == [32, 64] and all(r["time"] > 0 for r in results)


def test_an_empty_array_argument_tunes_as_kernel_tuner_does(kt_env, vector_args):
    """Kernel Tuner's cuda/spmv.py computes nnz as numpy.int32 * int, which wraps to 0: its column and value
    arrays are empty and Kernel Tuner still runs every configuration (no row has an element to read)."""
    size, args, expected = vector_args
    kernel = """__kernel void scale_rows(__global float *y, __global const float *vals, const int nnz, const int n) {
        int i = get_global_id(0);
        if (i < n) y[i] = nnz > 0 ? vals[0] : 1.0f;
    }"""
    y = np.zeros(size, np.float32)
    results, _ = tune_kernel("scale_rows", kernel, size, [y, np.zeros(0, np.float32), np.int32(0), np.int32(size)],
                             {"block_size_x": [32, 64]}, answer=[np.ones(size, np.float32), None, None, None],
                             quiet=True, iterations=2)
    assert [r["block_size_x"] for r in results] == [32, 64] and all("__error__" not in r for r in results)
