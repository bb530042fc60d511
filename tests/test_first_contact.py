"""First contact: tuning works from a script without a main guard, ``python -c``, stdin and a notebook,
and never hangs (workers that die or hang at start, Ctrl-C during compilation and measurement).

Every run here is a real interpreter tuning a real OpenCL kernel on PoCL through a real worker process.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from adaptune.measure import CallableSpec, Measurer, MeasureSetupError

# A user's script as they would paste it: no main guard, an answer check defined right here (a lambda).
TINY_SCRIPT = textwrap.dedent('''
    import numpy as np
    import adaptune as at

    kernel = """
    __kernel void vadd(__global const float *a, __global const float *b, __global float *c, const int n) {
        int i = get_global_id(0);
        if (i < n) c[i] = a[i] + b[i];
    }
    """
    n = 4096
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    expected = a + b
    space = at.Space({"block_size_x": [32, 64, 128]})
    spec = at.KernelSpec(kernel, "vadd", [a, b, np.zeros_like(a), np.int32(n)], problem_size=n,
                         answer=lambda outputs: bool(np.allclose(outputs[2], expected)))
    report = at.tune(at.Problem("vadd", spec, space), max_evals=3, repeats=2, db="first.db", progress=False)
    print("BEST", report.best, report.failed)
''')


def _env(marker: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    if marker:
        env["ADAPTUNE_TEST_MARK"] = marker
    return env


def _marked_pids(marker: str) -> list[int]:
    """Processes (ours and their workers) whose environment carries ``marker``: orphans if any remain."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"ADAPTUNE_TEST_MARK={marker}".encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _wait_gone(marker: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = _marked_pids(marker)
        if not left:
            return []
        time.sleep(0.1)
    return _marked_pids(marker)


def _assert_tuned(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "BEST {'block_size_x':" in proc.stdout and "freeze_support" not in proc.stderr


@pytest.mark.parametrize("how", ["script", "dash_c", "stdin"])
def test_a_script_without_main_guard_tunes(tmp_path, how):
    script = tmp_path / "example.py"
    script.write_text(TINY_SCRIPT)
    command = {"script": [sys.executable, str(script)], "dash_c": [sys.executable, "-c", TINY_SCRIPT],
               "stdin": [sys.executable, "-"]}[how]
    proc = subprocess.run(command, input=TINY_SCRIPT if how == "stdin" else None, capture_output=True,
                          text=True, cwd=tmp_path, env=_env(), timeout=240)
    _assert_tuned(proc)


def test_an_embedded_interpreter_finds_a_python_for_the_worker(tmp_path):
    """A frozen or embedded program's sys.executable is the host application, not Python."""
    host = tmp_path / "host-app"
    host.write_text("#!/bin/sh\nexit 99\n")
    host.chmod(0o755)
    script = f"import sys\nsys.executable = {str(host)!r}\nsys.frozen = True\n" + TINY_SCRIPT
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env=_env(), timeout=240)
    _assert_tuned(proc)


def test_a_notebook_kernel_tunes(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(TINY_SCRIPT)]
    client = nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    text = "".join(o.get("text", "") for o in notebook.cells[0].outputs if o.get("output_type") == "stream")
    assert "BEST {'block_size_x':" in text, notebook.cells[0].outputs


# --- workers that die or hang while starting ------------------------------------------------------
def _say_and_exit(message: str, code: int) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(code)


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class _DiesInWorker:
    """An argument whose unpickling (in the worker only) ends the worker: a start-up crash."""

    def __init__(self, how: str) -> None:
        self.how = how

    def __reduce__(self):
        if self.how == "exit":
            return _say_and_exit, ("the device driver said no", 7)
        if self.how == "kill":
            return _kill_self, ()
        return time.sleep, (3600,)  # "hang": a start-up that never finishes


def _add(config, a):
    return a + 1


def test_a_worker_that_exits_at_start_is_reported_with_its_stderr():
    t0 = time.monotonic()
    with pytest.raises(MeasureSetupError, match=r"(?s)died while starting \(exit code 7.*the device driver said no"):
        Measurer(CallableSpec(_add, arguments=(_DiesInWorker("exit"),)), "python")
    assert time.monotonic() - t0 < 10


def test_a_worker_killed_at_start_is_reported_at_once():
    t0 = time.monotonic()
    with pytest.raises(MeasureSetupError, match="killed by SIGKILL"):
        Measurer(CallableSpec(_add, arguments=(_DiesInWorker("kill"),)), "python")
    assert time.monotonic() - t0 < 10


def test_a_worker_hanging_at_start_times_out_and_is_killed(monkeypatch):
    marker = uuid.uuid4().hex
    monkeypatch.setenv("ADAPTUNE_TEST_MARK", marker)
    t0 = time.monotonic()
    with pytest.raises(MeasureSetupError, match="did not start within 3 s"):
        Measurer(CallableSpec(_add, arguments=(_DiesInWorker("hang"),)), "python", start_timeout_s=3)
    assert time.monotonic() - t0 < 10
    assert _wait_gone(marker, 5) == []  # the worker (started with the mark in its environment) is gone


def test_a_worker_whose_parent_is_killed_exits(tmp_path):
    marker = uuid.uuid4().hex
    script = textwrap.dedent('''
        import time, numpy as np
        from adaptune.measure import CallableSpec, Measurer
        def slow(config, a):
            time.sleep(30)
            return a
        m = Measurer(CallableSpec(slow, arguments=(np.zeros(3),)), "python")
        print("READY", flush=True)
        m.measure({})
    ''')
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=_env(marker))
    assert proc.stdout.readline().strip() == "READY"
    time.sleep(0.5)  # the worker is now inside the 30 s call
    proc.kill()
    proc.wait(10)
    assert _wait_gone(marker, 5) == []


# --- Ctrl-C ---------------------------------------------------------------------------------------
SLOW_SCRIPT = textwrap.dedent('''
    import numpy as np
    import adaptune as at
    body = "\\n".join(f"    acc = acc * 1.0001f + sin(acc + {i}.0f) * cos(x[{i} % n] + {i}.5f);" for i in range(LINES))
    kernel = ("__kernel void busy(__global float *x, const int n, const int loops) {"
              "  float acc = x[get_global_id(0)];"
              "  for (int l = 0; l < loops; l++) {" + body + "  }"
              "  x[get_global_id(0)] = acc; }")
    n = 4096
    x = np.random.rand(n).astype(np.float32)
    space = at.Space({"block_size_x": [16, 32, 64, 128, 256, 512], "unused": [0, 1]})
    spec = at.KernelSpec(kernel, "busy", [x, np.int32(n), np.int32(LOOPS)], problem_size=n)
    print("TUNING", flush=True)
    report = at.tune(at.Problem("busy", spec, space), repeats=5, db="ctrlc.db", progress=False, discard_factor=None)
    print("DONE", report.evaluated, flush=True)
''')


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return con.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]


def _rows_so_far(db: Path) -> int:
    """Rows while the tuner may still be creating the database (0 until its tables exist)."""
    try:
        return _rows(db) if db.exists() else 0
    except sqlite3.OperationalError:
        return 0


@pytest.mark.parametrize("phase", ["compile", "measure"])
def test_ctrl_c_stops_at_once_keeps_what_is_stored_and_leaves_no_process(tmp_path, phase):
    marker = uuid.uuid4().hex
    lines, loops = (3000, 1) if phase == "compile" else (4, 45)
    script = SLOW_SCRIPT.replace("LINES", str(lines)).replace("LOOPS", str(loops))
    env = _env(marker)
    env["POCL_KERNEL_CACHE"] = "0"  # every compile really compiles
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env=env, start_new_session=True)
    assert proc.stdout.readline().strip() == "TUNING"
    db = tmp_path / "ctrlc.db"
    if phase == "compile":
        time.sleep(1.5)  # worker started, first compile under way
    else:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _rows_so_far(db) < 1:
            time.sleep(0.2)
        assert _rows(db) >= 1, "no measurement was stored"
        stored = _rows(db)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    _, err = proc.communicate(timeout=10)
    assert time.monotonic() - t0 < 10
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert _wait_gone(marker, 5) == []
    if phase == "measure":
        assert "are kept" in err and _rows(db) >= stored
        resumed = subprocess.run([sys.executable, "-c", script], capture_output=True,
                                 text=True, cwd=tmp_path, env=_env(), timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert _rows(db) == 12


def test_numpy_arrays_cross_to_the_worker_intact():
    data = np.arange(10.0)
    with Measurer(CallableSpec(_add, arguments=(data,), answer=[data + 1]), "python") as m:
        assert m.measure({}).ok


# --- when everything fails, say so ----------------------------------------------------------------
BROKEN_SPEC = textwrap.dedent('''
    import numpy as np
    from adaptune.measure import KernelSpec
    from adaptune.space import Space
    from adaptune.tuning import Problem

    SOURCE = """
    __kernel void broken(__global float *x, const int n) {
        x[get_global_id(0)] = undeclared_name + 1.0f;
    }
    """
    x = np.zeros(256, np.float32)
    problem = Problem("broken", KernelSpec(SOURCE, "broken", [x, np.int32(256)], problem_size=256),
                      Space({"block_size_x": [16, 32, 64]}))
''')


def test_a_run_where_everything_fails_says_why(tmp_path, capsys):
    import adaptune as at
    from adaptune.cli import main

    spec_file = tmp_path / "broken_spec.py"
    spec_file.write_text(BROKEN_SPEC)
    from adaptune.tuning.spec_file import load_problem

    with pytest.warns(at.TuningFailedWarning, match="found no working configuration"):
        report = at.tune(load_problem(spec_file), db=str(tmp_path / "a.db"), progress=False, repeats=1)
    summary = report.failure_summary()
    assert report.best is None and "all 3 evaluated configurations failed (3 compile_error)" in summary
    assert "undeclared_name" in summary  # the compiler's own words
    code = main(["tune", str(spec_file), "--db", str(tmp_path / "b.db"), "--repeats", "1"])
    err = capsys.readouterr().err
    assert code == 1 and "found no working configuration" in err and "undeclared_name" in err


def test_the_demo_exits_non_zero_when_everything_fails(tmp_path):
    """`make demo` on a machine where no configuration works must fail, with the cause in one line."""
    spec_file = tmp_path / "broken_spec.py"
    spec_file.write_text(BROKEN_SPEC)
    proc = subprocess.run([sys.executable, "-m", "adaptune.demo", "--spec", str(spec_file), "--out",
                           str(tmp_path / "out"), "--repeats", "1"], capture_output=True, text=True,
                          cwd=tmp_path, env=_env(), timeout=240)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "demo: error: tuning 'broken' found no working configuration" in proc.stderr
    assert "undeclared_name" in proc.stderr


# --- the README's commands, and natural mistakes, as a newcomer makes them ---------------------------
DATA = Path(__file__).resolve().parents[1] / "data" / "recorded"
POCL_CACHE, H100_CACHE = DATA / "reduction_2e22_PoCL.json.gz", DATA / "reduction_2e26_H100.json.gz"


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adaptune", *argv], capture_output=True, text=True, cwd=cwd,
                          env=_env(), timeout=240)


def _two_device_db(tmp_path: Path) -> None:
    for cache in (POCL_CACHE, H100_CACHE):
        assert _cli("import", str(cache), "--name", "reduction", cwd=tmp_path).returncode == 0


def test_export_writes_every_device_and_input_or_the_one_asked_for(tmp_path):
    _two_device_db(tmp_path)
    proc = _cli("export", "--problem", "reduction", "--format", "t4", "-o", "red_t4.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in tmp_path.glob("red_t4.*.json"))
    assert len(written) == 2 and any("H100" in n for n in written), written
    proc = _cli("export", "--problem", "reduction", "--device", "2", "-o", "one.json", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "one.json").exists(), proc.stderr
    proc = _cli("export", "--problem", "reduction", "--input", "nope", "-o", "x.json", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--input 'nope' matches none" in proc.stderr


def test_show_names_the_device_of_each_row(tmp_path):
    _two_device_db(tmp_path)
    proc = _cli("show", "--top", "50", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "H100" in proc.stdout and "pthread" in proc.stdout and "device" in proc.stdout


def test_compare_reads_a_t4_file_on_kernel_tuners_side_too(tmp_path):
    pytest.importorskip("kernel_tuner")
    assert _cli("import", str(POCL_CACHE), cwd=tmp_path).returncode == 0
    assert _cli("export", "--problem", "reduction_2^22", "--format", "t4", "-o", "red_T4.json",
                cwd=tmp_path).returncode == 0
    proc = _cli("compare", str(POCL_CACHE), "red_T4.json", "--strategies", "random", "--kernel-tuner",
                "random_sample", "--repeats", "1", "--max-evals", "5", "--jobs", "1", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "red_T4" in proc.stdout and "kernel_tuner" in proc.stdout


def test_compare_refuses_an_unreadable_file_up_front_naming_it(tmp_path):
    (tmp_path / "notes.json.gz").write_text("not gzip")
    proc = _cli("compare", str(POCL_CACHE), "notes.json.gz", "--kernel-tuner", "random_sample", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "notes.json.gz" in proc.stderr


@pytest.mark.parametrize("damage", ["text", "truncated"])
def test_a_corrupt_database_is_one_line_naming_the_file(tmp_path, damage):
    if damage == "text":
        (tmp_path / "bad.db").write_text("hello\n")
    else:
        assert _cli("import", str(POCL_CACHE), "--db", "good.db", cwd=tmp_path).returncode == 0
        (tmp_path / "bad.db").write_bytes((tmp_path / "good.db").read_bytes()[:20000])
    proc = _cli("show", "--db", "bad.db", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "bad.db" in proc.stderr, proc.stderr


def test_a_kernel_source_that_names_a_file_is_read_or_not_found(tmp_path, monkeypatch):
    """Kernel Tuner's rule: a short string with '.c' and no code characters is a file name."""
    import adaptune as at

    monkeypatch.chdir(tmp_path)
    x = np.zeros(16, np.float32)
    with pytest.raises(FileNotFoundError, match=r"^not found: broken\.cl$"):
        at.KernelSpec("broken.cl", "scale", [x])
    (tmp_path / "scale.cl").write_text("__kernel void scale(__global float *x) { x[get_global_id(0)] *= 2.0f; }\n")
    spec = at.KernelSpec("scale.cl", "scale", [x])
    assert "x[get_global_id(0)] *= 2.0f" in spec.source_text and spec.lang == "opencl"


# --- progress: on by default in a terminal, never in a pipe or a log ---------------------------------
def _tune_with_stderr_on(stderr_tty: bool, tmp_path: Path) -> str:
    import pty

    script = TINY_SCRIPT.replace(", progress=False)", ")")  # the default, as a reader writes it
    if not stderr_tty:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                              env=_env(), timeout=240)
        _assert_tuned(proc)
        return proc.stderr
    leader, follower = pty.openpty()
    env = dict(_env(), COLUMNS="120", TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=follower, text=True,
                            cwd=tmp_path, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=240)
    os.close(leader)
    _assert_tuned(subprocess.CompletedProcess(proc.args, proc.returncode, out, ""))
    return b"".join(chunks).decode(errors="replace")


def test_tuning_shows_progress_in_a_terminal_and_none_in_a_pipe(tmp_path):
    (tmp_path / "tty").mkdir()
    (tmp_path / "pipe").mkdir()
    shown = _tune_with_stderr_on(True, tmp_path / "tty")
    assert "vadd" in shown and "3/3" in shown, shown[-2000:]
    piped = _tune_with_stderr_on(False, tmp_path / "pipe")
    assert "3/3" not in piped and "━" not in piped, piped[-2000:]
