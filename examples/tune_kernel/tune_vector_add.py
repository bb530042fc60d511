"""Tune an OpenCL kernel (runs on any CPU through PoCL): a space, a spec with a correctness check, a search."""

import numpy as np

import adaptune as at

kernel = """
__kernel void vadd(__global const float *a, __global const float *b, __global float *c, int n) {
    int i = get_global_id(0) * work_per_thread;
    for (int k = 0; k < work_per_thread; k++, i++)
        if (i < n) c[i] = a[i] + b[i];
}
"""
n = 1 << 16
a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
space = at.Space({"block_size_x": [32, 64, 128, 256], "work_per_thread": [1, 2, 4]},
                 constraints=["block_size_x * work_per_thread <= 512"],
                 defaults={"block_size_x": 64, "work_per_thread": 1})
spec = at.KernelSpec(kernel, "vadd", [a, b, np.zeros_like(a), np.int32(n)], problem_size=n,
                     grid_div=(["block_size_x", "work_per_thread"], [], []), answer=[None, None, a + b, None])
report = at.tune(at.Problem("vadd", spec, space), strategy="auto", max_evals=6, repeats=3, db="vadd.db",
                 progress=False)
print(f"best {report.best} at {report.best_time_ms:.4f} ms; {report.evaluated} measured, {report.failed} failed")
assert report.best is not None
