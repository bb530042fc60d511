/* SpMV variants y = A x in the adaptune dialect (CSR-scalar, CSR-vector, ELL, DIA) and their feature kernel.
 * Defines: BLOCK (threads per block, power of two), VEC (threads per row for CSR-vector, 2..32, power of two).
 */
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef DIA_ROW_CAP
#define DIA_ROW_CAP 1024
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
 *   partials[3 b + 2] = number of diagonals first seen by this block among the sampled rows (the first
 *                       DIA_ROW_CAP entries of each)
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
        /* at most DIA_ROW_CAP entries a sampled row: one thread walks the row, and a dense row of 10^5
         * entries would cost milliseconds (its first entries alone make DIA's fill-in prohibitive) */
        const i32 end = min(indptr[row + 1], indptr[row] + DIA_ROW_CAP);
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

/* CSR nnz-split, load-balanced (the idea of merge-path / cuSPARSE CSR ALG2): block b takes the non-zeros
 * [b * CHUNK, (b + 1) * CHUNK) whatever rows they belong to, so a row of a million entries is spread over many
 * blocks and a block of short rows covers many rows. block_rows[b] = first row starting at or after b * CHUNK
 * (computed once per matrix); the block owns rows block_rows[b] .. block_rows[b + 1] - 1 (the last block also
 * owns the empty rows at the end). Products go to shared memory; each owned row sums its part inside the chunk
 * (coalesced loads, one thread a row); the chunk's head (the tail of a row started in an earlier chunk) is
 * reduced by the whole block into carry_row[b] / carry_val[b] and added by spmv_csr_balanced_fixup. */
#ifndef CHUNK_ITEMS
#define CHUNK_ITEMS 8
#endif
#define CHUNK (BLOCK * CHUNK_ITEMS)
KERNEL spmv_csr_balanced(const GLOBAL i32 *RESTRICT indptr, const GLOBAL i32 *RESTRICT indices,
                         const GLOBAL real_t *RESTRICT data, const GLOBAL real_t *RESTRICT x,
                         GLOBAL real_t *RESTRICT y, const i32 n_rows, const i32 nnz,
                         const GLOBAL i32 *RESTRICT block_rows, GLOBAL i32 *RESTRICT carry_row,
                         GLOBAL real_t *RESTRICT carry_val) {
    SHARED real_t prod[CHUNK];
    SHARED real_t red[BLOCK];
    const i32 b = (i32)GROUP_ID();
    const i32 begin = b * CHUNK;
    const i32 end = min(begin + CHUNK, nnz);
    for (i32 i = (i32)LID(); i < CHUNK; i += BLOCK) {
        const i32 k = begin + i;
        prod[i] = k < end ? data[k] * LOAD_RO(x[indices[k]]) : (real_t)0;
    }
    BARRIER();
    const i32 r0 = block_rows[b], r1 = block_rows[b + 1];
    const i32 head_end = r0 <= n_rows ? min(indptr[r0], end) : end;
    real_t head = 0;
    for (i32 i = (i32)LID(); i < head_end - begin; i += BLOCK) head += prod[i];
    red[LID()] = head;
    BARRIER();
    for (u32 offset = BLOCK / 2; offset > 0; offset >>= 1) {
        if (LID() < offset) red[LID()] += red[LID() + offset];
        BARRIER();
    }
    if (LID() == 0) {
        carry_row[b] = head_end > begin ? r0 - 1 : -1;
        carry_val[b] = red[0];
    }
    for (i32 r = r0 + (i32)LID(); r < r1; r += BLOCK) {
        const i32 s = indptr[r] - begin;
        const i32 e = min(indptr[r + 1], end) - begin;
        real_t sum = 0;
        for (i32 i = s; i < e; ++i) sum += prod[i];
        y[r] = sum;
    }
}

/* Adds the chunk heads to their rows: the last chunk of each run of equal carry rows sums the run. */
KERNEL spmv_csr_balanced_fixup(const GLOBAL i32 *RESTRICT carry_row, const GLOBAL real_t *RESTRICT carry_val,
                               GLOBAL real_t *RESTRICT y, const i32 n_chunks) {
    const i32 b = (i32)(GROUP_ID() * GROUP_SIZE() + LID());
    if (b >= n_chunks) return;
    const i32 row = carry_row[b];
    if (row < 0 || (b + 1 < n_chunks && carry_row[b + 1] == row)) return;
    real_t sum = 0;
    for (i32 j = b; j >= 0 && carry_row[j] == row; --j) sum += carry_val[j];
    y[row] += sum;
}
