"""Threshold tuning: a program with two code versions chosen by `threshold <= n`, tuned exactly over 3 datasets."""

import numpy as np

from adaptune.thresholds import ThresholdProgram
from adaptune.thresholds.futhark import write_tuning_file
from adaptune.thresholds.timing import PathTimes, live_measure
from adaptune.thresholds.tuners import path_exhaustive


def body(run, rows):
    if run.compare("row_sums.suff_outer_par_0", len(rows)):  # many rows: one vectorised pass
        run.version("vectorised")
        if not run.dry:
            np.add.reduce(np.asarray(rows), axis=1)
    else:  # few rows: one row at a time
        run.version("per_row")
        if not run.dry:
            [sum(r) for r in rows]


prog = ThresholdProgram("row_sums", body)
prog.threshold("row_sums.suff_outer_par_0")
rng = np.random.default_rng(0)
datasets = {f"n{n}": [list(rng.random(8)) for _ in range(n)] for n in (4, 64, 1024)}
model = prog.model(datasets)
times = PathTimes(model, live_measure(prog, datasets, sync=lambda: None, repeats=5))
best = path_exhaustive(model, times, repeats=5)
print("best thresholds", dict(best.best), f"total {best.best_total_ms:.3f} ms; per dataset", best.per_dataset_ms)
write_tuning_file("row_sums.fut.tuning", best.best)  # Futhark's tuning-file format
