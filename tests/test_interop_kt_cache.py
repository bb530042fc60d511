"""Kernel Tuner caches: the real shipped files, the crash-left open form, hostile files, and KT reading ours."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from adaptune.records import Result, Status
from adaptune.store import FormatError, RecordedSpace, Store, load_kt_cache, load_recorded, write_kt_cache
from adaptune.store.kt_cache import EntryReader, kt_cache_from_mapping

DATA = Path(__file__).resolve().parents[1] / "data"
KT_TESTS = DATA / "kernel_tuner_tests"
VECTOR_ADD = KT_TESTS / "test_cache_file.json"
ENERGY = KT_TESTS / "test_cache_time_energy.json"
CONVOLUTION_A100 = DATA / "benchmark_hub" / "convolution_milo" / "A100.json.gz"


def raw_cache(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def test_small_cache_matches_the_file_field_by_field():
    rec = load_kt_cache(VECTOR_ADD)
    raw = raw_cache(VECTOR_ADD)
    assert (rec.device_name, rec.kernel_name, rec.problem_size) == ("NVIDIA RTX A4000", "vector_add", 100)
    assert rec.params == raw["tune_params"] and rec.objective == "time"
    assert len(rec.results) == len(raw["cache"]) == 15
    for r, (key, entry) in zip(rec.results, raw["cache"].items(), strict=True):
        assert str(r.config["block_size_x"]) == key
        assert r.status == Status.OK and r.time_ms == entry["time"] and r.samples == entry["times"]
        assert r.compile_ms == entry["compile_time"] and r.benchmark_ms == entry["benchmark_time"]
        assert r.observers["framework_time"] == entry["framework_time"]


def test_energy_metrics_go_to_observers():
    rec = load_kt_cache(ENERGY)
    first = raw_cache(ENERGY)["cache"]["128,1080"]
    r = rec.lookup({"block_size_x": 128, "nvml_gr_clock": 1080})
    for metric in ("energy", "ps_energy", "GFLOPS/W", "temperature", "core_freq"):
        assert r.observers[metric] == first[metric]
    assert "time" not in r.observers and "block_size_x" not in r.observers


def test_convolution_gz_failures_map_to_statuses():
    rec = load_kt_cache(CONVOLUTION_A100)
    raw = raw_cache(CONVOLUTION_A100)["cache"]
    assert len(rec.results) == len(raw) == 4362
    expected = {"RuntimeFailedConfig": Status.LAUNCH_ERROR, "CompilationFailedConfig": Status.COMPILE_ERROR}
    counts: dict[Status, int] = {}
    for r, entry in zip(rec.results, raw.values(), strict=True):
        want = expected[entry["time"]] if isinstance(entry["time"], str) else Status.OK
        assert r.status == want
        assert math.isinf(r.time_ms) == (want != Status.OK)
        counts[r.status] = counts.get(r.status, 0) + 1
    assert counts == {Status.OK: 4201, Status.LAUNCH_ERROR: 155, Status.COMPILE_ERROR: 6}
    best = rec.best()
    assert best.time_ms == min(e["time"] for e in raw.values() if not isinstance(e["time"], str))
    assert best.observers["GFLOP/s"] > 0


def kt_open_text(path: Path) -> tuple[str, list[str]]:
    """The text Kernel Tuner itself writes while tuning (header, then one entry a line with a comma)."""
    raw = raw_cache(path)
    cache = raw.pop("cache")
    header = json.dumps({**raw, "cache": {}}, indent="")[:-3]
    lines = ["\n" + json.dumps({k: v})[1:-1] + "," for k, v in cache.items()]
    return header, lines


def test_open_cache_after_a_crash_recovers_every_complete_entry(tmp_path):
    header, lines = kt_open_text(VECTOR_ADD)
    path = tmp_path / "open.json"
    path.write_text(header + "".join(lines[:9]) + lines[9][: len(lines[9]) // 2])  # killed mid-write
    rec = load_kt_cache(path)
    assert [r.config["block_size_x"] for r in rec.results] == load_kt_cache(VECTOR_ADD).params["block_size_x"][:9]
    assert rec.meta["recovered_open_cache"] and rec.meta["dropped_partial_entry"]
    path.write_text(header + "".join(lines))  # open but with a complete last entry
    rec = load_kt_cache(path)
    assert len(rec.results) == 15 and not rec.meta["dropped_partial_entry"]
    path.write_text(header)  # crashed before the first entry
    assert load_kt_cache(path).results == []


def test_garbage_inside_an_open_cache_is_an_error_not_a_silent_cut(tmp_path):
    header, lines = kt_open_text(VECTOR_ADD)
    path = tmp_path / "bad.json"
    path.write_text(header + "".join(lines[:3]) + '\n"256": {"block_size_x": 256, "time": oops},' + "".join(lines[4:]))
    with pytest.raises(FormatError, match=r"bad\.json: corrupt Kernel Tuner cache"):
        load_kt_cache(path)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(cache=[1, 2]), "'cache' must be an object"),
    (lambda d: d.update(tune_params_keys="block_size_x"), "'tune_params_keys' must be a list"),
    (lambda d: d["cache"]["128"].update(time=[1.0]), r"entry '128': 'time' must be a number, not a list"),
    (lambda d: d["cache"]["128"].update(times="fast"), r"entry '128': 'times' must be a list"),
    (lambda d: d["cache"]["128"].update(block_size_x=129), r"entry '128'.*give the key '129'"),
    (lambda d: d["cache"]["128"].pop("block_size_x"), r"entry '128' lacks tunable parameter"),
    (lambda d: d["cache"].update({"100": {"block_size_x": 100, "time": 1.0}}), r"entry '100': block_size_x=100 is not"),
    (lambda d: d["cache"].update({"77": "fast"}), r"entry '77' must be an object"),
    (lambda d: d.update(tune_params={"other": [1]}), "disagrees with 'tune_params_keys'"),
    (lambda d: d["cache"]["128"].update(timestamp="yesterday"), "is not an ISO date"),
    (lambda d: d.update(objective=5), "'objective' must be a name"),
])
def test_wrong_json_types_are_named(tmp_path, mutate, message):
    data = raw_cache(VECTOR_ADD)
    mutate(data)
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=message) as err:
        load_kt_cache(path)
    assert str(path) in str(err.value)


def test_multi_objective_cache_keeps_every_objective(tmp_path):
    data = raw_cache(ENERGY)
    data["objective"] = ["time", "GFLOPS/W"]
    (tmp_path / "multi.json").write_text(json.dumps(data))
    rec = load_kt_cache(tmp_path / "multi.json")
    assert rec.objective == "time" and rec.meta["objectives"] == ["time", "GFLOPS/W"]


def test_not_a_cache_and_truncated_gzip(tmp_path):
    (tmp_path / "list.json").write_text("[1, 2, 3]")
    with pytest.raises(FormatError, match="not a Kernel Tuner cache"):
        load_kt_cache(tmp_path / "list.json")
    (tmp_path / "prose.json").write_text("hello world")
    with pytest.raises(FormatError, match=r"prose\.json: not a Kernel Tuner cache"):
        load_kt_cache(tmp_path / "prose.json")
    blob = CONVOLUTION_A100.read_bytes()
    (tmp_path / "cut.json.gz").write_bytes(blob[: len(blob) // 3])
    with pytest.raises(FormatError, match=r"cut\.json\.gz: truncated or corrupt gzip"):
        load_kt_cache(tmp_path / "cut.json.gz")
    (tmp_path / "fake.json.gz").write_text("{}")
    with pytest.raises(FormatError, match="not a gzip file"):
        load_kt_cache(tmp_path / "fake.json.gz")


def test_kernel_tuner_reads_what_we_write(tmp_path):
    from kernel_tuner.util import read_cache

    rec = load_kt_cache(ENERGY)
    path = write_kt_cache(tmp_path / "out.json", rec)
    theirs = read_cache(str(path), open_cache=False)
    ours = raw_cache(ENERGY)
    assert theirs["tune_params_keys"] == ours["tune_params_keys"] and theirs["tune_params"] == ours["tune_params"]
    assert set(theirs["cache"]) == set(ours["cache"])
    for key, entry in ours["cache"].items():
        got = theirs["cache"][key]
        for field in ("time", "times", "compile_time", "benchmark_time", "energy", "GFLOPS/W", "timestamp"):
            assert got[field] == entry[field], (key, field)
    # and Kernel Tuner's in-memory form (with its __error__ objects) converts back
    theirs["cache"]["128,1080"].update(time="RuntimeFailedConfig", __error__=object())
    again = kt_cache_from_mapping(theirs, "kernel_tuner")
    assert again.results[0].status == Status.LAUNCH_ERROR and again.results[1:] == rec.results[1:]
    # Kernel Tuner 1.5 writes a failure without 'time': its name in __error__ only, an ErrorConfig once read
    entry = {k: v for k, v in raw_cache(ENERGY)["cache"]["128,1080"].items() if k not in ("time", "times")}
    data = {**raw_cache(ENERGY), "cache": {"128,1080": {**entry, "__error__": "CompilationFailedConfig"}}}
    (tmp_path / "kt15.json").write_text(json.dumps(data))
    from_file = load_kt_cache(tmp_path / "kt15.json").results[0]
    from_mapping = kt_cache_from_mapping(read_cache(str(tmp_path / "kt15.json"), open_cache=False)).results[0]
    assert from_file.status == from_mapping.status == Status.COMPILE_ERROR


def test_kernel_tuner_simulation_mode_replays_our_file(tmp_path):
    import kernel_tuner

    rec = load_kt_cache(VECTOR_ADD)
    rec.results[3] = Result.failure(rec.results[3].config, Status.COMPILE_ERROR, "ptxas error")
    rec.results[4] = Result.failure(rec.results[4].config, Status.TIMEOUT, "timed out")
    path = write_kt_cache(tmp_path / "sim.json", rec)
    results, _ = kernel_tuner.tune_kernel(rec.kernel_name, "", rec.problem_size, [], rec.params, cache=str(path),
                                          simulation_mode=True, strategy="brute_force", quiet=True)
    by_bs = {r["block_size_x"]: r for r in results}
    assert set(by_bs) == set(rec.params["block_size_x"])
    for r in rec.results:
        theirs = by_bs[r.config["block_size_x"]]
        if r.ok:
            assert theirs["time"] == r.time_ms
        else:
            assert "__error__" in theirs or isinstance(theirs["time"], str)
    # and our statuses survive our own round trip, timeout included
    back = load_kt_cache(path)
    assert [r.status for r in back.results] == [r.status for r in rec.results]
    assert back.results[4].error == "timed out"


def test_written_gz_round_trips_and_load_recorded_sniffs(tmp_path):
    rec = load_kt_cache(VECTOR_ADD)
    path = write_kt_cache(tmp_path / "out.json.gz", rec)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    back = load_recorded(path)
    assert [(r.config, r.status, r.time_ms, r.samples) for r in back.results] == \
           [(r.config, r.status, r.time_ms, r.samples) for r in rec.results]


def test_kt_cache_through_the_store(tmp_path):
    rec = load_kt_cache(ENERGY)
    rec.results[2] = Result.failure(rec.results[2].config, Status.WRONG_RESULT, "max abs error 0.5")
    with Store(tmp_path / "runs.db") as store:
        ids = rec.to_store(store)
        assert rec.to_store(store) == ids and store.count() == 15  # a second import updates
        back = RecordedSpace.from_store(store)
    assert back.device_name == rec.device_name and back.params == rec.params and back.objective == "time"
    assert back.problem_size == 80000000 and back.meta["input_name"] == "80000000"
    assert [(r.config, r.status, r.time_ms, r.samples, r.observers, r.error) for r in back.results] == \
           [(r.config, r.status, r.time_ms, r.samples, r.observers, r.error) for r in rec.results]


def test_entries_read_a_column_at_a_time_give_what_each_entry_read_alone_gives():
    names = ["a", "b"]
    base = {"time": 1.5, "times": [1.5, 1.25], "compile_time": 3, "timestamp": "2024-01-02 03:04:05+00:00",
            "power": 7}
    entries = [{"a": 1, "b": 2, **base}, {"a": 1, "b": 4, **base, "time": "CompilationFailedConfig"},
               {"a": 2, "b": 2, **base, "time": float("inf")}, {"a": 2, "b": 4, **base, "times": "x"},
               {"a": 4, "b": 4, **base, "timestamp": "yesterday"}, {"a": 2, "b": 8, **base, "time": 2},
               {"b": 2, "a": 8, **base},  # the layouts below fall back as a whole
               {"a": 4, "b": 2, **base, "power": "RuntimeFailedConfig", "x": 1}, {"a": 8, "b": 4, **base, "y": "text"},
               {"a": 3, "b": 3, **base, "z": 1}, [1, 2], {"a": True, "b": 2, **base, "w": 0}]
    members = [(",".join(str(e.get(n)) for n in names) if isinstance(e, dict) else "x", e) for e in entries]
    members[9] = ("3,9", members[9][1])  # a key that does not match its parameters

    class Counting(EntryReader):
        alone = 0

        def fields(self, *args):
            self.alone += 1
            return super().fields(*args)

    for allowed in (None, {"a": [1, 2, 4, 8, True], "b": [2, 4, 8]}):
        reader = Counting(names, allowed)
        many = [str(r) if isinstance(r, FormatError) else r for r in reader.many(members, set())]
        assert reader.alone == len(members) - 4  # four entries vouched for by the column checks (one a failure)
        alone: list = []
        for key, entry in members:
            try:
                alone.append(reader.fields(key, entry, f"entry {key!r}", set()))
            except FormatError as exc:
                alone.append(str(exc))
        assert many == alone
