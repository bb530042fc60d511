"""The drop-in's cache moves runs between adaptune and Kernel Tuner 1.5 (both directions, on PoCL); simulation
mode replays it; a crashing configuration is one failed result; a rerun resumes from the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from adaptune.integrations import kernel_tuner as drop_in
from adaptune.integrations.kernel_tuner import tune_kernel
from adaptune.store import Store, load_kt_cache
from tests.integrations.kt_kernels import VECTOR_ADD

kernel_tuner = pytest.importorskip("kernel_tuner")

TUNE_PARAMS = {"block_size_x": [32, 64, 128, 256]}
# a null-pointer store for block_size_x == 64: the worker process dies (a segfault on PoCL)
CRASHING = VECTOR_ADD.replace("c[i] = a[i] + b[i];",
                              "if (block_size_x == 64) { ((__global float *)0)[i] = 1.0f; } c[i] = a[i] + b[i];")


def kt_tune(size, args, cache, tune_params=TUNE_PARAMS, **kw):
    return kernel_tuner.tune_kernel("vector_add", VECTOR_ADD, size, args, tune_params, cache=str(cache), quiet=True,
                                    lang="OpenCL", iterations=2, **kw)


def test_kernel_tuner_reads_the_cache_adaptune_wrote(kt_env, vector_args):
    size, args, _ = vector_args
    ours, _ = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32, 64]}, cache="run",
                          metrics={"GB/s": lambda p: 12 * size / 1e6 / p["time"]}, quiet=True, iterations=2)
    assert (kt_env / "run.json").is_file()  # Kernel Tuner's naming: .json appended
    theirs, _ = kt_tune(size, args, kt_env / "run.json", {"block_size_x": [32, 64]})
    by_ours = {r["block_size_x"]: r for r in ours}
    for r in theirs:  # taken from the cache, not measured again: same time, no compile time
        assert r["time"] == pytest.approx(by_ours[r["block_size_x"]]["time"]) and r["compile_time"] == 0
        assert r["GB/s"] == pytest.approx(by_ours[r["block_size_x"]]["GB/s"])


def test_adaptune_continues_a_kernel_tuner_cache_and_kernel_tuner_reads_it_back(kt_env, vector_args):
    size, args, _ = vector_args
    theirs, _ = kt_tune(size, args, kt_env / "mixed.json", {"block_size_x": [32, 64, 128, 256]},
                        restrictions=["block_size_x <= 64"])
    ours, env = tune_kernel("vector_add", VECTOR_ADD, size, args, TUNE_PARAMS, cache="mixed.json", quiet=True,
                            iterations=2)
    assert env["evaluated"] == 4 and env["reused"] == 2  # 32 and 64 from Kernel Tuner's cache, 128 and 256 measured
    kt_times = {r["block_size_x"]: r["time"] for r in theirs}
    for r in ours:
        if r["block_size_x"] in kt_times:
            assert r["time"] == pytest.approx(kt_times[r["block_size_x"]])
    again, _ = kt_tune(size, args, kt_env / "mixed.json")
    assert [r["compile_time"] for r in again] == [0, 0, 0, 0]  # all four now in the cache
    assert json.loads((kt_env / "mixed.json").read_text())["device_name"] == env["device_name"]


def test_a_cache_of_another_kernel_or_parameters_is_refused(kt_env, vector_args):
    size, args, _ = vector_args
    tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, cache="c", quiet=True, iterations=1)
    with pytest.raises(ValueError, match="parameters"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32], "unroll": [1]}, cache="c", quiet=True)
    with pytest.raises(ValueError, match="problem size"):
        tune_kernel("vector_add", VECTOR_ADD, size + 1, args, {"block_size_x": [32]}, cache="c", quiet=True)


def test_earlier_cache_entries_outside_this_runs_values_are_kept(kt_env, vector_args):
    size, args, _ = vector_args
    tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32, 64]}, cache="k", quiet=True, iterations=1)
    _, env = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [64, 128]}, cache="k", quiet=True,
                         iterations=1)
    assert env["reused"] == 1
    recorded = load_kt_cache(kt_env / "k.json")
    assert sorted(r.config["block_size_x"] for r in recorded.results) == [32, 64, 128]
    assert recorded.params == {"block_size_x": [64, 128, 32]}


def test_simulation_mode_replays_the_cache_without_a_device(kt_env, vector_args):
    size, args, _ = vector_args
    measured, _ = tune_kernel("vector_add", VECTOR_ADD, size, args, TUNE_PARAMS, cache="sim", quiet=True, iterations=2)
    replayed, env = tune_kernel("vector_add", VECTOR_ADD, size, args, TUNE_PARAMS, cache="sim", quiet=True,
                                simulation_mode=True, strategy="random_sample", strategy_options={"max_fevals": 3},
                                seed=0)
    times = {r["block_size_x"]: r["time"] for r in measured}
    assert len(replayed) == 3 and env["simulation_mode"] is True
    assert all(r["time"] == times[r["block_size_x"]] for r in replayed)
    with pytest.raises(ValueError, match="simulation_mode needs an existing cache"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, TUNE_PARAMS, cache="none", simulation_mode=True, quiet=True)


@pytest.mark.slow
def test_a_crashing_configuration_is_one_failed_result_and_the_run_goes_on(kt_env, vector_args):
    size, args, expected = vector_args
    results, env = tune_kernel("vector_add", CRASHING, size, args, TUNE_PARAMS, answer=[expected, None, None, None],
                               quiet=True, iterations=2)
    by_block = {r["block_size_x"]: r for r in results}
    # Kernel Tuner would have died there: the crash is no row (a script reads every row's time) but listed in env
    assert 64 not in by_block and [(f["block_size_x"], f["status"]) for f in env["failed_results"]] == [
        (64, "launch_error")]
    assert "died" in env["failed_results"][0]["error"]
    assert all(isinstance(by_block[b]["time"], float) for b in (32, 128, 256))
    # the rerun resumes from the store: nothing is measured again
    again, env2 = tune_kernel("vector_add", CRASHING, size, args, TUNE_PARAMS, answer=[expected, None, None, None],
                              quiet=True, iterations=2)
    assert env2["reused"] == 4 and [r.get("time") for r in again] == [r.get("time") for r in results]
    assert np.isfinite(env["best_config"]["time"])


SLOW_SCRIPT = """
import numpy as np
from adaptune import tune_kernel
kernel = '''__kernel void spin(__global float *x, int n) {
    int i = get_global_id(0);
    float v = x[i];
    for (int k = 0; k < n; k++) { v = v * 0.999f + 0.001f; }
    x[i] = v;
}'''
x = np.zeros(4096, dtype=np.float32)
tune_kernel("spin", kernel, 4096, [x, np.int32(30000)], {"block_size_x": [16, 32, 64, 128, 256, 512]},
            iterations=3, quiet=True)
"""


@pytest.mark.slow
def test_a_killed_run_resumes_from_the_store(kt_env):
    (kt_env / "slow.py").write_text(SLOW_SCRIPT)
    env = {**os.environ, "ADAPTUNE_DB": str(kt_env / "resume.db")}
    proc = subprocess.Popen([sys.executable, "slow.py"], cwd=kt_env, env=env)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if (kt_env / "resume.db").exists():
                with Store(kt_env / "resume.db") as store:
                    if len(store.results()) >= 2:
                        break
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait()
    with Store(kt_env / "resume.db") as store:
        done = len(store.results())
    assert 2 <= done < 6, "the run should have been killed part-way"
    x = np.zeros(4096, dtype=np.float32)
    drop_in.settings.db = str(kt_env / "resume.db")
    kernel = SLOW_SCRIPT.split("'''")[1]
    results, env_ = tune_kernel("spin", kernel, 4096, [x, np.int32(30000)],
                                {"block_size_x": [16, 32, 64, 128, 256, 512]}, iterations=3, quiet=True)
    assert env_["reused"] == done and env_["evaluated"] == 6 and len(results) == 6
