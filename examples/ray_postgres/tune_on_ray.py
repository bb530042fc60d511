"""Tune on Ray workers into a shared PostgreSQL store (a local Ray cluster and a throw-away server here).

Needs the distributed extra: pip install "adaptune[distributed]" (ray, pgserver, psycopg). On a cluster,
pass address="auto" (or ray://...) and db="postgresql://user@host/db".
"""

import numpy as np

import adaptune as at
from adaptune.distributed.postgres import local_postgres

kernel = """
__kernel void scale(__global float *y, __global const float *x, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = 2.0f * x[i];
}
"""
n = 1 << 14
x = np.random.rand(n).astype(np.float32)
spec = at.KernelSpec(kernel, "scale", [np.zeros_like(x), x, np.int32(n)], problem_size=n,
                     answer=[2 * x, None, None])
problem = at.Problem("scale", spec, at.Space({"block_size_x": [16, 32, 64, 128]}))

with local_postgres() as url:  # every worker writes to this server; a re-run resumes from it
    report = at.tune(problem, "brute_force", repeats=2, db=url, executor="ray", n_parallel=2, progress=False)
    print(f"{report.evaluated} configurations measured by 2 Ray workers; best {report.best}")
    again = at.tune(problem, "brute_force", repeats=2, db=url, progress=False)  # nothing measured twice
    print(f"second run: {again.reused} of {again.evaluated} results reused from PostgreSQL")
    assert again.reused == again.evaluated
