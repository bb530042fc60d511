/* 2-D convolution (cross-correlation, as in Kernel Tuner's convolution example), CUDA twin of kernel.cl.
 *
 *   output[y][x] = sum_{i<filter_height, j<filter_width} input[y + i][x + j] * filter[i][j]
 *
 * The input is pre-padded: (image_height + filter_height - 1) x (image_width + filter_width - 1),
 * the output is image_height x image_width, both row-major.
 *
 * Tunable (injected as #defines):
 *   block_size_x, block_size_y  block shape
 *   tile_size_x, tile_size_y    outputs per thread, strided by the block size (coalesced)
 *   use_shared_mem              1: stage the block's input tile (+ border) in shared memory
 *   use_padding                 1: pad each shared-memory row by one float against bank conflicts
 *   read_only                   1: read global input through the read-only data cache (__ldg)
 *   filter_width, filter_height fixed per problem, passed as #defines so loops have constant bounds
 *
 * No bounds checks: the space requires image_width % (block_size_x * tile_size_x) == 0 and
 * image_height % (block_size_y * tile_size_y) == 0, and static shared memory <= 48 KiB.
 * Launch: grid = (image_width / (block_size_x * tile_size_x), image_height / (block_size_y * tile_size_y)).
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
#ifndef use_shared_mem
#define use_shared_mem 1
#endif
#ifndef use_padding
#define use_padding 0
#endif
#ifndef read_only
#define read_only 0
#endif
#ifndef filter_width
#define filter_width 15
#endif
#ifndef filter_height
#define filter_height 15
#endif

#define border_width (filter_width - 1)
#define border_height (filter_height - 1)
#define TILE_W (block_size_x * tile_size_x)
#define TILE_H (block_size_y * tile_size_y)
#define SH_W (TILE_W + border_width + use_padding)
#define SH_H (TILE_H + border_height)

#if read_only == 1
#define LOAD_INPUT(idx) __ldg(&input[(idx)])
#else
#define LOAD_INPUT(idx) input[(idx)]
#endif

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
convolution_kernel(float *__restrict__ output, const float *__restrict__ input,
                   const float *__restrict__ filter, const int image_width, const int image_height)
{
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int x0 = blockIdx.x * TILE_W;
    const int y0 = blockIdx.y * TILE_H;
    const int input_width = image_width + border_width;

    float sum[tile_size_y][tile_size_x];
    #pragma unroll
    for (int yi = 0; yi < tile_size_y; yi++) {
        #pragma unroll
        for (int xi = 0; xi < tile_size_x; xi++) {
            sum[yi][xi] = 0.0f;
        }
    }

#if use_shared_mem == 1
    __shared__ float sh_input[SH_H][SH_W];
    for (int i = ty; i < SH_H; i += block_size_y) {
        for (int j = tx; j < TILE_W + border_width; j += block_size_x) {
            sh_input[i][j] = LOAD_INPUT((y0 + i) * input_width + x0 + j);
        }
    }
    __syncthreads();
#define IN(r, c) sh_input[(r)][(c)]
#else
#define IN(r, c) LOAD_INPUT((y0 + (r)) * input_width + x0 + (c))
#endif

    for (int i = 0; i < filter_height; i++) {
        #pragma unroll
        for (int j = 0; j < filter_width; j++) {
            const float f = filter[i * filter_width + j];
            #pragma unroll
            for (int yi = 0; yi < tile_size_y; yi++) {
                #pragma unroll
                for (int xi = 0; xi < tile_size_x; xi++) {
                    sum[yi][xi] += IN(ty + yi * block_size_y + i, tx + xi * block_size_x + j) * f;
                }
            }
        }
    }

    #pragma unroll
    for (int yi = 0; yi < tile_size_y; yi++) {
        #pragma unroll
        for (int xi = 0; xi < tile_size_x; xi++) {
            output[(y0 + ty + yi * block_size_y) * image_width + x0 + tx + xi * block_size_x] = sum[yi][xi];
        }
    }
}
