"""Every query of the store interface, over every store: an SQLite file, an in-memory SQLite store and a real
PostgreSQL server (started by the ``pg`` fixture). Expected answers are computed here from the results the
test wrote, never read back from the store under test."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import sqlalchemy as sa

from adaptune.records import DeviceInfo, Result, Status
from adaptune.store import BaseStore, RunKey, Store, config_key
from adaptune.store.codec import config_hash
from adaptune.store.db import LOOKUP_BATCH, MEMORY

GPU = DeviceInfo(name="GPU A", platform="test", driver="1")
GPU2 = DeviceInfo(name="GPU B", platform="test", driver="1")


@pytest.fixture(params=["sqlite", "memory", "postgresql"])
def store(request, tmp_path) -> BaseStore:
    if request.param == "postgresql":
        target = request.getfixturevalue("pg_url")
    else:
        target = tmp_path / "conformance.db" if request.param == "sqlite" else MEMORY
    with Store(target) as s:
        yield s


def ok(config: dict, t: float, ts: float = 0.0) -> Result:
    return Result(config=config, status=Status.OK, time_ms=t, samples=[t, t * 1.1], timestamp=ts)


def failed(config: dict, status: Status = Status.COMPILE_ERROR) -> Result:
    return Result.failure(config, status, f"{status} of {config}")


def fill(store: BaseStore, times: list[float | None], device: DeviceInfo = GPU, input_name: str = "n=1",
         problem: str = "vadd") -> RunKey:
    """One run: configuration {"x": i} with time times[i] (None: a compile error), stored in that order."""
    run = store.run(device, problem, "h1", input_name, space_desc={"params": {"x": list(range(len(times)))}})
    store.put_stream(run, [ok({"x": i}, t, ts=i) if t is not None else failed({"x": i})
                           for i, t in enumerate(times)], chunk_size=7)
    return run


def expected_counts(times: list[float | None]) -> dict[str, int]:
    counts = {}
    if any(t is not None for t in times):
        counts["ok"] = sum(t is not None for t in times)
    if any(t is None for t in times):
        counts["compile_error"] = sum(t is None for t in times)
    return counts


def test_registration_and_listings(store):
    run = fill(store, [3.0, None, 1.0])
    assert store.run(GPU, "vadd", "h1", "n=1") == run  # get-or-create
    assert store.device(GPU2) != run.device_id
    assert store.problem("vadd", "other-source") != run.problem_id
    assert [(d.name, d.measurements) for d in store.devices()] == [("GPU A", 3), ("GPU B", 0)]
    assert store.device_info(run.device_id) == GPU
    problems = {p.name + p.source_hash: p for p in store.problems()}
    p = problems["vaddh1"]
    assert (p.measurements, p.failed, p.devices, p.inputs, p.best_time_ms) == (3, 1, 1, 1, 1.0)
    assert math.isinf(problems["vaddother-source"].best_time_ms)
    assert [x.id for x in store.problems("vadd")] == sorted(x.id for x in problems.values())
    assert store.problems("nothing") == []
    assert store.problem_info(run.problem_id).space == {"params": {"x": [0, 1, 2]}}
    assert [(i.name, i.measurements) for i in store.inputs(run.problem_id)] == [("n=1", 3)]
    with pytest.raises(KeyError):
        store.problem_info(999)
    with pytest.raises(KeyError):
        store.device_info(999)


def test_round_trip_keeps_every_field(store):
    run = store.run(GPU, "p", "h", "i")
    r = Result(config={"bs": np.int64(64), "mode": "fast", "on": True}, status=Status.OK, time_ms=1.5,
               samples=[1.5, float("nan"), 1.75], compile_ms=12.0, verify_ms=0.5, benchmark_ms=6.0,
               observers={"energy_j": 0.25, "power_w": np.float32(80.0), "bad": float("inf")}, timestamp=123.5)
    store.put(*run, r)
    got = store.get(*run, {"on": True, "mode": "fast", "bs": 64})  # key order and NumPy do not matter
    assert got.config == {"bs": 64, "mode": "fast", "on": True} and got.status == Status.OK
    assert got.time_ms == 1.5 and got.samples[0] == 1.5 and math.isnan(got.samples[1])
    assert (got.compile_ms, got.verify_ms, got.benchmark_ms, got.timestamp) == (12.0, 0.5, 6.0, 123.5)
    assert got.observers["energy_j"] == 0.25 and got.observers["power_w"] == 80.0
    assert math.isnan(got.observers["bad"])  # strict JSON has no infinity: it comes back as NaN
    f = failed({"bs": 1, "mode": "x", "on": False}, Status.TIMEOUT)
    f.time_ms = 5.0  # a failure's time is not kept: only successes carry one
    store.put(*run, f)
    back = store.get(*run, f.config)
    assert back.status == Status.TIMEOUT and math.isinf(back.time_ms) and back.error == f.error
    assert store.get(*run, {"bs": 2, "mode": "x", "on": False}) is None


def test_writes_are_idempotent_and_counts_follow_replacements(store):
    times = [float(i + 1) for i in range(30)]
    run = fill(store, times)
    assert store.count() == 30
    assert store.put_stream(run, [ok({"x": i}, float(i + 1)) for i in range(30)], chunk_size=4) == 30
    assert store.count() == 30 and store.status_counts() == {"ok": 30}
    store.put(*run, failed({"x": 3}, Status.TIMEOUT))  # replaced: status moves
    assert store.status_counts(run.problem_id) == {"ok": 29, "timeout": 1}
    assert store.count(status="timeout") == 1 and store.count(run.problem_id, run.device_id, run.input_id) == 30
    # replace=False keeps what is stored and adds what is new
    written = store.put_stream(run, [ok({"x": 3}, 0.5), ok({"x": 99}, 0.25)], replace=False)
    assert written == 2 and store.get(*run, {"x": 3}).status == Status.TIMEOUT
    assert store.get(*run, {"x": 99}).time_ms == 0.25 and store.count() == 31
    # a repeated key within one batch: the last one wins
    assert store.put_many(*run, [ok({"x": 50}, 9.0), ok({"x": 50}, 8.0)]) == 1
    assert store.get(*run, {"x": 50}).time_ms == 8.0
    assert store.delete(status=Status.TIMEOUT) == 1
    assert store.status_counts() == {"ok": 31} and store.count() == 31
    assert store.delete(problem_id=run.problem_id) == 31 and store.count() == 0 and store.status_counts() == {}


def test_top_best_and_merge_across_runs(store):
    a = fill(store, [5.0, 2.0, None, 2.0, 9.0])
    b = fill(store, [4.0, 1.5, 3.0], device=GPU2)
    c = fill(store, [0.5, 7.0], input_name="n=2")
    top = store.top(a.problem_id, 4)
    assert [(s.run, s.result.time_ms) for s in top] == [(c, 0.5), (b, 1.5), (a, 2.0), (a, 2.0)]
    assert [s.result.config for s in top[2:]] == [{"x": 1}, {"x": 3}]  # ties in order of arrival
    assert top[0].id < top[1].id or top[0].run != top[1].run
    assert [s.result.time_ms for s in store.top(a.problem_id, 3, device_id=a.device_id)] == [0.5, 2.0, 2.0]
    assert [s.result.time_ms for s in store.top(a.problem_id, 10, device_id=a.device_id, input_id=a.input_id)] == \
        [2.0, 2.0, 5.0, 9.0]
    assert store.top(a.problem_id, 0) == [] and store.top(999, 3) == []
    assert store.best(*a).config == {"x": 1} and store.best(*b).time_ms == 1.5


def test_trajectory_lists_each_improvement(store):
    times = [5.0, None, 6.0, 4.0, 4.0, 7.0, 1.0, None, 3.0, 0.5]
    run = fill(store, times)
    trajectory = store.trajectory(run)
    assert trajectory.evaluations == len(times)
    expected, best = [], math.inf
    for n, t in enumerate(times, 1):
        if t is not None and t < best:
            best = t
            expected.append((n, t, {"x": n - 1}))
    assert [(p.evaluation, p.best_ms, p.config) for p in trajectory.points] == expected
    assert [p.timestamp for p in trajectory.points] == [float(n - 1) for n, _, _ in expected]
    empty = fill(store, [None, None], input_name="all failed")
    assert store.trajectory(empty).points == [] and store.trajectory(empty).evaluations == 2


def test_page_sorts_filters_and_counts(store):
    rng = random.Random(1)
    times = [None if i % 5 == 0 else round(rng.uniform(1, 100), 3) for i in range(40)]
    run = fill(store, times)
    by_time = sorted((t, i) for i, t in enumerate(times) if t is not None)
    failures = [i for i, t in enumerate(times) if t is None]
    order = [i for _, i in by_time] + failures  # failures last, in order of arrival
    for offset, limit in ((0, 10), (25, 10), (30, 20), (45, 5)):
        page = store.page(run, offset=offset, limit=limit)
        assert page.total == 40 and [s.result.config["x"] for s in page.rows] == order[offset:offset + limit]
    slowest = store.page(run, limit=3, descending=True)
    assert [s.result.config["x"] for s in slowest.rows] == [i for _, i in sorted(by_time, key=lambda p: (-p[0],
                                                                                                      p[1]))][:3]
    fails = store.page(run, status="compile_error", limit=100)
    assert fails.total == len(failures) and [s.result.config["x"] for s in fails.rows] == failures
    by_id = store.page(run, order_by="id", descending=True, limit=5)
    assert [s.result.config["x"] for s in by_id.rows] == list(range(39, 34, -1))
    filtered = store.page(run, where={"x": 7})
    assert filtered.total == 1 and filtered.rows[0].result.config == {"x": 7}


def test_page_by_parameter_sorts_numbers_then_text(store):
    run = store.run(GPU, "mixed", "h", "i")
    configs = [{"bs": 128, "kind": "b"}, {"bs": 32, "kind": "a"}, {"bs": 1024, "kind": "a"}, {"bs": 64, "kind": "c"}]
    store.put_many(*run, [ok(c, float(i + 1)) for i, c in enumerate(configs)])
    assert [s.result.config["bs"] for s in store.page(run, order_by="bs").rows] == [32, 64, 128, 1024]
    assert [s.result.config["bs"] for s in store.page(run, order_by="bs", descending=True).rows] == \
        [1024, 128, 64, 32]
    page = store.page(run, order_by="bs", where={"kind": "a"})
    assert page.total == 2 and [s.result.config["bs"] for s in page.rows] == [32, 1024]
    assert [s.result.config["kind"] for s in store.page(run, order_by="kind").rows] == ["a", "a", "b", "c"]
    with pytest.raises(ValueError, match="parameter"):
        store.page(run, order_by='x"; DROP TABLE measurements; --')
    assert store.count() == 4  # the name never reached SQL as text


def test_time_histogram_counts_every_success(store):
    times = [0.1 * 2 ** (i % 12) for i in range(60)] + [None] * 4
    run = fill(store, times)
    bins = store.time_histogram(run, bins=12)
    assert len(bins) == 12 and sum(b.count for b in bins) == 60
    assert bins[0].low == pytest.approx(0.1) and bins[-1].high == pytest.approx(0.1 * 2 ** 11)
    assert all(b.count == 5 for b in bins)  # one value per log-spaced bin, five times each
    linear = store.time_histogram(run, bins=4, log=False)
    assert sum(b.count for b in linear) == 60 and linear[0].count > linear[-1].count
    assert store.time_histogram(fill(store, [None], input_name="none")) == []


def test_device_input_and_run_summaries(store):
    a = fill(store, [3.0, 2.0, None])
    b = fill(store, [1.0, None, None], device=GPU2)
    c = fill(store, [0.5], input_name="n=2")
    devices = {s.name: s for s in store.device_summaries(a.problem_id)}
    assert devices["GPU A"].counts == {"ok": 3, "compile_error": 1} and devices["GPU A"].best_time_ms == 0.5
    assert devices["GPU A"].best_config == {"x": 0} and devices["GPU B"].measurements == 3
    inputs = {s.name: s for s in store.input_summaries(a.problem_id)}
    assert inputs["n=1"].best_time_ms == 1.0 and inputs["n=1"].measurements == 6
    on_a = {s.name: s for s in store.input_summaries(a.problem_id, device_id=a.device_id)}
    assert on_a["n=1"].best_time_ms == 2.0 and on_a["n=1"].best_config == {"x": 1}
    runs = {s.run: s for s in store.runs()}
    assert set(runs) == {a, b, c}
    assert (runs[b].device, runs[b].problem, runs[b].input, runs[b].counts, runs[b].failed) == \
        ("GPU B", "vadd", "n=1", {"ok": 1, "compile_error": 2}, 2)
    assert [s.run for s in store.runs(device_id=b.device_id)] == [b]
    assert sorted(store.measured_pairs(a.problem_id)) == sorted({(r.device_id, r.input_id) for r in (a, b, c)})
    all_failed = fill(store, [None], input_name="n=3")
    assert math.isinf({s.run: s for s in store.runs()}[all_failed].best_time_ms)


def test_stored_keys_and_get_many_in_batches(store):
    n = 2 * LOOKUP_BATCH + 17
    run = store.run(GPU, "big", "h", "i")
    store.put_stream(run, (ok({"x": i, "y": "s"}, 1.0 + i) for i in range(0, n, 2)), chunk_size=300)
    asked = [{"y": "s", "x": i} for i in range(n)]
    stored = store.stored_keys(run, asked)
    assert stored == {config_key({"x": i, "y": "s"}) for i in range(0, n, 2)}
    found = store.get_many(*run, asked[:10])
    assert sorted(r.config["x"] for r in found.values()) == [0, 2, 4, 6, 8]
    assert store.stored_keys(RunKey(run.device_id, run.problem_id, 999), asked[:5]) == set()


def test_iter_results_streams_in_order_of_arrival(store):
    a = fill(store, [float(i) for i in range(25)])
    b = fill(store, [1.0, None, 2.0], device=GPU2)
    streamed = list(store.iter_results(a.problem_id, a.device_id, a.input_id, chunk_size=4))
    assert [s.result.config["x"] for s in streamed] == list(range(25)) and all(s.run == a for s in streamed)
    assert [s.id for s in streamed] == sorted(s.id for s in streamed)
    whole = list(store.iter_results(problem_id=a.problem_id, chunk_size=3))
    assert len(whole) == 28 and {s.run for s in whole} == {a, b}
    assert [s.result.config for s in store.iter_results(status="compile_error")] == [{"x": 1}]
    assert len(list(store.iter_results(chunk_size=5))) == 28
    assert [r.config["x"] for r in store.results(problem_id=a.problem_id, device_id=b.device_id)] == [0, 1, 2]


def test_rows_since_follows_new_rows(store):
    assert store.latest_id() == 0
    run = fill(store, [1.0, 2.0])
    mark = store.latest_id()
    assert store.rows_since(mark) == []
    store.put_many(*run, [ok({"x": 5}, 0.5, ts=100.0), ok({"x": 6}, 0.7, ts=200.0)])
    new = store.rows_since(mark)
    assert [s.result.config["x"] for s in new] == [5, 6] and store.latest_id() == new[-1].id
    assert [s.result.config["x"] for s in store.rows_since(mark, limit=1)] == [5]
    assert [s.result.config["x"] for s in store.rows_since(0, since_timestamp=150.0)] == [6]
    assert store.rows_since(0, problem_id=run.problem_id + 1) == []


def test_counts_match_the_rows_after_mixed_writes(store):
    """run_counts (kept by triggers or by the writer) agrees with a plain GROUP BY after random writes."""
    rng = random.Random(7)
    runs = [store.run(d, "mix", "h", f"i{k}") for d in (GPU, GPU2) for k in range(2)]
    statuses = [Status.OK, Status.TIMEOUT, Status.COMPILE_ERROR]
    for _ in range(12):
        run = rng.choice(runs)
        batch = [Result(config={"x": (x := rng.randrange(30)), "k": "ab"[x % 2]}, status=(s := rng.choice(statuses)),
                        time_ms=rng.uniform(1, 2) if s == Status.OK else math.inf) for _ in range(rng.randrange(1, 20))]
        store.put_stream(run, batch, chunk_size=rng.choice([3, 50]), replace=rng.random() < 0.7)
        if rng.random() < 0.2:
            store.delete(input_id=rng.choice(runs).input_id, status=rng.choice(statuses))
    engine = store.db.engine
    with engine.connect() as conn:
        truth = {(int(d), int(p), int(i), s): int(n) for d, p, i, s, n in conn.execute(sa.text(
            "SELECT device_id, problem_id, input_id, status, count(*) FROM measurements "
            "GROUP BY device_id, problem_id, input_id, status"))}
        rows = conn.execute(sa.text("SELECT device_id, problem_id, input_id, status, time_ms, "
                                    "CAST(config AS TEXT) FROM measurements")).all()
        bins = {tuple(r[:4]): int(r[4]) for r in conn.execute(sa.text("SELECT * FROM run_time_bins WHERE n <> 0"))}
        params = {tuple(r[:6]): int(r[6]) for r in conn.execute(sa.text(
            "SELECT device_id, problem_id, input_id, name, value, status, n FROM run_param_counts WHERE n <> 0"))}
    for run in runs:
        expected = {s: n for (d, p, i, s), n in truth.items() if (d, p, i) == tuple(run)}
        assert store.status_counts(run.problem_id, run.device_id, run.input_id) == expected
        assert {s.run: s.counts for s in store.runs()}.get(run, {}) == expected
    # the time bins and the parameter counts, against the rows themselves
    expected_bins, expected_params = {}, {}
    for d, p, i, status, t, config in rows:
        if t is not None:
            key = (d, p, i, math.floor(math.log2(t) * 64))
            expected_bins[key] = expected_bins.get(key, 0) + 1
        for name, value in json.loads(config).items():
            key = (d, p, i, name, json.dumps(value), status)
            expected_params[key] = expected_params.get(key, 0) + 1
    assert bins == expected_bins and params == expected_params


def test_fast_pages_agree_with_sorting_every_row(store):
    """Pages by a parameter value and by a numeric parameter (answered from the summary tables and an index
    walk) list exactly what sorting all of the run's rows lists, at every offset, status and direction."""
    rng = random.Random(3)
    run = store.run(GPU, "pages", "h", "i")
    stored = {}
    for _ in range(3):  # writes, rewrites with other statuses, a delete: the summaries must follow
        batch = []
        for _ in range(60):
            x = rng.randrange(40)
            t = None if rng.random() < 0.3 else round(rng.uniform(1, 50), 3)
            batch.append(ok({"x": x, "b": [16, 32, 64][x % 3], "k": "pq"[x % 2]}, t) if t is not None
                         else failed({"x": x, "b": [16, 32, 64][x % 3], "k": "pq"[x % 2]}))
        store.put_stream(run, batch, chunk_size=25)
    store.delete(status=Status.COMPILE_ERROR, input_id=run.input_id)
    for r in store.iter_results(run.problem_id, run.device_id, run.input_id):
        stored[r.result.config["x"]] = (r.id, r.result)
    rows = sorted(stored.values())

    def expect(filter_=None, status=None, by=None, descending=False):
        chosen = [(i, r) for i, r in rows if (status is None or str(r.status) == status)
                  and (filter_ is None or all(r.config[k] == v for k, v in filter_.items()))]
        if by is None:
            oks = sorted(((r.time_ms, i) for i, r in chosen if r.ok), key=lambda p: ((-p[0] if descending
                                                                                    else p[0]), p[1]))
            return [i for _, i in oks] + [i for i, r in chosen if not r.ok]
        return [i for i, r in sorted(chosen, key=lambda p: ((-1 if descending else 1) * p[1].config[by], p[0]))]

    for offset, limit in ((0, 7), (5, 30), (20, 50), (38, 4)):
        for status in (None, "ok"):
            page = store.page(run, offset=offset, limit=limit, where={"k": "p"}, status=status)
            want = expect({"k": "p"}, status)
            assert page.total == len(want) and [s.id for s in page.rows] == want[offset:offset + limit]
            for descending in (False, True):
                page = store.page(run, offset=offset, limit=limit, order_by="b", status=status, descending=descending)
                want = expect(None, status, "b", descending)
                assert page.total == len(want) and [s.id for s in page.rows] == want[offset:offset + limit]
    assert store.page(run, where={"k": "nothing"}).total == 0


def test_log_histogram_counts_agree_with_its_edges(store):
    """Bins from the stored fine bins: every success in exactly one bin, by the edges the bins report."""
    rng = random.Random(5)
    times = [round(10 ** rng.uniform(-2, 3), 6) for _ in range(300)] + [None] * 5
    run = fill(store, times)
    bins = store.time_histogram(run, bins=17)
    assert len(bins) == 17 and all(a.high == b.low for a, b in zip(bins, bins[1:], strict=False))
    for j, b in enumerate(bins):
        inside = [t for t in times if t is not None and b.low <= t and (t < b.high or j == len(bins) - 1)]
        assert b.count == len(inside)


def test_a_hash_collision_keeps_both_configurations(store, monkeypatch):
    """Two configurations whose 64-bit hashes agree (injected: no real pair is known) are both kept, found,
    replaced and counted by their keys, whichever was stored first, in one chunk or in two."""
    import adaptune.store.db as db_module
    import adaptune.store.rows as rows_module

    same = {config_key({"x": 1}), config_key({"x": 2}), config_key({"x": 5}), config_key({"x": 6})}
    colliding = lambda key: 7 if key in same else config_hash(key)  # noqa: E731
    monkeypatch.setattr(rows_module, "config_hash", colliding)
    monkeypatch.setattr(db_module, "config_hash", colliding)
    run = store.run(GPU, "collide", "h", "i")
    store.put(*run, ok({"x": 1}, 5.0))
    store.put_many(*run, [ok({"x": 2}, 3.0), ok({"x": 3}, 4.0), ok({"x": 5}, 1.0), ok({"x": 6}, 2.0)])
    assert store.count() == 5 and store.get(*run, {"x": 2}).time_ms == 3.0 and store.get(*run, {"x": 1}).time_ms == 5.0
    store.put(*run, failed({"x": 2}))  # replaced by its key, not x=1's row
    store.put(*run, ok({"x": 1}, 4.5))
    assert store.count() == 5 and store.get(*run, {"x": 1}).time_ms == 4.5 and not store.get(*run, {"x": 2}).ok
    assert store.stored_keys(run, [{"x": 1}, {"x": 2}, {"x": 4}, {"x": 6}]) == {
        config_key({"x": 1}), config_key({"x": 2}), config_key({"x": 6})}
    assert store.status_counts() == {"ok": 4, "compile_error": 1}
    assert [s.result.config["x"] for s in store.page(run).rows] == [5, 6, 3, 1, 2]


def test_version_1_database_is_migrated(tmp_path):
    """A store written before the query interface (schema 1) opens with its counts and indexes in place."""
    import sqlite3

    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as raw:
        raw.executescript("""
            CREATE TABLE adaptune_schema (key VARCHAR(64) PRIMARY KEY, value VARCHAR(256) NOT NULL);
            INSERT INTO adaptune_schema VALUES ('schema_version', '1');
            CREATE TABLE devices (id INTEGER PRIMARY KEY, name VARCHAR(256) NOT NULL, platform VARCHAR(256) NOT NULL,
                driver VARCHAR(256) NOT NULL, properties JSON NOT NULL, UNIQUE (name, platform, driver));
            CREATE TABLE problems (id INTEGER PRIMARY KEY, name VARCHAR(256) NOT NULL,
                source_hash VARCHAR(128) NOT NULL, space JSON NOT NULL, UNIQUE (name, source_hash));
            CREATE TABLE inputs (id INTEGER PRIMARY KEY, problem_id INTEGER NOT NULL REFERENCES problems (id),
                name VARCHAR(256) NOT NULL, features JSON NOT NULL, UNIQUE (problem_id, name));
            CREATE TABLE measurements (id INTEGER PRIMARY KEY, device_id INTEGER NOT NULL, problem_id INTEGER NOT NULL,
                input_id INTEGER NOT NULL, config_key TEXT NOT NULL, config JSON NOT NULL, status VARCHAR(32) NOT NULL,
                time_ms FLOAT, samples JSON NOT NULL, compile_ms FLOAT NOT NULL, verify_ms FLOAT NOT NULL,
                benchmark_ms FLOAT NOT NULL, observers JSON NOT NULL, error TEXT NOT NULL, timestamp FLOAT NOT NULL,
                UNIQUE (device_id, problem_id, input_id, config_key));
            CREATE INDEX ix_measurements_problem ON measurements (problem_id, status);
            INSERT INTO devices VALUES (1, 'old GPU', 'test', '', '{}');
            INSERT INTO problems VALUES (1, 'old', 'h', '{}');
            INSERT INTO inputs VALUES (1, 1, 'default', '{}');
            INSERT INTO measurements VALUES (1, 1, 1, 1, '{"x":1}', '{"x": 1}', 'ok', 2.0, '[2.0]', 0, 0, 0, '{}', '', 1);
            INSERT INTO measurements VALUES (2, 1, 1, 1, '{"x":2}', '{"x": 2}', 'timeout', 9.0, '[]', 0, 0, 0, '{}',
                'slow', 2);
        """)
    with Store(path) as store:
        assert store.status_counts() == {"ok": 1, "timeout": 1}
        assert store.top(1, 5)[0].result.config == {"x": 1} and len(store.top(1, 5)) == 1
        assert math.isinf(store.get(1, 1, 1, {"x": 2}).time_ms)
        store.put(1, 1, 1, ok({"x": 3}, 1.0))
        assert store.count() == 3 and store.best(1, 1, 1).config == {"x": 3}
        run = RunKey(1, 1, 1)  # the summaries of the new version, counted from the old rows
        assert store.page(run, where={"x": 2}).total == 1 and store.page(run, order_by="x").rows[0].id == 1
        assert [b.count for b in store.time_histogram(run, bins=2)] == [1, 1]
        store.put(1, 1, 1, ok({"x": 1}, 3.0))  # found by its hash, computed by the upgrade
        assert store.count() == 3
