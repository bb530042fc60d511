"""The CUDA backend, NVML observer and CuPy-timed Python variants, on a real NVIDIA GPU.

Skipped where CuPy or a GPU is missing (CI). On a GPU box run it with ``pytest -s`` to see the
measured numbers; it also runs as a script where pytest is not installed.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np

from adaptune.backends.binary import compile_binary
from adaptune.backends.cuda import CUDABackend
from adaptune.measure import CallableSpec, KernelSpec, Measurer, MeasureSettings
from adaptune.measure.runners import kernel_source
from adaptune.records import Status
from adaptune.space import Space
from adaptune.tuning import Problem, tune

try:
    import pytest
except ImportError:  # the GPU machine may lack pytest: the __main__ block below runs the tests
    pytest = None


def _gpu_present() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    import cupy

    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # CuPy without a driver
        return False


if pytest is not None:
    pytestmark = pytest.mark.skipif(not _gpu_present(), reason="needs CuPy and an NVIDIA GPU")

N = 1 << 20
rng = np.random.default_rng(3)
A = rng.random(N, dtype=np.float32) + 0.5
B = rng.random(N, dtype=np.float32)

SOURCE = r"""
extern "C" __global__ void vadd(float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
#if mode == 1
    if (i < n) c[i] = a[i] - b[i];
#elif mode == 2
    volatile float *va = a;
    while (va[0] >= 0.0f) { }
#elif mode == 3
    ((float *)16)[i] = 1.0f;
#elif mode == 4
    if (i < n) { a[i] = 2.0f * a[i]; c[i] = a[i] + b[i]; }
#else
    if (i < n) c[i] = a[i] + b[i];
#endif
}
"""

TEMPLATED = r"""
template <int BS, typename T>
__global__ void tadd(const T *a, const T *b, T *c, int n) {
    int i = blockIdx.x * BS + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i] + (T)EXTRA;
}
"""


def spec(**kw) -> KernelSpec:
    kw.setdefault("answer", [None, None, A + B, None])
    return KernelSpec(SOURCE, "vadd", [A, B, np.zeros_like(A), np.int32(N)], problem_size=N, **kw)


def test_cuda_measures_with_nvml_and_survives_faults():
    settings = MeasureSettings(repeats=20, timeout_s=5.0, observers=("nvml",))
    with Measurer(spec(), "cuda", settings) as m:
        info = m.device_info()
        ok = m.measure({"block_size_x": 256, "mode": 0})
        wrong = m.measure({"block_size_x": 256, "mode": 1})
        too_big = m.measure({"block_size_x": 2048, "mode": 0})
        broken = m.measure({"block_size_x": 256, "mode": "0 +"})
        illegal = m.measure({"block_size_x": 256, "mode": 3})
        after_illegal = m.measure({"block_size_x": 128, "mode": 0})
        endless = m.measure({"block_size_x": 256, "mode": 2})
        after_endless = m.measure({"block_size_x": 512, "mode": 0})
        restarts = m.restarts
    print(f"\n{info.name} driver {info.driver} cc {info.properties['compute_capability']}")
    print(f"vadd n={N}: {ok.time_ms * 1e3:.1f} us median, {3 * 4 * N / ok.time_ms / 1e6:.0f} GB/s, "
          f"compile {ok.compile_ms:.0f} ms, observers {ok.observers}")
    for r in (wrong, too_big, broken, illegal, endless):
        print(f"  {r.config}: {r.status} - {r.error[:150]!r}")
    assert info.platform == "cuda"
    assert ok.ok and len(ok.samples) == 20 and ok.time_ms > 0, ok.error
    assert {"sm_clock_mhz", "temperature_c", "power_w"} <= set(ok.observers)
    assert wrong.status == Status.WRONG_RESULT
    assert too_big.status == Status.LAUNCH_ERROR and "not launched" in too_big.error
    assert broken.status == Status.COMPILE_ERROR
    assert illegal.status == Status.LAUNCH_ERROR
    assert after_illegal.ok, after_illegal.error
    assert endless.status == Status.TIMEOUT
    assert after_endless.ok, after_endless.error
    assert restarts == 2


def test_cuda_restores_inputs_and_prefetches():
    configs = [{"block_size_x": b, "mode": 4} for b in (64, 128, 256, 1024)]
    with Measurer(spec(answer=[None, None, 2 * A + B, None]), "cuda", MeasureSettings(repeats=5)) as m:
        m.prefetch(configs)
        results = [m.measure(c) for c in configs]
        stats = m.stats()
    print(f"\nprefetch stats {stats}; times (us) {[round(r.time_ms * 1e3, 1) for r in results]}")
    assert all(r.ok for r in results), [r.error for r in results]
    assert stats["compiles"] == 4 and stats["prefetched"] == 4


def test_cuda_template_parameters():
    s = KernelSpec(TEMPLATED, "tadd", [A, B, np.zeros_like(A), np.int32(N)], problem_size=N,
                   template_params=["block_size_x", "T"], defines={"EXTRA": 1}, answer=[None, None, A + B + 1, None])
    with Measurer(s, "cuda", MeasureSettings(repeats=5)) as m:
        r = m.measure({"block_size_x": 128, "T": "float"})
    assert r.ok, r.error


WITH_CUB = r"""
#include <cub/cub.cuh>
extern "C" __global__ void warp_sums(const float *a, float *c, int n) {
    typedef cub::WarpReduce<float> WarpReduce;
    __shared__ typename WarpReduce::TempStorage temp[block_size_x / 32];
    int i = blockIdx.x * block_size_x + threadIdx.x;
    float sum = WarpReduce(temp[threadIdx.x / 32]).Sum(i < n ? a[i] : 0.0f);
    if (threadIdx.x % 32 == 0 && i < n) c[i / 32] = sum;
}
"""


def test_a_kernel_whose_headers_hold_host_code_is_built_by_nvcc_in_the_worker_and_ahead(tmp_path):
    # CUB's headers hold host code: NVRTC refuses them ("not allowed in JIT mode"), Kernel Tuner's lang="CUDA"
    # builds them with nvcc, and so does the CUDA backend, in its worker and in the compile processes alike
    sums = A.reshape(-1, 32).sum(axis=1, dtype=np.float32)
    s = KernelSpec(WITH_CUB, "warp_sums", [A, np.zeros_like(sums), np.int32(N)], problem_size=N,
                   answer=[None, sums, None], atol=1e-4)
    with Measurer(s, "cuda", MeasureSettings(repeats=3)) as m:
        r = m.measure({"block_size_x": 256})
    assert r.ok, r.error
    target = CUDABackend(0).binary_target()
    _, _, _, full, expr = kernel_source(s, {"block_size_x": 128}, "cuda")
    binary = compile_binary("cuda", target, full, expr, ())
    assert binary.symbol == "warp_sums" and binary.target == target
    report = tune(Problem("warp_sums", s, Space({"block_size_x": [64, 128, 256, 512]})), backend="cuda",
                  db=str(tmp_path / "cub.db"), progress=False)
    assert all(r.ok for r in report.results) and len(report.results) == 4, [r.error for r in report.results]


SHARED = r"""
extern "C" __global__ void via_shared(const float *a, float *c, int n) {
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x * pad] = i < n ? a[i] : 0.0f;
    __syncthreads();
    if (i < n) c[i] = 2.0f * tile[threadIdx.x * pad];
}
"""


def test_cuda_dynamic_shared_memory_also_above_48k():
    s = KernelSpec(SHARED, "via_shared", [A, np.zeros_like(A), np.int32(N)], problem_size=N,
                   shared_mem="block_size_x * pad * 4", answer=[None, 2 * A, None])
    with Measurer(s, "cuda", MeasureSettings(repeats=5)) as m:
        small = m.measure({"block_size_x": 256, "pad": 1})  # 1 KiB
        large = m.measure({"block_size_x": 256, "pad": 64})  # 64 KiB: needs the opt-in attribute
        too_large = m.measure({"block_size_x": 256, "pad": 1024})  # 1 MiB
    print(f"\nshared memory: {small.time_ms * 1e3:.1f} us (1 KiB), {large.time_ms * 1e3:.1f} us (64 KiB); "
          f"{too_large.error}")
    assert small.ok and large.ok, (small.error, large.error)
    assert too_large.status == Status.LAUNCH_ERROR and "not launched" in too_large.error


def test_energy_over_many_repeats():
    n = 1 << 26
    a = np.ones(n, np.float32)
    s = KernelSpec(SOURCE, "vadd", [a, a, np.zeros_like(a), np.int32(n)], problem_size=n, restore_inputs=False)
    with Measurer(s, "cuda", MeasureSettings(repeats=500, observers=("nvml",))) as m:
        r = m.measure({"block_size_x": 256, "mode": 0})
    print(f"\nvadd n={n} x500: {r.time_ms:.3f} ms median ({3 * 4 * n / r.time_ms / 1e6:.0f} GB/s), "
          f"benchmark {r.benchmark_ms:.0f} ms, observers {r.observers}")
    assert r.ok and r.observers.get("energy_j", 0) > 0


def cupy_add(config, a, b):
    import cupy

    out = cupy.empty_like(a)
    cupy.add(a, b, out=out)
    return out


def test_python_variant_on_cupy_is_timed_with_events():
    import cupy

    s = CallableSpec(cupy_add, [cupy.asarray(A), cupy.asarray(B)], answer=[A + B])
    with Measurer(s, "python", MeasureSettings(repeats=10)) as m:
        r = m.measure({})
        info = m.device_info()
    print(f"\ncupy add via CallableSpec: {r.time_ms * 1e3:.1f} us median")
    assert r.ok and math.isfinite(r.time_ms), r.error
    assert info.platform == "cuda"  # the GPU the variant runs on, not the host CPU


class _LateLaunch:
    """A kernel whose launch the host enqueues 50 us late (a worker's compile thread holding the interpreter)."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, *args, **kwargs):
        import time

        until = time.perf_counter() + 50e-6
        while time.perf_counter() < until:
            pass
        return self.kernel(*args, **kwargs)


def test_the_hold_keeps_the_hosts_enqueue_out_of_a_short_kernels_timed_window():
    from adaptune.backends.cuda import CUDABackend

    backend = CUDABackend(0)
    kernel = backend.compile('extern "C" __global__ void nothing() {}', "nothing")
    late = _LateLaunch(kernel)
    windows = {}
    for hold in (False, True):
        backend.hold_before_short_launches = hold
        times = [backend.time_launch(late, (1,), (1,), []) for _ in range(5)]
        assert not backend.last_launch_held_up
        windows[hold] = min(times)
    print(f"\nan empty kernel enqueued 50 us late: window {windows[False] * 1e3:.1f} us without the hold, "
          f"{windows[True] * 1e3:.1f} us with it")
    assert windows[False] >= 0.05  # the start event fired on an idle stream: the window holds the host's 50 us
    assert windows[True] < 0.05  # the hold kept the stream busy until the launch was in: the kernel alone
    backend.close()


if __name__ == "__main__":
    if not _gpu_present():
        raise SystemExit("needs CuPy and an NVIDIA GPU")
    failed = 0
    for name, fn in list(globals().items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                print(f"PASS {name}")
            except Exception as exc:
                failed += 1
                print(f"FAIL {name}: {type(exc).__name__}: {exc}")
    raise SystemExit(1 if failed else 0)
