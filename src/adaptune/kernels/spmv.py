"""SpMV code variants (y = A x): CSR-scalar, CSR-vector (2..32 threads a row), ELL, DIA, and cuSPARSE.

A `DeviceMatrix` holds one matrix on a device in every format its constraints allow; formats are built once
per matrix (as an iterative solver would) and each variant then runs one product. Values are float32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.kernels.device import Device

BLOCK = 256
VECTOR_WIDTHS = (2, 4, 8, 16, 32)
ELL_MAX_FILL = 3.0  # Nitro-style constraint: padded cells / nnz
DIA_MAX_FILL = 3.0
MAX_FORMAT_CELLS = 2**31 - 1  # i32 indexing in the kernels
REAL = np.float32


class FormatConstraintError(ValueError):
    """A format is not available for this matrix (fill-in or memory constraint); the message says which."""


@dataclass
class DeviceMatrix:
    """One sparse matrix on a device: CSR always; ELL and DIA when their constraints hold."""

    device: Device
    n_rows: int
    n_cols: int
    nnz: int
    indptr: Any
    indices: Any
    data: Any
    ell: tuple[Any, Any, int] | None = None  # (cols, vals, width)
    dia: tuple[Any, Any, int] | None = None  # (offsets, vals, n_diags)
    library: Any = None  # cupyx.scipy.sparse.csr_matrix when on CUDA
    extra: dict[str, Any] = field(default_factory=dict)


def ell_fill(row_lengths_max: int, n_rows: int, nnz: int) -> float:
    return row_lengths_max * n_rows / max(nnz, 1)


def dia_fill(n_diags: int, n_rows: int, nnz: int) -> float:
    return n_diags * n_rows / max(nnz, 1)


def upload(device: Device, indptr, indices, data, shape: tuple[int, int], *,
           ell_max_fill: float = ELL_MAX_FILL, dia_max_fill: float = DIA_MAX_FILL,
           memory_budget_bytes: int | None = None) -> DeviceMatrix:
    """Put a CSR matrix (canonical: sorted, no duplicates) on the device and build ELL / DIA where allowed.

    Arrays may be NumPy or (for a CuPy device) CuPy; conversion runs in that array module.
    """
    xp = device.xp
    n_rows, n_cols = int(shape[0]), int(shape[1])
    if n_rows <= 0 or n_cols <= 0:
        raise ValueError(f"matrix shape {shape} must be positive")
    if len(indptr) != n_rows + 1:
        raise ValueError(f"indptr has {len(indptr)} entries, expected n_rows + 1 = {n_rows + 1}")
    nnz = int(indptr[-1])
    if nnz >= 2**31:
        raise ValueError(f"nnz = {nnz} exceeds the 32-bit index range of the kernels")
    ip = xp.asarray(indptr, dtype=np.int32)
    ix = xp.asarray(indices, dtype=np.int32)
    dv = xp.asarray(data, dtype=REAL)
    budget = memory_budget_bytes if memory_budget_bytes is not None else 8 * (nnz * 8 + n_rows * 4) + 2**20

    lengths = xp.diff(ip)
    rows = row_ids(xp, ip, nnz)
    width = int(lengths.max()) if n_rows else 0
    ell = None
    cells = width * n_rows
    if ell_fill(width, n_rows, nnz) <= ell_max_fill and cells <= MAX_FORMAT_CELLS and cells * 8 <= budget:
        pos = xp.arange(nnz, dtype=np.int64) - ip[rows].astype(np.int64)
        flat = pos * n_rows + rows
        cols = xp.full(cells, -1, dtype=np.int32)
        vals = xp.zeros(cells, dtype=REAL)
        cols[flat] = ix
        vals[flat] = dv
        ell = (_to_device(device, cols), _to_device(device, vals), width)
    dia = None
    diag = ix.astype(np.int64) - rows.astype(np.int64)
    offsets = xp.unique(diag)
    n_diags = int(offsets.size)
    cells = n_diags * n_rows
    if dia_fill(n_diags, n_rows, nnz) <= dia_max_fill and cells <= MAX_FORMAT_CELLS and cells * 4 <= budget:
        d_idx = xp.searchsorted(offsets, diag)
        vals = xp.zeros(cells, dtype=REAL)
        vals[d_idx * n_rows + rows] = dv
        dia = (_to_device(device, offsets.astype(np.int32)), _to_device(device, vals), n_diags)
    library = None
    if xp is not np:  # CuPy: cuSPARSE through cupyx
        import cupyx.scipy.sparse as cusparse

        library = cusparse.csr_matrix((dv, ix, ip), shape=(n_rows, n_cols))
    return DeviceMatrix(device, n_rows, n_cols, nnz, _to_device(device, ip), _to_device(device, ix),
                        _to_device(device, dv), ell, dia, library,
                        {"ell_width": width, "n_diags": n_diags})


def row_ids(xp, indptr, nnz: int):
    """Row of every stored entry (vectorised; works for NumPy and CuPy, empty rows included)."""
    return xp.searchsorted(indptr[1:], xp.arange(nnz, dtype=indptr.dtype), side="right").astype(np.int32)


def _to_device(device: Device, array) -> Any:
    return device.asarray(array) if isinstance(array, np.ndarray) else array


def _grid(n: int, per_block: int) -> int:
    return max(1, (n + per_block - 1) // per_block)


def csr_scalar(m: DeviceMatrix, x, y) -> None:
    k = m.device.kernel("spmv_kernels.c", "spmv_csr_scalar", {"BLOCK": BLOCK})
    k(_grid(m.n_rows, BLOCK), BLOCK, (m.indptr, m.indices, m.data, x, y, np.int32(m.n_rows)))


def csr_vector(m: DeviceMatrix, x, y, vec: int = 8, *, portable_reduce: bool = False) -> None:
    if vec not in VECTOR_WIDTHS:
        raise ValueError(f"CSR-vector group size {vec} not in {VECTOR_WIDTHS}")
    defines = {"BLOCK": BLOCK, "VEC": vec}
    if portable_reduce:
        defines["ADAPTUNE_PORTABLE_REDUCE"] = 1
    k = m.device.kernel("spmv_kernels.c", "spmv_csr_vector", defines)
    k(_grid(m.n_rows, BLOCK // vec), BLOCK, (m.indptr, m.indices, m.data, x, y, np.int32(m.n_rows)))


def ell(m: DeviceMatrix, x, y) -> None:
    if m.ell is None:
        raise FormatConstraintError(f"ELL not built: fill {m.extra['ell_width'] * m.n_rows / max(m.nnz, 1):.2f}")
    cols, vals, width = m.ell
    k = m.device.kernel("spmv_kernels.c", "spmv_ell", {"BLOCK": BLOCK})
    k(_grid(m.n_rows, BLOCK), BLOCK, (cols, vals, x, y, np.int32(m.n_rows), np.int32(width)))


def dia(m: DeviceMatrix, x, y) -> None:
    if m.dia is None:
        raise FormatConstraintError(f"DIA not built: {m.extra['n_diags']} diagonals over {m.n_rows} rows")
    offsets, vals, n_diags = m.dia
    k = m.device.kernel("spmv_kernels.c", "spmv_dia", {"BLOCK": BLOCK})
    k(_grid(m.n_rows, BLOCK), BLOCK,
      (offsets, vals, x, y, np.int32(m.n_rows), np.int32(m.n_cols), np.int32(n_diags)))


def cusparse(m: DeviceMatrix, x, y) -> None:
    """cuSPARSE SpMV via cupyx (CUDA only); writes into y."""
    if m.library is None:
        raise FormatConstraintError("cuSPARSE needs a CuPy device")
    y[...] = m.library @ x


def variants() -> dict[str, Callable[[DeviceMatrix, Any, Any], None]]:
    """Every SpMV variant by name, in a fixed order (CSR-vector once per group size)."""
    table: dict[str, Callable[[DeviceMatrix, Any, Any], None]] = {"csr_scalar": csr_scalar}
    for vec in VECTOR_WIDTHS:
        table[f"csr_vector_{vec}"] = lambda m, x, y, _v=vec: csr_vector(m, x, y, _v)
    table["ell"] = ell
    table["dia"] = dia
    table["cusparse"] = cusparse
    return table


def available(m: DeviceMatrix, name: str) -> bool:
    """Constraint check per variant (Nitro's constraints: fill-in and memory, library presence)."""
    if name == "ell":
        return m.ell is not None
    if name == "dia":
        return m.dia is not None
    if name == "cusparse":
        return m.library is not None
    return True
