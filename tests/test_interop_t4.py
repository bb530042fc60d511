"""T4 result files: schema-valid output, Kernel Tuner's own T4 export read back, and the full round trip."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest

from adaptune.records import Result, Status
from adaptune.store import (
    FormatError,
    RecordedSpace,
    Store,
    load_kt_cache,
    load_recorded,
    load_t4,
    write_kt_cache,
    write_t4,
)

DATA = Path(__file__).resolve().parents[1] / "data"
VECTOR_ADD = DATA / "kernel_tuner_tests" / "test_cache_file.json"
ENERGY = DATA / "kernel_tuner_tests" / "test_cache_time_energy.json"
CONVOLUTION_A100 = DATA / "benchmark_hub" / "convolution_milo" / "A100.json.gz"


def t4_schema() -> dict:
    from kernel_tuner.file_utils import output_file_schema

    return output_file_schema("results")[1]


def with_every_status(rec: RecordedSpace) -> RecordedSpace:
    failures = [Status.COMPILE_ERROR, Status.LAUNCH_ERROR, Status.TIMEOUT, Status.WRONG_RESULT, Status.CONSTRAINT]
    for i, status in enumerate(failures):
        rec.results[i] = Result.failure(rec.results[i].config, status, f"{status} happened",
                                        compile_ms=rec.results[i].compile_ms)
    return rec


def test_written_t4_is_valid_against_the_t4_schema(tmp_path):
    rec = with_every_status(load_kt_cache(ENERGY))
    path = write_t4(tmp_path / "results.json", rec)
    data = json.loads(path.read_text())
    jsonschema.validate(data, t4_schema())
    assert data["schema_version"] == "1.0.0" and data["metadata"]["timeunit"] == "milliseconds"
    first_ok = data["results"][5]
    assert first_ok["invalidity"] == "correct" and first_ok["configuration"] == rec.results[5].config
    assert first_ok["times"]["runtimes"] == rec.results[5].samples
    assert {"name": "time", "value": rec.results[5].time_ms, "unit": "ms"} in first_ok["measurements"]
    assert {"name": "energy", "value": rec.results[5].observers["energy"], "unit": "J"} in first_ok["measurements"]
    assert [r["invalidity"] for r in data["results"][:5]] == ["compile", "runtime", "timeout", "correctness",
                                                              "constraints"]


def test_t4_round_trip_keeps_statuses_times_and_metrics(tmp_path):
    rec = with_every_status(load_kt_cache(ENERGY))
    back = load_t4(write_t4(tmp_path / "results.json", rec))
    assert back.params == rec.params and back.device_name == rec.device_name
    assert back.problem_size == rec.problem_size and back.kernel_name == rec.kernel_name
    for a, b in zip(rec.results, back.results, strict=True):
        assert (a.config, a.status, a.samples, a.compile_ms, a.benchmark_ms) == \
               (b.config, b.status, b.samples, b.compile_ms, b.benchmark_ms)
        assert a.time_ms == b.time_ms or (math.isinf(a.time_ms) and math.isinf(b.time_ms))
        recorded = {k: v for k, v in a.observers.items() if v or k not in ("framework_time", "strategy_time")}
        assert b.observers == recorded and a.error == b.error  # a zero framework time means "not recorded"
        assert b.timestamp == pytest.approx(a.timestamp, abs=1e-5)


def test_kernel_tuners_own_t4_export_reads(tmp_path):
    import kernel_tuner
    from kernel_tuner.file_utils import store_output_file

    rec = load_kt_cache(VECTOR_ADD)
    cache = write_kt_cache(tmp_path / "sim.json", rec)
    results, _ = kernel_tuner.tune_kernel(rec.kernel_name, "", rec.problem_size, [], rec.params, cache=str(cache),
                                          simulation_mode=True, strategy="brute_force", quiet=True)
    store_output_file(str(tmp_path / "kt_t4.json"), results, rec.params)
    back = load_t4(tmp_path / "kt_t4.json")
    assert back.meta["format"] == "t4" and back.names == ["block_size_x"]
    assert {r.config["block_size_x"]: r.time_ms for r in back.results} == \
           {r.config["block_size_x"]: r.time_ms for r in rec.results}
    assert all(r.ok and r.samples for r in back.results)
    assert load_recorded(tmp_path / "kt_t4.json").meta["format"] == "t4"  # sniffed, not told


def test_full_round_trip_kt_store_t4_kt(tmp_path):
    """KT cache -> store -> T4 -> RecordedSpace -> KT cache: same configs, statuses and times."""
    original = load_kt_cache(CONVOLUTION_A100)
    with Store(tmp_path / "runs.db") as store:
        original.to_store(store)
        from_db = RecordedSpace.from_store(store)
    t4_path = write_t4(tmp_path / "conv_t4.json", from_db)
    jsonschema.validate(json.loads(t4_path.read_text()), t4_schema())
    again = load_t4(t4_path)
    final = load_kt_cache(write_kt_cache(tmp_path / "conv_again.json", again))
    assert final.params == original.params and final.device_name == original.device_name
    assert final.problem_size == original.problem_size and final.kernel_name == original.kernel_name
    summary = [(r.config, r.status, r.time_ms, r.samples, r.compile_ms) for r in original.results]
    assert [(r.config, r.status, r.time_ms, r.samples, r.compile_ms) for r in final.results] == summary
    assert [r.observers["GFLOP/s"] for r in final.results if r.ok] == \
           [r.observers["GFLOP/s"] for r in original.results if r.ok]


def test_time_units_are_converted(tmp_path):
    doc = {"schema_version": "1.0.0", "metadata": {"timeunit": "seconds"},
           "results": [{"configuration": {"x": 1}, "times": {"runtimes": [0.002, 0.004], "compilation_time": 1.5},
                        "invalidity": "correct", "correctness": 1,
                        "measurements": [{"name": "time", "value": 3.0, "unit": "ms"}]},
                       {"configuration": {"x": 2}, "times": {"runtimes": [0.001, 0.003, 0.002]},
                        "invalidity": "correct", "correctness": 1}]}
    (tmp_path / "s.json").write_text(json.dumps(doc))
    a, b = load_t4(tmp_path / "s.json").results
    assert a.samples == [2.0, 4.0] and a.time_ms == 3.0 and a.compile_ms == 1500.0
    assert b.time_ms == 2.0  # no time measurement: the median of the runtimes


@pytest.mark.parametrize(("doc", "message"), [
    ({"results": []}, "not a T4 results file"),
    ({"schema_version": "2.0.0", "results": []}, "schema version '2.0.0' is not supported"),
    ({"schema_version": "1.0.0", "results": [{"configuration": {"x": 1}, "times": {}, "invalidity": "broken"}]},
     r"results\[0\]: 'invalidity' 'broken'"),
    ({"schema_version": "1.0.0", "results": [{"configuration": [1], "times": {}, "invalidity": "correct"}]},
     r"results\[0\]: 'configuration' must be an object"),
    ({"schema_version": "1.0.0", "results": [{"configuration": {"x": 1}, "times": {"runtimes": "fast"},
                                              "invalidity": "correct"}]}, "runtimes must be a list"),
    ({"schema_version": "1.0.0", "results": [{"configuration": {"x": 1}, "times": {}, "invalidity": "correct"}]},
     "needs a 'time' measurement or runtimes"),
    ({"schema_version": "1.0.0", "metadata": {"timeunit": "fortnights"}, "results": []}, "unknown 'timeunit'"),
])
def test_malformed_t4_is_named(tmp_path, doc, message):
    path = tmp_path / "bad_t4.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=message) as err:
        load_t4(path)
    assert "bad_t4.json" in str(err.value)


def test_published_t4_file_agrees_with_its_kernel_tuner_cache():
    """benchmark_hub ships the A100 run twice: as a Kernel Tuner cache and as Kernel Tuner's T4 export."""
    t4 = load_recorded(CONVOLUTION_A100.with_name("A100_T4.json.gz"))
    kt = load_kt_cache(CONVOLUTION_A100)
    assert t4.meta["format"] == "t4" and t4.names == kt.names
    assert [(r.config, r.status, r.time_ms, r.samples, r.compile_ms) for r in t4.results] == \
           [(r.config, r.status, r.time_ms, r.samples, r.compile_ms) for r in kt.results]


def test_load_recorded_reads_an_adaptune_database(tmp_path):
    rec = load_kt_cache(VECTOR_ADD)
    with Store(tmp_path / "runs.db") as store:
        rec.to_store(store, name="vadd")
    back = load_recorded(tmp_path / "runs.db")
    assert back.meta["problem_name"] == "vadd" and back.kernel_name == "vector_add"
    assert [(r.config, r.time_ms) for r in back.results] == [(r.config, r.time_ms) for r in rec.results]
