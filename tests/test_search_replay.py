"""Replay of recorded Kernel Tuner caches: failures, the simulated clock, measurement noise."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from adaptune.search import Budget, Replay

DATA = Path(__file__).resolve().parents[1] / "data"
CONV = DATA / "benchmark_hub" / "convolution_milo" / "A6000.json.gz"


@pytest.fixture(scope="module")
def conv() -> Replay:
    return Replay.from_file(CONV)


def test_replayed_space_is_the_recorded_one_and_failures_count(conv: Replay) -> None:
    assert len(conv.space) == 4362  # recorded configurations, not the 10240 of the cartesian product
    assert int((~np.isfinite(conv.values)).sum()) == 221 + 252  # RuntimeFailed + CompilationFailed
    tr = conv.run("brute_force", Budget(), seed=0)
    assert len(tr) == 4362 and int(np.isinf(tr.values).sum()) == 473  # each failure is one evaluation


def test_simulated_clock_charges_compile_verify_benchmark_of_each_visit(tmp_path: Path) -> None:
    src = json.loads((DATA / "kernel_tuner_tests" / "test_cache_file.json").read_text())
    rp = Replay.from_file(DATA / "kernel_tuner_tests" / "test_cache_file.json")
    tr = rp.run("random", Budget(max_evals=5), seed=2)
    expected = 0.0
    for i in tr.indices:
        r = src["cache"][rp.space.key(rp.space.config(int(i)))]
        expected += (r["compile_time"] + r["verification_time"] + r["benchmark_time"]) / 1000
    assert tr.sim_seconds[-1] == pytest.approx(expected)


def test_noise_draws_from_the_recorded_runs() -> None:
    rp = Replay.from_file(DATA / "kernel_tuner_tests" / "test_cache_file.json")
    rng = np.random.default_rng(0)
    draws = {rp.evaluate(0, rng) for _ in range(30)}
    assert len(draws) > 1
    assert min(draws) >= min(rp.samples[0]) and max(draws) <= max(rp.samples[0])
    assert rp.evaluate(0) == rp.values[0]


def test_missing_or_corrupt_file_gets_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Replay.from_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json at all")
    with pytest.raises(ValueError):
        Replay.from_file(bad)


def test_a_record_without_any_success_is_refused() -> None:
    from adaptune.space import Space

    with pytest.raises(ValueError, match="no configuration"):
        Replay(Space({"a": [1, 2]}), np.array([math.inf, math.inf]))


def test_replay_reads_an_adaptune_database(tmp_path: Path) -> None:
    """A real SQLite store written through the store layer replays like the cache it was filled from."""
    from adaptune.records import DeviceInfo
    from adaptune.store import Store, load_kt_cache

    cache = DATA / "kernel_tuner_tests" / "test_cache_file.json"
    recorded = load_kt_cache(cache)
    db = tmp_path / "rec.db"
    with Store(db) as store:
        dev = store.device(DeviceInfo(recorded.device_name, "opencl:test"))
        prob = store.problem("cached", "h", {"params": recorded.params})
        inp = store.input(prob, "default", {"problem_size": recorded.problem_size})
        for r in recorded.results:
            store.put(dev, prob, inp, r)
    from_db, from_cache = Replay.from_file(db), Replay.from_file(cache)
    assert len(from_db.space) == len(from_cache.space) == 15
    np.testing.assert_array_equal(from_db.values, from_cache.values)
    assert from_db.run("auto", Budget(max_evals=15), seed=0).best == from_cache.optimum
