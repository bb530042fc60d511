"""The drop-in on an NVIDIA GPU: constant memory, tunable template arguments, dynamic shared memory, NVML.

Skipped where CuPy or a GPU is missing (CI); the GPU run is ``pytest -q tests/integrations/test_kernel_tuner_cuda.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adaptune.integrations import kernel_tuner as drop_in

NVMLObserver = pytest.importorskip("kernel_tuner.observers.nvml").NVMLObserver  # Kernel Tuner's own object


def _gpu_present() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    import cupy

    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - CuPy without a driver
        return False


pytestmark = pytest.mark.skipif(not _gpu_present(), reason="needs CuPy and an NVIDIA GPU")

WEIGHTED = r"""
__constant__ float weights[4];

template<typename T, int bs>
__global__ void weighted(T *out, const T *x, int n) {
    extern __shared__ float scratch[];
    int i = blockIdx.x * bs + threadIdx.x;
    scratch[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = scratch[threadIdx.x] * weights[i % 4];
}
"""


@pytest.fixture
def gpu_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(drop_in, "settings", drop_in.DropInSettings(db=str(tmp_path / "adaptune.db")))


def test_constant_memory_templates_shared_memory_and_nvml(gpu_env):
    n = 1 << 16
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    w = np.array([1, 2, 3, 4], dtype=np.float32)
    expected = x * np.tile(w, n // 4)
    args = [np.zeros_like(x), x, np.int32(n)]
    results, env = drop_in.tune_kernel(
        "weighted<float, block_size_x>", WEIGHTED, n, args, {"block_size_x": [64, 128, 256]},
        cmem_args={"weights": w}, smem_args={"size": lambda p: 4 * p["block_size_x"]},
        answer=[expected, None, None], observers=[NVMLObserver(["nvml_energy", "temperature"])], lang="CuPy", quiet=True)
    assert all("__error__" not in r for r in results), [r.get("adaptune_error") for r in results]
    assert all(r["nvml_energy"] > 0 and r["temperature"] > 0 for r in results)
    out = drop_in.run_kernel("weighted<float, block_size_x>", WEIGHTED, n, args, {"block_size_x": 128},
                             cmem_args={"weights": w}, smem_args={"size": 512}, lang="CUDA")
    np.testing.assert_allclose(out[0], expected, rtol=1e-6)
    assert env["device_name"]


# lang="C" with CUDA host code, as Kernel Tuner's pnpoly_cupy.py: the kernel reads and writes the arguments'
# host memory through device-mapped pointers and the function returns its own event time
HOST_LAUNCH = r"""
#include <cuda_runtime.h>
__global__ void twice_kernel(float *out, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
extern "C" float twice_on_gpu(float *out, const float *x, int n) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    twice_kernel<<<(n + block_size_x - 1) / block_size_x, block_size_x>>>(out, x, n);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return cudaGetLastError() == cudaSuccess ? ms : -1.0f;
}
"""


def test_c_host_code_built_by_nvcc_for_this_gpu_on_mapped_memory(gpu_env, tmp_path):
    (tmp_path / "twice_host.cu").write_text(HOST_LAUNCH)
    x = np.random.default_rng(0).random(1 << 16, dtype=np.float32)
    results, env = drop_in.tune_kernel("twice_on_gpu", "twice_host.cu", x.size, [np.zeros_like(x), x, np.int32(x.size)],
                                       {"block_size_x": [64, 256]}, answer=[2 * x, None, None], lang="C",
                                       compiler_options=["-arch=sm_52"], quiet=True)  # an arch CUDA 13 rejects
    assert all("__error__" not in r for r in results), [r.get("adaptune_error") for r in results]
    assert all(r["time"] > 0 for r in results) and env["platform_name"] == "c"


FORK_PROBE = """
import json, sys
import numpy as np
import cupy  # loads CUDA's driver library; nothing is initialised yet
from adaptune import tune_kernel

source = "__global__ void add(float *c, const float *a, int n) { int i = blockIdx.x * block_size_x + threadIdx.x; if (i < n) c[i] = a[i] + 1.0f; }"
n = 1 << 20
args = [np.zeros(n, np.float32), np.ones(n, np.float32), np.int32(n)]
starts = [tune_kernel("add", source, n, args, {"block_size_x": [128, 256]}, quiet=True)[1]["worker_start"]]
cupy.zeros(1)  # a CUDA context in this process: a fork now would hand the child a dead one
starts.append(tune_kernel("add", source, n, args, {"block_size_x": [512]}, quiet=True)[1]["worker_start"])
print(json.dumps(starts))
"""


def test_the_worker_is_forked_after_importing_cupy_and_execd_once_cuda_is_initialised(tmp_path):
    here = str(Path(drop_in.__file__).resolve().parents[2])  # the adaptune being tested, whatever put it on the path
    env = {**os.environ, "ADAPTUNE_DB": str(tmp_path / "adaptune.db"),
           "PYTHONPATH": os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = subprocess.run([sys.executable, "-c", FORK_PROBE], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    first, second = json.loads(out.stdout.strip().splitlines()[-1])
    assert first == "fork"
    assert second.startswith("exec (a device driver is initialised") and "/dev/nvidia" in second
