/* Vector add c = a + b, CUDA twin of kernel.cl.
 *
 * Tunable (injected as #defines):
 *   block_size_x  threads per block
 *   tile_size_x   elements per thread, strided by block_size_x so that loads stay coalesced
 * Launch: grid = ceil(n / (block_size_x * tile_size_x)) blocks of block_size_x.
 */
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif

extern "C" __global__ void __launch_bounds__(block_size_x)
vector_add(float *__restrict__ c, const float *__restrict__ a, const float *__restrict__ b,
           const int n)
{
    const int first = blockIdx.x * (block_size_x * tile_size_x) + threadIdx.x;
    #pragma unroll
    for (int t = 0; t < tile_size_x; t++) {
        const int i = first + t * block_size_x;
        if (i < n) {
            c[i] = a[i] + b[i];
        }
    }
}
