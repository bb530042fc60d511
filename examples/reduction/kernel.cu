/* Sum of a float array in one launch, CUDA twin of kernel.cl (same algorithm: no warp shuffles).
 *
 * Stage 1: every thread accumulates a grid-stride slice of x (loads of vector_width floats,
 *          elements_per_thread independent loads per step), then the block reduces its partial
 *          sums with a tree in shared memory.
 * Stage 2: use_atomics == 1: thread 0 of each block atomicAdds the block's sum into out[0]
 *                            (out[0] must be 0 before the launch).
 *          use_atomics == 0: each block writes its sum to partials[block]; the last block to finish
 *                            (ticket from an atomic counter, after __threadfence) sums partials with
 *                            the same tree, writes out[0] and resets the counter to 0 for the next launch.
 *
 * Tunable (injected as #defines):
 *   block_size_x         threads per block, a power of two (tree reduction)
 *   elements_per_thread  loads in flight per thread per grid-stride step
 *   vector_width         1, 2 or 4 floats per load (float2/float4; cudaMalloc'ed x is aligned)
 *   num_blocks           number of blocks (0 = as many as needed to cover x once, no grid stride);
 *                        only the launch geometry uses it, the kernel reads gridDim.x
 *   use_atomics          second stage, see above
 * Arguments: out (float[1]), x (float[n]), n, partials (float[>= blocks]), counter (uint[1], 0 initially).
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

__device__ __forceinline__ float load_sum(const float *__restrict__ x, const int v)
{
#if vector_width == 1
    return x[v];
#elif vector_width == 2
    const float2 a = reinterpret_cast<const float2 *>(x)[v];
    return a.x + a.y;
#elif vector_width == 4
    const float4 a = reinterpret_cast<const float4 *>(x)[v];
    return (a.x + a.y) + (a.z + a.w);
#else
#error "vector_width must be 1, 2 or 4"
#endif
}

/* Tree reduction of sh[0..block_size_x) into sh[0]; all threads of the block must call it. */
__device__ __forceinline__ void block_reduce(float *sh, const int tid)
{
    __syncthreads();
    for (int s = block_size_x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sh[tid] += sh[tid + s];
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(block_size_x)
sum_floats(float *out, const float *__restrict__ x, const int n, float *partials,
           unsigned int *counter)
{
    __shared__ float sh[block_size_x];
    const int tid = threadIdx.x;
    const int n_vec = n / vector_width;
    const int step = gridDim.x * (block_size_x * elements_per_thread);

    float acc = 0.0f;
    for (int base = blockIdx.x * (block_size_x * elements_per_thread) + tid; base < n_vec; base += step) {
        #pragma unroll
        for (int e = 0; e < elements_per_thread; e++) {
            const int v = base + e * block_size_x;
            if (v < n_vec) {
                acc += load_sum(x, v);
            }
        }
    }
    if (blockIdx.x == 0 && tid == 0) {   /* the n % vector_width floats that do not fill a vector */
        for (int i = n_vec * vector_width; i < n; i++) {
            acc += x[i];
        }
    }
    sh[tid] = acc;
    block_reduce(sh, tid);

#if use_atomics == 1
    if (tid == 0) {
        atomicAdd(out, sh[0]);
    }
#else
    __shared__ bool is_last;
    if (tid == 0) {
        partials[blockIdx.x] = sh[0];
        __threadfence();   /* publish the partial before taking a ticket */
        is_last = atomicInc(counter, 0xffffffffu) == gridDim.x - 1;
    }
    __syncthreads();
    if (is_last) {
        const volatile float *done = partials;   /* bypass L1: other blocks wrote these */
        float total = 0.0f;
        for (int g = tid; g < (int)gridDim.x; g += block_size_x) {
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
