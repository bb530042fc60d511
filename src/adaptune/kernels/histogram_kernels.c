/* Histograms of 8/16/32-bit keys into BINS bins (keys >= BINS are ignored, as CUB's HistogramEven over
 * [0, BINS) does) in the adaptune dialect.
 * Defines:
 *   KEY_BITS    8, 16 or 32: keys are packed 32 / KEY_BITS to a 32-bit word, little-endian
 *   BINS        number of bins
 *   ALGO        0 = global atomics, one per key
 *               1 = global atomics with run aggregation: a thread walks RUN_WORDS consecutive words and adds
 *                   a run of equal keys with one atomic (constant, image-like and sorted data)
 *               2 = shared-memory privatised histogram, REPL interleaved copies a block (copy = thread % REPL,
 *                   so the lanes of a warp that hit one bin hit REPL different addresses), merged at the end
 *               3 = sort + run-length: each tile of TILE_KEYS keys is bitonic-sorted in shared memory and each
 *                   run adds its length with two atomics (skew-insensitive)
 *   REPL        copies of the privatised histogram (ALGO 2); BINS * REPL words must fit in shared memory
 *   BLOCK       threads per block (power of two)
 * n_keys says how many keys are valid (the last word may be partial). hist must be zero at launch.
 */
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef KEY_BITS
#define KEY_BITS 8
#endif
#ifndef BINS
#define BINS 256
#endif
#ifndef ALGO
#define ALGO 0
#endif
#ifndef REPL
#define REPL 1
#endif
#define KPW (32 / KEY_BITS)
#if KEY_BITS == 32
#define KEY_MASK 0xffffffffu
#else
#define KEY_MASK ((1u << KEY_BITS) - 1u)
#endif
#define RUN_WORDS 4
#define TILE_KEYS 4096
#if ALGO == 3
#define TILE_WORDS (TILE_KEYS / KPW)
#elif ALGO == 1
#define TILE_WORDS (BLOCK * RUN_WORDS)
#else
#define TILE_WORDS (BLOCK * 4)
#endif

DEVICE u32 key_of(const u32 w, const u32 b) {
#if KEY_BITS == 32
    return w;
#else
    return (w >> (KEY_BITS * b)) & KEY_MASK;
#endif
}

KERNEL histogram_keys(const GLOBAL u32 *RESTRICT words, const u32 n_keys, GLOBAL u32 *RESTRICT hist) {
    const u32 n_words = (n_keys + KPW - 1u) / KPW;
    const u32 n_tiles = (n_words + TILE_WORDS - 1u) / TILE_WORDS;
#if ALGO == 2
    SHARED u32 local_hist[BINS * REPL];
    for (u32 i = LID(); i < BINS * REPL; i += GROUP_SIZE()) local_hist[i] = 0;
    BARRIER();
    const u32 copy = LID() % REPL;
#elif ALGO == 3
    SHARED u32 keys[TILE_KEYS];
#endif
    const u32 first = (u32)(((u64)GROUP_ID() * n_tiles) / NUM_GROUPS());
    const u32 last = (u32)(((u64)(GROUP_ID() + 1u) * n_tiles) / NUM_GROUPS());
    for (u32 tile = first; tile < last; ++tile) {
#if ALGO == 0 || ALGO == 2
        for (u32 i = LID(); i < TILE_WORDS; i += GROUP_SIZE()) {
            const u32 w_idx = tile * TILE_WORDS + i;
            if (w_idx < n_words) {
                const u32 w = words[w_idx];
                const u32 valid = min((u32)KPW, n_keys - KPW * w_idx);
                for (u32 b = 0; b < valid; ++b) {
                    const u32 k = key_of(w, b);
                    if (k < BINS) {
#if ALGO == 0
                        ATOMIC_ADD_U32(&hist[k], 1u);
#else
                        ATOMIC_ADD_U32(&local_hist[k * REPL + copy], 1u);
#endif
                    }
                }
            }
        }
#elif ALGO == 1
        u32 run_key = 0xffffffffu, run_len = 0;
        for (u32 j = 0; j < RUN_WORDS; ++j) {
            const u32 w_idx = tile * TILE_WORDS + LID() * RUN_WORDS + j;
            if (w_idx < n_words) {
                const u32 w = words[w_idx];
                const u32 valid = min((u32)KPW, n_keys - KPW * w_idx);
                for (u32 b = 0; b < valid; ++b) {
                    const u32 k = key_of(w, b);
                    if (k == run_key) {
                        ++run_len;
                    } else {
                        if (run_key < BINS) ATOMIC_ADD_U32(&hist[run_key], run_len);
                        run_key = k;
                        run_len = 1;
                    }
                }
            }
        }
        if (run_key < BINS) ATOMIC_ADD_U32(&hist[run_key], run_len);
#else
        for (u32 i = LID(); i < TILE_WORDS; i += GROUP_SIZE()) {
            const u32 w_idx = tile * TILE_WORDS + i;
            const u32 w = w_idx < n_words ? words[w_idx] : 0u;
            const u32 valid = w_idx < n_words ? min((u32)KPW, n_keys - KPW * w_idx) : 0u;
            for (u32 b = 0; b < (u32)KPW; ++b) keys[KPW * i + b] = b < valid ? key_of(w, b) : 0xffffffffu;
        }
        BARRIER();
        for (u32 k = 2; k <= TILE_KEYS; k <<= 1) {
            for (u32 j = k >> 1; j > 0; j >>= 1) {
                for (u32 p = LID(); p < TILE_KEYS / 2u; p += GROUP_SIZE()) {
                    const u32 i = 2u * j * (p / j) + (p % j);
                    const u32 partner = (j == (k >> 1)) ? (i ^ (k - 1u)) : (i + j);
                    const u32 a = keys[i], c = keys[partner];
                    if (a > c) { keys[i] = c; keys[partner] = a; }
                }
                BARRIER();
            }
        }
        /* each run adds (end - start) as +end at its last key and -start at its first (modulo 2^32) */
        for (u32 i = LID(); i < TILE_KEYS; i += GROUP_SIZE()) {
            const u32 v = keys[i];
            if (v < BINS) {
                if (i == 0u || keys[i - 1u] != v) ATOMIC_ADD_U32(&hist[v], 0u - i);
                if (i == TILE_KEYS - 1u || keys[i + 1u] != v) ATOMIC_ADD_U32(&hist[v], i + 1u);
            }
        }
        BARRIER();
#endif
    }
#if ALGO == 2
    BARRIER();
    for (u32 i = LID(); i < BINS; i += GROUP_SIZE()) {
        u32 total = 0;
        for (u32 c = 0; c < REPL; ++c) total += local_hist[i * REPL + c];
        if (total) ATOMIC_ADD_U32(&hist[i], total);
    }
#endif
}

/* Sub-sample statistics for the features, one block, no bins-sized memory (BINS may be 65,536): over `count`
 * keys at positions s * stride (s < count <= SAMPLE_MAX):
 *   out[0] = mean / BINS, out[1] = standard deviation / BINS,
 *   out[2] = collision share: key s equals key (s + count / 2) % count (an estimate of sum p_i^2, which is
 *            what makes atomics on one bin contend),
 *   out[3] = neighbour share: key at s * stride equals the key right after it (runs, warp-level contention). */
#define SAMPLE_MAX 4096
DEVICE u32 key_at(const GLOBAL u32 *RESTRICT words, const u32 i) {
    return key_of(words[i / KPW], i % KPW);
}

KERNEL histogram_subsample_stats(const GLOBAL u32 *RESTRICT words, const u32 n_keys, const u32 stride,
                                 const u32 count, GLOBAL float *RESTRICT out) {
    SHARED u32 sample[SAMPLE_MAX];
    SHARED float sums[BLOCK];
    SHARED float sqs[BLOCK];
    SHARED u32 coll[BLOCK];
    SHARED u32 neigh[BLOCK];
    float s = 0.0f, q = 0.0f;
    u32 my_neigh = 0;
    for (u32 i = LID(); i < count; i += GROUP_SIZE()) {
        const u32 pos = i * stride;
        const u32 v = key_at(words, pos);
        sample[i] = v;
        const float f = (float)v / (float)BINS;
        s += f;
        q += f * f;
        if (pos + 1u < n_keys) my_neigh += key_at(words, pos + 1u) == v;
    }
    BARRIER();
    u32 my_coll = 0;
    for (u32 i = LID(); i < count; i += GROUP_SIZE()) my_coll += sample[i] == sample[(i + count / 2u) % count];
    sums[LID()] = s;
    sqs[LID()] = q;
    coll[LID()] = my_coll;
    neigh[LID()] = my_neigh;
    BARRIER();
    for (u32 offset = BLOCK / 2; offset > 0; offset >>= 1) {
        if (LID() < offset) {
            sums[LID()] += sums[LID() + offset];
            sqs[LID()] += sqs[LID() + offset];
            coll[LID()] += coll[LID() + offset];
            neigh[LID()] += neigh[LID() + offset];
        }
        BARRIER();
    }
    if (LID() == 0) {
        const float mean = sums[0] / (float)count;
        out[0] = mean;
        out[1] = sqrt(fmax(sqs[0] / (float)count - mean * mean, 0.0f));
        out[2] = (float)coll[0] / (float)count;
        out[3] = (float)neigh[0] / (float)count;
    }
}
