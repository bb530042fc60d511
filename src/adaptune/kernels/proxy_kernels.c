/* Proxy micro-benchmarks (Nitro's P-DFS device features, seed 001 ch. 3) in the adaptune dialect: each
 * kernel stresses one resource, and its measured rate describes the device to a transfer model.
 * Every kernel uses grid-stride loops (any grid works) and writes something the host can check, so no
 * compiler may drop the work. (OpenCL reserves atomic_add and friends: hence the names.)
 *   copy_u32           dst[i] = src[i]                              -> copy bandwidth (bytes read + written)
 *   atomic_count       ATOMIC_ADD_U32 on counters[i % slots]        -> global atomic throughput; few slots =
 *                                                                      contention, many = spread
 *   local_bandwidth    ITER read-modify-writes of a shared tile      -> local (shared) memory bandwidth
 *   fma_chain          8 independent FMA chains of ITER steps        -> single-precision FLOP rate
 *   empty_kernel       nothing                                       -> launch latency
 */
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITER
#define ITER 256
#endif

KERNEL copy_u32(GLOBAL const u32 *RESTRICT src, GLOBAL u32 *RESTRICT dst, u32 n) {
    u32 stride = NUM_GROUPS() * GROUP_SIZE();
    for (u32 i = GROUP_ID() * GROUP_SIZE() + LID(); i < n; i += stride) dst[i] = src[i];
}

KERNEL atomic_count(GLOBAL u32 *counters, u32 slots, u32 n) {
    u32 stride = NUM_GROUPS() * GROUP_SIZE();
    for (u32 i = GROUP_ID() * GROUP_SIZE() + LID(); i < n; i += stride) ATOMIC_ADD_U32(&counters[i % slots], 1u);
}

KERNEL local_bandwidth(GLOBAL u32 *out, u32 seed) {
    SHARED u32 tile[BLOCK];
    u32 t = LID();
    tile[t] = seed + t;
    BARRIER();
    u32 acc = 0;
    for (u32 k = 0; k < ITER; ++k) {
        /* read a neighbour's word (a different bank each step), write back to one's own */
        u32 v = tile[(t + k + 1u) % BLOCK];
        acc += v;
        BARRIER();
        tile[t] = v ^ k;
        BARRIER();
    }
    out[GROUP_ID() * GROUP_SIZE() + t] = acc + tile[t];
}

KERNEL fma_chain(GLOBAL float *out, float a, float b) {
    u32 g = GROUP_ID() * GROUP_SIZE() + LID();
    float x0 = (float)g * 1e-9f, x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f;
    float x4 = x0 + 4.0f, x5 = x0 + 5.0f, x6 = x0 + 6.0f, x7 = x0 + 7.0f;
    for (u32 k = 0; k < ITER; ++k) {
        x0 = x0 * a + b; x1 = x1 * a + b; x2 = x2 * a + b; x3 = x3 * a + b;
        x4 = x4 * a + b; x5 = x5 * a + b; x6 = x6 * a + b; x7 = x7 * a + b;
    }
    out[g] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}

KERNEL empty_kernel(GLOBAL u32 *out) {
    if (GROUP_ID() == 0u && LID() == 0u && out[0] == 0xffffffffu) out[0] = 0u;
}
