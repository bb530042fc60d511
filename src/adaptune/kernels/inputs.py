"""Input generators for the GPU suite: sparse matrices of 12 structural families, histogram keys (8/16/32-bit,
16 ... 65,536 bins) with uniform and skewed distributions, and sort keys in six orders; and disjoint training / test sets of input specs.

Every generator takes the array module `xp` (NumPy, or CuPy to generate big inputs on the GPU, which is far
faster than SciPy on the host) and a seed; the same spec always gives the same input for a given xp.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

MATRIX_FAMILIES = ("uniform_random", "constant_row", "power_law", "banded", "stencil_2d", "stencil_3d",
                   "block_diagonal", "near_diagonal", "arrow", "diagonal_plus_random", "power_law_heavy", "rmat")
HISTOGRAM_KINDS = ("uniform", "normal", "constant", "exponential", "image", "mixed_regions", "few_values",
                   "sparse_spikes", "zipf", "sorted_runs")
HISTOGRAM_BINS = tuple(2**k for k in range(4, 17))  # every power of two 16 ... 65,536 (round 2: every 4th)
KEY_BITS = {8: np.uint8, 16: np.uint16, 32: np.uint32}
GRAPH_FAMILIES = ("rmat", "kronecker_mild", "erdos_renyi", "random_regular", "power_law", "grid_2d", "grid_3d",
                  "grid_2d_diag", "road_like", "small_world", "deep_tree", "hub_spoke")
HIGH_DIAMETER = ("grid_2d", "grid_2d_diag", "road_like", "deep_tree")
SORT_ORDERS = ("uniform", "normal", "reversed", "almost_sorted", "few_unique", "sorted", "with_nans")
SORT_DTYPES = ("int32", "int64", "float32", "float64")


@dataclass(frozen=True)
class InputSpec:
    """One input: benchmark, family, size parameters and seed (JSON-ready via `as_dict`)."""

    benchmark: str
    family: str
    size: int
    seed: int
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def name(self) -> str:
        extra = "-".join(f"{k}{v}" for k, v in sorted(self.params.items()))
        return f"{self.benchmark}:{self.family}:{self.size}:{extra}:s{self.seed}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- sparse matrices


def _canonical(xp, rows, cols, n_rows: int, n_cols: int, rng, already_sorted: bool = False):
    """Sort entries by (row, col), drop duplicates, attach values in [-1, 1): CSR (indptr, indices, data)."""
    rows = rows.astype(np.int64)
    cols = cols.astype(np.int64)
    keep = (cols >= 0) & (cols < n_cols)
    rows, cols = rows[keep], cols[keep]
    if not already_sorted:
        key = rows * n_cols + cols
        order = xp.argsort(key)
        key = key[order]
        first = xp.ones(key.size, dtype=bool)
        first[1:] = key[1:] != key[:-1]
        key = key[first]
        rows, cols = key // n_cols, key % n_cols
    counts = xp.bincount(rows, minlength=n_rows)
    indptr = xp.zeros(n_rows + 1, dtype=np.int32)
    indptr[1:] = xp.cumsum(counts)
    data = (rng.random(cols.size, dtype=np.float32) * 2 - 1).astype(np.float32)
    return indptr, cols.astype(np.int32), data


def _from_lengths(xp, lengths, n_cols: int):
    """Row ids of entries for the given row lengths (vectorised; no per-row Python loop)."""
    indptr = xp.zeros(lengths.size + 1, dtype=np.int64)
    indptr[1:] = xp.cumsum(lengths)
    nnz = int(indptr[-1])
    rows = xp.searchsorted(indptr[1:], xp.arange(nnz, dtype=np.int64), side="right")
    pos = xp.arange(nnz, dtype=np.int64) - indptr[rows]
    return rows, pos


def _offsets_pattern(xp, n_rows: int, offsets):
    """Entries (row, row + offset) for a fixed set of sorted offsets: DIA-like patterns."""
    offsets = xp.asarray(offsets, dtype=np.int64)
    rows = xp.repeat(xp.arange(n_rows, dtype=np.int64), int(offsets.size))
    cols = rows + xp.tile(offsets, n_rows)
    return rows, cols


def sparse_matrix(family: str, n_rows: int, avg_nnz: float, seed: int, xp=np):
    """A square CSR matrix (indptr, indices, data, shape) of the named family with about avg_nnz a row."""
    if family not in MATRIX_FAMILIES:
        raise ValueError(f"unknown matrix family {family!r}; known: {', '.join(MATRIX_FAMILIES)}")
    if n_rows < 8 or avg_nnz <= 0:
        raise ValueError(f"need n_rows >= 8 and avg_nnz > 0, got {n_rows}, {avg_nnz}")
    rng = xp.random.default_rng(seed)
    host_rng = np.random.default_rng(seed)
    n = n_rows
    k = max(1, int(round(avg_nnz)))
    sorted_pattern = False
    if family in ("uniform_random", "constant_row", "power_law", "power_law_heavy"):
        if family == "uniform_random":
            lengths = xp.floor(rng.random(n) * (2 * avg_nnz) + 0.5).astype(np.int64)
        elif family == "constant_row":
            lengths = xp.full(n, k, dtype=np.int64)
        else:  # Pareto row lengths, shape 1.5..2.5 (heavy: 1.1..1.4, rows up to n long), mean avg_nnz
            alpha = float(host_rng.uniform(1.5, 2.5) if family == "power_law" else host_rng.uniform(1.1, 1.4))
            raw = (1.0 - rng.random(n)) ** (-1.0 / alpha)
            lengths = xp.minimum(xp.floor(raw * avg_nnz * (alpha - 1) / alpha), n).astype(np.int64)
        rows, _ = _from_lengths(xp, lengths, n)
        cols = rng.integers(0, n, rows.size)
    elif family == "banded":
        half = max(k, int(host_rng.integers(k, 8 * k + 2)))
        offsets = np.sort(host_rng.choice(np.arange(-half, half + 1), size=min(k, 2 * half + 1), replace=False))
        rows, cols = _offsets_pattern(xp, n, offsets)
        sorted_pattern = True
    elif family in ("stencil_2d", "stencil_3d"):
        if family == "stencil_2d":
            nx = max(2, int(math.isqrt(n)))
            offsets = [-nx, -1, 0, 1, nx]
        else:
            nx = max(2, round(n ** (1 / 3)))
            offsets = [-nx * nx, -nx, -1, 0, 1, nx, nx * nx]
        rows, cols = _offsets_pattern(xp, n, offsets)
        sorted_pattern = True
    elif family == "block_diagonal":
        b = k
        rows = xp.repeat(xp.arange(n, dtype=np.int64), b)
        cols = (rows // b) * b + xp.tile(xp.arange(b, dtype=np.int64), n)
        sorted_pattern = True
    elif family == "near_diagonal":  # FEM-like locality: columns scattered around the diagonal
        lengths = xp.maximum(1, xp.floor(avg_nnz * (0.5 + rng.random(n)))).astype(np.int64)
        rows, _ = _from_lengths(xp, lengths, n)
        bandwidth = float(host_rng.uniform(2, 50)) * avg_nnz
        cols = rows + xp.rint(rng.standard_normal(rows.size) * bandwidth).astype(np.int64)
    elif family == "arrow":  # a few dense rows over a short-row body: large max deviation
        n_dense = int(host_rng.integers(1, 32))
        body = max(1, k - 1)
        lengths = xp.full(n, body, dtype=np.int64)
        dense_rows = xp.asarray(host_rng.choice(n, size=n_dense, replace=False))
        lengths[dense_rows] = min(n, max(body * 1000, n // 8))
        rows, _ = _from_lengths(xp, lengths, n)
        cols = rng.integers(0, n, rows.size)
        diag = xp.arange(n, dtype=np.int64)
        rows, cols = xp.concatenate([rows, diag]), xp.concatenate([cols, diag])
    elif family == "rmat":  # R-MAT / Kronecker: skewed rows and columns, as in graph-derived matrices
        rows, cols = rmat_edges(xp, rng, host_rng, n, int(n * avg_nnz))
    else:  # diagonal_plus_random: a tridiagonal band plus random entries
        band_rows, band_cols = _offsets_pattern(xp, n, [-1, 0, 1])
        extra = max(0, k - 3)
        r_rows, _ = _from_lengths(xp, xp.floor(rng.random(n) * 2 * extra + 0.5).astype(np.int64), n)
        r_cols = rng.integers(0, n, r_rows.size)
        rows, cols = xp.concatenate([band_rows, r_rows]), xp.concatenate([band_cols, r_cols])
    indptr, indices, data = _canonical(xp, rows, cols, n, n, rng, already_sorted=sorted_pattern)
    return indptr, indices, data, (n, n)


def rmat_edges(xp, rng, host_rng, n: int, m: int, probs: tuple[float, float, float] | None = None):
    """m R-MAT edges over n vertices (ids reduced modulo n); quadrant probabilities a, b, c (d = rest)."""
    a, b, c = probs if probs is not None else (float(host_rng.uniform(0.45, 0.6)), 0.19, 0.19)
    levels = max(1, (n - 1).bit_length())
    rows = xp.zeros(m, dtype=np.int64)
    cols = xp.zeros(m, dtype=np.int64)
    for _ in range(levels):
        u = rng.random(m)
        down = u >= a + b
        right = ((u >= a) & (u < a + b)) | (u >= a + b + c)
        rows = rows * 2 + down
        cols = cols * 2 + right
    return rows % n, cols % n


# ---------------------------------------------------------------- histogram keys


def histogram_data(kind: str, n: int, seed: int, xp=np, bins: int = 256, key_bits: int = 8):
    """n keys in [0, bins) of the named distribution (uniform, or skewed to various degrees), as unsigned
    integers of key_bits bits; bins must fit in key_bits."""
    if kind not in HISTOGRAM_KINDS:
        raise ValueError(f"unknown histogram data kind {kind!r}; known: {', '.join(HISTOGRAM_KINDS)}")
    if n < 1:
        raise ValueError(f"need n >= 1, got {n}")
    if key_bits not in KEY_BITS or bins < 1 or bins > 2**key_bits:
        raise ValueError(f"bins must fit in key_bits {tuple(KEY_BITS)}: need 1 <= bins <= 2**key_bits, got {key_bits}, {bins}")
    rng = xp.random.default_rng(seed)
    host_rng = np.random.default_rng(seed)
    top = bins - 1
    if kind == "uniform":
        values = rng.integers(0, bins, n)
    elif kind == "normal":
        mean, sd = host_rng.uniform(0.15, 0.85) * bins, host_rng.uniform(0.004, 0.25) * bins
        values = xp.rint(rng.standard_normal(n) * sd + mean)
    elif kind == "constant":
        values = xp.full(n, int(host_rng.integers(0, bins)))
    elif kind == "exponential":
        values = xp.floor(-xp.log(1.0 - rng.random(n)) * host_rng.uniform(0.004, 0.15) * bins)
    elif kind == "image":  # smooth 2-D scene (sum of waves) plus sensor noise, row-major
        width = 1 << int(host_rng.integers(8, 13))
        i = xp.arange(n, dtype=np.float64)
        x, y = (i % width) / width, xp.floor(i / width) / width
        fx, fy = host_rng.uniform(0.5, 6, 2)
        scene = 0.5 + 0.23 * xp.sin(2 * math.pi * fx * x) + 0.23 * xp.cos(2 * math.pi * fy * y)
        values = xp.rint((scene + rng.standard_normal(n) * host_rng.uniform(0.002, 0.03)) * bins)
    elif kind == "mixed_regions":  # flat regions (heavy contention) next to busy ones: uneven tile costs
        share = float(host_rng.uniform(0.2, 0.8))
        values = rng.integers(0, bins, n)
        region = xp.floor(xp.arange(n, dtype=np.float64) / max(1, n // 16)).astype(np.int64)
        flat = (region * 2654435761 % 100) < share * 100
        values = xp.where(flat, int(host_rng.integers(0, bins)), values)
    elif kind == "few_values":
        choices = xp.asarray(host_rng.choice(bins, size=min(bins, int(host_rng.integers(2, 17))), replace=False))
        values = choices[rng.integers(0, int(choices.size), n)]
    elif kind == "zipf":  # Zipf-like over a random permutation of the bins: a few very hot bins
        s = float(host_rng.uniform(1.1, 2.0))
        ranks = xp.floor((1.0 - rng.random(n)) ** (-1.0 / (s - 1.0))) - 1
        perm = xp.asarray(host_rng.permutation(bins))
        values = perm[xp.minimum(ranks, top).astype(np.int64)]
    elif kind == "sorted_runs":  # long runs of one key (sorted or run-length-like data)
        values = xp.sort(rng.integers(0, bins, n))
    else:  # sparse_spikes: mostly zero
        values = xp.where(rng.random(n) < host_rng.uniform(0.01, 0.2), rng.integers(0, bins, n), 0)
    return xp.clip(values, 0, top).astype(KEY_BITS[key_bits])


# ---------------------------------------------------------------- sort keys


def sort_keys(order: str, n: int, dtype: str, seed: int, xp=np):
    """n keys of dtype in the named order; almost_sorted swaps 20-25 % of the keys in random pairs."""
    if order not in SORT_ORDERS:
        raise ValueError(f"unknown key order {order!r}; known: {', '.join(SORT_ORDERS)}")
    if dtype not in SORT_DTYPES:
        raise ValueError(f"unknown key dtype {dtype!r}; known: {', '.join(SORT_DTYPES)}")
    rng = xp.random.default_rng(seed)
    host_rng = np.random.default_rng(seed)
    is_float = dtype.startswith("float")
    top = 2**30 if dtype == "int32" else 2**60
    if order == "few_unique":
        pool = rng.random(int(host_rng.integers(2, 65))) * 1e6 if is_float else rng.integers(0, top, int(host_rng.integers(2, 65)))
        keys = pool[rng.integers(0, int(pool.size), n)]
    elif order == "normal":
        keys = rng.standard_normal(n) * 1e6 if is_float else xp.rint(rng.standard_normal(n) * (top / 8))
    else:
        keys = rng.random(n) * 1e6 if is_float else rng.integers(0, top, n)
    keys = keys.astype(dtype)
    if order in ("sorted", "reversed", "almost_sorted"):
        keys = xp.sort(keys)
        if order == "reversed":
            keys = keys[::-1].copy()
        elif order == "almost_sorted":
            n_pairs = int(n * host_rng.uniform(0.20, 0.25) / 2)
            pick = xp.argsort(rng.random(n))[: 2 * n_pairs]  # distinct positions (CuPy has no permutation)
            a, b = pick[:n_pairs], pick[n_pairs:]
            ka, kb = keys[a].copy(), keys[b].copy()
            keys[a], keys[b] = kb, ka
    elif order == "with_nans" and is_float:  # 1-10 % NaN keys at random places (integers: plain uniform)
        keys[rng.random(n) < host_rng.uniform(0.01, 0.1)] = np.nan
    return keys


# ---------------------------------------------------------------- graphs


def _grid_edges(xp, dims: tuple[int, ...], diagonal: bool = False):
    """Edges (u, v), u < v, of a 2-D or 3-D grid (4 / 6 neighbours; 8 with `diagonal` in 2-D)."""
    n = int(np.prod(dims))
    ids = xp.arange(n, dtype=np.int64)
    coords = []
    rest = ids
    for d in reversed(dims):
        coords.append(rest % d)
        rest = rest // d
    coords = coords[::-1]  # coords[0] slowest
    steps = []
    for axis in range(len(dims)):
        step = [0] * len(dims)
        step[axis] = 1
        steps.append(step)
    if diagonal and len(dims) == 2:
        steps += [[1, 1], [1, -1]]
    us, vs = [], []
    for step in steps:
        ok = xp.ones(n, dtype=bool)
        offset = 0
        stride = 1
        for axis in reversed(range(len(dims))):
            c = coords[axis] + step[axis]
            ok &= (c >= 0) & (c < dims[axis])
            offset += step[axis] * stride
            stride *= dims[axis]
        us.append(ids[ok])
        vs.append(ids[ok] + offset)
    return xp.concatenate(us), xp.concatenate(vs)


def graph(family: str, n: int, avg_degree: float, seed: int, xp=np):
    """A symmetric graph (indptr, indices) of the named family with about n vertices and avg_degree
    neighbours a vertex (grids fix their own degree); no self-loops, no duplicate edges."""
    if family not in GRAPH_FAMILIES:
        raise ValueError(f"unknown graph family {family!r}; known: {', '.join(GRAPH_FAMILIES)}")
    if n < 16 or avg_degree <= 0:
        raise ValueError(f"need n >= 16 and avg_degree > 0, got {n}, {avg_degree}")
    rng = xp.random.default_rng(seed)
    host_rng = np.random.default_rng(seed)
    half = max(1, int(n * avg_degree / 2))  # undirected edges to draw
    if family in ("rmat", "kronecker_mild"):
        probs = (0.57, 0.19, 0.19) if family == "rmat" else (0.45, 0.22, 0.22)
        u, v = rmat_edges(xp, rng, host_rng, n, half, probs)
        perm = xp.asarray(host_rng.permutation(n))  # hide the id order that R-MAT leaves
        u, v = perm[u], perm[v]
    elif family == "erdos_renyi":
        u, v = rng.integers(0, n, half), rng.integers(0, n, half)
    elif family == "random_regular":  # union of random perfect matchings-like pairings: degree ~ 2 x rounds
        rounds = max(1, int(round(avg_degree / 2)))
        base = xp.arange(n, dtype=np.int64)
        u = xp.concatenate([base] * rounds)
        v = xp.concatenate([xp.argsort(rng.random(n)) for _ in range(rounds)])
    elif family == "power_law":  # Chung-Lu: endpoints drawn with probability proportional to Pareto weights
        alpha = float(host_rng.uniform(1.8, 2.6))
        w = (1.0 - rng.random(n)) ** (-1.0 / (alpha - 1.0))
        cdf = xp.cumsum(w)
        cdf /= cdf[-1]
        u = xp.minimum(xp.searchsorted(cdf, rng.random(half)), n - 1)
        v = xp.minimum(xp.searchsorted(cdf, rng.random(half)), n - 1)
    elif family in ("grid_2d", "grid_2d_diag", "road_like"):
        side = max(4, int(math.isqrt(n)))
        dims = (side, max(4, n // side))
        u, v = _grid_edges(xp, dims, diagonal=family == "grid_2d_diag")
        if family == "road_like":  # a percolated mesh: 35-45 % of the streets removed, a few long roads
            keep = rng.random(u.size) >= host_rng.uniform(0.35, 0.45)
            u, v = u[keep], v[keep]
            m = int(dims[0] * dims[1])
            extra = max(1, m // 2000)
            u = xp.concatenate([u, rng.integers(0, m, extra)])
            v = xp.concatenate([v, rng.integers(0, m, extra)])
        n = int(dims[0] * dims[1])
    elif family == "grid_3d":
        side = max(3, round(n ** (1 / 3)))
        u, v = _grid_edges(xp, (side, side, max(3, n // (side * side))))
        n = side * side * max(3, n // (side * side))
    elif family == "small_world":  # Watts-Strogatz: ring lattice, 5 % of the edges rewired at random
        k = max(1, int(round(avg_degree / 2)))
        base = xp.arange(n, dtype=np.int64)
        u = xp.concatenate([base] * k)
        v = xp.concatenate([(base + j) % n for j in range(1, k + 1)])
        rewire = rng.random(u.size) < 0.05
        v = xp.where(rewire, rng.integers(0, n, u.size), v)
    elif family == "deep_tree":  # each vertex hangs off one of the `window` before it: depth ~ 2 n / window
        window = int(host_rng.integers(64, 1024))
        child = xp.arange(1, n, dtype=np.int64)
        parent = child - 1 - xp.floor(rng.random(n - 1) * xp.minimum(child, window)).astype(np.int64)
        u, v = parent, child
    else:  # hub_spoke: a few hubs tied to large shares of the vertices, over a sparse random body
        hubs = int(host_rng.integers(2, 16))
        share = float(host_rng.uniform(0.05, 0.3))
        body = max(1, int(n * max(avg_degree - 2 * share * hubs, 1.0) / 2))
        u = [rng.integers(0, n, body)]
        v = [rng.integers(0, n, body)]
        for h in host_rng.choice(n, size=hubs, replace=False):
            members = xp.nonzero(rng.random(n) < share)[0]
            u.append(xp.full(members.size, int(h), dtype=np.int64))
            v.append(members)
        u, v = xp.concatenate(u), xp.concatenate(v)
    u, v = u.astype(np.int64), v.astype(np.int64)
    loop = u == v
    u, v = u[~loop], v[~loop]
    rows, cols = xp.concatenate([u, v]), xp.concatenate([v, u])
    indptr, indices, _ = _canonical(xp, rows, cols, n, n, rng)
    return indptr, indices


# ---------------------------------------------------------------- training / test sets


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def spmv_specs(count: int, seed: int, nnz_range=(5e5, 4e7), avg_range=(2.0, 96.0)) -> list[InputSpec]:
    """Matrices cycling through the families; nnz and row length log-uniform (from 4 MB, well inside L2, to
    several times L2; round 2 started at 2e6 non-zeros)."""
    rng = np.random.default_rng(seed)
    specs = []
    for i in range(count):
        family = MATRIX_FAMILIES[i % len(MATRIX_FAMILIES)]
        avg = _log_uniform(rng, *avg_range)
        if family in ("stencil_2d",):
            avg = 5.0
        elif family == "stencil_3d":
            avg = 7.0
        nnz = _log_uniform(rng, *nnz_range)
        n_rows = int(min(2**23, max(2**12, nnz / avg)))
        specs.append(InputSpec("spmv", family, n_rows, int(rng.integers(2**31)), {"avg": round(avg, 2)}))
    return specs


def histogram_specs(count: int, seed: int, size_range=(2e4, 6.4e7)) -> list[InputSpec]:
    """Kinds cycle; bins drawn from every power of two 16 ... 65,536 (shared-memory privatisation holds at
    most 8192); key width drawn among those that hold the bins; size log-uniform (keys; round 2 started at
    1e5)."""
    rng = np.random.default_rng(seed)
    specs = []
    for i in range(count):
        bins = int(rng.choice(HISTOGRAM_BINS))
        bits = int(rng.choice([b for b in KEY_BITS if 2**b >= bins]))
        specs.append(InputSpec("histogram", HISTOGRAM_KINDS[i % len(HISTOGRAM_KINDS)],
                               int(_log_uniform(rng, *size_range)), int(rng.integers(2**31)),
                               {"bins": bins, "key_bits": bits}))
    return specs


def sort_specs(count: int, seed: int, size_range=(1e5, 2e7)) -> list[InputSpec]:
    rng = np.random.default_rng(seed)
    specs = []
    for i in range(count):
        order = SORT_ORDERS[i % len(SORT_ORDERS)]
        dtype = SORT_DTYPES[(i // len(SORT_ORDERS)) % len(SORT_DTYPES)]
        specs.append(InputSpec("sort", order, int(_log_uniform(rng, *size_range)), int(rng.integers(2**31)),
                               {"dtype": dtype}))
    return specs


def bfs_specs(count: int, seed: int, size_range=(2**14, 2**21), avg_range=(3.0, 32.0),
              high_diameter_max: int = 2**18) -> list[InputSpec]:
    """Graphs cycling through the families; vertices and degree log-uniform (meshes and deep trees capped at
    `high_diameter_max` vertices: their diameter, hence the level count, grows like sqrt(n) or n)."""
    rng = np.random.default_rng(seed)
    specs = []
    for i in range(count):
        family = GRAPH_FAMILIES[i % len(GRAPH_FAMILIES)]
        n = int(_log_uniform(rng, *size_range))
        if family in HIGH_DIAMETER:
            n = min(n, high_diameter_max)
        avg = round(_log_uniform(rng, *avg_range), 2)
        specs.append(InputSpec("bfs", family, n, int(rng.integers(2**31)), {"avg": avg}))
    return specs


def train_test(make, n_train: int, n_test: int, seed: int) -> tuple[list[InputSpec], list[InputSpec]]:
    """Disjoint sets: different seed streams, and any spec equal to a training one is dropped from test."""
    train = make(n_train, seed)
    test = [s for s in make(n_test + 8, seed + 7919) if s not in set(train)][:n_test]
    return train, test
