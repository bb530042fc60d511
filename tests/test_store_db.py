"""The results database on real SQLite files: idempotent writes, lookups, listings, bad files, concurrency."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest

from adaptune.records import DeviceInfo, Result, Status
from adaptune.store import Store, StoreError, config_key
from adaptune.store import schema as S

GPU = DeviceInfo(name="Test GPU", platform="opencl:Portable Computing Language", driver="1.0",
                 properties={"compute_units": 2})


def ids_of(store: Store, problem: str = "vector_add", source_hash: str = "abc", input_name: str = "n=1024"):
    device_id = store.device(GPU)
    problem_id = store.problem(problem, source_hash, {"params": {"bs": [32, 64, 128], "unroll": [1, 2]}})
    input_id = store.input(problem_id, input_name, {"n": 1024})
    return device_id, problem_id, input_id


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.db") as s:
        yield s


def test_registration_is_get_or_create(store):
    assert store.device(GPU) == store.device(GPU)
    other = DeviceInfo(name="Test GPU", platform="cuda", driver="12.4")
    assert store.device(other) != store.device(GPU)
    p1 = store.problem("vector_add", "abc", {"params": {"bs": [1]}})
    assert store.problem("vector_add", "abc", {"params": {"bs": [1, 2]}}) == p1
    assert store.problem_info(p1).space == {"params": {"bs": [1, 2]}}  # kept up to date
    assert store.problem("vector_add", "changed-source", {}) != p1
    assert store.input(p1, "n=10") == store.input(p1, "n=10", {"n": 10})
    assert store.inputs(p1)[0].features == {"n": 10}


def test_put_get_round_trip_keeps_every_field(store):
    d, p, i = ids_of(store)
    r = Result.from_samples({"bs": np.int64(64), "unroll": 2}, [1.5, 1.25, 1.75], compile_ms=12.0, verify_ms=0.5,
                            benchmark_ms=6.0, observers={"energy_j": 0.25, "power_w": np.float32(80.0)})
    store.put(d, p, i, r)
    got = store.get(d, p, i, {"unroll": 2, "bs": 64})  # key order and NumPy scalars do not matter
    assert got is not None
    assert got.config == {"bs": 64, "unroll": 2}
    assert got.status == Status.OK and got.time_ms == 1.5 and got.samples == [1.5, 1.25, 1.75]
    assert (got.compile_ms, got.verify_ms, got.benchmark_ms) == (12.0, 0.5, 6.0)
    assert got.observers == {"energy_j": 0.25, "power_w": 80.0}
    assert got.timestamp == pytest.approx(r.timestamp)
    assert store.get(d, p, i, {"bs": 32, "unroll": 2}) is None


def test_failures_store_inf_as_null(store, tmp_path):
    d, p, i = ids_of(store)
    store.put(d, p, i, Result.failure({"bs": 128, "unroll": 1}, Status.COMPILE_ERROR, "error: bad token"))
    got = store.get(d, p, i, {"bs": 128, "unroll": 1})
    assert got.status == Status.COMPILE_ERROR and math.isinf(got.time_ms) and got.error == "error: bad token"
    with sqlite3.connect(tmp_path / "runs.db") as raw:
        assert raw.execute("SELECT time_ms FROM measurements").fetchone() == (None,)


def test_put_is_idempotent_and_replaces(store):
    d, p, i = ids_of(store)
    config = {"bs": 32, "unroll": 1}
    store.put(d, p, i, Result.from_samples(config, [3.0]))
    store.put(d, p, i, Result.from_samples(config, [3.0]))
    assert store.count() == 1
    store.put(d, p, i, Result.from_samples(config, [2.0]))
    assert store.count() == 1 and store.get(d, p, i, config).time_ms == 2.0
    # the same configuration on another input is another measurement
    other_input = store.input(p, "n=2048")
    store.put(d, p, other_input, Result.from_samples(config, [4.0]))
    assert store.count() == 2 and store.count(input_id=i) == 1


def test_put_many_lookup_and_listings(store):
    d, p, i = ids_of(store)
    results = [Result.from_samples({"bs": bs, "unroll": u}, [bs / u / 10]) for bs in (32, 64, 128) for u in (1, 2)]
    results[0] = Result.failure(results[0].config, Status.TIMEOUT, "timed out after 10 s")
    assert store.put_many(d, p, i, results) == 6
    assert store.put_many(d, p, i, results) == 6 and store.count() == 6  # rerun: no duplicates
    everything = store.get_many(d, p, i, [r.config for r in results])
    assert set(everything) == {config_key(r.config) for r in results}
    some = store.get_many(d, p, i, [{"bs": 64, "unroll": 2}, {"bs": 999, "unroll": 1}])
    assert list(some) == [config_key({"bs": 64, "unroll": 2})]
    assert store.stored_keys((d, p, i), [{"unroll": 2, "bs": 64}, {"bs": 999, "unroll": 1}]) == set(some)
    assert [r.config for r in store.results(problem_id=p)] == [r.config for r in results]  # insertion order
    assert len(store.results(status=Status.TIMEOUT)) == 1
    assert store.best(d, p, i).config == {"bs": 32, "unroll": 2}
    assert store.count(status="ok") == 5
    device = store.devices()[0]
    assert (device.id, device.name, device.driver, device.platform, device.measurements) == (
        d, "Test GPU", "1.0", GPU.platform, 6)
    assert store.device_info(d) == GPU and store.device_info(d).properties == {"compute_units": 2}
    assert [(x.id, x.measurements, x.failed) for x in store.problems()] == [(p, 6, 1)]
    assert store.measured_pairs(p) == [(d, i)]
    assert store.delete(status=Status.TIMEOUT) == 1 and store.count() == 5


def test_reopen_keeps_everything_and_uses_wal(tmp_path):
    path = tmp_path / "runs.db"
    with Store(path) as s:
        d, p, i = ids_of(s)
        s.put(d, p, i, Result.from_samples({"bs": 32, "unroll": 1}, [1.0]))
    with Store(str(path)) as s:
        assert s.count() == 1 and s.integrity_check() == "ok"
        assert ids_of(s) == (d, p, i)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("SELECT value FROM adaptune_schema").fetchone()[0] == str(S.SCHEMA_VERSION)


def test_reader_is_not_blocked_by_an_open_write_transaction(tmp_path):
    path = tmp_path / "runs.db"
    with Store(path) as s:
        d, p, i = ids_of(s)
        s.put(d, p, i, Result.from_samples({"bs": 32, "unroll": 1}, [1.0]))
    writer = sqlite3.connect(path, timeout=1, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("DELETE FROM measurements")  # uncommitted
    with Store(path) as reader:  # opening and reading must not wait for the writer
        assert reader.count() == 1
    writer.execute("ROLLBACK")
    writer.close()


def test_text_file_is_refused_by_name(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n")
    with pytest.raises(StoreError, match=r"notes\.db is not an adaptune database"):
        Store(path)
    assert path.read_text() == "these are my notes, not a database\n"  # nothing lost


def test_other_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    with pytest.raises(StoreError, match=r"other\.db is not an adaptune database .*customers"):
        Store(path)


def test_corrupt_database_gives_one_error_naming_the_file(tmp_path):
    path = tmp_path / "runs.db"
    with Store(path) as s:
        d, p, i = ids_of(s)
        s.put_many(d, p, i, [Result.from_samples({"bs": b, "unroll": 1}, [1.0]) for b in range(200)])
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # smash the first page (schema) after the header
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"runs\.db"):
        Store(path)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "runs.db"
    Store(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE adaptune_schema SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer adaptune"):
        Store(path)


def test_directory_and_missing_folder_are_refused(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        Store(tmp_path)
    with pytest.raises(StoreError, match="does not exist"):
        Store(tmp_path / "no" / "such" / "runs.db")


def test_sqlalchemy_url_in_memory():
    with Store("sqlite://") as s:  # any SQLAlchemy URL works; this one is a private in-memory database
        d, p, i = ids_of(s)
        s.put(d, p, i, Result.from_samples({"bs": 32, "unroll": 1}, [1.0]))
        assert s.count() == 1


def test_bad_url_is_one_store_error():
    with pytest.raises(StoreError, match="cannot open database"):
        Store("nosuchdialect://host/db")
