/* 2-D convolution (cross-correlation, as in Kernel Tuner's convolution example), OpenCL twin of kernel.cu.
 *
 *   output[y][x] = sum_{i<filter_height, j<filter_width} input[y + i][x + j] * filter[i][j]
 *
 * The input is pre-padded: (image_height + filter_height - 1) x (image_width + filter_width - 1),
 * the output is image_height x image_width, both row-major.
 *
 * Tunable (injected as #defines):
 *   block_size_x, block_size_y  work-group shape
 *   tile_size_x, tile_size_y    outputs per work-item, strided by the block size (coalesced)
 *   use_shared_mem              1: stage the work-group's input tile (+ border) in local memory
 *   use_padding                 1: pad each local-memory row by one float (bank conflicts on GPUs)
 *   filter_width, filter_height fixed per problem, passed as #defines so loops have constant bounds
 *
 * No bounds checks: the space requires image_width % (block_size_x * tile_size_x) == 0 and
 * image_height % (block_size_y * tile_size_y) == 0.
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
#ifndef filter_width
#define filter_width 7
#endif
#ifndef filter_height
#define filter_height 7
#endif

#define border_width (filter_width - 1)
#define border_height (filter_height - 1)
#define TILE_W (block_size_x * tile_size_x)
#define TILE_H (block_size_y * tile_size_y)
#define SH_W (TILE_W + border_width + use_padding)
#define SH_H (TILE_H + border_height)

__kernel void convolution_kernel(__global float *output, __global const float *input,
                                 __constant float *filter, const int image_width, const int image_height)
{
    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int x0 = get_group_id(0) * TILE_W;
    const int y0 = get_group_id(1) * TILE_H;
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
    __local float sh_input[SH_H][SH_W];
    for (int i = ty; i < SH_H; i += block_size_y) {
        for (int j = tx; j < TILE_W + border_width; j += block_size_x) {
            sh_input[i][j] = input[(y0 + i) * input_width + x0 + j];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#define IN(r, c) sh_input[(r)][(c)]
#else
#define IN(r, c) input[(y0 + (r)) * input_width + x0 + (c)]
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
