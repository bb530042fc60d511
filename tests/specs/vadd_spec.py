"""A small real OpenCL problem for end-to-end tests: vector add with two tunable parameters."""

import numpy as np

from adaptune.measure import KernelSpec
from adaptune.space import Space
from adaptune.tuning import Problem

SOURCE = """
__kernel void vadd(__global const float *a, __global const float *b, __global float *c, const int n) {
    int i = get_global_id(0) * work_per_thread;
    for (int k = 0; k < work_per_thread; k++) {
        if (i + k < n) c[i + k] = a[i + k] + b[i + k];
    }
}
"""

N = 1 << 16
rng = np.random.default_rng(1)
a = rng.random(N, dtype=np.float32)
b = rng.random(N, dtype=np.float32)
c = np.zeros_like(a)

space = Space(
    {"block_size_x": [16, 32, 64, 128, 256], "work_per_thread": [1, 2, 4, 8]},
    constraints=["block_size_x * work_per_thread <= 1024"],
    defaults={"block_size_x": 32, "work_per_thread": 1},
)
spec = KernelSpec(
    SOURCE, "vadd", [a, b, c, np.int32(N)], problem_size=N,
    grid_div=(("block_size_x", "work_per_thread"), (), ()),
    answer=[None, None, a + b, None],
)
problem = Problem("vadd_test", spec, space)
