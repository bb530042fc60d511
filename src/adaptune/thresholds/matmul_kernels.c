/* Matrix multiplication C = A B (A n x m, B m x p, row-major) as the five code versions that Futhark's
 * incremental flattening generates for map (\xs -> map (dotprod xs) (transpose yss)) xss (seed 003, V0-V4),
 * in the adaptune dialect. Defines: GS (threads per group, power of two) for the versions that use groups.
 */
#ifndef GS
#define GS 256
#endif

/* Sum over the group through shared memory; every thread of the group must call it. */
DEVICE real_t group_sum(LOCAL real_t *buf, real_t v) {
    buf[LID()] = v;
    BARRIER();
    for (u32 s = GS / 2; s > 0; s >>= 1) {
        if (LID() < s) buf[LID()] += buf[LID() + s];
        BARRIER();
    }
    return buf[0];
}

/* V0: the outer map in parallel, its body sequential: one thread computes one row of C. */
KERNEL mm_v0(const GLOBAL real_t *RESTRICT a, const GLOBAL real_t *RESTRICT b, GLOBAL real_t *RESTRICT c,
             const i32 n, const i32 m, const i32 p) {
    const i32 i = (i32)(GROUP_ID() * GROUP_SIZE() + LID());
    if (i >= n) return;
    for (i32 j = 0; j < p; ++j) {
        real_t s = 0;
        for (i32 k = 0; k < m; ++k) s += a[(i64)i * m + k] * b[(i64)k * p + j];
        c[(i64)i * p + j] = s;
    }
}

/* V1: one work-group per row; its threads share the row's columns, each a sequential dot product. */
KERNEL mm_v1(const GLOBAL real_t *RESTRICT a, const GLOBAL real_t *RESTRICT b, GLOBAL real_t *RESTRICT c,
             const i32 n, const i32 m, const i32 p) {
    const i32 i = (i32)GROUP_ID();
    for (i32 j = (i32)LID(); j < p; j += (i32)GROUP_SIZE()) {
        real_t s = 0;
        for (i32 k = 0; k < m; ++k) s += a[(i64)i * m + k] * b[(i64)k * p + j];
        c[(i64)i * p + j] = s;
    }
}

/* V2: both maps in parallel, dotprod sequential: one thread per element of C. */
KERNEL mm_v2(const GLOBAL real_t *RESTRICT a, const GLOBAL real_t *RESTRICT b, GLOBAL real_t *RESTRICT c,
             const i32 n, const i32 m, const i32 p) {
    const i64 e = (i64)GROUP_ID() * GROUP_SIZE() + LID();
    if (e >= (i64)n * p) return;
    const i64 i = e / p, j = e % p;
    real_t s = 0;
    for (i32 k = 0; k < m; ++k) s += a[i * m + k] * b[(i64)k * p + j];
    c[e] = s;
}

/* V3: one work-group per element of C; the group reduces the dot product. */
KERNEL mm_v3(const GLOBAL real_t *RESTRICT a, const GLOBAL real_t *RESTRICT b, GLOBAL real_t *RESTRICT c,
             const i32 n, const i32 m, const i32 p) {
    SHARED real_t buf[GS];
    const i64 e = (i64)GROUP_ID();
    const i64 i = e / p, j = e % p;
    real_t s = 0;
    for (i32 k = (i32)LID(); k < m; k += GS) s += a[i * m + k] * b[(i64)k * p + j];
    s = group_sum(buf, s);
    if (LID() == 0) c[e] = s;
}

/* V4: the whole nest in parallel, one thread per multiplication: groups of GS products are reduced in
 * shared memory (a segmented reduction), `chunks` partial sums per element, summed by mm_v4_finish. */
KERNEL mm_v4(const GLOBAL real_t *RESTRICT a, const GLOBAL real_t *RESTRICT b, GLOBAL real_t *RESTRICT out,
             const i32 n, const i32 m, const i32 p, const i32 chunks) {
    SHARED real_t buf[GS];
    const i64 g = (i64)GROUP_ID();
    const i64 e = g / chunks;
    const i32 k = (i32)(g % chunks) * GS + (i32)LID();
    const i64 i = e / p, j = e % p;
    real_t s = 0;
    if (k < m) s = a[i * m + k] * b[(i64)k * p + j];
    s = group_sum(buf, s);
    if (LID() == 0) out[g] = s;
}

KERNEL mm_v4_finish(const GLOBAL real_t *RESTRICT partial, GLOBAL real_t *RESTRICT c, const i32 elements,
                    const i32 chunks) {
    const i64 e = (i64)GROUP_ID() * GROUP_SIZE() + LID();
    if (e >= elements) return;
    real_t s = 0;
    for (i32 q = 0; q < chunks; ++q) s += partial[e * chunks + q];
    c[e] = s;
}

/* Bias and ReLU over a n x p matrix in place (the deep program's elementwise stage), two versions. */
KERNEL act_rows(GLOBAL real_t *RESTRICT x, const GLOBAL real_t *RESTRICT bias, const i32 n, const i32 p) {
    const i32 i = (i32)(GROUP_ID() * GROUP_SIZE() + LID());
    if (i >= n) return;
    for (i32 j = 0; j < p; ++j) {
        const real_t v = x[(i64)i * p + j] + bias[j];
        x[(i64)i * p + j] = v > 0 ? v : (real_t)0;
    }
}

KERNEL act_elems(GLOBAL real_t *RESTRICT x, const GLOBAL real_t *RESTRICT bias, const i32 n, const i32 p) {
    const i64 e = (i64)GROUP_ID() * GROUP_SIZE() + LID();
    if (e >= (i64)n * p) return;
    const real_t v = x[e] + bias[e % p];
    x[e] = v > 0 ? v : (real_t)0;
}
