"""lang="C": host functions compiled with g++/gcc/nvcc and timed by the float they return (Kernel Tuner's C backend)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from adaptune.backends.host_c import nvcc_options
from adaptune.integrations.kernel_tuner import run_kernel, tune_kernel

# a blocked sum as Kernel Tuner users write C: it times itself and returns milliseconds
BLOCKED_SUM = """
#include <time.h>
float blocked_sum(float *out, const float *x, int n) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    float acc = 0.0f;
    for (int i = 0; i < n; i += block_size_x) {
        float part = 0.0f;
        for (int j = i; j < i + block_size_x && j < n; j++) part += x[j];
        acc += part;
    }
#if block_size_x == 2
    *(volatile int *)0 = 1;          /* this configuration crashes */
#endif
#if block_size_x == 4
    this configuration does not compile;
#endif
#if block_size_x == 16
    acc += 1.0f;                     /* and this one is wrong */
#endif
    out[0] = acc;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0.tv_sec) * 1e3f + (t1.tv_nsec - t0.tv_nsec) * 1e-6f;
}
"""


def sum_args(n=4096):
    x = np.arange(n, dtype=np.float32) % 7
    return [np.zeros(1, np.float32), x, np.int32(n)], [np.array([x.sum()], np.float32), None, None]


def test_a_tuned_c_function_survives_a_crash_a_compile_error_and_a_wrong_result(kt_env):
    args, answer = sum_args()
    results, env = tune_kernel("blocked_sum", BLOCKED_SUM, 1, args, {"block_size_x": [1, 2, 4, 8, 16]},
                               answer=answer, lang="C", iterations=3, quiet=True)
    by = {r["block_size_x"]: r for r in results}
    # Kernel Tuner stops at each of these three; adaptune goes on and lists them beside the results
    failed = {f["block_size_x"]: f["status"] for f in env["failed_results"]}
    assert failed == {2: "launch_error", 4: "compile_error"} and 2 not in by and 4 not in by
    assert 16 not in by and env["wrong_results"] == [{"block_size_x": 16}]
    for b in (1, 8):
        assert "__error__" not in by[b] and len(by[b]["times"]) == 3 and by[b]["time"] > 0
    assert env["best_config"]["block_size_x"] in (1, 8) and env["platform_name"] == "c"


RETURNS_ITS_TIME = """
float configured_time(float *x) {
    x[0] = block_size_x;
    return block_size_x == 3 ? -1.0f : 0.25f * block_size_x;
}
"""


def test_the_returned_float_is_the_time_and_a_negative_one_a_failed_run(kt_env):
    results, env = tune_kernel("configured_time", RETURNS_ITS_TIME, 1, [np.zeros(1, np.float32)],
                             {"block_size_x": [1, 2, 3]}, lang="C", iterations=2, quiet=True)
    assert [(r["block_size_x"], r["time"], r.get("times")) for r in results[:2]] == [(1, 0.25, [0.25, 0.25]),
                                                                                   (2, 0.5, [0.5, 0.5])]
    failed = env["failed_results"]  # (Kernel Tuner would have stopped there)
    assert len(results) == 2 and failed[0]["status"] == "launch_error" and "-1.0" in failed[0]["error"]


PLAIN_C = """
#ifdef __cplusplus
#error compiled as C++
#endif
float scale(double *x, double factor, int n) {
    for (int i = 0; i < n; i++) x[i] *= factor * block_size_x;
    return 1.0f;
}
"""


def test_run_kernel_with_gcc_on_a_c_file_passes_scalars_by_their_dtype(kt_env):
    (kt_env / "scale.c").write_text(PLAIN_C)
    x = np.arange(5, dtype=np.float64)
    out = run_kernel("scale", "scale.c", 5, [x, np.float64(0.5), np.int32(5)], {"block_size_x": 4}, compiler="gcc")
    np.testing.assert_allclose(out[0], x * 2.0)
    assert not np.any(x != np.arange(5))  # the caller's array is not written


def test_an_unknown_compiler_and_a_compiler_for_cuda_are_refused(kt_env):
    with pytest.raises(Exception, match="no-such-cc"):
        tune_kernel("configured_time", RETURNS_ITS_TIME, 1, [np.zeros(1, np.float32)], {"block_size_x": [1]},
                    lang="C", compiler="no-such-cc", quiet=True)
    with pytest.raises(ValueError, match="compiler: .*lang='C'"):
        run_kernel("k", "__global__ void k(float *x) {}", 1, [np.zeros(1, np.float32)], {"block_size_x": 1},
                   compiler="g++")


def test_nvcc_gets_an_architecture_it_builds():
    supported = frozenset({75, 80, 90})
    assert nvcc_options(["-arch=sm_52", "-O3"], 90, supported) == ["-O3", "-arch=sm_90"]
    assert nvcc_options(["-arch", "sm_52"], None, supported) == []
    assert nvcc_options(["--gpu-architecture=sm_80"], 90, supported) == ["-arch=sm_80"]
    assert nvcc_options(["-O3"], 90, supported) == ["-O3", "-arch=sm_90"]


HOST_CU = """
#include <cuda_runtime.h>
extern "C" float twice(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] *= 2 * block_size_x;
    return 1.0f;
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_host_code_is_built_by_nvcc_without_the_architecture_it_rejects(kt_env):
    (kt_env / "twice.cu").write_text(HOST_CU)
    x = np.ones(3, np.float32)
    out = run_kernel("twice", ["twice.cu"], 3, [x, np.int32(3)], {"block_size_x": 3}, lang="C",
                     compiler_options=["-arch=sm_52"])
    np.testing.assert_allclose(out[0], 6.0)


def test_blocks_over_the_threads_a_block_may_have_are_left_out_of_the_space_as_kernel_tuner_does(kt_env, capsys):
    """Kernel Tuner's space drops configurations whose block sizes multiply to over the device's max_threads
    (1 024 for its C backend); they are neither measured nor in the results."""
    args, answer = sum_args()
    params = {"block_size_x": [256, 512, 1024, 2048], "block_size_y": [1, 2], "unused": [0, 1]}
    results, _ = tune_kernel("blocked_sum", BLOCKED_SUM, 1, args, params, answer=answer, lang="C", iterations=1,
                             restrictions=["unused == 0"], verbose=True)
    kept = sorted((r["block_size_x"], r["block_size_y"]) for r in results)
    assert kept == [(256, 1), (256, 2), (512, 1), (512, 2), (1024, 1)]
    assert "Searchspace has 5 configurations after restrictions" in capsys.readouterr().out
