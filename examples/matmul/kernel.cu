/* Tiled matrix multiply C = A * B (row-major, single precision), CUDA twin of kernel.cl.
 *
 *   A is M x K, B is K x N, C is M x N.
 *
 * Each block computes a TILE_M x TILE_N block of C; each thread computes tile_size_y rows
 * x tile_size_x columns of it. Rows are strided by block_size_y and column groups of vector_width
 * by block_size_x * vector_width, so neighbouring threads touch neighbouring memory.
 *
 * Tunable (injected as #defines):
 *   block_size_x, block_size_y  block shape
 *   tile_size_x, tile_size_y    outputs per thread in x (columns) and y (rows)
 *   vector_width                1, 2 or 4: loads/stores of B, C (and A tiles) as float, float2, float4
 *   loop_unroll_factor_k        k iterations per step of the inner loop (manually unrolled)
 *   use_shared_mem              0: read A and B from global memory; 1: stage tiles in shared memory
 *   tile_size_k                 depth of the shared-memory tiles (only used when use_shared_mem == 1)
 *
 * No bounds checks, by design; the search space carries the constraints that make them unneeded:
 *   N % (block_size_x * tile_size_x) == 0, M % (block_size_y * tile_size_y) == 0,
 *   tile_size_x % vector_width == 0, K % loop_unroll_factor_k == 0,
 *   and with use_shared_mem: K % tile_size_k == 0, tile_size_k % loop_unroll_factor_k == 0,
 *   tile_size_k % vector_width == 0, static shared memory <= 48 KiB.
 * Vector loads need 4*vector_width-byte alignment: cudaMalloc'ed buffers and the constraints above give it.
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
#define VECS_X (tile_size_x / vector_width)       /* vectors per thread in x */
#define STRIDE_X (block_size_x * vector_width)    /* columns between a thread's vectors */

#if vector_width == 1
typedef float floatv;
__device__ __forceinline__ floatv zero_v() { return 0.0f; }
__device__ __forceinline__ floatv fma_v(float a, floatv b, floatv c) { return fmaf(a, b, c); }
#elif vector_width == 2
typedef float2 floatv;
__device__ __forceinline__ floatv zero_v() { return make_float2(0.0f, 0.0f); }
__device__ __forceinline__ floatv fma_v(float a, floatv b, floatv c)
{
    return make_float2(fmaf(a, b.x, c.x), fmaf(a, b.y, c.y));
}
#elif vector_width == 4
typedef float4 floatv;
__device__ __forceinline__ floatv zero_v() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
__device__ __forceinline__ floatv fma_v(float a, floatv b, floatv c)
{
    return make_float4(fmaf(a, b.x, c.x), fmaf(a, b.y, c.y), fmaf(a, b.z, c.z), fmaf(a, b.w, c.w));
}
#else
#error "vector_width must be 1, 2 or 4"
#endif

#define LOADV(p) (*reinterpret_cast<const floatv *>(p))
#define STOREV(v, p) (*reinterpret_cast<floatv *>(p) = (v))

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
matmul_kernel(float *__restrict__ C, const float *__restrict__ A, const float *__restrict__ B,
              const int M, const int N, const int K)
{
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE_M + ty;
    const int col0 = blockIdx.x * TILE_N + tx * vector_width;

    floatv acc[tile_size_y][VECS_X];
    #pragma unroll
    for (int i = 0; i < tile_size_y; i++) {
        #pragma unroll
        for (int j = 0; j < VECS_X; j++) {
            acc[i][j] = zero_v();
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
                    acc[i][j] = fma_v(a[i], b[j], acc[i][j]);
                }
            }
        }
    }
#else
    __shared__ __align__(16) float As[TILE_M][tile_size_k];
    __shared__ __align__(16) float Bs[tile_size_k][TILE_N];
    const int tid = ty * block_size_x + tx;
    const int a_row = blockIdx.y * TILE_M;
    const int b_col = blockIdx.x * TILE_N;

    for (int kt = 0; kt < K; kt += tile_size_k) {
        /* Cooperative, vectorised loads of both tiles: consecutive threads read consecutive vectors. */
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
        __syncthreads();

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
                        acc[i][j] = fma_v(a[i], b[j], acc[i][j]);
                    }
                }
            }
        }
        __syncthreads();
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
