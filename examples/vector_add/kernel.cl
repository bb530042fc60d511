/* Vector add c = a + b, OpenCL twin of kernel.cu.
 *
 * Tunable (injected as #defines):
 *   block_size_x  work-items per work-group
 *   tile_size_x   elements per work-item, strided by block_size_x so that loads stay coalesced
 * Launch: grid = ceil(n / (block_size_x * tile_size_x)) work-groups of block_size_x.
 */
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif

__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, const int n)
{
    const int first = get_group_id(0) * (block_size_x * tile_size_x) + get_local_id(0);
    #pragma unroll
    for (int t = 0; t < tile_size_x; t++) {
        const int i = first + t * block_size_x;
        if (i < n) {
            c[i] = a[i] + b[i];
        }
    }
}
