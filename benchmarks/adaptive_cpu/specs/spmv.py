"""SPEC: sparse matrix-vector product y = A x, with the storage format chosen per matrix.

Variants: SciPy's CSR, CSC, COO, DIA and BSR kernels, and an ELLPACK product written here in NumPy.
An input is a matrix prepared in every format once (conversion is not timed: this models an
iterative solver that stores the matrix in the chosen format and multiplies many times). DIA and ELL
are constrained by their fill-in (padding memory), BSR by its block fill. Features read the row
pointers and column indices of a few sampled rows only: O(1) in the matrix size.
"""

from __future__ import annotations

import functools
import os
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from adaptune.adaptive import CodeVariant

SCALE = os.environ.get("ADAPTUNE_BENCH_SCALE", "full")
MAX_FILL = 3.0  # a padded format may store at most this many slots per nonzero


class Matrix:
    """One sparse matrix in every format, with its exact structure statistics (computed once)."""

    def __init__(self, csr: sp.csr_matrix, seed: int) -> None:
        self.csr = csr.tocsr()
        self.csr.sort_indices()
        self.x = np.random.default_rng(seed).random(csr.shape[1])

    @cached_property
    def csc(self) -> sp.csc_matrix:
        return self.csr.tocsc()

    @cached_property
    def coo(self) -> sp.coo_matrix:
        return self.csr.tocoo()

    @cached_property
    def n_diagonals(self) -> int:
        coo = self.coo
        return int(np.unique(coo.col.astype(np.int64) - coo.row).size)

    @cached_property
    def dia(self) -> sp.dia_matrix:
        return self.csr.todia()

    @cached_property
    def bsr(self) -> sp.bsr_matrix:
        return self.csr.tobsr()

    @cached_property
    def ell(self) -> tuple[np.ndarray, np.ndarray]:
        lengths = np.diff(self.csr.indptr)
        width = int(lengths.max(initial=0))
        rows = np.repeat(np.arange(self.csr.shape[0]), lengths)
        slot = np.arange(self.csr.nnz) - np.repeat(self.csr.indptr[:-1], lengths)
        cols = np.zeros((self.csr.shape[0], width), np.int32)
        vals = np.zeros((self.csr.shape[0], width))
        cols[rows, slot], vals[rows, slot] = self.csr.indices, self.csr.data
        return cols, vals

    def __repr__(self) -> str:
        return f"Matrix({self.csr.shape}, nnz={self.csr.nnz})"


variant = CodeVariant("spmv")


@variant.variant(default=True)
def csr(m: Matrix) -> np.ndarray:
    return m.csr @ m.x


@variant.variant
def csc(m: Matrix) -> np.ndarray:
    return m.csc @ m.x


@variant.variant
def coo(m: Matrix) -> np.ndarray:
    return m.coo @ m.x


@variant.variant
def dia(m: Matrix) -> np.ndarray:
    return m.dia @ m.x


@variant.variant
def bsr(m: Matrix) -> np.ndarray:
    return m.bsr @ m.x


@variant.variant
def ell(m: Matrix) -> np.ndarray:
    cols, vals = m.ell
    return np.einsum("ij,ij->i", vals, m.x[cols])


@variant.constraint(dia)
def dia_fill(m: Matrix) -> bool:
    return m.n_diagonals * m.csr.shape[0] <= MAX_FILL * max(m.csr.nnz, 1)


@variant.constraint(ell)
def ell_fill(m: Matrix) -> bool:
    return int(np.diff(m.csr.indptr).max(initial=0)) * m.csr.shape[0] <= MAX_FILL * max(m.csr.nnz, 1)


@variant.constraint(bsr)
def bsr_fill(m: Matrix) -> bool:
    b = m.bsr
    return b.data.size <= MAX_FILL * max(m.csr.nnz, 1) and b.blocksize != (1, 1)


@variant.feature
def log_rows(m: Matrix) -> float:
    return float(np.log10(m.csr.shape[0]))


@variant.feature
def nnz_per_row(m: Matrix) -> float:
    return m.csr.nnz / m.csr.shape[0]


def _sampled_rows(n: int, count: int) -> np.ndarray:
    return np.arange(0, n, max(1, n // count))


def _sampled_lengths(m: Matrix) -> np.ndarray:
    """Lengths of about 1024 evenly strided rows, from two strided views of the row pointers: O(1)
    in the matrix size (a full np.diff of the row pointers cost more than a small matrix's product)."""
    indptr, step = m.csr.indptr, max(1, m.csr.shape[0] // 1024)
    return indptr[1::step] - indptr[:-1:step]


@variant.feature
def row_length_cv(m: Matrix) -> float:
    """Spread of the sampled row lengths over the exact mean (nnz / rows)."""
    return float(_sampled_lengths(m).std() / max(m.csr.nnz / m.csr.shape[0], 1e-9))


@variant.feature
def max_over_mean_row(m: Matrix) -> float:
    """Longest sampled row over the exact mean row length (padding of ELL-like formats)."""
    return float(_sampled_lengths(m).max(initial=0) / max(m.csr.nnz / m.csr.shape[0], 1e-9))


@variant.feature
def sampled_diagonal_fill(m: Matrix) -> float:
    """Distinct diagonals met in 64 sampled rows, per nonzero per row: ~1 for banded, large for random."""
    rows = _sampled_rows(m.csr.shape[0], 64)
    starts, ends = m.csr.indptr[rows], m.csr.indptr[rows + 1]
    lengths = ends - starts
    if lengths.sum() == 0:
        return 0.0
    first = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    idx = first + np.arange(lengths.sum())  # the nonzero positions of the sampled rows, vectorised
    offsets = m.csr.indices[idx] - np.repeat(rows, ends - starts)
    return float(np.unique(offsets).size / max(idx.size / len(rows), 1e-9))


def _random_sparse(g: np.random.Generator, n: int, nnz: int) -> sp.csr_matrix:
    """Uniformly scattered nonzeros (duplicates summed); scipy.sparse.random would enumerate n*n slots."""
    rows, cols = g.integers(0, n, nnz), g.integers(0, n, nnz)
    return sp.csr_matrix((g.random(nnz), (rows, cols)), shape=(n, n))


STRUCTURES = ("banded", "stencil2d", "stencil3d", "power_law", "block", "random")


def make_matrix(seed: int, stratum: int | None = None) -> tuple[str, object]:
    """A random matrix; with ``stratum`` (training) it is row ``stratum`` of a Latin
    hypercube design over the same ranges (see :func:`_design`)."""
    rng = np.random.default_rng(seed)
    lo, hi = (3, 4) if SCALE == "fast" else (3, 6)
    if stratum is None:
        n = int(10 ** rng.uniform(lo, hi))
        kind = STRUCTURES[int(rng.integers(len(STRUCTURES)))]
        param = int(rng.integers(1, 40))
    else:
        p = _design()[stratum]
        n = int(10 ** (lo + (hi - lo) * p[0]))
        kind = STRUCTURES[int(p[1] * len(STRUCTURES))]
        param = 1 + int(39 * p[2])
    name = f"{kind}-{n}-p{param}-s{seed}"

    def make() -> tuple[Matrix]:
        g = np.random.default_rng(seed)
        if kind == "banded":
            offsets = np.unique(np.concatenate([[0], g.integers(-param * 3, param * 3 + 1, param)]))
            a = sp.diags([g.random(n) for _ in offsets], offsets, shape=(n, n), format="csr")
        elif kind == "stencil2d":
            k = max(2, int(np.sqrt(n)))
            t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
            a = sp.kronsum(t, t, format="csr")
        elif kind == "stencil3d":
            k = max(2, int(round(n ** (1 / 3))))
            t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
            a = sp.kronsum(sp.kronsum(t, t), t, format="csr")
        elif kind == "power_law":
            lengths = np.minimum(n, (g.pareto(1.2, n) * 2 + 1).astype(np.int64))
            rows = np.repeat(np.arange(n), lengths)
            a = sp.csr_matrix((g.random(rows.size), (rows, g.integers(0, n, rows.size))), shape=(n, n))
        elif kind == "block":
            b = (2, 4, 8)[param % 3]
            nb = max(1, n // b)
            a = sp.kron(_random_sparse(g, nb, (param % 8 + 1) * nb), np.ones((b, b)), format="csr")
        else:
            a = _random_sparse(g, n, (param % 10 + 1) * n)
        a = a.tocsr()
        a.sum_duplicates()
        return (Matrix(a, seed),)

    return name, make


N_TRAIN, N_TEST = (50, 200) if SCALE == "full" else (5, 20)  # training set: 25 % of the test set


@functools.cache
def _design() -> np.ndarray:
    """Training inputs as a Latin hypercube (one stratum per input in every dimension, dimensions
    uncorrelated), so that few inputs still cover every combination's neighbourhood."""
    from scipy.stats import qmc

    return qmc.LatinHypercube(d=3, seed=2026).random(N_TRAIN)


def training_inputs() -> list:
    return [make_matrix(seed, stratum=seed) for seed in range(N_TRAIN)]


def test_inputs() -> list:
    return [make_matrix(seed) for seed in range(2000, 2000 + N_TEST)]
