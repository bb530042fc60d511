/* Sum of a float array in one launch, OpenCL twin of kernel.cu. No sub-group/warp shuffles.
 *
 * Stage 1: every work-item accumulates a grid-stride slice of x (loads of vector_width floats,
 *          elements_per_thread independent loads per step), then the work-group reduces its
 *          partial sums with a tree in local memory.
 * Stage 2: use_atomics == 1: work-item 0 of each group adds the group's sum into out[0] with an
 *                            atomic compare-and-swap loop (out[0] must be 0 before the launch).
 *          use_atomics == 0: each group writes its sum to partials[group]; the last group to finish
 *                            (ticket from an atomic counter) sums partials with the same tree, writes
 *                            out[0] and resets the counter to 0 for the next launch.
 *
 * Tunable (injected as #defines):
 *   block_size_x         work-items per group, a power of two (tree reduction)
 *   elements_per_thread  loads in flight per work-item per grid-stride step
 *   vector_width         1, 2 or 4 floats per load (vload2/vload4)
 *   num_blocks           number of groups (0 = as many as needed to cover x once, no grid stride);
 *                        only the launch geometry uses it, the kernel reads get_num_groups(0)
 *   use_atomics          second stage, see above
 * Arguments: out (float[1]), x (float[n]), n, partials (float[>= groups]), counter (uint[1], 0 initially).
 */
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef elements_per_thread
#define elements_per_thread 1
#endif
#ifndef vector_width
#define vector_width 1
#endif
#ifndef use_atomics
#define use_atomics 1
#endif

#if (block_size_x & (block_size_x - 1)) != 0
#error "block_size_x must be a power of two"
#endif

inline float load_sum(__global const float *x, const int v)
{
#if vector_width == 1
    return x[v];
#elif vector_width == 2
    const float2 a = vload2(v, x);
    return a.x + a.y;
#elif vector_width == 4
    const float4 a = vload4(v, x);
    return (a.x + a.y) + (a.z + a.w);
#else
#error "vector_width must be 1, 2 or 4"
#endif
}

/* Tree reduction of sh[0..block_size_x) into sh[0]; all work-items of the group must call it. */
inline void block_reduce(__local float *sh, const int tid)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = block_size_x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sh[tid] += sh[tid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

#if use_atomics == 1
/* OpenCL 1.2 has no float atomic add: compare-and-swap on the bits. */
inline void atomic_add_float(volatile __global float *addr, const float value)
{
    union { unsigned int u; float f; } seen, next;
    do {
        seen.f = *addr;
        next.f = seen.f + value;
    } while (atomic_cmpxchg((volatile __global unsigned int *)addr, seen.u, next.u) != seen.u);
}
#endif

__kernel void sum_floats(__global float *out, __global const float *x, const int n,
                         __global float *partials, volatile __global unsigned int *counter)
{
    __local float sh[block_size_x];
    const int tid = get_local_id(0);
    const int n_vec = n / vector_width;
    const int step = get_num_groups(0) * (block_size_x * elements_per_thread);

    float acc = 0.0f;
    for (int base = get_group_id(0) * (block_size_x * elements_per_thread) + tid; base < n_vec; base += step) {
        #pragma unroll
        for (int e = 0; e < elements_per_thread; e++) {
            const int v = base + e * block_size_x;
            if (v < n_vec) {
                acc += load_sum(x, v);
            }
        }
    }
    if (get_global_id(0) == 0) {   /* the n % vector_width floats that do not fill a vector */
        for (int i = n_vec * vector_width; i < n; i++) {
            acc += x[i];
        }
    }
    sh[tid] = acc;
    block_reduce(sh, tid);

#if use_atomics == 1
    if (tid == 0) {
        atomic_add_float(out, sh[0]);
    }
#else
    __local int is_last;
    if (tid == 0) {
        partials[get_group_id(0)] = sh[0];
        mem_fence(CLK_GLOBAL_MEM_FENCE);   /* publish the partial before taking a ticket */
        is_last = atomic_inc(counter) == get_num_groups(0) - 1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (is_last) {
        volatile __global const float *done = partials;   /* bypass stale caches */
        float total = 0.0f;
        for (int g = tid; g < (int)get_num_groups(0); g += block_size_x) {
            total += done[g];
        }
        sh[tid] = total;
        block_reduce(sh, tid);
        if (tid == 0) {
            out[0] = sh[0];
            *counter = 0;
        }
    }
#endif
}
