"""adaptune.triton.autotune on real Triton kernels, run by Triton's interpreter on the CPU (no GPU in CI)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="the triton extra (pip install 'adaptune[triton]') is not installed")

import tkernels  # noqa: E402  (sets TRITON_INTERPRET before Triton decorates anything)
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from adaptune import triton as at  # noqa: E402
from adaptune.space import Space  # noqa: E402
from adaptune.store import Store  # noqa: E402

BLOCKS = (16, 32, 64)


def make(db, blocks=BLOCKS, policy="tune", pre_hook=None, **options):
    @at.autotune(configs=[at.Config({"BLOCK": b}, pre_hook=pre_hook) for b in blocks], key=["n"], db=str(db),
                 policy=policy, **options)
    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)

    return add


def call(kernel, n):
    x, y, out = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.empty(n)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    assert torch.equal(out, x + y)


def rows(db) -> list:
    with Store(db) as store:
        return store.results()


def test_tune_stores_one_row_per_config_and_hits_touch_nothing(tmp_path):
    db = tmp_path / "t.db"
    add = make(db)
    call(add, 40)
    assert add.stats.measured == 3 and len(rows(db)) == 3
    key = (40, "torch.float32", "torch.float32", "torch.float32")  # Triton's key: values, then dtypes
    assert add.cache[key] is add.best_config
    call(add, 40)
    assert add.stats.measured == 3 and add.stats.reused == 0
    again = make(db)  # a new process with the same store: nothing is measured again
    call(again, 40)
    assert again.stats.measured == 0 and again.stats.reused == 3


def test_keys_match_triton_autotune(tmp_path):
    from adaptune.integrations.triton.environment import host_bench

    ours = make(tmp_path / "t.db", blocks=(16, 32))
    theirs = triton.autotune([triton.Config({"BLOCK": b}) for b in (16, 32)], key=["n"], do_bench=host_bench)(
        ours.fn)
    for kernel in (ours, theirs):
        call(kernel, 20)
    assert list(ours.cache) == list(theirs.cache)


def test_adding_a_config_measures_only_it(tmp_path):
    db = tmp_path / "t.db"
    call(make(db, blocks=(16, 32)), 40)
    more = make(db, blocks=(16, 32, 64))
    call(more, 40)
    assert (more.stats.measured, more.stats.reused) == (1, 2)


def test_changed_source_never_reuses_rows(tmp_path):
    db = tmp_path / "t.db"
    call(make(db), 40)

    @at.autotune(configs=[at.Config({"BLOCK": b}) for b in BLOCKS], key=["n"], db=str(db))
    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):  # same name, new body
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.load(y + offs, mask=mask) + tl.load(x + offs, mask=mask), mask=mask)

    call(add, 40)
    assert (add.stats.measured, add.stats.reused) == (3, 0)
    with Store(db) as store:
        assert len(store.problems()) == 2


def test_predict_benchmarks_nothing_for_an_unseen_key(tmp_path):
    db = tmp_path / "t.db"
    tuner = make(db)
    for n in (20, 40, 70):
        call(tuner, n)
    predictor = make(db, policy="predict")
    call(predictor, 50)
    assert predictor.stats.measured == 0 and predictor.stats.predicted == 1
    assert predictor.stats.fits and predictor.best_config in predictor.configs


def _timed_by_rule(db, policy):
    """A kernel whose do_bench (Triton's injectable timer) reports a known time: BLOCK 16 wins below n = 48,
    BLOCK 64 above; the kernel itself still runs (on the interpreter) for every measurement."""
    current = {}

    def remember(nargs):
        current.update(block=nargs["BLOCK"], n=nargs["n"])

    def do_bench(fn, quantiles=None):
        fn()
        best = 16 if current["n"] < 48 else 64
        t = 1.0 if current["block"] == best else 2.0
        return [t, t, t]

    return make(db, policy=policy, pre_hook=remember, do_bench=do_bench)


def test_the_model_learns_which_config_wins_where(tmp_path):
    db = tmp_path / "t.db"
    tuner = _timed_by_rule(db, "tune")
    for n in (4, 8, 16, 24, 32, 40, 56, 64, 80, 96, 112, 128):
        call(tuner, n)
    predictor = _timed_by_rule(db, "predict")
    chosen = {}
    for n in (6, 20, 36, 72, 100, 120):
        call(predictor, n)
        chosen[n] = predictor.best_config.kwargs["BLOCK"]
    assert predictor.stats.measured == 0
    assert chosen == {6: 16, 20: 16, 36: 16, 72: 64, 100: 64, 120: 64}


def test_predict_without_stored_timings_warns_and_runs_the_first_config(tmp_path):
    add = make(tmp_path / "t.db", policy="predict")
    with pytest.warns(RuntimeWarning, match="no stored timings"):
        call(add, 30)
    assert add.best_config is add.configs[0] and add.stats.measured == 0


def test_predict_tune_measures_top_k_in_the_background(tmp_path):
    db = tmp_path / "t.db"
    for n in (20, 70):
        call(make(db), n)
    add = make(db, policy="predict+tune", settings=at.TuneSettings(top_k=2))
    call(add, 45)
    assert add.stats.caller_s == 0.0  # the caller never measured
    add.wait()
    assert add.stats.measured == 2 and add.stats.background_s > 0
    key = (45, "torch.float32", "torch.float32", "torch.float32")
    with Store(db) as store:
        stored = store.results()
    assert [r.error for r in stored if not r.ok] == [] and len(stored) == 2 * 3 + 2
    assert add.cache[key] in add.configs
    call(add, 45)  # now a plain hit
    assert add.stats.predicted == 1


def test_measure_after_hits_measures_on_the_nth_call(tmp_path):
    db = tmp_path / "t.db"
    call(make(db), 20)
    add = make(db, policy="predict+tune", settings=at.TuneSettings(top_k=2, measure_after_hits=2))
    call(add, 33)
    assert add.stats.measured == 0
    call(add, 33)
    assert add.stats.measured == 2 and add.stats.caller_s > 0


def test_space_with_constraints_gives_the_configs(tmp_path):
    space = Space({"BLOCK": [16, 32, 64], "num_warps": [1, 4]}, constraints=["BLOCK >= 32"])
    kernel = at.autotune(None, key=["n"], space=space, db=str(tmp_path / "t.db"))(tkernels.add_kernel.fn)
    assert sorted((c.kwargs["BLOCK"], c.num_warps) for c in kernel.configs) == [(32, 1), (32, 4), (64, 1), (64, 4)]


def test_key_naming_no_argument_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="key 'm' names no argument of the kernel"):
        at.autotune([at.Config({"BLOCK": 16})], key=["m"], db=str(tmp_path / "t.db"))(tkernels.add_kernel.fn)


def test_all_configs_failing_raises_a_summary_with_the_first_error(tmp_path):
    db = tmp_path / "t.db"
    add = make(db, blocks=(3, 5))  # tl.arange needs a power of two
    with pytest.raises(at.AutotuneError, match=r"all 2 failed \(2 launch_error\); first error") as info:
        call(add, 30)
    assert "power of 2" in str(info.value)
    assert [r.ok for r in rows(db)] == [False, False]


def test_triton_cache_results_files_become_rows(tmp_path):
    db = tmp_path / "t.db"
    add = make(db)
    key = [40, "torch.float32", "torch.float32", "torch.float32"]
    cached = [(at.Config({"BLOCK": b}).__dict__, [t, t, t]) for b, t in zip(BLOCKS, (0.3, 0.1, 0.2), strict=True)]
    folder = tmp_path / "cache" / "abc123"
    folder.mkdir(parents=True)
    (folder / "add.autotune.json").write_text(json.dumps({"key": key, "configs_timings": cached}))
    (folder / "junk").mkdir()
    (folder / "junk" / "add.autotune.json").write_text("{not json")
    with pytest.warns(RuntimeWarning, match="not a Triton autotune cache file"):
        assert at.import_triton_cache(add, [tmp_path / "cache"], verify=False) == 3
    call(add, 40)
    assert add.stats.measured == 0 and add.best_config.kwargs["BLOCK"] == 32


def test_tune_ahead_in_process_then_reuses(tmp_path):
    db = str(tmp_path / "t.db")
    report = at.tune_ahead(tkernels.add_kernel, [{"n": 24}, {"n": 40}], tkernels.make_args, db=db, isolate=False)
    assert (report.keys, report.measured, report.failed) == (2, 6, {})
    again = at.tune_ahead(tkernels.add_kernel, [{"n": 24}], tkernels.make_args, db=db, isolate=False)
    assert (again.measured, again.reused) == (0, 3)


def test_verifying_a_cache_file_without_a_gpu_driver_is_a_clear_error(tmp_path):
    folder = tmp_path / "abc"
    folder.mkdir()
    entry = [(at.Config({"BLOCK": 16}).__dict__, [0.1, 0.1, 0.1])]
    (folder / "add.autotune.json").write_text(json.dumps({"key": [40], "configs_timings": entry}))
    with pytest.raises(ValueError, match="pass verify=False"):
        at.import_triton_cache(make(tmp_path / "t.db"), [tmp_path])


def test_prime_loads_stored_choices_without_measuring(tmp_path):
    db = tmp_path / "t.db"
    call(make(db), 40)
    fresh = make(db)
    key = (40, "torch.float32", "torch.float32", "torch.float32")
    assert fresh.prime([key, (41, "torch.float32", "torch.float32", "torch.float32")]) == 1
    call(fresh, 40)
    assert (fresh.stats.measured, fresh.stats.reused) == (0, 0)


@pytest.mark.slow
def test_cli_tunes_ahead_in_the_worker_and_records_a_crash(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([{"n": 20}]))
    db = tmp_path / "t.db"
    proc = subprocess.run([sys.executable, "-m", "adaptune", "triton", "tune", "tkernels:add_kernel",
                           "--make-args", "tkernels:make_args", "--keys", str(keys), "--db", str(db)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ":".join(sys.path), "TKERNELS_CRASH": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "1 keys: 3 configurations measured, 0 reused, 1 failed" in proc.stdout
    failed = [r for r in rows(db) if not r.ok]
    assert [r.config["BLOCK"] for r in failed] == [32] and failed[0].error.startswith("worker:")


@pytest.mark.slow
def test_tune_ahead_on_two_local_workers(tmp_path):
    from adaptune.distributed import LocalExecutor

    db = str(tmp_path / "t.db")
    report = at.tune_ahead("tkernels:add_kernel", [{"n": 24}, {"n": 40}], "tkernels:make_args", db=db,
                           executor=LocalExecutor([0, 1]), timeout_s=120)
    assert (report.keys, report.measured, report.failed) == (2, 6, {})
    assert len(rows(db)) == 6


@pytest.mark.slow
def test_another_process_reuses_timings_through_postgresql(tmp_path):
    pytest.importorskip("psycopg")
    from adaptune.distributed import local_postgres

    script = ("import tkernels, torch, triton\n"
              "grid, args, kwargs = tkernels.make_args({'n': 24})\n"
              "tkernels.add_kernel[grid](*args, **kwargs)\n"
              "print(tkernels.add_kernel.stats.measured, tkernels.add_kernel.stats.reused)\n")
    with contextlib.ExitStack() as stack:
        for attempt in range(3):  # pgserver's pg_ctl start fails now and then on a busy machine (seen 2 in ~15)
            try:
                url = stack.enter_context(local_postgres(tmp_path / f"pg{attempt}"))
                break
            except (subprocess.CalledProcessError, FileNotFoundError):
                if attempt == 2:
                    raise
        report = at.tune_ahead(tkernels.add_kernel, [{"n": 24}], tkernels.make_args, db=url, isolate=False)
        assert report.measured == 3
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": ":".join(sys.path), "ADAPTUNE_TRITON_DB": url})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "3"]
