"""Multi-versioned matrix multiplication: versions V0-V4 guarded by four thresholds over n, m, p (seed 003).

The tree is Futhark's for ``map (\\xs -> map (dotprod xs) (transpose yss)) xss``: ``t0 <= n`` picks V0 (a thread
per row), else ``t1 <= p`` V1 (a work-group per row), else ``t2 <= n*p`` V2 (a thread per element), else
``t3 <= m`` V3 (a work-group per element), else V4 (the whole nest in parallel, a segmented reduction).
With every threshold at the default 2^15 the large-input versions win the comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptune.kernels.device import Device
from adaptune.thresholds.kernels import kernel
from adaptune.thresholds.program import Run, ThresholdProgram

T0, T1, T2, T3 = ("main.suff_outer_par_0", "main.suff_intra_par_1", "main.suff_outer_par_2",
                  "main.suff_intra_par_3")
BLOCK = 256
VERSIONS = ("V0", "V1", "V2", "V3", "V4")


def declare(program: ThresholdProgram, prefix: str = "main") -> tuple[str, str, str, str]:
    """Declare the four matmul thresholds (named like Futhark's) under ``prefix``."""
    names = tuple(t.replace("main.", f"{prefix}.") for t in (T0, T1, T2, T3))
    a, b, c, d = names
    program.threshold(a)
    program.threshold(b, after={a: False})
    program.threshold(c, after={a: False, b: False})
    program.threshold(d, after={a: False, b: False, c: False})
    return a, b, c, d


@dataclass
class MatmulData:
    """One dataset on one device: C = A B with A n x m and B m x p (float32)."""

    n: int
    m: int
    p: int
    device: Device | None = None
    a: Any = None
    b: Any = None
    c: Any = None
    scratch: Any = None

    @property
    def shape_only(self) -> bool:
        return self.device is None

    def result(self) -> np.ndarray:
        return self.device.to_host(self.c).reshape(self.n, self.p)


def make_data(device: Device | None, n: int, m: int, p: int, seed: int = 0) -> MatmulData:
    """Random inputs (or sizes only, for collecting comparison values without a device)."""
    if min(n, m, p) < 1:
        raise ValueError(f"matmul sizes must be positive, got n={n}, m={m}, p={p}")
    if device is None:
        return MatmulData(n, m, p)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, m), dtype=np.float32)
    b = rng.standard_normal((m, p), dtype=np.float32)
    return MatmulData(n, m, p, device, device.asarray(a.ravel()), device.asarray(b.ravel()),
                      device.empty(n * p, np.float32))


def _group(size: int) -> int:
    """Futhark-like group size for an intra-group version: the work per group, 32..256, a power of two."""
    return int(min(BLOCK, max(32, 1 << max(0, (int(size) - 1).bit_length()))))


def launch(version: str, d: MatmulData) -> None:
    """Run one code version on a dataset (results in ``d.c``)."""
    dev = d.device
    n, m, p = np.int32(d.n), np.int32(d.m), np.int32(d.p)
    src = "matmul_kernels.c"
    if version == "V0":
        kernel(dev, src, "mm_v0", {})(-(-d.n // 64), 64, (d.a, d.b, d.c, n, m, p))
    elif version == "V1":
        gs = _group(d.p)
        kernel(dev, src, "mm_v1", {"GS": gs})(d.n, gs, (d.a, d.b, d.c, n, m, p))
    elif version == "V2":
        kernel(dev, src, "mm_v2", {})(-(-d.n * d.p // BLOCK), BLOCK, (d.a, d.b, d.c, n, m, p))
    elif version == "V3":
        gs = _group(d.m)
        kernel(dev, src, "mm_v3", {"GS": gs})(d.n * d.p, gs, (d.a, d.b, d.c, n, m, p))
    elif version == "V4":
        gs = _group(d.m)
        chunks = -(-d.m // gs)
        out = d.c
        if chunks > 1:
            if d.scratch is None or d.scratch.size < d.n * d.p * chunks:
                d.scratch = dev.empty(d.n * d.p * chunks, np.float32)
            out = d.scratch
        kernel(dev, src, "mm_v4", {"GS": gs})(d.n * d.p * chunks, gs, (d.a, d.b, out, n, m, p, np.int32(chunks)))
        if chunks > 1:
            kernel(dev, src, "mm_v4_finish", {})(-(-d.n * d.p // BLOCK), BLOCK,
                                                 (d.scratch, d.c, np.int32(d.n * d.p), np.int32(chunks)))
    else:
        raise ValueError(f"unknown matmul version {version!r}; known: {VERSIONS}")


def dispatch(run: Run, d: MatmulData, names: tuple[str, str, str, str] = (T0, T1, T2, T3)) -> str:
    """Futhark's run-time choice: compare the thresholds top-down, launch the version reached."""
    a, b, c, e = names
    if run.compare(a, d.n):
        version = "V0"
    elif run.compare(b, d.p):
        version = "V1"
    elif run.compare(c, d.n * d.p):
        version = "V2"
    elif run.compare(e, d.m):
        version = "V3"
    else:
        version = "V4"
    run.version(version)
    if not run.dry:
        launch(version, d)
    return version


def program() -> ThresholdProgram:
    """The matmul program: ``program().run(make_data(dev, n, m, p), assignment)``."""
    prog = ThresholdProgram("matmul", body=lambda run, d: dispatch(run, d))
    declare(prog)
    return prog


def forcing(version: str) -> dict[str, int]:
    """An assignment that makes any dataset run ``version`` (for tests and for timing every path)."""
    index = VERSIONS.index(version)
    out = {}
    for i, name in enumerate((T0, T1, T2, T3)):
        out[name] = -(2**62) if i == index else 2**62
    return out
