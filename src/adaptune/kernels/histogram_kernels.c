/* 256-bin histogram of 8-bit data in the adaptune dialect.
 * Defines:
 *   ALGO        0 = global atomics, 1 = shared-memory privatised atomics, 2 = sort-then-run-length
 *   DYNAMIC     0 = even-share grid (block b takes a contiguous 1/G of the tiles),
 *               1 = dynamic grid (blocks take the next tile from a global work queue)
 *   BLOCK       threads per block (power of two)
 *   TILE_WORDS  32-bit words per tile; for ALGO 2, 4 * TILE_WORDS must be a power of two
 * Data arrive as 32-bit words (4 bytes each); n_bytes says how many bytes are valid, so the last word may be
 * partial. hist (256 counters) and queue (1 counter, DYNAMIC only) must be zero at launch.
 */
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef TILE_WORDS
#define TILE_WORDS 1024
#endif
#ifndef ALGO
#define ALGO 0
#endif
#ifndef DYNAMIC
#define DYNAMIC 0
#endif
#define BINS 256
#define TILE_BYTES (4 * TILE_WORDS)

KERNEL histogram256(const GLOBAL u32 *RESTRICT words, const u32 n_bytes, GLOBAL u32 *RESTRICT hist,
                    GLOBAL u32 *RESTRICT queue) {
    const u32 n_words = (n_bytes + 3u) / 4u;
    const u32 n_tiles = (n_words + TILE_WORDS - 1u) / TILE_WORDS;
#if ALGO == 1
    SHARED u32 local_hist[BINS];
    for (u32 i = LID(); i < BINS; i += GROUP_SIZE()) local_hist[i] = 0;
    BARRIER();
#elif ALGO == 2
    SHARED u32 keys[TILE_BYTES];
#endif
#if DYNAMIC
    SHARED u32 next_tile;
    for (;;) {
        if (LID() == 0) next_tile = ATOMIC_ADD_U32(queue, 1u);
        BARRIER();
        const u32 tile = next_tile;
        BARRIER();
        if (tile >= n_tiles) break; /* uniform: every thread read the same tile */
#else
    const u32 first = (u32)(((u64)GROUP_ID() * n_tiles) / NUM_GROUPS());
    const u32 last = (u32)(((u64)(GROUP_ID() + 1u) * n_tiles) / NUM_GROUPS());
    for (u32 tile = first; tile < last; ++tile) {
#endif
#if ALGO == 0 || ALGO == 1
        for (u32 i = LID(); i < TILE_WORDS; i += GROUP_SIZE()) {
            const u32 w_idx = tile * TILE_WORDS + i;
            if (w_idx < n_words) {
                const u32 w = words[w_idx];
                const u32 valid = min(4u, n_bytes - 4u * w_idx);
                for (u32 b = 0; b < valid; ++b) {
#if ALGO == 0
                    ATOMIC_ADD_U32(&hist[(w >> (8u * b)) & 255u], 1u);
#else
                    ATOMIC_ADD_U32(&local_hist[(w >> (8u * b)) & 255u], 1u);
#endif
                }
            }
        }
#else
        /* Sort the tile's bytes in shared memory (bitonic; 256 pads the tail), then each run of equal
         * values adds its length with two atomics: +end at its last element and -start at its first
         * (counts are modulo 2^32, so the sum is exact). Skew-insensitive: at most 2 * 256 atomics per tile. */
        for (u32 i = LID(); i < TILE_WORDS; i += GROUP_SIZE()) {
            const u32 w_idx = tile * TILE_WORDS + i;
            const u32 w = w_idx < n_words ? words[w_idx] : 0u;
            const u32 valid = w_idx < n_words ? min(4u, n_bytes - 4u * w_idx) : 0u;
            for (u32 b = 0; b < 4u; ++b) keys[4u * i + b] = b < valid ? (w >> (8u * b)) & 255u : 256u;
        }
        BARRIER();
        for (u32 k = 2; k <= TILE_BYTES; k <<= 1) {
            for (u32 j = k >> 1; j > 0; j >>= 1) {
                for (u32 p = LID(); p < TILE_BYTES / 2u; p += GROUP_SIZE()) {
                    const u32 i = 2u * j * (p / j) + (p % j);
                    const u32 partner = (j == (k >> 1)) ? (i ^ (k - 1u)) : (i + j);
                    const u32 a = keys[i], c = keys[partner];
                    if (a > c) { keys[i] = c; keys[partner] = a; }
                }
                BARRIER();
            }
        }
        for (u32 i = LID(); i < TILE_BYTES; i += GROUP_SIZE()) {
            const u32 v = keys[i];
            if (v < 256u) {
                if (i == 0u || keys[i - 1u] != v) ATOMIC_ADD_U32(&hist[v], 0u - i);
                if (i == TILE_BYTES - 1u || keys[i + 1u] != v) ATOMIC_ADD_U32(&hist[v], i + 1u);
            }
        }
        BARRIER();
#endif
    }
#if ALGO == 1
    BARRIER();
    for (u32 i = LID(); i < BINS; i += GROUP_SIZE())
        if (local_hist[i]) ATOMIC_ADD_U32(&hist[i], local_hist[i]);
#endif
}

/* Sub-sample statistics for the features, one block: over `count` bytes at positions s * stride,
 * out[0] = mean, out[1] = standard deviation, out[2] = share of the most frequent value. */
KERNEL histogram_subsample_stats(const GLOBAL u8 *RESTRICT data, const u32 stride, const u32 count,
                                 GLOBAL float *RESTRICT out) {
    SHARED u32 bins[BINS];
    SHARED float sums[BLOCK];
    SHARED float sqs[BLOCK];
    SHARED u32 mx[BLOCK];
    for (u32 i = LID(); i < BINS; i += GROUP_SIZE()) bins[i] = 0;
    BARRIER();
    float s = 0.0f, q = 0.0f;
    for (u32 i = LID(); i < count; i += GROUP_SIZE()) {
        const u32 v = data[i * stride];
        s += (float)v;
        q += (float)v * (float)v;
        ATOMIC_ADD_U32(&bins[v], 1u);
    }
    sums[LID()] = s;
    sqs[LID()] = q;
    BARRIER();
    u32 m = 0;
    for (u32 i = LID(); i < BINS; i += GROUP_SIZE()) m = max(m, bins[i]);
    mx[LID()] = m;
    BARRIER();
    for (u32 offset = BLOCK / 2; offset > 0; offset >>= 1) {
        if (LID() < offset) {
            sums[LID()] += sums[LID() + offset];
            sqs[LID()] += sqs[LID() + offset];
            mx[LID()] = max(mx[LID()], mx[LID() + offset]);
        }
        BARRIER();
    }
    if (LID() == 0) {
        const float mean = sums[0] / (float)count;
        out[0] = mean;
        out[1] = sqrt(fmax(sqs[0] / (float)count - mean * mean, 0.0f));
        out[2] = (float)mx[0] / (float)count;
    }
}
