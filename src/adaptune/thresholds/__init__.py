"""Threshold tuning over multi-versioned code (Futhark's incremental flattening; seed 003).

`tree` parses ``--print-sizes`` and builds the forest; `program` declares thresholds over our own code and
collects comparison values; `model` enumerates the unique combinations (the seed's Case 1 / Case 2 and an
exact, flow-aware variant) with a brute-force oracle; `timing` keeps per-(dataset, path) run times; `tuners`
searches (exhaustive with early termination, hill climbing, adaptune strategies); `futhark` reads and writes
Futhark's tuning files and ``-L`` logs. `matmul` and `deep` are multi-versioned programs in the portable dialect.
"""

from adaptune.thresholds.futhark import parse_comparisons, read_tuning_file, write_tuning_file
from adaptune.thresholds.model import (
    ThresholdModel,
    count_seed,
    dedup,
    enumerate_exact,
    enumerate_seed,
    naive_space_size,
    oracle_signatures,
)
from adaptune.thresholds.program import Run, ThresholdProgram, ThresholdUsageError
from adaptune.thresholds.timing import PathTimes, live_measure
from adaptune.thresholds.tree import (
    DEFAULT_THRESHOLD,
    NULLROOT,
    MultiParentError,
    Node,
    ThresholdDecl,
    ThresholdSyntaxError,
    build_forest,
    parse_print_sizes,
    render_tree,
)
from adaptune.thresholds.tuners import TuneOutcome, exhaustive, hillclimb, path_exhaustive, strategy_search

__all__ = ["DEFAULT_THRESHOLD", "NULLROOT", "MultiParentError", "Node", "PathTimes", "Run", "ThresholdDecl",
           "ThresholdModel", "ThresholdProgram", "ThresholdSyntaxError", "ThresholdUsageError", "TuneOutcome",
           "build_forest", "count_seed", "dedup", "enumerate_exact", "enumerate_seed", "exhaustive", "hillclimb",
           "live_measure", "naive_space_size", "oracle_signatures", "parse_comparisons", "parse_print_sizes",
           "path_exhaustive", "read_tuning_file", "render_tree", "strategy_search", "write_tuning_file"]
