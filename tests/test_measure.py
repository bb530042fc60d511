"""The measurement worker end to end: real OpenCL kernels on PoCL, real worker processes.

One kernel source with a ``mode`` parameter selects the behaviour (correct, wrong, endless,
crashing...), so a single worker exercises faults and the respawns after them.
"""

from __future__ import annotations

import ctypes
import math
import os
import pickle
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from adaptune.measure import (
    CallableSpec,
    GeneratedSources,
    KernelSpec,
    Measurer,
    MeasureSettings,
    MeasureSetupError,
    SpecError,
    process,
    worker_boot,
)
from adaptune.measure.runners import KernelRunner
from adaptune.records import Status

N = 300  # not a multiple of the block sizes: the bounds check matters
MODES_SOURCE = """
__kernel void vadd(__global float *a, __global const float *b, __global float *c, const int n) {
    int i = get_global_id(0);
#if mode == 1                      /* wrong values */
    if (i < n) c[i] = a[i] - b[i];
#elif mode == 2                    /* never ends: a volatile load the compiler cannot drop */
    volatile __global float *va = a;
    while (va[0] >= 0.0f) { }
#elif mode == 3                    /* writes one element too far: out-of-range index */
    if (i < n) c[i + 1] = a[i] + b[i];
#elif mode == 4                    /* crashes the process: a write far outside any buffer */
    __global float *far = c + ((long)1 << 40);
    far[i] = 1.0f;
#elif mode == 5                    /* writes nothing at all */
#else
    if (i < n) c[i] = a[i] + b[i];
#endif
}
"""

rng = np.random.default_rng(7)
A = rng.random(N, dtype=np.float32) + 0.5  # positive: mode 2's loop condition holds forever
B = rng.random(N, dtype=np.float32)


def modes_spec(**kw) -> KernelSpec:
    return KernelSpec(MODES_SOURCE, "vadd", [A.copy(), B, np.zeros_like(A), np.int32(N)], problem_size=N,
                      answer=[None, None, A + B, None], **kw)


SETTINGS = MeasureSettings(repeats=5, warmup=1, timeout_s=3.0)


@pytest.fixture(scope="module")
def measurer():
    with Measurer(modes_spec(), "opencl", SETTINGS) as m:
        yield m


def cfg(mode: int = 0, block: int = 64) -> dict:
    return {"block_size_x": block, "mode": mode}


def test_correct_kernel_is_ok_with_all_samples(measurer):
    r = measurer.measure(cfg())
    assert r.status == Status.OK, r.error
    assert len(r.samples) == 5 and all(s > 0 for s in r.samples)
    assert r.time_ms == statistics.median(r.samples)
    assert r.compile_ms > 0 and r.verify_ms > 0 and r.benchmark_ms > 0
    assert measurer.device_info().platform.startswith("opencl:")


def test_wrong_values_are_wrong_result(measurer):
    r = measurer.measure(cfg(mode=1))
    assert r.status == Status.WRONG_RESULT and math.isinf(r.time_ms)
    assert "output 2" in r.error and "values differ" in r.error


def test_out_of_range_index_is_wrong_result(measurer):
    r = measurer.measure(cfg(mode=3))
    assert r.status == Status.WRONG_RESULT
    assert "first at 0" in r.error  # element 0 is never written: the NaN poison shows it


def test_poison_catches_a_kernel_that_writes_nothing():
    # the output buffer already holds the right answer, so only poisoning can reveal the bug
    spec = KernelSpec(MODES_SOURCE, "vadd", [A, B, A + B, np.int32(N)], problem_size=N,
                      answer=[None, None, A + B, None])
    with Measurer(spec, "opencl", MeasureSettings(repeats=1)) as m:
        lazy = m.measure(cfg(mode=5))
        good = m.measure(cfg(mode=0))
    assert lazy.status == Status.WRONG_RESULT and "not finite" in lazy.error
    assert good.status == Status.OK


def test_syntax_error_is_compile_error_with_the_compiler_message(measurer):
    r = measurer.measure(cfg(mode="0 +"))  # "#if mode == 0 +" does not parse
    assert r.status == Status.COMPILE_ERROR
    assert "error" in r.error and "invalid token" in r.error
    assert ".cl:4:" in r.error  # the line in the user's source, not shifted by the injected #defines


def test_block_too_large_is_refused_without_launch(measurer):
    too_big = measurer.device_info().properties["max_work_group_size"] * 2
    r = measurer.measure(cfg(block=too_big))
    assert r.status == Status.LAUNCH_ERROR
    assert "not launched" in r.error and str(too_big) in r.error
    assert r.compile_ms == 0.0  # refused before it was even compiled


def test_endless_kernel_times_out_and_the_next_config_works(measurer):
    restarts = measurer.restarts
    t0 = time.monotonic()
    r = measurer.measure(cfg(mode=2))
    waited = time.monotonic() - t0
    assert r.status == Status.TIMEOUT and "killed" in r.error
    assert waited >= SETTINGS.timeout_s
    assert measurer.restarts == restarts + 1
    after = measurer.measure(cfg(block=32))
    assert after.status == Status.OK, after.error


def test_crashing_kernel_is_launch_error_and_the_next_config_works(measurer):
    r = measurer.measure(cfg(mode=4))
    assert r.status == Status.LAUNCH_ERROR
    assert "died" in r.error and "SIGSEGV" in r.error
    after = measurer.measure(cfg(block=128))
    assert after.status == Status.OK, after.error


def test_settling_runs_the_kernel_until_its_speed_is_steady_before_timing_it():
    with Measurer(modes_spec(), "opencl", MeasureSettings(repeats=3, settle=True)) as m:
        result = m.measure(cfg(block=32))
        stats = m.stats()
    assert result.ok and len(result.samples) == 3
    assert 6 <= stats["settle_runs"] <= 20


SPIN_SOURCE = """
__kernel void spin(__global uint *out, const uint iters) {  /* a serial LCG chain: its length is its run time */
    uint h = 12345u;
    for (uint k = 0; k < iters; k++) h = h * 1664525u + 1013904223u;
    out[0] = h;
}
"""


def _lcg(n: int, h: int = 12345, a: int = 1664525, c: int = 1013904223) -> int:
    """``n`` steps of the kernel's LCG at once (affine maps composed by squaring)."""
    m, mul, add = 1 << 32, 1, 0
    while n:
        if n & 1:
            mul, add = mul * a % m, (add * a + c) % m
        a, c, n = a * a % m, (c * a + c) % m, n >> 1
    return (mul * h + add) % m


def test_a_long_warm_up_after_the_verification_is_kept_as_the_first_sample():
    """A kernel of about 0.4 s (300 M dependent steps on one work-item): its warm-up, after the verification
    launch paid the work-group compile, is a whole run, kept as the first of the two samples; a short kernel's
    warm-up is thrown away as before."""
    runs = {}
    for iters in (1_000, 300_000_000):
        spec = KernelSpec(SPIN_SOURCE, "spin", [np.zeros(1, np.uint32), np.uint32(iters)], problem_size=1,
                          answer=[np.array([_lcg(iters)], np.uint32), None])
        with Measurer(spec, "opencl", MeasureSettings(repeats=2)) as m:
            runs[iters] = (m.measure({"block_size_x": 1}), m.stats())
    short, short_stats = runs[1_000]
    long, long_stats = runs[300_000_000]
    assert short.ok and long.ok, (short.error, long.error)  # the answer checks that every step ran
    assert short_stats["kept_warmups"] == 0 and len(short.samples) == 2
    assert long_stats["kept_warmups"] == 1 and len(long.samples) == 2


def test_prefetch_compiles_ahead_in_the_pool():
    configs = [cfg(block=b) for b in (16, 32, 64)]
    with Measurer(modes_spec(), "opencl", MeasureSettings(repeats=1, warmup=0)) as m:
        m.prefetch(configs)
        m.prefetch(configs)  # asking twice compiles once
        results = [m.measure(c) for c in configs]
        again = m.measure(configs[0])  # in-memory binary cache: no compile
        stats = m.stats()
    assert all(r.ok for r in results)
    assert all(r.compile_ms > 0 for r in results) and again.compile_ms == 0.0
    assert stats["prefetched"] == 3 and stats["compiles"] == 3
    assert stats["compiled_ahead"] + stats["compile_waits"] == 3


def test_a_worker_started_ahead_measures_and_one_left_untaken_is_stopped():
    with process.spare_worker("opencl", None):
        spare = process._spares[process.warm_argument("opencl", None)]
        with Measurer(modes_spec(), "opencl", SETTINGS) as m:
            assert not process._spares  # taken, not started twice
            result = m.measure(cfg())
            phases = m.start_phases  # seconds from the worker's start to each moment of it
        assert result.ok, result.error
        assert phases["imported"] <= phases["device_opened"] <= phases["runner_ready"] <= phases["ready_seen"]
        assert phases["imported"] <= phases["setup_received"] <= phases["runner_ready"]
        spare.proc.wait(10)  # closed: it exits on its own
    with process.spare_worker("opencl", None):
        unused = process._spares[process.warm_argument("opencl", None)]
    assert unused.proc.poll() is not None and not process._spares


def test_the_worker_starts_without_the_parents_modules_and_generated_texts_add_none():
    """A worker's start is a tuning call's fixed cost: it imports neither the parent's side (Measurer, cloudpickle)
    nor, for a generator's texts made ahead (GeneratedSources), the layers above measurement."""
    code = ("import sys, pickle, adaptune.measure.worker as w; pickle.loads(sys.stdin.buffer.read()); "
            "print(sorted(m for m in sys.modules if m in ('cloudpickle', 'sklearn') or 'measurer' in m "
            "or m.startswith(('adaptune.search', 'adaptune.integrations'))))")
    texts = GeneratedSources(("mode",), {(0,): MODES_SOURCE, (1,): MODES_SOURCE.replace("a[i] - b[i]", "0")})
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(texts), capture_output=True,
                         env=process.child_env(), check=True)
    assert out.stdout.decode().strip() == "[]", out.stderr.decode()
    spec = KernelSpec(texts, "vadd", [A.copy(), B, np.zeros_like(A), np.int32(N)], problem_size=N,
                      answer=[None, None, A + B, None])
    with Measurer(spec, "opencl", MeasureSettings(repeats=1, warmup=0)) as m:
        assert m.measure(cfg(0)).ok and m.measure(cfg(1)).status is Status.WRONG_RESULT


def test_an_execd_workers_entry_imports_nothing_heavy_before_it_starts_cudas_driver():
    """``worker_boot`` starts CUDA's driver before the worker's imports (so they overlap): it must not import NumPy
    or CuPy itself, and it reads the device from ``WARM`` (another backend's starts nothing)."""
    code = ("import sys, adaptune.measure.worker_boot; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'cupy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, env=process.child_env(), check=True)
    assert out.stdout.decode().strip() == "[]", out.stderr.decode()
    assert worker_boot.cuda_device(["3", "4", '["cuda", 1]']) == (True, 1)
    assert worker_boot.cuda_device(["3", "4", '["opencl", [0, 0]]'])[0] is False
    assert worker_boot.cuda_device(["3", "4"]) == (False, None)
    assert worker_boot.cuda_device(["3", "4", "not json"]) == (False, None)


IN_PLACE_SOURCE = """
__kernel void scale(__global float *a, __global const float *b, __global float *c, const int n) {
    int i = get_global_id(0);
    if (i < n) { a[i] = 2.0f * a[i]; c[i] = a[i] + b[i]; }
}
"""


@pytest.mark.parametrize("restore", [True, False])
def test_inputs_modified_by_the_kernel_are_restored_between_runs(restore):
    spec = KernelSpec(IN_PLACE_SOURCE, "scale", [A, B, np.zeros_like(A), np.int32(N)], problem_size=N,
                      answer=[None, None, 2 * A + B, None], restore_inputs=restore)
    with Measurer(spec, "opencl", MeasureSettings(repeats=3)) as m:
        first, second = m.measure(cfg()), m.measure(cfg())
    assert first.ok, first.error
    # the second checked run follows 1 + 1 + 3 runs that each doubled `a`: only a restore keeps it right
    assert second.ok if restore else second.status == Status.WRONG_RESULT


def test_adaptive_repeats_stop_between_the_bounds(measurer):
    with Measurer(modes_spec(), "opencl", MeasureSettings(repeats="auto", auto_min_repeats=5,
                                                          auto_max_repeats=40, auto_max_seconds=1.0)) as m:
        r = m.measure(cfg())
    assert r.ok and 5 <= len(r.samples) <= 40


def test_spec_errors_are_raised_with_their_cause(measurer):
    bad = modes_spec(grid_div=(["block_size_x * tile"], None, None))
    with Measurer(bad, "opencl", SETTINGS) as m, pytest.raises(SpecError, match="tile"):
        m.measure(cfg())
    lock = threading.Lock()  # cannot cross a process boundary at all
    with pytest.raises(TypeError, match="cannot be sent to the worker"):
        Measurer(CallableSpec(numpy_add, arguments=(lock,)), "python")
    with pytest.raises(MeasureSetupError, match="no OpenCL device matches"):
        Measurer(modes_spec(), "opencl", device="no-such-device")
    with pytest.raises(ValueError, match="needs a device backend"):
        Measurer(modes_spec(), "python")


# --- Python variants --------------------------------------------------------------------------
def numpy_add(config, a, b):
    if config["variant"] == "wrong":
        return a - b
    if config["variant"] == "raise":
        raise FloatingPointError("variant gave up")
    if config["variant"] == "exit":
        os._exit(3)
    if config["variant"] == "segfault":
        ctypes.string_at(0)
    out = np.empty_like(a)
    for start in range(0, a.size, config["chunk"]):
        np.add(a[start:start + config["chunk"]], b[start:start + config["chunk"]],
               out=out[start:start + config["chunk"]])
    return out


def test_python_backend_measures_numpy_callables_and_survives_their_faults():
    spec = CallableSpec(numpy_add, [A, B], answer=[A + B])
    with Measurer(spec, "python", MeasureSettings(repeats=4)) as m:
        ok = m.measure({"variant": "chunks", "chunk": 64})
        wrong = m.measure({"variant": "wrong", "chunk": 64})
        raised = m.measure({"variant": "raise", "chunk": 64})
        segfault = m.measure({"variant": "segfault", "chunk": 64})
        after = m.measure({"variant": "chunks", "chunk": 128})
        exited = m.measure({"variant": "exit", "chunk": 64})
        info = m.device_info()
    assert ok.ok and len(ok.samples) == 4 and all(s > 0 for s in ok.samples)
    assert wrong.status == Status.WRONG_RESULT and "values differ" in wrong.error
    assert raised.status == Status.LAUNCH_ERROR and "FloatingPointError: variant gave up" in raised.error
    assert segfault.status == Status.LAUNCH_ERROR and "SIGSEGV" in segfault.error
    assert after.ok
    assert exited.status == Status.LAUNCH_ERROR and "exit code 3" in exited.error
    assert info.platform == "cpu"


def test_the_hold_before_short_launches_is_asked_for_by_the_settings():
    for asked in (False, True):
        runner = KernelRunner(modes_spec(), "opencl", MeasureSettings(hold_short_launches=asked), None)
        try:
            assert runner.backend.hold_before_short_launches is asked
            assert runner.measure(cfg(), lambda ms: None)[0].ok  # OpenCL has no hold: it measures as before
        finally:
            runner.close()
