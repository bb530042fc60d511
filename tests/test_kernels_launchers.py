"""Named-file kernels: the launcher is kept per (source, name, defines), so a launch does not rebuild and
hash the source text; different defines still get their own build, and launches stay correct."""

import numpy as np

from adaptune.kernels import sort
from adaptune.kernels.device import OpenCLDevice


def test_launchers_are_kept_per_defines_and_stay_correct():
    dev = OpenCLDevice()
    k32 = sort._kernel(dev, np.dtype(np.int32), "count_order")
    compiles = dev.compiles
    assert sort._kernel(dev, np.dtype(np.int32), "count_order") is k32 and dev.compiles == compiles
    k64 = sort._kernel(dev, np.dtype(np.float64), "count_order")
    assert k64 is not k32 and dev.compiles == compiles + 1
    # the key is the text of the defines: 1 and "1" make the same #define line, so one launcher
    a = dev.kernel("sort_kernels.c", "count_order", {**sort.key_defines(np.dtype(np.int32)), "LOCALITY": 1})
    b = dev.kernel("sort_kernels.c", "count_order", {**sort.key_defines(np.dtype(np.int32)), "LOCALITY": "1"})
    assert a is b
    keys = np.random.default_rng(1).integers(0, 50, 10_001).astype(np.int32)
    for _ in range(2):  # the kept launcher again, on new buffers
        got = sort.count_order(dev, dev.asarray(keys))
        want = [np.sum(keys[1:] < keys[:-1]), np.sum(keys[1:] > keys[:-1]), np.sum(keys[1:] == keys[:-1])]
        np.testing.assert_array_equal(got, want)
