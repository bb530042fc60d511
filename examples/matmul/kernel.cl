/* Tiled matrix multiply C = A * B (row-major, single precision), OpenCL twin of kernel.cu.
 *
 *   A is M x K, B is K x N, C is M x N.
 *
 * Each work-group computes a TILE_M x TILE_N block of C; each work-item computes tile_size_y rows
 * x tile_size_x columns of it. Rows are strided by block_size_y and column groups of vector_width
 * by block_size_x * vector_width, so neighbouring work-items touch neighbouring memory.
 *
 * Tunable (injected as #defines):
 *   block_size_x, block_size_y  work-group shape
 *   tile_size_x, tile_size_y    outputs per work-item in x (columns) and y (rows)
 *   vector_width                1, 2 or 4: loads/stores of B, C (and A tiles) as float, float2, float4
 *   loop_unroll_factor_k        k iterations per step of the inner loop (manually unrolled)
 *   use_shared_mem              0: read A and B from global memory; 1: stage tiles in local memory
 *   tile_size_k                 depth of the local-memory tiles (only used when use_shared_mem == 1)
 *
 * No bounds checks, by design; the search space carries the constraints that make them unneeded:
 *   N % (block_size_x * tile_size_x) == 0, M % (block_size_y * tile_size_y) == 0,
 *   tile_size_x % vector_width == 0, K % loop_unroll_factor_k == 0,
 *   and with use_shared_mem: K % tile_size_k == 0, tile_size_k % loop_unroll_factor_k == 0,
 *   tile_size_k % vector_width == 0.
 * Launch: grid = (N / (block_size_x * tile_size_x), M / (block_size_y * tile_size_y)).
 */
#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 16
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif
#ifndef tile_size_y
#define tile_size_y 1
#endif
#ifndef vector_width
#define vector_width 1
#endif
#ifndef loop_unroll_factor_k
#define loop_unroll_factor_k 1
#endif
#ifndef use_shared_mem
#define use_shared_mem 0
#endif
#ifndef tile_size_k
#define tile_size_k 16
#endif

#define TILE_M (block_size_y * tile_size_y)
#define TILE_N (block_size_x * tile_size_x)
#define VECS_X (tile_size_x / vector_width)       /* vectors per work-item in x */
#define STRIDE_X (block_size_x * vector_width)    /* columns between a work-item's vectors */

#if vector_width == 1
typedef float floatv;
#define LOADV(p) (*(p))
#define STOREV(v, p) (*(p) = (v))
#elif vector_width == 2
typedef float2 floatv;
#define LOADV(p) vload2(0, (p))
#define STOREV(v, p) vstore2((v), 0, (p))
#elif vector_width == 4
typedef float4 floatv;
#define LOADV(p) vload4(0, (p))
#define STOREV(v, p) vstore4((v), 0, (p))
#else
#error "vector_width must be 1, 2 or 4"
#endif

__kernel void matmul_kernel(__global float *C, __global const float *A, __global const float *B,
                            const int M, const int N, const int K)
{
    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int row0 = get_group_id(1) * TILE_M + ty;
    const int col0 = get_group_id(0) * TILE_N + tx * vector_width;

    floatv acc[tile_size_y][VECS_X];
    #pragma unroll
    for (int i = 0; i < tile_size_y; i++) {
        #pragma unroll
        for (int j = 0; j < VECS_X; j++) {
            acc[i][j] = (floatv)(0.0f);
        }
    }

#if use_shared_mem == 0
    for (int k0 = 0; k0 < K; k0 += loop_unroll_factor_k) {
        #pragma unroll
        for (int u = 0; u < loop_unroll_factor_k; u++) {
            const int k = k0 + u;
            float a[tile_size_y];
            floatv b[VECS_X];
            #pragma unroll
            for (int i = 0; i < tile_size_y; i++) {
                a[i] = A[(row0 + i * block_size_y) * K + k];
            }
            #pragma unroll
            for (int j = 0; j < VECS_X; j++) {
                b[j] = LOADV(B + k * N + col0 + j * STRIDE_X);
            }
            #pragma unroll
            for (int i = 0; i < tile_size_y; i++) {
                #pragma unroll
                for (int j = 0; j < VECS_X; j++) {
                    acc[i][j] += a[i] * b[j];
                }
            }
        }
    }
#else
    __local float As[TILE_M][tile_size_k];
    __local float Bs[tile_size_k][TILE_N];
    const int tid = ty * block_size_x + tx;
    const int a_row = get_group_id(1) * TILE_M;
    const int b_col = get_group_id(0) * TILE_N;

    for (int kt = 0; kt < K; kt += tile_size_k) {
        /* Cooperative, vectorised loads of both tiles: consecutive work-items read consecutive vectors. */
        for (int e = tid; e < TILE_M * (tile_size_k / vector_width); e += block_size_x * block_size_y) {
            const int r = e / (tile_size_k / vector_width);
            const int c = (e % (tile_size_k / vector_width)) * vector_width;
            STOREV(LOADV(A + (a_row + r) * K + kt + c), &As[r][c]);
        }
        for (int e = tid; e < tile_size_k * (TILE_N / vector_width); e += block_size_x * block_size_y) {
            const int r = e / (TILE_N / vector_width);
            const int c = (e % (TILE_N / vector_width)) * vector_width;
            STOREV(LOADV(B + (kt + r) * N + b_col + c), &Bs[r][c]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int k0 = 0; k0 < tile_size_k; k0 += loop_unroll_factor_k) {
            #pragma unroll
            for (int u = 0; u < loop_unroll_factor_k; u++) {
                const int k = k0 + u;
                float a[tile_size_y];
                floatv b[VECS_X];
                #pragma unroll
                for (int i = 0; i < tile_size_y; i++) {
                    a[i] = As[ty + i * block_size_y][k];
                }
                #pragma unroll
                for (int j = 0; j < VECS_X; j++) {
                    b[j] = LOADV(&Bs[k][tx * vector_width + j * STRIDE_X]);
                }
                #pragma unroll
                for (int i = 0; i < tile_size_y; i++) {
                    #pragma unroll
                    for (int j = 0; j < VECS_X; j++) {
                        acc[i][j] += a[i] * b[j];
                    }
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif

    #pragma unroll
    for (int i = 0; i < tile_size_y; i++) {
        #pragma unroll
        for (int j = 0; j < VECS_X; j++) {
            STOREV(acc[i][j], C + (row0 + i * block_size_y) * N + col0 + j * STRIDE_X);
        }
    }
}
