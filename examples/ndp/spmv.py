"""A nested data-parallel computation: SpMV in three lines, generated into kernels with several schedules."""

import numpy as np
import scipy.sparse as sp

from adaptune.kernels.device import OpenCLDevice  # CupyDevice() on an NVIDIA GPU
from adaptune.lang import ndp


@ndp.computation(values="f32", columns="i32", offsets="i32", x="f32")
def spmv(values, columns, offsets, x):
    rows, cols = ndp.nest(values, offsets), ndp.nest(columns, offsets)
    return ndp.map(lambda r, c: ndp.reduce(ndp.add, ndp.map(lambda a, b: a * b, r, ndp.gather(x, c))), rows, cols)


matrix = sp.random(500, 500, density=0.02, format="csr", dtype=np.float32, random_state=0)
x = np.random.default_rng(0).random(500).astype(np.float32)
arrays = (matrix.data, matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32), x)
prog = spmv.generate(OpenCLDevice())
print("schedules:", prog.variant_names)
y = prog.run("independent.sequential", *arrays)
assert np.allclose(np.asarray(y), matrix @ x, rtol=1e-4)
print("matches scipy on", matrix.nnz, "non-zeros")
