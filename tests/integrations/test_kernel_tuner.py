"""adaptune.tune_kernel / run_kernel on PoCL: every Kernel Tuner parameter honoured, or refused by name."""

from __future__ import annotations

import json
import logging
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import adaptune
from adaptune.integrations import kernel_tuner as drop_in
from adaptune.integrations.kernel_tuner import run_kernel, tune_kernel
from adaptune.integrations.kt_args import UnsupportedOption, template_instance
from adaptune.integrations.kt_results import (
    CompilationFailedConfig,
    InvalidConfig,
    RuntimeFailedConfig,
    stops_kernel_tuner,
)
from adaptune.space import ConstraintError
from adaptune.store import load_kt_cache
from tests.integrations.kt_kernels import SCALE_2D, VECTOR_ADD


def ok_rows(results):
    return [r for r in results if "__error__" not in r]


def test_the_package_exports_the_drop_in():
    assert adaptune.tune_kernel is tune_kernel and adaptune.run_kernel is run_kernel


def test_importing_the_drop_in_leaves_the_model_libraries_unloaded():
    """A brute-force user pays no import of scikit-learn or SciPy (1.5-2 s: more than a small tuning run)."""
    probe = ("import sys; from adaptune import tune_kernel, run_kernel; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'sklearn', 'scipy', 'pandas'}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_vector_add_as_in_kernel_tuners_readme(kt_env, vector_args, capsys):
    size, args, expected = vector_args
    tune_params = {"block_size_x": [32, 64, 128]}
    results, env = tune_kernel("vector_add", VECTOR_ADD, size, args, tune_params, answer=[expected, None, None, None],
                               iterations=3, verbose=True)
    out = capsys.readouterr().out
    assert "Searchspace has 3 configurations" in out and "BEST PERFORMING CONFIGURATION FOR OBJECTIVE time" in out
    assert [r["block_size_x"] for r in results] == [32, 64, 128]
    for r in results:
        assert isinstance(r["time"], float) and len(r["times"]) == 3 and r["time"] > 0
        assert {"compile_time", "verification_time", "benchmark_time", "timestamp", "framework_time"} <= set(r)
    assert env["best_config"] == min(results, key=lambda r: r["time"])
    assert env["device_name"] and env["iterations"] == 3 and env["evaluated"] == 3
    assert env["total_compile_time"] == pytest.approx(sum(r["compile_time"] for r in results))
    # Kernel Tuner's examples json.dump the whole return (expdist.py, pnpoly_cupy.py): it must be plain JSON
    assert json.loads(json.dumps((results, env)))[1]["evaluated"] == 3


def test_run_kernel_returns_every_argument_after_one_run(kt_env, vector_args):
    size, args, expected = vector_args
    out = run_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": 64}, lang="OpenCL")
    np.testing.assert_allclose(out[0], expected)
    np.testing.assert_array_equal(out[1], args[1])
    assert out[3] == size
    assert not np.any(args[0])  # the caller's arrays are not written


def test_2d_grid_divisors_restrictions_defines_and_compiler_options(kt_env):
    width, height = 96, 20
    data = np.arange(width * height, dtype=np.float32)
    args = [np.zeros_like(data), data, np.int32(width), np.int32(height)]
    tune_params = {"block_size_x": [8, 16, 32], "block_size_y": [1, 2, 4], "tile_size_x": [1, 2, 3]}
    results, _ = tune_kernel(
        "scale", SCALE_2D, (width, height), args, tune_params, grid_div_x=["block_size_x", "tile_size_x"],
        grid_div_y=lambda p: p["block_size_y"], restrictions=["block_size_x * block_size_y >= 16",
                                                               lambda p: p["tile_size_x"] != 3],
        answer=[2.5 * data, None, None, None], compiler_options=["-DFACTOR=2.5f"], quiet=True, iterations=1)
    configs = {(r["block_size_x"], r["block_size_y"], r["tile_size_x"]) for r in results}
    assert configs == {(x, y, t) for x in (8, 16, 32) for y in (1, 2, 4) for t in (1, 2) if x * y >= 16}
    assert all("__error__" not in r for r in results)


def test_defines_constant_and_per_configuration(kt_env):
    width, height = 64, 4
    data = np.ones(width * height, dtype=np.float32)
    args = [np.zeros_like(data), data, np.int32(width), np.int32(height)]
    results, _ = tune_kernel("scale", SCALE_2D, (width, height), args, {"block_size_x": [16, 32], "tile_size_x": [1]},
                             defines={"FACTOR": lambda p: f"{p['block_size_x']}.0f"}, quiet=True, iterations=1)
    assert all("__error__" not in r for r in results)
    out = run_kernel("scale", SCALE_2D, (width, height), args, {"block_size_x": 16, "tile_size_x": 1},
                     defines={"FACTOR": "3.0f"})
    np.testing.assert_allclose(out[0], 3.0)


def test_kernel_source_file_name_path_list_and_generator(kt_env, vector_args):
    size, args, expected = vector_args
    Path("vector_add.cl").write_text(VECTOR_ADD)
    Path("helper.h").write_text("#define ADD(x, y) ((x) + (y))\n")
    Path("uses_helper.cl").write_text('#include "helper.h"\n' + VECTOR_ADD.replace("a[i] + b[i]", "ADD(a[i], b[i])"))
    params = {"block_size_x": 128}
    for source in ("vector_add.cl", Path("vector_add.cl"), ["uses_helper.cl", "helper.h"]):
        np.testing.assert_allclose(run_kernel("vector_add", source, size, args, params)[0], expected)

    def generator(p):
        return VECTOR_ADD.replace("get_global_id(0)", f"get_local_id(0) + get_group_id(0) * {p['block_size_x']}")

    results, _ = tune_kernel("vector_add", generator, size, args, {"block_size_x": [32, 64]}, lang="OpenCL",
                             answer=[expected, None, None, None], quiet=True, iterations=1)
    assert len(ok_rows(results)) == 2
    with pytest.raises(TypeError, match="lang"):
        tune_kernel("vector_add", generator, size, args, {"block_size_x": [32]}, quiet=True)


def test_problem_size_as_parameter_name_and_callable(kt_env):
    data = np.zeros(256, dtype=np.float32)
    kernel = "__kernel void fill(__global float *x) { x[get_global_id(0)] = 1.0f; }"
    tune_params = {"block_size_x": [32, 64], "n": [128, 256]}
    results, _ = tune_kernel("fill", kernel, "n", [data], tune_params, quiet=True, iterations=1)
    assert len(ok_rows(results)) == 4
    out = run_kernel("fill", kernel, lambda p: p["n"] // 2, [data], {"block_size_x": 32, "n": 256})
    assert out[0][:128].sum() == 128 and out[0][128:].sum() == 0
    assert run_kernel("fill", kernel, 64, [data], {"block_size_x": 4})[0].sum() == 64  # 16 groups of 4
    assert run_kernel("fill", kernel, 64, [data], {"block_size_x": 4}, grid_div_x=[])[0].sum() == 256  # 64 groups


def test_block_size_names(kt_env, vector_args):
    size, args, expected = vector_args
    kernel = VECTOR_ADD.replace("get_global_id(0)", "get_local_id(0) + get_group_id(0) * threads")
    results, _ = tune_kernel("vector_add", kernel, size, args, {"threads": [32, 64]}, block_size_names=["threads"],
                             answer=[expected, None, None, None], quiet=True, iterations=1)
    assert len(ok_rows(results)) == 2


def test_wrong_results_and_custom_verify(kt_env, vector_args):
    size, args, expected = vector_args
    results, env = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32, 64]},
                               answer=[expected + 1, None, None, None], quiet=True, iterations=1)
    # Kernel Tuner stops at the first wrong output and never returns one: left out, listed in env
    assert results == [] and env["wrong_results"] == [{"block_size_x": 32}, {"block_size_x": 64}]
    assert "best_config" not in env and env["failed"] == 2

    def verify(answer, result_host, atol=None):  # runs in the worker: it passes only if called as Kernel Tuner does
        return atol == 0.5 and result_host[1] is None and np.allclose(answer[0], result_host[0] - 1, atol=atol)

    results, _ = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, quiet=True,
                             answer=[expected - 1, None, None, None], verify=verify, atol=0.5, iterations=1)
    assert len(ok_rows(results)) == 1
    results, env = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [64]}, quiet=True,
                               answer=[expected, None, None, None], verify=verify, atol=0.5, iterations=1)
    assert results == [] and env["wrong_results"] == [{"block_size_x": 64}]


def test_metrics_and_objective(kt_env, vector_args):
    size, args, _ = vector_args
    metrics = {"GB/s": lambda p: (3 * 4 * size / 1e9) / (p["time"] / 1e3), "twice": "2 * block_size_x + time * 0"}
    results, env = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32, 64, 128]}, metrics=metrics,
                               objective="GB/s", quiet=True, iterations=2)
    for r in results:
        assert r["GB/s"] == pytest.approx(3 * 4 * size / 1e9 / (r["time"] / 1e3)) and r["twice"] == 2 * r["block_size_x"]
    assert env["best_config"] == max(results, key=lambda r: r["GB/s"])
    with pytest.raises(UnsupportedOption, match="objective"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, metrics=metrics, objective="GB/s",
                    strategy="random_sample", quiet=True)
    with pytest.raises(ValueError, match="objective_higher_is_better"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, objective="mine", quiet=True)


def test_strategies_and_budgets(kt_env, vector_args):
    size, args, _ = vector_args
    tune_params = {"block_size_x": [16, 32, 64, 128, 256, 512]}
    results, env = tune_kernel("vector_add", VECTOR_ADD, size, args, tune_params, strategy="random_sample",
                               strategy_options={"max_fevals": 3}, seed=1, quiet=True, iterations=1)
    assert len(results) == 3 and env["strategy"] == "random"
    results, _ = tune_kernel("vector_add", VECTOR_ADD, size, args, tune_params, strategy="random_sample",
                             strategy_options={"fraction": 0.5}, seed=2, quiet=True, iterations=1)
    assert len(results) == 3
    results, env = tune_kernel("vector_add", VECTOR_ADD, size, args, tune_params, strategy="greedy_ils",
                               strategy_options={"time_limit": 600}, quiet=True, iterations=1)
    assert env["strategy"] == "greedy_ils" and len(results) >= 1
    results, env = tune_kernel("vector_add", VECTOR_ADD, size, args, tune_params,  # Kernel Tuner's module form
                               strategy=adaptune.strategies.minimize, strategy_options={"max_fevals": 2},
                               quiet=True, iterations=1)
    assert env["strategy"] == "greedy_ils" and len(results) == 2
    assert set(vars(adaptune.strategies)) >= {"brute_force", "minimize", "random_sample", "genetic_algorithm"}
    with pytest.raises(UnsupportedOption, match="strategy: 'nsga2'"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, tune_params, strategy="nsga2", quiet=True)
    with pytest.raises(UnsupportedOption, match="strategy_options.*popsize"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, tune_params, strategy="genetic_algorithm",
                    strategy_options={"popsize": 4}, quiet=True)


@pytest.mark.parametrize(("option", "value"), [
    ("cmem_args", {"d_filter": np.zeros(4, np.float32)}), ("texmem_args", {"tex": {"array": np.zeros(4)}}),
    ("compiler", "nvcc"), ("objectives", {"time": False, "energy": False}),
    ("smem_args", {"size": 64}), ("lang", "HIP"), ("lang", "FORTRAN"),
])
def test_options_adaptune_cannot_honour_are_refused_by_name(kt_env, vector_args, option, value):
    size, args, _ = vector_args
    with pytest.raises(UnsupportedOption, match=f"^{option}:"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, quiet=True, **{option: value})


def test_observers_other_than_nvml_are_refused_and_nvml_needs_nvidia(kt_env, vector_args):
    size, args, _ = vector_args

    class PMTObserver:
        pass

    with pytest.raises(UnsupportedOption, match="^observers: PMTObserver"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, observers=[PMTObserver()], quiet=True)

    class NVMLObserver:  # the shape of kernel_tuner.observers.nvml.NVMLObserver (it needs an NVIDIA GPU to construct)
        observables = ("nvml_energy", "temperature")

    with pytest.raises(Exception, match="NVIDIA"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, observers=[NVMLObserver()], quiet=True)


def test_parallel_runs_continue_a_cache_and_write_it_back(kt_env, vector_args):
    size, args, expected = vector_args
    serial, _ = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32, 64, 128]}, cache="c",
                            restrictions=["block_size_x <= 64"], quiet=True, iterations=1)
    drop_in.settings.db = str(kt_env / "elsewhere.db")  # nothing in adaptune's store: only the cache knows 32 and 64
    results, env = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32, 64, 128]}, parallel=2,
                               answer=[expected, None, None, None], cache="c", quiet=True, iterations=1)
    assert sorted(r["block_size_x"] for r in results) == [32, 64, 128] and env["evaluated"] == 3
    assert env["reused"] == 2 and env["failed"] == 0
    cached = {r["block_size_x"]: r["time"] for r in serial}
    assert {r["block_size_x"]: r["time"] for r in results if r["block_size_x"] in cached} == cached
    assert sorted(r.config["block_size_x"] for r in load_kt_cache(kt_env / "c.json").results) == [32, 64, 128]


def test_restriction_text_is_parsed_never_evaluated(kt_env, vector_args):
    size, args, _ = vector_args
    with pytest.raises(ConstraintError):
        tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]},
                    restrictions=["__import__('os').system('touch pwned') or True"], quiet=True)
    assert not Path("pwned").exists()


def test_quiet_prints_nothing_and_log_writes_a_file(kt_env, vector_args, capsys, monkeypatch):
    size, args, _ = vector_args
    monkeypatch.setattr(logging.root, "handlers", [])  # as in a script: pytest's own handlers would keep basicConfig off
    tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, quiet=True, iterations=1,
                log=logging.DEBUG)
    assert capsys.readouterr().out == ""
    assert list(Path().glob("vector_add*.log"))


def test_device_and_platform_select_the_opencl_device(kt_env, vector_args):
    size, args, _ = vector_args
    _, env = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, platform=0, device=0,
                         quiet=True, iterations=1)
    assert env["device_name"]
    with pytest.raises(Exception, match="no OpenCL device"):
        tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [32]}, device=99, quiet=True)


def test_tunable_template_arguments_of_the_kernel_name():
    assert template_instance("vector_add<float, block_size_x>", ["block_size_x"]) == (
        "vector_add", ["_kt_template_0", "block_size_x"], {"_kt_template_0": "float"})
    assert template_instance("vector_add<float>", ["block_size_x"]) == ("vector_add<float>", None, {})


def test_templates_on_opencl_are_refused_clearly(kt_env, vector_args):
    size, args, _ = vector_args
    with pytest.raises(ValueError, match="template"):
        tune_kernel("vector_add<block_size_x>", VECTOR_ADD, size, args, {"block_size_x": [32]}, quiet=True)


def test_a_jinja2_template_render_is_a_generator_too(kt_env, vector_args):
    jinja2 = pytest.importorskip("jinja2")
    size, args, expected = vector_args
    template = jinja2.Template(VECTOR_ADD.replace("get_global_id(0)", "get_group_id(0) * {{ block_size_x }}"
                                                  " + get_local_id(0)"))
    results, _ = tune_kernel("vector_add", template.render, size, args, {"block_size_x": [32, 64]}, lang="OpenCL",
                             answer=[expected, None, None, None], quiet=True, iterations=1)
    assert len(ok_rows(results)) == 2


def test_nvml_energy_is_kernel_tuners_power_times_one_runs_time():
    from adaptune.integrations.kt_results import observed
    from adaptune.records import Result

    # NVML's energy counter did not advance over these short runs (0 J): Kernel Tuner's energy is
    # median power x the run's time, and so is ours
    result = Result.from_samples({"b": 1}, [2.0, 2.0, 2.0], observers={"energy_j": 0.0, "power_w": 150.0,
                                                                      "temperature_c": 40.0})
    assert observed(result, ["nvml_energy", "nvml_power", "temperature"]) == {
        "nvml_energy": pytest.approx(0.3), "nvml_power": 150.0, "temperature": 40.0}


def test_blocks_over_the_devices_work_group_limit_are_not_in_the_results_or_the_cache(kt_env, vector_args):
    """Kernel Tuner's space leaves out blocks over CL_DEVICE_MAX_WORK_GROUP_SIZE (PoCL: 4096); adaptune learns that
    limit in the worker, which refuses such blocks unlaunched, and leaves them out of what it returns."""
    size, args, expected = vector_args
    results, _ = tune_kernel("vector_add", VECTOR_ADD, size, args, {"block_size_x": [64, 4096, 8192, 16384]},
                             answer=[expected, None, None, None], iterations=1, quiet=True, cache="limit.json")
    assert [r["block_size_x"] for r in results] == [64, 4096]
    assert "time" in results[0]
    cached = json.loads(Path("limit.json").read_text())["cache"]
    assert sorted(cached) == ["4096", "64"]


def test_a_scalar_argument_that_changes_is_a_new_input_not_a_resume(kt_env, vector_args):
    """Kernel Tuner's ``reduction.py`` tunes one kernel eleven times, changing only the scalar ``n``: each call
    must measure its own work, never reuse what an earlier ``n`` stored."""
    size, args, _ = vector_args
    space = {"block_size_x": [32, 64, 128]}
    _, first = tune_kernel("vector_add", VECTOR_ADD, size, args, space, quiet=True, iterations=1)
    _, other_n = tune_kernel("vector_add", VECTOR_ADD, size, [*args[:3], np.int32(10)], space, quiet=True,
                             iterations=1)
    _, same_n = tune_kernel("vector_add", VECTOR_ADD, size, [*args[:3], np.int32(10)], space, quiet=True,
                            iterations=1)
    assert (first["reused"], other_n["reused"], same_n["reused"]) == (0, 0, 3)


def test_a_configuration_that_does_not_compile_is_listed_not_returned(kt_env, vector_args):
    """``reduction.py`` on PoCL: its unroll factor 0 does not compile there. Kernel Tuner raises at it; adaptune
    goes on, and the script's ``min(results, key=lambda x: x['time'])`` must still find a time in every row."""
    size, args, _ = vector_args
    source = VECTOR_ADD.replace("int i = get_global_id(0);",
                                "int i = get_global_id(0);\n#if block_size_x == 64\n    not C at all;\n#endif")
    results, env = tune_kernel("vector_add", source, size, args, {"block_size_x": [32, 64, 128]}, quiet=True,
                               iterations=1)
    assert sorted(r["block_size_x"] for r in results) == [32, 128]
    assert min(results, key=lambda x: x["time"])["block_size_x"] in (32, 128)
    assert [(f["block_size_x"], f["status"]) for f in env["failed_results"]] == [(64, "compile_error")]


def test_failed_rows_stay_where_kernel_tuner_keeps_them():
    """The failures Kernel Tuner 1.5 records and goes past stay rows (its own form); the others it raises at."""
    shared = {"block_size_x": 32, "__error__": CompilationFailedConfig(), "adaptune_status": "compile_error",
              "adaptune_error": "ptxas error   : Entry function 'k' uses too much shared data (0x10000 bytes)"}
    source = {**shared, "adaptune_error": "clBuildProgram failed: BUILD_PROGRAM_FAILURE"}
    resources = {**shared, "__error__": RuntimeFailedConfig(), "adaptune_status": "launch_error",
                 "adaptune_error": "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch"}
    crash = {**resources, "adaptune_error": "the worker died (killed by SIGSEGV); it is restarted"}
    invalid = {**shared, "__error__": InvalidConfig(), "adaptune_error": "block of 2048 threads (not launched)"}
    rows = [shared, source, resources, crash, invalid, {"block_size_x": 64, "time": 1.0}]
    assert [stops_kernel_tuner(r) for r in rows] == [False, True, False, True, False, False]
    assert pickle.loads(pickle.dumps(shared)) == shared
    assert json.loads(json.dumps(resources))["__error__"] == "RuntimeFailedConfig"
