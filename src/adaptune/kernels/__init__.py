"""Reusable GPU/CPU code variants with their features and input generators (Nitro's benchmarks).

Kernels are written once in a portable dialect (`dialect.h`) and run through CuPy (CUDA) or PyOpenCL:
`spmv` (CSR-scalar, CSR-vector, load-balanced CSR, ELL, DIA, cuSPARSE prepared / convenience, torch.sparse),
`histogram` (8/16/32-bit keys, 16..65,536 bins: global, run-aggregated, privatised x1/x8/x32, sort, CUB),
`sort` (merge, bitonic, presorted-aware, CUB radix, PyTorch), `bfs` (9 variants), `features`, `inputs`
(generators), `dispatch` (KeptDispatch: the choice kept with the input object; DistilledDispatch: a first
call from host metadata through `distilled`, a cost-aware tree compiled into closures), `prefetched`
(PrefetchedDispatch: features started at fix time, a first call through a tree over host metadata and device
features once they are on the host), `sampled` (features a first call can afford: a few hundred values read at
fix), `device`.
"""

from adaptune.kernels.device import CupyDevice, Device, KernelSourceError, OpenCLDevice

__all__ = ["CupyDevice", "Device", "KernelSourceError", "OpenCLDevice"]
