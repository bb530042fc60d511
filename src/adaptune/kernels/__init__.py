"""Reusable GPU/CPU code variants with their features and input generators (Nitro's benchmarks).

Kernels are written once in a portable dialect (`dialect.h`) and run through CuPy (CUDA) or PyOpenCL:
`spmv` (CSR-scalar, CSR-vector, ELL, DIA, cuSPARSE), `histogram` (3 algorithms x 2 grids), `sort`
(merge, bitonic, presorted-aware, CUB radix, PyTorch), `features`, `inputs` (generators), `device`.
"""

from adaptune.kernels.device import CupyDevice, Device, KernelSourceError, OpenCLDevice

__all__ = ["CupyDevice", "Device", "KernelSourceError", "OpenCLDevice"]
