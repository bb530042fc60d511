/* SpMV variants y = A x in the adaptune dialect (CSR-scalar, CSR-vector, ELL, DIA) and their feature kernel.
 * Defines: BLOCK (threads per block, power of two), VEC (threads per row for CSR-vector, 2..32, power of two).
 */
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 8
#endif

/* CSR-scalar: one thread per row. Fast for short, even rows; diverges on long or uneven rows. */
KERNEL spmv_csr_scalar(const GLOBAL i32 *RESTRICT indptr, const GLOBAL i32 *RESTRICT indices,
                       const GLOBAL real_t *RESTRICT data, const GLOBAL real_t *RESTRICT x,
                       GLOBAL real_t *RESTRICT y, const i32 n_rows) {
    const i32 stride = (i32)(NUM_GROUPS() * GROUP_SIZE());
    for (i32 row = (i32)(GROUP_ID() * GROUP_SIZE() + LID()); row < n_rows; row += stride) {
        real_t sum = 0;
        const i32 end = indptr[row + 1];
        for (i32 k = indptr[row]; k < end; ++k) sum += data[k] * LOAD_RO(x[indices[k]]);
        y[row] = sum;
    }
}

/* CSR-vector: VEC threads per row, coalesced reads of long rows; partial sums reduced per group.
 * CUDA reduces with warp shuffles (groups never straddle a warp since VEC <= 32 divides 32); the portable
 * path (OpenCL, or ADAPTUNE_PORTABLE_REDUCE) uses shared memory and block barriers. */
KERNEL spmv_csr_vector(const GLOBAL i32 *RESTRICT indptr, const GLOBAL i32 *RESTRICT indices,
                       const GLOBAL real_t *RESTRICT data, const GLOBAL real_t *RESTRICT x,
                       GLOBAL real_t *RESTRICT y, const i32 n_rows) {
#if !defined(ADAPTUNE_CUDA) || defined(ADAPTUNE_PORTABLE_REDUCE)
    SHARED real_t partial[BLOCK];
#endif
    const u32 lane = LID() % VEC;
    const i32 rows_per_block = BLOCK / VEC;
    const i32 row_stride = (i32)NUM_GROUPS() * rows_per_block;
    /* The loop bound depends only on the block, so every thread reaches every barrier. */
    for (i32 base = (i32)GROUP_ID() * rows_per_block; base < n_rows; base += row_stride) {
        const i32 row = base + (i32)(LID() / VEC);
        real_t sum = 0;
        if (row < n_rows) {
            const i32 end = indptr[row + 1];
            for (i32 k = indptr[row] + (i32)lane; k < end; k += VEC) sum += data[k] * LOAD_RO(x[indices[k]]);
        }
#if defined(ADAPTUNE_CUDA) && !defined(ADAPTUNE_PORTABLE_REDUCE)
        for (int offset = VEC / 2; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, offset, VEC);
#else
        partial[LID()] = sum;
        BARRIER();
        for (u32 offset = VEC / 2; offset > 0; offset >>= 1) {
            if (lane < offset) partial[LID()] += partial[LID() + offset];
            BARRIER();
        }
        sum = partial[LID()];
        BARRIER();
#endif
        if (lane == 0 && row < n_rows) y[row] = sum;
    }
}

/* ELL, column-major (entry j of row r at j * n_rows + r, so a warp reads consecutive addresses).
 * Padding entries carry column -1. */
KERNEL spmv_ell(const GLOBAL i32 *RESTRICT cols, const GLOBAL real_t *RESTRICT vals,
                const GLOBAL real_t *RESTRICT x, GLOBAL real_t *RESTRICT y, const i32 n_rows, const i32 width) {
    const i32 stride = (i32)(NUM_GROUPS() * GROUP_SIZE());
    for (i32 row = (i32)(GROUP_ID() * GROUP_SIZE() + LID()); row < n_rows; row += stride) {
        real_t sum = 0;
        for (i32 j = 0; j < width; ++j) {
            const i32 c = cols[j * n_rows + row];
            if (c >= 0) sum += vals[j * n_rows + row] * LOAD_RO(x[c]);
        }
        y[row] = sum;
    }
}

/* DIA, row-indexed (diagonal d of row r at d * n_rows + r holds A[r, r + offsets[d]], 0 outside the matrix). */
KERNEL spmv_dia(const GLOBAL i32 *RESTRICT offsets, const GLOBAL real_t *RESTRICT vals,
                const GLOBAL real_t *RESTRICT x, GLOBAL real_t *RESTRICT y, const i32 n_rows, const i32 n_cols,
                const i32 n_diags) {
    const i32 stride = (i32)(NUM_GROUPS() * GROUP_SIZE());
    for (i32 row = (i32)(GROUP_ID() * GROUP_SIZE() + LID()); row < n_rows; row += stride) {
        real_t sum = 0;
        for (i32 d = 0; d < n_diags; ++d) {
            const i32 col = row + offsets[d];
            if (col >= 0 && col < n_cols) sum += vals[d * n_rows + row] * LOAD_RO(x[col]);
        }
        y[row] = sum;
    }
}

/* All SpMV features in one launch (one pass over indptr plus a row sample):
 *   partials[3 b + 0] = sum over the block's rows of (len - mean)^2   (mean = nnz / n_rows, exact, so no
 *                       cancellation as in E[L^2] - E[L]^2)
 *   partials[3 b + 1] = max row length in the block
 *   partials[3 b + 2] = number of diagonals first seen by this block among the sampled rows
 * Sampled rows are s * sample_stride for s < n_sample. Diagonals are marked in `stamps` (n_rows + n_cols
 * words) with atomic max of `generation`, so the buffer never needs clearing between calls. */
KERNEL spmv_features(const GLOBAL i32 *RESTRICT indptr, const GLOBAL i32 *RESTRICT indices, const i32 n_rows,
                     const i32 sample_stride, const i32 n_sample, GLOBAL u32 *RESTRICT stamps,
                     const u32 generation, GLOBAL float *RESTRICT partials) {
    SHARED float sq[BLOCK];
    SHARED float mx[BLOCK];
    SHARED u32 new_diags[BLOCK];
    const float mean = (float)(indptr[n_rows] - indptr[0]) / (float)n_rows;
    const i32 stride = (i32)(NUM_GROUPS() * GROUP_SIZE());
    const i32 tid = (i32)(GROUP_ID() * GROUP_SIZE() + LID());
    float my_sq = 0.0f, my_max = 0.0f;
    for (i32 row = tid; row < n_rows; row += stride) {
        const float len = (float)(indptr[row + 1] - indptr[row]);
        my_sq += (len - mean) * (len - mean);
        my_max = fmax(my_max, len);
    }
    u32 my_new = 0;
    for (i32 s = tid; s < n_sample; s += stride) {
        const i32 row = s * sample_stride;
        const i32 end = indptr[row + 1];
        for (i32 k = indptr[row]; k < end; ++k) {
            const u32 diag = (u32)(indices[k] - row + n_rows - 1);
            if (ATOMIC_MAX_U32(&stamps[diag], generation) < generation) ++my_new;
        }
    }
    sq[LID()] = my_sq;
    mx[LID()] = my_max;
    new_diags[LID()] = my_new;
    BARRIER();
    for (u32 offset = BLOCK / 2; offset > 0; offset >>= 1) {
        if (LID() < offset) {
            sq[LID()] += sq[LID() + offset];
            mx[LID()] = fmax(mx[LID()], mx[LID() + offset]);
            new_diags[LID()] += new_diags[LID() + offset];
        }
        BARRIER();
    }
    if (LID() == 0) {
        partials[3 * GROUP_ID() + 0] = sq[0];
        partials[3 * GROUP_ID() + 1] = mx[0];
        partials[3 * GROUP_ID() + 2] = (float)new_diags[0];
    }
}
