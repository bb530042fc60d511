"""SpMV code variants (y = A x): CSR-scalar, CSR-vector (2..32 threads a row), CSR load-balanced (nnz split),
ELL, DIA, and the libraries: cuSPARSE prepared (generic API, descriptors and buffer made once; CSR ALG1 and
ALG2), cuSPARSE's convenience call (`A @ x` in cupyx, which sets everything up on every call) and
torch.sparse CSR.

A `DeviceMatrix` holds one matrix on a device in every format its constraints allow; formats, the balanced
split and the library descriptors are built once per matrix (as an iterative solver would) and each variant
then runs one product. Values are float32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.kernels.device import Device

BLOCK = 256
VECTOR_WIDTHS = (2, 4, 8, 16, 32)
CHUNK_ITEMS = 8  # non-zeros a thread loads in the balanced kernel: a block takes BLOCK * CHUNK_ITEMS
CHUNK = BLOCK * CHUNK_ITEMS
CUSPARSE_ALGS = {"cusparse_alg1": 2, "cusparse_alg2": 3}  # CUSPARSE_SPMV_CSR_ALG1 / ALG2 (cusparse.h)
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
    balanced: tuple[Any, Any, Any, int] | None = None  # (block_rows, carry_row, carry_val, n_chunks)
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
    n_chunks = -(-nnz // CHUNK)
    starts = xp.arange(n_chunks, dtype=np.int64) * CHUNK
    block_rows = xp.concatenate([xp.searchsorted(ip, starts, side="left").astype(np.int32),
                                 xp.asarray([n_rows], dtype=np.int32)])
    balanced = (_to_device(device, block_rows), device.empty(max(n_chunks, 1), np.int32),
                device.empty(max(n_chunks, 1), REAL), n_chunks)
    library = None
    if xp is not np:  # CuPy: cuSPARSE through cupyx
        import cupyx.scipy.sparse as cusparse

        library = cusparse.csr_matrix((dv, ix, ip), shape=(n_rows, n_cols))
    return DeviceMatrix(device, n_rows, n_cols, nnz, _to_device(device, ip), _to_device(device, ix),
                        _to_device(device, dv), ell, dia, library, balanced,
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


def csr_balanced(m: DeviceMatrix, x, y) -> None:
    """Load-balanced CSR: equal non-zeros a block (rows split across blocks), then one fix-up launch."""
    block_rows, carry_row, carry_val, n_chunks = m.balanced
    if n_chunks == 0:
        m.device.fill_zero(y)
        return
    defines = {"BLOCK": BLOCK, "CHUNK_ITEMS": CHUNK_ITEMS}
    k = m.device.kernel("spmv_kernels.c", "spmv_csr_balanced", defines)
    k(n_chunks, BLOCK, (m.indptr, m.indices, m.data, x, y, np.int32(m.n_rows), np.int32(m.nnz), block_rows,
                        carry_row, carry_val))
    fix = m.device.kernel("spmv_kernels.c", "spmv_csr_balanced_fixup", defines)
    fix(_grid(n_chunks, BLOCK), BLOCK, (carry_row, carry_val, y, np.int32(n_chunks)))


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
    """cuSPARSE's convenience call via cupyx (CUDA only): descriptors, buffer and output made on every call."""
    if m.library is None:
        raise FormatConstraintError("cuSPARSE needs a CuPy device")
    y[...] = m.library @ x


class PreparedSpMV:
    """cuSPARSE generic SpMV as an iterative solver calls it: the CSR and dense-vector descriptors, the work
    buffer (cusparseSpMV_bufferSize) and, where the library has it, cusparseSpMV_preprocess are done once for
    one (matrix, x, y); each product is then one cusparseSpMV."""

    def __init__(self, m: DeviceMatrix, x, y, alg: int) -> None:
        import cupy
        from cupy.cuda import device as cuda_device
        from cupy_backends.cuda.libs import cusparse as lib
        from cupyx import cusparse as cx

        self.lib, self.alg, self.keep = lib, alg, (x, y)
        self.preprocess_status: int | str = "not tried"
        self.handle = cuda_device.get_cusparse_handle()
        self.desc_a = cx.SpMatDescriptor.create(m.library)
        self.desc_x = cx.DnVecDescriptor.create(x)
        self.desc_y = cx.DnVecDescriptor.create(y)
        self.alpha, self.beta = np.ones(1, REAL), np.zeros(1, REAL)
        self.op = lib.CUSPARSE_OPERATION_NON_TRANSPOSE
        self.dtype = 0  # CUDA_R_32F
        size = lib.spMV_bufferSize(self.handle, self.op, self.alpha.ctypes.data, self.desc_a.desc,
                                   self.desc_x.desc, self.beta.ctypes.data, self.desc_y.desc, self.dtype, alg)
        self.buffer = cupy.empty(max(int(size), 1), cupy.int8)
        self.preprocessed = _preprocess(self)

    def __call__(self) -> None:
        self.lib.spMV(self.handle, self.op, self.alpha.ctypes.data, self.desc_a.desc, self.desc_x.desc,
                      self.beta.ctypes.data, self.desc_y.desc, self.dtype, self.alg, self.buffer.data.ptr)


def _preprocess(p: PreparedSpMV) -> bool:
    """cusparseSpMV_preprocess through ctypes (CuPy binds no such call); False where the library lacks it
    or refuses it (``p.preprocess_status`` keeps the cusparseStatus_t, or the reason)."""
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            # libcusparse.so itself (not libcusparseLt, which PyTorch also maps)
            path = next(line.split()[-1] for line in maps if "/libcusparse.so" in line)
        fn = ctypes.CDLL(path).cusparseSpMV_preprocess
    except (OSError, StopIteration, AttributeError) as exc:
        p.preprocess_status = f"unavailable: {exc!r}"
        return False
    vp = ctypes.c_void_p
    fn.argtypes = [vp, ctypes.c_int, vp, vp, vp, vp, vp, ctypes.c_int, ctypes.c_int, vp]
    fn.restype = ctypes.c_int
    status = fn(p.handle, p.op, p.alpha.ctypes.data, p.desc_a.desc, p.desc_x.desc, p.beta.ctypes.data,
                p.desc_y.desc, p.dtype, p.alg, p.buffer.data.ptr)
    p.preprocess_status = int(status)
    return status == 0


def cusparse_prepared(m: DeviceMatrix, x, y, alg: int = 2) -> None:
    """Prepared cuSPARSE product (state kept with the matrix, keyed by the x and y buffers)."""
    if m.library is None:
        raise FormatConstraintError("cuSPARSE needs a CuPy device")
    key = ("cusparse_prepared", alg, x.data.ptr, y.data.ptr, x.size, y.size)
    state = m.extra.get(key)
    if state is None:
        state = m.extra[key] = PreparedSpMV(m, x, y, alg)
    state()


def _torch_copy_mv(a, xt, yt) -> None:
    import torch

    yt.copy_(torch.mv(a, xt))


def torch_csr(m: DeviceMatrix, x, y) -> None:
    """torch.sparse CSR product on the same memory (DLPack, no copies); the tensor is made once."""
    if m.library is None:
        raise FormatConstraintError("torch.sparse needs a CuPy device")
    key = ("torch_csr", x.data.ptr, y.data.ptr)
    state = m.extra.get(key)
    if state is None:
        import torch

        a = torch.sparse_csr_tensor(torch.from_dlpack(m.indptr), torch.from_dlpack(m.indices),
                                    torch.from_dlpack(m.data), size=(m.n_rows, m.n_cols))
        xt, yt = torch.from_dlpack(x), torch.from_dlpack(y)
        try:
            torch.mv(a, xt, out=yt)
            state = functools.partial(torch.mv, a, xt, out=yt)
        except (RuntimeError, TypeError):
            state = functools.partial(_torch_copy_mv, a, xt, yt)
        m.extra[key] = state
    state()


def variants(with_libraries: bool = True) -> dict[str, Callable[[DeviceMatrix, Any, Any], None]]:
    """Every SpMV variant by name, in a fixed order (CSR-vector once per group size); the libraries last.

    `cusparse_alg1` / `cusparse_alg2` are the prepared calls, `cusparse` the convenience call."""
    table: dict[str, Callable[[DeviceMatrix, Any, Any], None]] = {"csr_scalar": csr_scalar}
    for vec in VECTOR_WIDTHS:
        table[f"csr_vector_{vec}"] = lambda m, x, y, _v=vec: csr_vector(m, x, y, _v)
    table["csr_balanced"] = csr_balanced
    table["ell"] = ell
    table["dia"] = dia
    if with_libraries:
        for name, alg in CUSPARSE_ALGS.items():
            table[name] = lambda m, x, y, _a=alg: cusparse_prepared(m, x, y, _a)
        table["cusparse"] = cusparse
        table["torch_csr"] = torch_csr
    return table


def available(m: DeviceMatrix, name: str) -> bool:
    """Constraint check per variant (Nitro's constraints: fill-in and memory, library presence)."""
    if name == "ell":
        return m.ell is not None
    if name == "dia":
        return m.dia is not None
    if name in ("cusparse", "torch_csr", *CUSPARSE_ALGS):
        return m.library is not None
    return True
