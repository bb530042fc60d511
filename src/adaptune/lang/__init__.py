"""adaptune.lang: lazy NumPy-style arrays compiled into fused, tuned OpenCL/CUDA kernels (seed 002, Bohrium).

The user-facing entry point is ``import adaptune.numpy as anp``; this package holds the layers under it:
``ir`` (the recorded DAG), ``array`` (the NumPy interface), ``fuse`` (kernels and the plan cache),
``codegen`` (the portable dialect), ``reduce`` (reduction variants and their selection), ``runtime``.
The subpackage ``ndp`` holds Surge's nested data-parallel operators, schedules and policies (seed 001 ch. 5).
"""

from adaptune.lang.array import LazyArray
from adaptune.lang.eager import FallbackWarning
from adaptune.lang.session import FlushStats

__all__ = ["FallbackWarning", "FlushStats", "LazyArray"]
