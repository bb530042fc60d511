"""PoCL's kernel cache filled by warming processes between timed runs (``adaptune.measure.cache_warm``).

Each tuning runs in a fresh interpreter: this test process has PoCL loaded (``conftest.py`` probes it), and a
process holding a driver must not fork (``measure.fork``). What is checked is PoCL's own cache on disk: a
work-group function per block size, put there by the warming processes, and the worker's builds then taking
the cache's path (a fraction of a real build), with every result verified against the answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from adaptune.measure import cache_warm
from adaptune.measure.cache_warm import KernelCacheWarmer
from adaptune.measure.spec import KernelSpec
from adaptune.records import DeviceInfo

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = (16, 32, 64, 128)
SCRIPT = r"""
import json, sys
import numpy as np
from adaptune.measure import cache_warm
from adaptune.tuning import Problem, tune
from adaptune.measure import KernelSpec
from adaptune.space import Space

cache_warm.BURST_TIMEOUT_S = float(sys.argv[2])
source = '''
__kernel void scale(__global float *out, __global const float *a, int n) {
    int i = get_global_id(0);
    if (HANG_IN_ONE_GROUP && get_num_groups(0) == 1) {  // only a single work-group's launch: the warming one
        while (out[0] != -1.0f) { out[1] += 1.0f; }
    }
    if (CRASH_IN_ONE_GROUP && get_num_groups(0) == 1 && get_local_size(0) == 64) {  // far outside any mapping
        out[((long)n << 28) + i] = 1.0f;
    }
    for (int k = 0; k < 64; k++) {  // some work for the compiler: a loop it unrolls per block size
        if (i < n) out[i] = a[i] * 3.0f + (float)(k & 1);
    }
}
'''.replace("HANG_IN_ONE_GROUP", str(int(sys.argv[1] == "hang"))).replace(
    "CRASH_IN_ONE_GROUP", str(int(sys.argv[1] == "crash")))
n = 1 << 16
a = np.random.default_rng(0).random(n, dtype=np.float32)
spec = KernelSpec(source, "scale", [np.zeros(n, np.float32), a, np.int32(n)], problem_size=n,
                  answer=[a * 3.0 + 1.0, None, None], atol=1e-5)
problem = Problem("warm_test", spec, Space({"block_size_x": json.loads(sys.argv[4])}))
report = tune(problem, "brute_force", repeats=2, db=sys.argv[3], progress=False, backend="opencl")
print(json.dumps({"stats": report.worker_stats, "failed": report.failed, "evaluated": report.evaluated,
                  "compile_ms": [r.compile_ms for r in report.results]}))
"""


def _tune(tmp_path: Path, fault: str, timeout_s: float, cache: str = "1", blocks: tuple[int, ...] = BLOCKS) -> dict:
    tmp_path.mkdir(exist_ok=True)
    env = {**os.environ, "POCL_CACHE_DIR": str(tmp_path / "pocl"), "POCL_KERNEL_CACHE": cache,
           "PYOPENCL_NO_CACHE": "1", "ADAPTUNE_COMPILE_PROCESSES": "2",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", SCRIPT, fault, str(timeout_s),
                          str(tmp_path / "t.db"), json.dumps(blocks)], capture_output=True, text=True, env=env, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _warmed_block_sizes(cache: Path) -> set[int]:
    """Block sizes with a work-group function in PoCL's cache (folders named like ``64-1-1-goffs0-smallgrid``)."""
    return {int(p.name.split("-")[0]) for p in cache.glob("*/*/scale/*") if p.is_dir()}


def test_warming_processes_fill_pocls_cache_and_the_worker_builds_from_it(tmp_path):
    data = _tune(tmp_path, "none", timeout_s=180)
    stats = data["stats"]
    assert data["evaluated"] == len(BLOCKS) and data["failed"] == 0  # every result checked against the answer
    assert stats["warming_processes"] == 2 and stats["warmed"] == len(BLOCKS) and not stats["warming_given_up"]
    assert _warmed_block_sizes(tmp_path / "pocl") == set(BLOCKS)
    # the worker's builds found the program in the cache: far below a build of it (hundreds of ms on PoCL)
    cold = _tune(tmp_path / "cold", "none", timeout_s=180, cache="0")
    assert "warming_processes" not in cold["stats"]  # PoCL's cache off: nothing to fill, no warming
    assert max(data["compile_ms"]) < min(cold["compile_ms"]) / 2, (data["compile_ms"], cold["compile_ms"])


def test_a_burst_that_does_not_end_gives_the_warming_up_and_loses_no_result(tmp_path):
    """The kernel spins forever when launched as one work-group (the warming launch) and works otherwise."""
    data = _tune(tmp_path, "hang", timeout_s=3)
    stats = data["stats"]
    assert stats["warming_given_up"] and stats["warmed"] == 0
    assert data["evaluated"] == len(BLOCKS) and data["failed"] == 0  # the worker measured every one itself


def test_a_warming_process_that_crashes_ends_its_burst_and_the_next_runs_in_fresh_processes(tmp_path):
    """Block size 64 kills its warming process (a wild write in the one-work-group launch alone). Its burst is
    not waited for until the timeout (600 s, past the 400 s this test gives the run): it ends when the process
    is gone, the worker measures what was left, and the next burst (two processes warm four configurations a
    burst, eight here) runs in a fresh pool."""
    blocks = (64, 16, 32, 128, 8, 256, 4, 2)
    data = _tune(tmp_path, "crash", timeout_s=600, blocks=blocks)
    stats = data["stats"]
    assert stats["warm_crashes"] == 1 and not stats["warming_given_up"]
    assert stats["warmed"] + stats["warm_failed"] == len(blocks) and stats["warm_failed"] >= 1
    assert stats["warmed"] >= 4  # the second burst, all of it, in the new processes
    assert data["evaluated"] == len(blocks) and data["failed"] == 0  # the worker's launches of 64 are fine


def test_warming_is_only_for_opencl_cpu_devices_with_pocls_cache_on(monkeypatch):
    monkeypatch.setattr(cache_warm, "fork_refusal", lambda: None)  # this test process has PoCL loaded
    monkeypatch.setenv("ADAPTUNE_COMPILE_PROCESSES", "2")
    monkeypatch.delenv("POCL_KERNEL_CACHE", raising=False)
    spec = KernelSpec("__kernel void k(__global float *a) {}", "k", [np.zeros(1, np.float32)], problem_size=1)
    cpu = DeviceInfo("cpu", "opencl:Portable Computing Language", properties={"type": "ALL | CPU"})
    warmer = KernelCacheWarmer.for_device(spec, cpu)
    assert warmer is not None and warmer.processes == 2 and warmer.burst_size == 4
    warmer.close()
    gpu = DeviceInfo("NVIDIA H100", "opencl:NVIDIA CUDA", properties={"type": "GPU"})
    assert KernelCacheWarmer.for_device(spec, gpu) is None
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")
    assert KernelCacheWarmer.for_device(spec, cpu) is None
    monkeypatch.setenv("POCL_KERNEL_CACHE", "1")
    monkeypatch.setenv("ADAPTUNE_COMPILE_PROCESSES", "1")
    assert KernelCacheWarmer.for_device(spec, cpu) is None
    monkeypatch.delenv("ADAPTUNE_COMPILE_PROCESSES")  # by default: one process a core, from 4 cores on
    monkeypatch.setattr(cache_warm, "_usable_cores", lambda: 2)
    assert KernelCacheWarmer.for_device(spec, cpu) is None
    monkeypatch.setattr(cache_warm, "_usable_cores", lambda: 6)
    warmer = KernelCacheWarmer.for_device(spec, cpu)
    assert warmer is not None and warmer.processes == 6
    warmer.close()
