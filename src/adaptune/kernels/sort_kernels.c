/* Sorting kernels in the adaptune dialect: bitonic tile sort, merge-path merge passes (merge sort),
 * global bitonic steps (bitonic sort), order counting (features and the presorted check) and reversal.
 * Defines: KEY_T (i32, i64, float, double), KEY_MAX (largest key, padding), BLOCK (threads, power of two),
 * TILE = 2 * BLOCK keys sorted per block in shared memory, ITEMS = keys merged per thread per pass;
 * LOCALITY (defined or not): merge passes copy pairs of runs that are already in order.
 * Float keys may be NaN: they order after every number (NumPy's order), through KEY_LESS; padding is NaN.
 */
#ifdef KEY_IS_FLOAT
#define KEY_LESS(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
#else
#define KEY_LESS(a, b) ((a) < (b))
#endif
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#define TILE (2 * BLOCK)

/* Bitonic network over a TILE of shared memory, sorting ascending; `k_first` > 2 skips stages already done. */
DEVICE void bitonic_in_shared(LOCAL KEY_T *s, const u32 k_first, const u32 k_last) {
    for (u32 k = k_first; k <= k_last; k <<= 1) {
        for (u32 j = k >> 1; j > 0; j >>= 1) {
            const u32 p = LID();
            const u32 i = 2u * j * (p / j) + (p % j);
            const u32 partner = (j == (k >> 1)) ? (i ^ (k - 1u)) : (i + j);
            const KEY_T a = s[i], c = s[partner];
            if (KEY_LESS(c, a)) { s[i] = c; s[partner] = a; }
            BARRIER();
        }
    }
}

/* Sort each TILE of keys[0, n) ascending in place (the tail tile is padded with KEY_MAX). */
KERNEL sort_tiles(GLOBAL KEY_T *RESTRICT keys, const u32 n) {
    SHARED KEY_T s[TILE];
    const u32 base = GROUP_ID() * TILE;
    for (u32 i = LID(); i < TILE; i += BLOCK) s[i] = base + i < n ? keys[base + i] : KEY_MAX;
    BARRIER();
    bitonic_in_shared(s, 2u, TILE);
    for (u32 i = LID(); i < TILE; i += BLOCK)
        if (base + i < n) keys[base + i] = s[i];
}

/* One merge-sort pass: sorted runs of `width` keys in src are merged pairwise into dst. Thread t writes
 * outputs [t * ITEMS, (t + 1) * ITEMS) after finding its start on the merge path by binary search (stable). */
KERNEL merge_pass(const GLOBAL KEY_T *RESTRICT src, GLOBAL KEY_T *RESTRICT dst, const u32 n, const u32 width) {
    const u64 out_begin = ((u64)GROUP_ID() * BLOCK + LID()) * ITEMS;
    if (out_begin >= n) return;
    const u64 pair_begin = (out_begin / (2u * (u64)width)) * (2u * (u64)width);
    const u64 a_begin = pair_begin;
    const u64 a_end = min(pair_begin + width, (u64)n);
    const u64 b_end = min(pair_begin + 2u * (u64)width, (u64)n);
    const u64 len_a = a_end - a_begin, len_b = b_end - a_end;
#ifdef LOCALITY
    /* Locality (ModernGPU's idea for nearly sorted keys): a pair of runs already in order is copied, with no
     * merge-path search and no comparisons per key. */
    if (len_b == 0u || !KEY_LESS(src[a_end], src[a_end - 1u])) {
        const u64 copy_end = min(out_begin + ITEMS, b_end);
        for (u64 o = out_begin; o < copy_end; ++o) dst[o] = src[o];
        return;
    }
#endif
    const u64 diag = out_begin - pair_begin;
    u64 lo = diag > len_b ? diag - len_b : 0u;
    u64 hi = diag < len_a ? diag : len_a;
    while (lo < hi) {
        const u64 mid = (lo + hi) / 2u;
        if (!KEY_LESS(src[a_end + diag - mid - 1u], src[a_begin + mid])) lo = mid + 1u; else hi = mid;
    }
    u64 ia = lo, ib = diag - lo;
    const u64 out_end = min(out_begin + ITEMS, b_end);
    for (u64 o = out_begin; o < out_end; ++o) {
        const bool take_a = ib >= len_b || (ia < len_a && !KEY_LESS(src[a_end + ib], src[a_begin + ia]));
        dst[o] = take_a ? src[a_begin + ia] : src[a_end + ib];
        if (take_a) ++ia; else ++ib;
    }
}

/* One global step (k, j) of the bitonic network over keys[0, P), P a power of two: one thread per pair. */
KERNEL bitonic_step(GLOBAL KEY_T *RESTRICT keys, const u32 half_p, const u32 k, const u32 j) {
    const u32 p = GROUP_ID() * BLOCK + LID();
    if (p >= half_p) return;
    const u32 i = 2u * j * (p / j) + (p % j);
    const u32 partner = (j == (k >> 1)) ? (i ^ (k - 1u)) : (i + j);
    const KEY_T a = keys[i], c = keys[partner];
    if (KEY_LESS(c, a)) { keys[i] = c; keys[partner] = a; }
}

/* The steps j = TILE/2 .. 1 of stage k (k > TILE) in shared memory: one launch instead of log2(TILE). */
KERNEL bitonic_tile_steps(GLOBAL KEY_T *RESTRICT keys, const u32 k) {
    SHARED KEY_T s[TILE];
    const u32 base = GROUP_ID() * TILE;
    for (u32 i = LID(); i < TILE; i += BLOCK) s[i] = keys[base + i];
    BARRIER();
    for (u32 j = TILE / 2; j > 0; j >>= 1) {
        const u32 p = LID();
        const u32 i = 2u * j * (p / j) + (p % j);
        const KEY_T a = s[i], c = s[i + j];
        if (KEY_LESS(c, a)) { s[i] = c; s[i + j] = a; }
        BARRIER();
    }
    for (u32 i = LID(); i < TILE; i += BLOCK) keys[base + i] = s[i];
}

/* Count order over pairs (s * stride, s * stride + 1), s < n_pairs: counts[0] += descents (next < this),
 * counts[1] += ascents (next > this), counts[2] += ties. stride 1 and n_pairs n - 1 gives the exact counts. */
KERNEL count_order(const GLOBAL KEY_T *RESTRICT keys, const u32 stride, const u32 n_pairs,
                   GLOBAL u32 *RESTRICT counts) {
    SHARED u32 d[BLOCK];
    SHARED u32 a[BLOCK];
    SHARED u32 t[BLOCK];
    u32 my_d = 0, my_a = 0, my_t = 0;
    for (u32 s = GROUP_ID() * BLOCK + LID(); s < n_pairs; s += NUM_GROUPS() * BLOCK) {
        const u64 i = (u64)s * stride;
        const KEY_T x = keys[i], y = keys[i + 1];
        const u32 down = KEY_LESS(y, x), up = KEY_LESS(x, y);
        my_d += down;
        my_a += up;
        my_t += !down && !up;
    }
    d[LID()] = my_d;
    a[LID()] = my_a;
    t[LID()] = my_t;
    BARRIER();
    for (u32 offset = BLOCK / 2; offset > 0; offset >>= 1) {
        if (LID() < offset) {
            d[LID()] += d[LID() + offset];
            a[LID()] += a[LID() + offset];
            t[LID()] += t[LID() + offset];
        }
        BARRIER();
    }
    if (LID() == 0) {
        ATOMIC_ADD_U32(&counts[0], d[0]);
        ATOMIC_ADD_U32(&counts[1], a[0]);
        ATOMIC_ADD_U32(&counts[2], t[0]);
    }
}

/* dst[i] = src[n - 1 - i]. */
KERNEL reverse_copy(const GLOBAL KEY_T *RESTRICT src, GLOBAL KEY_T *RESTRICT dst, const u32 n) {
    for (u32 i = GROUP_ID() * BLOCK + LID(); i < n; i += NUM_GROUPS() * BLOCK) dst[i] = src[n - 1u - i];
}
