"""The worker forked from the parent when that is safe, exec'd otherwise (adaptune.measure.fork).

This test process has PoCL's libOpenCL mapped (conftest opens a device), so it can only exec: the forked paths
run in one fresh Python process, whose findings the tests read.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adaptune.measure import process
from adaptune.measure.fork import fork_refusal, mapped_driver, open_device_file

SCRIPT = r'''
import ctypes, ctypes.util, json, os, threading
import numpy as np
import adaptune.integrations.kernel_tuner as kt
from adaptune import tune_kernel
from adaptune.measure.process import WorkerProcess, WorkerStartError

SOURCE = """__kernel void vadd(__global float *c, __global const float *a, __global const float *b, int n) {
#if mode == 4
    __global float *far = c + ((long)1 << 40);
    if (get_global_id(0) == 0) far[0] = 1.0f;   /* crashes the worker: one work-item, so one of PoCL's threads */
#endif
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}"""
n = 4096
a, b = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32)
args = [np.zeros_like(a), a, b, np.int32(n)]
out = {}

kt.settings.db = os.environ["DB"]
rows, env = tune_kernel("vadd", SOURCE, n, args, {"mode": [4, 0], "block_size_x": [32, 64]}, lang="OpenCL",
                        restrictions=["mode == 0 or block_size_x == 64"], answer=[a + b, None, None, None],
                        iterations=2, quiet=True)  # the crash first, then two configurations in a new worker
out["tune"] = {"worker_start": env["worker_start"], "ok": sum("__error__" not in r for r in rows),
               "crash": [f["status"] + " " + f["error"] for f in env.get("failed_results", []) if f["mode"] == 4]}
rows, env = tune_kernel("vadd", SOURCE, n, args, {"block_size_x": [128]}, lang="OpenCL", quiet=True)
out["next_call"] = env["worker_start"]  # the last call's worker may still be closing: forked all the same
stop = threading.Event()
busy = threading.Thread(target=stop.wait, name="users-thread")
busy.start()
worker = WorkerProcess()
out["thread"] = worker.how
worker.stop()
stop.set(); busy.join()
ctypes.CDLL(ctypes.util.find_library("OpenCL") or "libOpenCL.so.1")
worker = WorkerProcess()
out["driver"] = worker.how
worker.stop()
os.environ["ADAPTUNE_WORKER_START"] = "fork"
try:
    WorkerProcess()
except WorkerStartError as exc:
    out["forced"] = str(exc)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    """One fresh process: a tune whose worker crashes and is respawned, forked, and a second tune; then a thread,
    then a mapped driver, each making the next worker exec'd; then ADAPTUNE_WORKER_START=fork refused."""
    env = {**process.child_env(), "DB": str(tmp_path_factory.mktemp("fork") / "a.db")}
    env.pop("ADAPTUNE_WORKER_START", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.slow  # one fresh process importing adaptune's drop-in: 3-6 s on 2 shared cores
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker is forked on Linux only")
def test_a_tune_runs_in_forked_workers_through_a_crash_without_a_warning(findings):
    found, stderr = findings
    tune = found["tune"]
    assert tune["crash"][0].startswith("launch_error") and "SIGSEGV" in tune["crash"][0]
    # the worker's traceback, not the list of modules. One work-item faults: when several of PoCL's threads fault
    # at once, the second fault kills the worker before or during faulthandler's dump (seen in CI, with every item)
    crash = tune["crash"][0]
    assert "File \"" in crash and "Extension modules" not in crash
    assert tune["ok"] == 2 and tune["worker_start"] == "fork"  # the worker started after the crash, forked too
    assert found["next_call"] == "fork"
    assert "multi-threaded" not in stderr and "DeprecationWarning" not in stderr


@pytest.mark.slow  # one fresh process importing adaptune's drop-in: 3-6 s on 2 shared cores
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker is forked on Linux only")
def test_a_running_thread_or_a_mapped_driver_makes_the_worker_execd(findings):
    found, _ = findings
    assert found["thread"].startswith("exec (other threads run") and "users-thread" in found["thread"]
    assert found["driver"].startswith("exec (a device driver is loaded") and "libOpenCL" in found["driver"]
    assert "ADAPTUNE_WORKER_START=fork" in found["forced"] and "libOpenCL" in found["forced"]


def test_this_process_has_the_driver_mapped_so_it_execs(monkeypatch):
    assert mapped_driver() is not None and "device driver" in (fork_refusal() or "")
    worker = process.WorkerProcess()
    try:
        assert worker.how.startswith("exec (")
    finally:
        worker.stop()
    monkeypatch.setenv("ADAPTUNE_WORKER_START", "spawn")
    with pytest.raises(process.WorkerStartError, match="ADAPTUNE_WORKER_START='spawn' is not one of auto, fork, exec"):
        process.WorkerProcess()


def test_an_open_gpu_device_file_refuses_the_fork(tmp_path):
    """An initialised driver keeps its device file open (cuInit: /dev/nvidiactl); a loaded library alone does not."""
    fds = tmp_path / "fd"
    fds.mkdir()
    (fds / "0").symlink_to("/dev/null")
    (fds / "1").symlink_to(tmp_path / "a-file")
    assert open_device_file(str(fds)) is None
    (fds / "7").symlink_to("/dev/nvidiactl")
    assert open_device_file(str(fds)) == "/dev/nvidiactl"
