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
