"""Distributed tuning on real parts: a PostgreSQL server started here, a local Ray cluster, real processes.

Fault tests: writers whose connections are killed (pg_terminate_backend) mid-run, a Ray actor killed in the
middle of a measurement, a tuning driver killed and resumed. Each asserts zero lost and zero duplicated rows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

pytest.importorskip("ray")
pytest.importorskip("psycopg")

from adaptune.distributed import RayExecutor, terminate_other_connections  # noqa: E402
from adaptune.measure import CallableSpec  # noqa: E402
from adaptune.records import DeviceInfo, Result, Status  # noqa: E402
from adaptune.search.replay import Replay  # noqa: E402
from adaptune.space import Space  # noqa: E402
from adaptune.store import Store  # noqa: E402
from adaptune.store.db import engine_url  # noqa: E402
from adaptune.tuning import Problem, tune  # noqa: E402
from adaptune.tuning.spec_file import load_problem  # noqa: E402

SRC = str(Path(__file__).resolve().parents[1] / "src")
VADD = Path(__file__).parent / "specs" / "vadd_spec.py"
GPU = DeviceInfo(name="Writer GPU", platform="test", driver="1")


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}})
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _key_stats(url: str) -> tuple[int, int]:
    """(rows, duplicated keys) of the measurements table, counted by the server itself."""
    engine = sa.create_engine(engine_url(url), poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        if conn.execute(sa.text("SELECT to_regclass('measurements')")).scalar_one() is None:
            return 0, 0  # not created yet
        rows = conn.execute(sa.text("SELECT count(*) FROM measurements")).scalar_one()
        dups = conn.execute(sa.text(
            "SELECT count(*) FROM (SELECT 1 FROM measurements GROUP BY device_id, problem_id, input_id, "
            "config_key HAVING count(*) > 1) d")).scalar_one()
    engine.dispose()
    return int(rows), int(dups)


# ---------------------------------------------------------------------------------------------- the store
def test_postgres_store_is_idempotent_per_key(pg_url):
    with Store(pg_url) as store:
        assert store.dialect == "postgresql"
        d = store.device(GPU)
        p = store.problem("k", "h", {"x": [1, 2]})
        i = store.input(p, "n=1")
        results = [Result.from_samples({"x": x}, [float(x)]) for x in range(10)]
        assert store.put_many(d, p, i, results + results[:3]) == 10  # a key twice in one batch: the last wins
        store.put_many(d, p, i, results)
        store.put(d, p, i, Result.failure({"x": 3}, Status.TIMEOUT, "again"))
        assert store.count() == 10 and store.get(d, p, i, {"x": 3}).status == Status.TIMEOUT
        assert store.device(GPU) == d and store.problem("k", "h") == p  # get-or-create finds the same rows
    assert _key_stats(pg_url) == (10, 0)


WRITER = textwrap.dedent("""
    import sys, time
    from adaptune.records import DeviceInfo, Result
    from adaptune.store import Store
    url, who, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = Store(url)
    d = store.device(DeviceInfo(name="Writer GPU", platform="test", driver="1"))
    p = store.problem("shared", "h0")
    i = store.input(p, "n=1")
    for k in range(n):
        # every writer writes the shared keys 0..n/2 and its own keys: overlapping upserts
        key = k if k < n // 2 else 1000 * (who + 1) + k
        store.put(d, p, i, Result.from_samples({"k": key}, [float(key) + 1]))
        time.sleep(0.002)
    print(store.retries, store.reconnects)
""")


def test_four_writers_survive_killed_connections_without_loss_or_duplicates(pg_url):
    n = 150
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_url, str(w), str(n)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
    killed = 0
    deadline = time.time() + 90
    while any(p.poll() is None for p in procs) and time.time() < deadline:
        time.sleep(0.4)
        killed += terminate_other_connections(pg_url)  # a server failover, every few hundred ms
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    assert killed > 0
    expected = n // 2 + 4 * (n - n // 2)
    rows, dups = _key_stats(pg_url)
    assert dups == 0
    assert rows == expected  # nothing lost
    # the kills really reached the writers: links they found dropped (by the pre-ping when killed idle in
    # the pool, or mid-transaction) and replaced; a kill mid-transaction also retries that write
    retries, reconnects = (sum(int(out.split()[k]) for out, _ in outs) for k in (-2, -1))
    assert reconnects >= 1, (retries, reconnects, killed)


def test_store_reconnects_after_its_connection_is_killed(pg_url):
    with Store(pg_url) as store:
        d = store.device(GPU)
        p = store.problem("k", "h")
        i = store.input(p, "n=1")
        store.put(d, p, i, Result.from_samples({"x": 1}, [1.0]))
        assert terminate_other_connections(pg_url) >= 1
        store.put(d, p, i, Result.from_samples({"x": 2}, [2.0]))  # the pooled connection is dead: reconnect
        assert store.count() == 2
        assert terminate_other_connections(pg_url) >= 1
        assert len(store.results()) == 2


# ---------------------------------------------------------------------------------------------- Ray
def test_tune_on_local_ray_cluster_then_resume_locally(ray_cluster, pg_url):
    problem = load_problem(VADD)
    report = tune(problem, "brute_force", repeats=2, db=pg_url, progress=False, executor="ray", n_parallel=2)
    assert report.evaluated == len(problem.space) and report.failed == 0
    assert _key_stats(pg_url) == (len(problem.space), 0)
    assert report.default == problem.space.config(problem.space.default_index())
    # again with two local workers (no Ray): every stored row is reused, nothing is measured
    again = tune(problem, "brute_force", repeats=2, db=pg_url, progress=False, executor="local", n_parallel=2)
    assert again.reused == again.evaluated == len(problem.space) and again.best == report.best


def test_mixed_devices_are_tuned_per_kind_and_never_mixed(ray_cluster, pg_url):
    # two really different OpenCL devices of this host (PoCL's multi-threaded and single-threaded drivers),
    # one Ray actor each, as on a cluster with two GPU models: one search, one set of rows per device kind
    problem = load_problem(VADD)
    executor = RayExecutor(devices=["pthread", "basic"],
                           runtime_env={"env_vars": {"POCL_DEVICES": "pthread basic"}})
    report = tune(problem, "brute_force", repeats=1, db=pg_url, progress=False, executor=executor)
    reports = [report, *report.others]
    assert sorted(r.device.name.split("-")[0] for r in reports) == ["basic", "pthread"]
    for r in reports:  # each kind measured the whole space itself, nothing borrowed from the other
        assert r.evaluated == len(problem.space) and r.failed == 0 and r.reused == 0
    with Store(pg_url) as store:
        rows = store.results()
        per_device = {}
        for r in reports:
            per_device[r.device.name] = len(store.results(device_id=store.device(r.device)))
    assert per_device == {r.device.name: len(problem.space) for r in reports}
    assert len(rows) == 2 * len(problem.space) and _key_stats(pg_url) == (2 * len(problem.space), 0)


def test_compilation_fanned_out_to_cpu_actors(ray_cluster, pg_url):
    from adaptune.measure import MeasureSettings

    problem = load_problem(VADD)
    configs = [problem.space.config(i) for i in range(len(problem.space))]
    # the mechanism: binaries made by two CPU-only actors reach the measuring actor before its measurements
    executor = RayExecutor(n_workers=1, compile_workers=2)
    try:
        executor.start(problem.spec, "opencl", MeasureSettings(repeats=1))
        executor.prefetch(0, configs)
        deadline = time.time() + 120
        while executor._compiling and time.time() < deadline:
            executor.wait(timeout=0.5)
        assert not executor._compiling
        results = []
        for config in configs:
            executor.submit(0, config)
            while not (done := executor.wait(timeout=1.0)):
                pass
            results += [c.result for c in done]
        assert all(r is not None and r.ok for r in results) and len(results) == len(configs)
        (stats,) = executor.worker_stats()
        assert stats["loaded_binaries"] == len(configs) and stats["compiles"] == 0
    finally:
        executor.close()
    # in a tuning run binaries arrive when they arrive: each kernel is loaded or compiled, nothing is lost
    executor = RayExecutor(n_workers=1, compile_workers=2)
    report = tune(problem, "brute_force", repeats=1, db=pg_url, progress=False, executor=executor)
    assert report.evaluated == len(problem.space) and report.failed == 0
    (stats,) = executor.final_stats
    assert stats["compiles"] + stats["loaded_binaries"] == len(problem.space)
    assert _key_stats(pg_url) == (len(problem.space), 0)


def test_model_based_strategy_with_two_asks_in_flight(tmp_path):
    problem = load_problem(VADD)
    auto = tune(problem, "auto", max_evals=8, repeats=1, db=str(tmp_path / "a.db"), progress=False,
                n_parallel=2, seed=1)
    assert auto.evaluated == 8  # the budget holds with two workers
    assert len({problem.space.key(r.config) for r in auto.results}) == 8  # nothing asked twice


def test_ray_executor_refuses_more_workers_than_the_cluster_can_place(ray_cluster):
    from adaptune.measure import MeasureSettings

    with pytest.raises(RuntimeError, match="cannot place 64 measurement workers"):
        RayExecutor(n_workers=64).start(CallableSpec(lambda config: None), "python", MeasureSettings())


def _sleepy_problem(n: int = 10, sleep_s: float = 0.4) -> Problem:
    def sleepy(config, *args):
        import time as _t

        _t.sleep(sleep_s * (1 + config["x"] / 100))
        return None

    return Problem("sleepy", CallableSpec(sleepy), Space({"x": list(range(n))}), input_name="default")


def test_actor_killed_mid_measurement_loses_and_duplicates_nothing(ray_cluster, pg_url):
    problem = _sleepy_problem()
    executor = RayExecutor(n_workers=2)
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("report", tune(
        problem, "brute_force", repeats=1, warmup=0, verify=False, backend="python", db=pg_url,
        progress=False, executor=executor, discard_factor=None)))
    thread.start()
    deadline = time.time() + 60
    while (not executor.pids or _key_stats(pg_url)[0] < 2) and time.time() < deadline:
        time.sleep(0.1)
    os.kill(executor.pids[0], signal.SIGKILL)  # the actor process itself, in the middle of a measurement
    thread.join(timeout=120)
    report = box["report"]
    assert executor.lost >= 1  # the kill really interrupted a measurement
    assert report.evaluated == len(problem.space)
    assert all(r.status == Status.OK for r in report.results), [(r.status, r.error[:300]) for r in report.results if not r.ok]  # the interrupted config was measured again
    assert _key_stats(pg_url) == (len(problem.space), 0)


def test_crashing_kernel_costs_one_record_not_the_actor(ray_cluster, pg_url):
    def crashes_on_3(config, *args):
        import os as _os

        if config["x"] == 3:
            _os._exit(7)  # the measurement worker process dies, as with a kernel that segfaults
        return None

    problem = Problem("crashy", CallableSpec(crashes_on_3), Space({"x": list(range(6))}))
    executor = RayExecutor(n_workers=2)
    report = tune(problem, "brute_force", repeats=1, warmup=0, verify=False, backend="python", db=pg_url,
                  progress=False, executor=executor)
    bad = [r for r in report.results if not r.ok]
    assert [r.config for r in bad] == [{"x": 3}] and bad[0].status == Status.LAUNCH_ERROR
    assert executor.lost == 0  # the actors lived: only their measurement worker process was respawned
    assert _key_stats(pg_url) == (6, 0)


DRIVER = textwrap.dedent("""
    import json, sys
    from adaptune.measure import CallableSpec
    from adaptune.space import Space
    from adaptune.tuning import Problem, tune

    def sleepy(config, *args):
        import time
        time.sleep(0.3)

    problem = Problem("driver_kill", CallableSpec(sleepy), Space({"x": list(range(12))}))
    report = tune(problem, "brute_force", repeats=1, warmup=0, verify=False, backend="python", db=sys.argv[1],
                  progress=False, executor="ray", address=sys.argv[2], n_parallel=2, discard_factor=None)
    print(json.dumps(report.to_json()))
""")


def test_driver_killed_then_resumed_reuses_everything_stored(ray_cluster, pg_url):
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, pg_url, ray_cluster], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while _key_stats(pg_url)[0] < 4 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.kill()
    proc.communicate()
    before, dups = _key_stats(pg_url)
    assert 4 <= before < 12 and dups == 0
    out = subprocess.run([sys.executable, "-c", DRIVER, pg_url, ray_cluster], env=_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["evaluated"] == 12 and report["reused"] >= before
    assert _key_stats(pg_url) == (12, 0)


def test_cli_tune_ray_address(ray_cluster, pg_url):
    out = subprocess.run([sys.executable, "-m", "adaptune", "tune", str(VADD), "--strategy", "random",
                          "--max-evals", "6", "--repeats", "1", "--db", pg_url, "--json", "--seed", "2",
                          "--ray", ray_cluster, "--workers", "2"],
                         env=_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert data["evaluated"] == 6
    rows, dups = _key_stats(pg_url)
    assert dups == 0 and rows in (6, 7)  # 7 when the default configuration was measured for the speed-up


# ---------------------------------------------------------------------------------------------- search
def test_batch_asks_with_constant_liar_never_repeat_and_spread(tmp_path):
    import numpy as np

    space = Space({"a": list(range(12)), "b": list(range(12))})
    t = np.asarray(space.table, dtype=float)
    values = (t[:, 0] - 7.0) ** 2 + (t[:, 1] - 3.0) ** 2 + 1.0
    replay = Replay(space, values)
    from adaptune.search.base import Budget

    for liar in (None, "min"):
        trace = replay.run("auto", Budget(max_evals=60), seed=3, n_parallel=2, liar=liar)
        assert len(trace) == 60 and len(set(trace.indices.tolist())) == 60
    with pytest.raises(ValueError, match="liar"):
        replay.run("auto", Budget(max_evals=40), seed=3, n_parallel=2, liar="median")


# ---------------------------------------------------------------------------------------------- labelling
def _toy_code_variant(with_space: bool = False):
    """Variants with an exact, deterministic cost (``work``), so a serial and a Ray labelling must agree;
    ``with_space``: one more variant whose parameter ``tile`` is searched per input (best tile = n % 5)."""
    from adaptune.adaptive import CodeVariant

    def linear(n, kind):
        return n, 10.0 + n

    def quadratic(n, kind):
        return n, 1.0 + n * n / 50.0

    def special(n, kind):
        return n, 1.0

    def fragile(n, kind):
        if n % 3 == 0:
            raise RuntimeError("fragile fails on multiples of 3")
        return n, 5.0

    cv = CodeVariant("toy_ray", objective="work", metrics=lambda run: {"work": run()[1]},
                     verify=lambda ref, out: ref[0] == out[0])
    cv.variant(linear, default=True)
    for f in (quadratic, special, fragile):
        cv.variant(f)
    cv.constraint(special)(lambda n, kind: kind == "special")
    if with_space:
        def tiled(n, kind, tile=0):
            return n, 2.0 + abs(tile - n % 5)

        cv.variant(tiled, space=Space({"tile": list(range(5))}), strategy="brute_force", budget=5)
    cv.feature(lambda n, kind: float(n), name="size")
    cv.feature(lambda n, kind: float(kind == "special"), name="is_special")
    return cv


def test_ray_map_survives_a_killed_actor_without_losing_or_repeating_items(ray_cluster):
    from adaptune.distributed.tasks import ray_map

    def _slow_pid(x: int) -> tuple[int, int]:  # defined here: Ray ships it by value (tests do not import)
        import os as _os
        import time as _t

        _t.sleep(0.4)
        return x * x, _os.getpid()

    got, killed = {}, None
    for position, (square, pid) in ray_map(_slow_pid, [(x,) for x in range(8)], n_workers=2, num_gpus=0):
        assert position not in got  # each item comes back once
        got[position] = (square, pid)
        if killed is None:
            killed = pid
            os.kill(pid, signal.SIGKILL)  # the actor's process; Ray restarts it and repeats its call
    assert {p: sq for p, (sq, _) in got.items()} == {x: x * x for x in range(8)}
    assert len({pid for _, pid in got.values()} - {killed}) >= 2  # the other actor and the restarted one


def test_code_variant_labelling_on_ray_matches_serial_labelling(ray_cluster, pg_url, tmp_path):
    train = [(f"n{n}-{k}", (n, k)) for n in range(1, 100, 9) for k in ("plain", "special")]
    serial = _toy_code_variant().train(train, model="tree", repeats=1, db=str(tmp_path / "s.db"), progress=False)
    cv = _toy_code_variant()
    parallel = cv.train(train, model="tree", repeats=1, db=pg_url, progress=False, executor="ray")
    assert parallel.labels == serial.labels
    assert sorted(map(str, parallel.failures)) == sorted(map(str, serial.failures))
    rows, dups = _key_stats(pg_url)
    assert rows == len(train) * 4 and dups == 0  # every input x variant once, failures included
    with Store(str(tmp_path / "s.db")) as s, Store(pg_url) as p:
        key = {(r.config["variant"], r.status, r.observers.get("work")) for r in s.results()}
        assert key == {(r.config["variant"], r.status, r.observers.get("work")) for r in p.results()}
    assert cv.select(50, "special").variant == "special"


def test_labelling_with_searched_variants_runs_the_searches_on_ray(ray_cluster, pg_url, tmp_path):
    # the per-input search of a variant with a Space runs on the actors too, and gives what serial gives
    train = [(f"n{n}", (n, "plain")) for n in range(1, 60, 7)]
    serial = _toy_code_variant(True).train(train, model="tree", repeats=1, db=str(tmp_path / "s.db"),
                                          progress=False)
    parallel = _toy_code_variant(True).train(train, model="tree", repeats=1, db=pg_url, progress=False,
                                            executor="ray")
    assert parallel.labels == serial.labels and any("tile=" in str(lab) for lab in parallel.labels)
    with Store(str(tmp_path / "s.db")) as s, Store(pg_url) as p:
        key = {(r.config["variant"], r.config.get("tile"), r.status, r.observers.get("work")) for r in s.results()}
        assert key == {(r.config["variant"], r.config.get("tile"), r.status, r.observers.get("work"))
                       for r in p.results()}
        assert len(p.results()) == len(s.results())
    assert _key_stats(pg_url)[1] == 0
    # a second Ray labelling of the same inputs finds everything stored (searched configurations too)
    again = _toy_code_variant(True).train(train, model="tree", repeats=1, db=pg_url, progress=False,
                                         executor="ray")
    assert again.measured == 0 and again.labels == parallel.labels
