"""Kernels written the way Kernel Tuner users write them (OpenCL, for PoCL)."""

VECTOR_ADD = """
__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
"""

# 2D: each work-item scales tile_size_x elements of a row; grid_div_x = block_size_x * tile_size_x
SCALE_2D = """
__kernel void scale(__global float *out, __global const float *in, int width, int height) {
    int y = get_global_id(1);
    int x0 = get_global_id(0) * tile_size_x;
    for (int t = 0; t < tile_size_x; t++) {
        int x = x0 + t;
        if (x < width && y < height) {
            out[y * width + x] = FACTOR * in[y * width + x];
        }
    }
}
"""
