"""CUDA kernels compiled ahead in forked processes (``adaptune.measure.compile_ahead``).

On any host: where no binary can come (no NVML, no GPU) the processes say so and every configuration stays
outstanding for the worker; a configuration that does not compile in the processes goes to the worker once,
as soon as that is known, while binaries keep coming for the rest. On a GPU (skipped in CI): real cubins for
the worker's architecture, and a tuning call whose worker loads them instead of compiling, with the same
results as without, and whose failing compiles the worker compiles ahead and reports.
"""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from adaptune.backends import CompileError, make_backend
from adaptune.backends.binary import CompileFailure, KernelBinary
from adaptune.measure import KernelSpec, Measurer, compile_ahead, runners
from adaptune.measure.compile_ahead import CompileAhead, gpu_target, visible_gpus
from adaptune.records import Status
from adaptune.space import Space
from adaptune.tuning import Problem, tune

N = 1 << 16
A = np.arange(N, dtype=np.float32)
OPENCL_TWICE = r"""
__kernel void twice(__global const float *a, __global float *c, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = 2.0f * a[i];
}
"""
SOURCE = r"""
extern "C" __global__ void twice(const float *a, float *c, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = 2.0f * a[i];
}
"""
CONFIGS = [{"block_size_x": b} for b in (64, 128, 256)]
FAILING = SOURCE.replace("extern", "#if block_size_x > 128\n#error too big\n#endif\nextern")  # fails above 128


def _spec() -> KernelSpec:
    return KernelSpec(SOURCE, "twice", [A, np.zeros_like(A), np.int32(N)], problem_size=N,
                      answer=[None, 2 * A, None])


def test_only_the_gpus_cuda_visible_devices_names_are_asked_read_as_cuda_reads_it():
    assert visible_gpus(None) is None  # unset: every GPU of the host
    assert visible_gpus("2") == [2] and visible_gpus("1, 0") == [1, 0]
    assert visible_gpus("GPU-5068ed7f-58af,3") == ["GPU-5068ed7f-58af", 3]
    assert visible_gpus("") == [] and visible_gpus("-1") == []  # none visible: no binaries (the worker says why)
    assert visible_gpus("0,x,1") == [0]  # CUDA stops at the first entry it cannot use
    assert visible_gpus("MIG-abc") is None  # MIG instances: ask every GPU


def test_only_cuda_kernels_are_compiled_ahead_and_the_processes_leave_no_thread():
    with pytest.raises(ValueError, match="for CUDA"):
        CompileAhead(_spec(), "opencl")
    assert CompileAhead.for_tuning(_spec(), "opencl") is None
    ahead = CompileAhead(_spec(), "cuda", processes=2)
    before = threading.active_count()
    ahead.start()
    ahead.compile(CONFIGS)
    ahead.binaries(CONFIGS[0], timeout=60)
    ahead.close()
    assert threading.active_count() == before  # a later worker of this process can still be forked


@pytest.mark.skipif(gpu_target() is not None, reason="this host has GPUs NVML can see")
def test_without_a_gpu_no_binary_comes_and_every_configuration_stays_for_the_worker():
    ahead = CompileAhead(_spec(), "cuda", processes=2)
    ahead.compile(CONFIGS[:1])  # asked before the processes exist: waits for start()
    ahead.start()
    ahead.compile(CONFIGS)
    ahead.expect("sm_90")
    try:
        assert ahead.binaries(CONFIGS[0], timeout=60) == []
        assert ahead.binaries(CONFIGS[2], timeout=60) == []
        assert not ahead.usable
        assert ahead.left_to_worker() == CONFIGS
        assert ahead.left_to_worker() == []  # each named once
    finally:
        ahead.close()


def test_a_compile_error_is_handed_on_and_any_other_failure_left_to_the_worker_once(monkeypatch):
    # forked, the processes inherit these: for 256 a compile error (the worker's own compile would say the same),
    # for 64 no compiler at all (a reason of this process, not of the kernel)
    monkeypatch.setitem(compile_ahead._STATE, "target", "sm_90")

    def compile_binary(platform, target, source, expr, options):
        if "block_size_x 256" in source:
            raise CompileError("NVRTC compilation failed", log="kern.cu(3): error: too big")
        if "block_size_x 64" in source:
            raise ImportError("no NVRTC in this process")
        return KernelBinary("cuda", target, b"a cubin", expr)

    monkeypatch.setattr(runners, "compile_binary", compile_binary)
    ahead = CompileAhead(_spec(), "cuda", processes=2)
    ahead.start()
    ahead.compile(CONFIGS)
    ahead.expect("sm_90")
    try:
        delivered = {c["block_size_x"]: b for config in CONFIGS for c, b in ahead.binaries(config, timeout=60)}
        assert delivered[128].image == b"a cubin"
        assert delivered[256] == CompileFailure("kern.cu(3): error: too big")
        assert ahead.usable  # a failing configuration is not a reason to stop sending binaries
        assert ahead.left_to_worker() == [CONFIGS[0]] and ahead.left_to_worker() == []
    finally:
        ahead.close()


def test_blocks_larger_than_the_gpu_allows_are_not_compiled(monkeypatch):
    # the worker refuses such a configuration unlaunched: a binary for it would be compile time wasted
    monkeypatch.setitem(compile_ahead._STATE, "target", "sm_90")
    compiled = multiprocessing.get_context("fork").Array("i", 4)  # block sizes the processes compiled

    def compile_binary(platform, target, source, expr, options):
        for slot, size in enumerate((64, 128, 256, 512)):
            if f"block_size_x {size}\n" in source:
                compiled[slot] = 1
        return KernelBinary("cuda", target, b"a cubin", expr)

    monkeypatch.setattr(runners, "compile_binary", compile_binary)
    ahead = CompileAhead(_spec(), "cuda", processes=2)
    ahead.compile(CONFIGS)  # asked before the worker said what its GPU allows
    ahead.expect("sm_90", max_threads=128)  # ... which cancels 256, not yet begun
    ahead.start()
    ahead.compile([{"block_size_x": 512}])  # asked after: never compiled
    try:
        delivered = [c["block_size_x"] for config in CONFIGS for c, _ in ahead.binaries(config, timeout=60)]
    finally:
        ahead.close()
    assert sorted(delivered) == [64, 128] and ahead.left_to_worker() == []
    assert list(compiled) == [1, 1, 0, 0]


def test_the_worker_reports_a_compile_error_handed_to_it_without_compiling():
    # any backend's worker takes a CompileFailure in place of a binary: PoCL here, as CUDA on a GPU
    pytest.importorskip("pyopencl")  # the GPU machines have none
    spec = KernelSpec(OPENCL_TWICE, "twice", [A, np.zeros_like(A), np.int32(N)], problem_size=N,
                      answer=[None, 2 * A, None])
    with Measurer(spec, "opencl") as m:
        m.preload([({"block_size_x": 64}, CompileFailure("kern.cu(3): error: too big"))])
        failed = m.measure({"block_size_x": 64})
        ok = m.measure({"block_size_x": 128})
        compiles = m.stats()["compiles"]
    assert failed.status == Status.COMPILE_ERROR and "error: too big" in failed.error
    assert ok.ok and compiles == 1  # only the configuration with no error handed over was compiled


@pytest.mark.skipif(gpu_target() is None, reason="needs an NVIDIA GPU that NVML sees (and CuPy)")
def test_on_a_gpu_the_worker_loads_the_binaries_and_tunes_as_without_them(tmp_path):

    target = make_backend("cuda", 0).binary_target()
    assert gpu_target() == target
    ahead = CompileAhead(_spec(), "cuda", processes=2)
    ahead.start()
    ahead.compile(CONFIGS)
    ahead.expect(target)
    try:
        got = ahead.binaries(CONFIGS[0], timeout=60) + ahead.binaries(CONFIGS[2], timeout=60)
        got += ahead.binaries(CONFIGS[1], timeout=60)
    finally:
        ahead.close()
    assert sorted(c["block_size_x"] for c, _ in got) == [64, 128, 256]
    assert all(b.target == target for _, b in got) and ahead.usable and ahead.left_to_worker() == []
    problem = Problem("twice", _spec(), Space({"block_size_x": [64, 128, 256, 512]}))
    report = tune(problem, backend="cuda", db=str(tmp_path / "a.db"), progress=False)
    assert report.worker_stats["loaded_binaries"] >= 1  # compiled ahead here, loaded there
    assert all(r.ok for r in report.results) and len(report.results) == 4
    spec = KernelSpec(FAILING, "twice", [A, np.zeros_like(A), np.int32(N)], problem_size=N, answer=[None, 2 * A, None])
    report = tune(Problem("twice", spec, Space({"block_size_x": [64, 128, 256, 512]})), backend="cuda",
                  db=str(tmp_path / "b.db"), progress=False)
    by_block = {r.config["block_size_x"]: r for r in report.results}
    assert by_block[64].ok and by_block[128].ok
    assert all("too big" in by_block[b].error for b in (256, 512))  # the compile processes' error, handed on
    assert report.worker_stats["prefetched"] == 0  # ... so the worker's pool was handed none to compile again
