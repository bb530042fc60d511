"""Launch configuration from source: the LS-CAT model reads a CUDA kernel and predicts its block shape.

Only the source is read (no GPU, no compilation): the prediction becomes a space's default and a prior.
"""

import numpy as np

import adaptune as at
from adaptune.predict import launch_config, launch_first, with_predicted_default

source = """extern "C" __global__ void scale(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}"""
x = np.ones(1 << 20, np.float32)
args = [np.zeros_like(x), x, np.int32(x.size)]
shape = launch_config(source, "scale", args=args)
space = with_predicted_default(at.Space({"block_size_x": [32, 64, 128, 256, 512, 1024]}), shape)
print("predicted block shape", shape, "-> default", space.config(space.default_index()))
tiled = at.Space({"block_size_x": [64, 128, 256, 512, 1024], "tile_size_x": [1, 2, 4, 8]})
print("first configuration to try:", launch_first(tiled, source, "scale", args=args))
