"""Nested data-parallel operators (Surge, seed 001 ch. 5): write a computation once, get one variant per schedule.

    from adaptune.lang import ndp

    @ndp.computation(values="f32", columns="i32", offsets="i32", x="f32")
    def spmv(values, columns, offsets, x):
        rows, cols = ndp.nest(values, offsets), ndp.nest(columns, offsets)
        return ndp.map(lambda r, c: ndp.reduce(ndp.add, ndp.map(ndp.mul, r, ndp.gather(x, c))), rows, cols)

    prog = spmv.generate(device)          # kernels.device.CupyDevice() or OpenCLDevice()
    print(prog.explain(values, columns, offsets, x))
    y = prog.run("independent.cooperative", values, columns, offsets, x, logical_warp_size=8)
    prog.tune(training_inputs)            # CodeVariant.train: per-input labels, SVM; prog(*arrays) dispatches
    sel = ndp.PrefetchedSelector(prog, labels, host_tree, full_rule)  # a first call on fresh inputs:
    sel.fix(*arrays); ...; sel(*arrays)   # features prefetched at binding, the gate picks in well under 1 us

See docs/ndp.md for the operators, the accepted Python subset, schedules, policies and features.
"""

from adaptune.lang.ndp.ops import (
    BinaryOp,
    NdpError,
    Node,
    add,
    compact,
    gather,
    join,
    map,
    maximum,
    minimum,
    mul,
    nest,
    range,
    reduce,
    reduce_by_key,
    replicate,
    reverse,
    scan,
    scatter,
    split,
    striding,
    transpose,
    zip,
)
from adaptune.lang.ndp.prefetched import PrefetchedSelector
from adaptune.lang.ndp.program import Computation, Program, computation
from adaptune.lang.ndp.schedule import GPU, Platform, enumerate_schedules, reachable, strongest
from adaptune.lang.ndp.translate import TranslationError, scalar_function

max = maximum  # noqa: A001 - Surge's operator names
min = minimum  # noqa: A001
# names under which the top-level package re-exports this module's entry points (adaptune._LAZY)
ndp_computation, NdpComputation, NdpProgram = computation, Computation, Program
NdpPrefetchedSelector = PrefetchedSelector

__all__ = ["GPU", "BinaryOp", "Computation", "NdpComputation", "NdpError", "NdpPrefetchedSelector", "NdpProgram", "Node", "Platform", "Program", "TranslationError", "add",
           "compact", "computation", "enumerate_schedules", "gather", "join", "map", "max", "maximum", "min",
           "minimum", "mul", "ndp_computation", "nest", "PrefetchedSelector", "range", "reachable", "reduce", "reduce_by_key", "replicate", "reverse",
           "scalar_function", "scan", "scatter", "split", "striding", "strongest", "transpose", "zip"]
