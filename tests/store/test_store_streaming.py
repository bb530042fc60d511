"""Streaming import and export: Kernel Tuner caches in every form, T4, CSV and databases, on real files, a real
killed import process, and SQLite and PostgreSQL (whose bulk path is COPY)."""

from __future__ import annotations

import csv
import gc
import gzip
import io
import itertools
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from adaptune.records import DeviceInfo, Result, Status
from adaptune.store import FormatError, Store, StoreError, exporter, load_kt_cache
from adaptune.store import bulk as bulk_module
from adaptune.store import db as db_module
from adaptune.store import importer as importer_module
from adaptune.store import jsonstream as jsonstream_module
from adaptune.store import rows as rows_module
from adaptune.store import schema as S
from adaptune.store.base import RunKey, record_of
from adaptune.store.bulk import BulkLoad
from adaptune.store.codec import config_hash
from adaptune.store.db import Encoded, encode_chunk
from adaptune.store.exporter import export_run
from adaptune.store.importer import import_file

DATA = Path(__file__).resolve().parents[2] / "data" / "kernel_tuner_tests"
VECTOR_ADD = DATA / "test_cache_file.json"
NAMES = [f"p{j}" for j in range(4)]


def cache_lines(n: int, failures_every: int = 7) -> tuple[str, list[str]]:
    """Kernel Tuner's own layout (header, one entry a line with a comma): what it writes while tuning."""
    values = {name: list(range(0, 20 * 16, 16)) for name in NAMES}  # 20^4 distinct configurations
    header = {"device_name": "Synthetic GPU", "kernel_name": "synthetic", "problem_size": [4096, 4096],
              "tune_params_keys": NAMES, "tune_params": values, "objective": "time", "cache": {}}
    lines = []
    for i in range(n):
        config = {name: (i // 20 ** j) % 20 * 16 for j, name in enumerate(NAMES)}
        entry = {**config, "time": "CompilationFailedConfig" if i % failures_every == 3 else 1.0 + (i * 7919) % 1000,
                 "times": [1.0, 1.1], "compile_time": 50.0, "timestamp": "2024-01-02 03:04:05.000000+00:00"}
        lines.append("\n" + json.dumps({",".join(str(v) for v in config.values()): entry})[1:-1] + ",")
    return json.dumps(header, indent="")[:-3], lines


def closed(header: str, lines: list[str]) -> str:
    return header + "".join(lines)[:-1] + "}\n}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    target = request.getfixturevalue("pg_url") if request.param == "postgresql" else tmp_path / "s.db"
    with Store(target) as s:
        yield s


def test_every_cache_form_imports_every_entry(store, tmp_path):
    header, lines = cache_lines(500)
    plain, packed, open_form = tmp_path / "c.json", tmp_path / "c.json.gz", tmp_path / "open.json"
    plain.write_text(closed(header, lines))
    packed.write_bytes(gzip.compress(closed(header, lines).encode()))
    open_form.write_text(header + "".join(lines))  # a tuning run killed between two entries
    expected = {(r.status, r.time_ms) for r in load_kt_cache(plain).results}
    for path in (plain, packed, open_form):
        report = import_file(store, path, chunk_size=64)
        assert (report.written, report.skipped) == (500, 0), report.summary()
        failures = len(range(3, 500, 7))  # cache_lines fails every 7th entry from the 4th
        assert store.count() == 500 and store.status_counts() == {"ok": 500 - failures, "compile_error": failures}
    run = report.runs[0]
    assert {(r.status, r.time_ms) for r in store.results(*[run.problem_id, run.device_id, run.input_id])} == expected
    assert store.problem_info(run.problem_id).space["params"]["p0"] == list(range(0, 320, 16))
    assert [i.name for i in store.inputs(run.problem_id)] == ["4096x4096"]


def test_truncated_caches_import_every_complete_entry_and_say_what_was_skipped(tmp_path):
    header, lines = cache_lines(300)
    cut = tmp_path / "cut.json"
    cut.write_text(header + "".join(lines[:200]) + lines[200][:40])  # killed while writing entry 200
    text = closed(header, lines).encode()
    cut_gz = tmp_path / "cut.json.gz"
    cut_gz.write_bytes(gzip.compress(text)[: len(gzip.compress(text)) * 2 // 3])  # a download cut short
    with Store(tmp_path / "t.db") as store:
        report = import_file(store, cut)
        assert (report.written, report.skipped) == (200, 1)
        assert "skipped 1 entry" in report.summary() and "unterminated" in report.summary()
        gz_report = import_file(store, cut_gz)
        assert gz_report.skipped == 1 and 0 < gz_report.written < 300 and store.count() == max(200, gz_report.written)
        assert "end-of-stream marker" in gz_report.reasons[0]


def test_bad_entries_are_skipped_and_counted_but_garbage_in_the_middle_is_an_error(tmp_path):
    header, lines = cache_lines(20)
    bad_value = lines[:5] + ['\n"0,0,0,0": {"p0": 0, "p1": 0, "p2": 0, "p3": 0, "time": [1]},'] + lines[5:]
    path = tmp_path / "bad.json"
    path.write_text(closed(header, bad_value))
    with Store(tmp_path / "b.db") as store:
        report = import_file(store, path)
        assert (report.written, report.skipped) == (20, 1) and "'time' must be a number" in report.reasons[0]
        garbage = tmp_path / "garbage.json"
        garbage.write_text(header + "".join(lines[:3]) + '\n"x": {"p0": oops},' + "".join(lines[4:]))
        with pytest.raises(FormatError, match=r"garbage\.json: invalid JSON"):
            import_file(store, garbage)


def test_header_after_the_cache_is_read_in_a_second_pass(tmp_path):
    raw = json.loads(VECTOR_ADD.read_text())
    reordered = {"cache": raw.pop("cache"), **raw}  # another tool's writer put the entries first
    path = tmp_path / "reordered.json"
    path.write_text(json.dumps(reordered, indent=2))
    with Store(tmp_path / "r.db") as store:
        assert import_file(store, path).written == 15


@pytest.mark.parametrize("fmt", ["kt", "t4", "csv"])
def test_export_then_import_round_trips(store, tmp_path, fmt):
    report = import_file(store, VECTOR_ADD)
    target = tmp_path / f"out.{fmt}.gz"
    assert export_run(store, report.runs[0], target, fmt) == 15
    with Store(tmp_path / "back.db") as back:
        again = import_file(back, target, name="vector_add")
        assert (again.written, again.skipped) == (15, 0)
        original = {r.config["block_size_x"]: (r.status, r.time_ms, r.samples) for r in store.results()}
        assert {r.config["block_size_x"]: (r.status, r.time_ms, r.samples) for r in back.results()} == original


def test_csv_rows_that_do_not_read_are_skipped(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("bs,status,time_ms\n32,ok,1.5\n64,ok,not-a-number\n128,bogus,2\n256,timeout,\n512,ok\n")
    with Store(tmp_path / "c.db") as store:
        report = import_file(store, path)
        assert (report.written, report.skipped) == (2, 3) and store.status_counts() == {"ok": 1, "timeout": 1}
        (problem,) = store.problems()
        assert store.problem_info(problem.id).space["params"] == {"bs": [32, 256]}


def test_another_adaptune_database_imports_run_by_run(tmp_path):
    with Store(tmp_path / "a.db") as a:
        import_file(a, VECTOR_ADD)
        import_file(a, DATA / "test_cache_time_energy.json")
    with Store(tmp_path / "b.db") as b:
        report = import_file(b, tmp_path / "a.db")
        assert report.written == 30 and len(report.runs) == 2 and b.count() == 30


def adaptune(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adaptune", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_killed_import_leaves_a_consistent_store_and_the_rerun_completes_it(tmp_path):
    n = 50_000
    header, lines = cache_lines(n)
    cache = tmp_path / "big.json"
    cache.write_text(closed(header, lines))
    db = tmp_path / "k.db"
    proc = subprocess.Popen([sys.executable, "-m", "adaptune", "import", str(cache), "--db", str(db), "--quiet",
                             "--chunk-size", "500"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        rows = 0
        deadline = time.monotonic() + 120
        while rows < 1000 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            if db.exists():
                try:
                    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as raw:
                        rows = raw.execute("SELECT count(*) FROM measurements").fetchone()[0]
                except sqlite3.OperationalError:  # the schema is being created
                    rows = 0
        assert proc.poll() is None, "the import finished before it could be killed"
        readers = _children(proc.pid)  # the reader process the import forks
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _gone(readers), "the reader process outlived the killed import"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    with Store(db) as store:
        assert store.integrity_check() == "ok"
        kept = store.count()
        assert 1000 <= kept < n and kept % 500 == 0  # whole chunks only
        assert sum(1 for _ in store.iter_results()) == kept  # the counts agree with the rows
    out = adaptune("import", str(cache), "--db", str(db))
    assert out.returncode == 0 and f"imported {n} measurements" in out.stdout, out.stderr
    again = adaptune("import", str(cache), "--db", str(db))  # idempotent: 50,000 stays 50,000
    assert again.returncode == 0
    with Store(db) as store:
        assert store.count() == n == sum(1 for _ in store.iter_results())
        assert store.status_counts() == {"ok": n - len(range(3, n, 7)), "compile_error": len(range(3, n, 7))}


def test_cli_reports_truncation_and_refuses_foreign_or_corrupt_databases_in_one_line(tmp_path):
    header, lines = cache_lines(30)
    cut = tmp_path / "cut.json"
    cut.write_text(header + "".join(lines[:25]) + lines[25][:30])
    out = adaptune("import", str(cut), "--db", str(tmp_path / "ok.db"))
    assert out.returncode == 0 and "imported 25 measurements" in out.stdout and "skipped 1 entry" in out.stdout
    foreign = tmp_path / "shop.db"
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    for db, cause in ((foreign, "not an adaptune database"), (corrupt, "not a database")):
        for command in (("import", str(cut), "--db", str(db)), ("show", "--db", str(db)),
                        ("export", "--db", str(db), "--problem", "x", "-o", str(tmp_path / "o.json"))):
            result = adaptune(*command)
            assert result.returncode == 2, result.stderr
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert str(db) in result.stderr and cause in result.stderr and "Traceback" not in result.stderr


def _children(pid: int) -> list[int]:
    """Child process ids (Linux's /proc; empty where there is none)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _gone(pids: list[int], timeout: float = 15.0) -> bool:
    """Whether these processes ended within ``timeout`` seconds (those still running are killed)."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
        time.sleep(0.1)
    for p in alive:
        os.kill(p, signal.SIGKILL)
    return not alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def _summaries(store, run):
    """The run's rows and summary tables as plain values (bulk and chunked loads must agree on all of them)."""
    rows = {tuple(r.result.config.values()): (r.result.status, r.result.time_ms)
                                          for r in store.iter_results(run.problem_id, run.device_id, run.input_id)}
    tables = {}
    for table in (S.run_counts, S.run_time_bins, S.run_param_counts):
        where = [table.c.problem_id == run.problem_id, table.c.device_id == run.device_id,
                 table.c.input_id == run.input_id, table.c.n != 0]
        tables[table.name] = sorted(tuple(r)[3:] for r in store.db.rows(sa.select(table).where(*where)))
    return rows, tables


def test_bulk_load_equals_the_chunked_upserts_with_repeated_keys_and_colliding_hashes(store, tmp_path,
                                                                                      monkeypatch):
    header, lines = cache_lines(400)
    again = [re.sub(r'"time": ([0-9.]+)', r'"time": 9\1', line) if i % 3 else line for i, line in enumerate(lines[:60])]
    path = tmp_path / "dups.json"  # 60 keys twice (some with another time): the later one wins
    path.write_text(closed(header, lines + again))
    a, b = '{"p0":16,"p1":0,"p2":0,"p3":0}', '{"p0":32,"p1":0,"p2":0,"p3":0}'  # two keys given one 64-bit hash
    collide = (lambda real: lambda key: 42 if key in (a, b) else real(key))(config_hash)
    monkeypatch.setattr(rows_module, "config_hash", collide)
    monkeypatch.setattr(rows_module, "config_hashes", lambda keys: list(map(collide, keys)))
    monkeypatch.setattr(db_module, "config_hash", collide)
    loads = []
    monkeypatch.setattr(db_module, "BulkLoad", type("Spy", (BulkLoad,), {"finish": lambda self: loads.append(1)
                                                                         or BulkLoad.finish(self)}))
    monkeypatch.setattr(bulk_module, "BULK_MIN_ROWS", 1)
    bulk = import_file(store, path, name="bulk", chunk_size=64)
    assert loads == [1] and bulk.written == 400 and store.count() == 400
    monkeypatch.setattr(bulk_module, "BULK_MIN_ROWS", 10 ** 9)
    chunked = import_file(store, path, name="chunked", chunk_size=64)  # a chunk at a time, by upserts
    assert loads == [1] and chunked.written == 460 and store.count() == 800
    assert _summaries(store, bulk.runs[0]) == _summaries(store, chunked.runs[0])
    for report in (bulk, chunked):
        got = store.get_many(*report.runs[0], [json.loads(a), json.loads(b), {"p0": 0, "p1": 0, "p2": 0, "p3": 0}])
        assert len(got) == 3 and got[a].config["p0"] == 16 and got[b].config["p0"] == 32
    assert import_file(store, path, name="bulk").written == 400 and store.count() == 800  # idempotent (one chunk)
    assert store.integrity_check() == "ok"


def test_sqlite_bulk_inserts_of_many_rows_a_statement_store_what_executemany_stores(tmp_path, monkeypatch):
    header, lines = cache_lines(300)
    path = tmp_path / "c.json"
    path.write_text(closed(header, lines))
    monkeypatch.setattr(bulk_module, "BULK_MIN_ROWS", 1)
    tables = []
    for per in (1, 7):  # 1: every row by executemany; 7: statements of 7 rows, the rest of a chunk by executemany
        monkeypatch.setattr(bulk_module, "INSERT_ROWS", per)
        with Store(tmp_path / f"{per}.db") as store:
            assert import_file(store, path, chunk_size=64).written == 300
            with store.db.read() as conn:
                tables.append(conn.exec_driver_sql("SELECT * FROM measurements ORDER BY id").all())
    assert len(tables[0]) == 300 and tables[0] == tables[1]


def test_chunks_encoded_by_the_reader_or_by_the_writer_store_the_same_rows_and_skip_the_same_entries(tmp_path,
                                                                                                     monkeypatch):
    header, lines = cache_lines(300)
    lines[10] = lines[10].replace('"p0": 160', '"p0": 161')  # not among 'tune_params': skipped
    lines[20] = lines[20].replace('"2024-01-02 03:04:05.000000+00:00"', '"not a date"')  # skipped
    lines[30] = lines[30].replace('"compile_time"', '"note": "x", "compile_time"')  # another layout: a record
    path = tmp_path / "c.json"
    path.write_text(closed(header, lines))
    monkeypatch.setattr(jsonstream_module, "BLOCK", 4096)  # ~20 entries a decoded block: most of them clean
    got = []
    for share in (1, 2, 10 ** 6):  # every chunk encoded by the reader process; every other one; none

        class Every(importer_module.ReaderShare):
            def __call__(self, chunk, n=itertools.count(1), share=share):
                return encode_chunk(self.run, chunk) if next(n) % share == 0 else importer_module._as_handed(chunk)

        monkeypatch.setattr(importer_module, "ReaderShare", Every)
        with Store(tmp_path / f"{share}.db") as store:
            report = import_file(store, path, chunk_size=64)
            with store.db.read() as conn:
                tables = [conn.exec_driver_sql(f"SELECT * FROM {t}").all() for t in
                          ("measurements", "run_counts", "run_time_bins", "run_param_counts")]
        got.append((report.written, report.skipped, report.reasons, tables))
    assert got[0][:2] == (298, 2) and "161" in got[0][2][0] and "not a date" in got[0][2][1]
    assert got[0] == got[1] == got[2]


def test_csv_built_by_the_database_reads_back_as_python_writes_it(store, tmp_path):
    run = store.run(DeviceInfo(name="d", platform="p"), "k", "src", "in")
    weird = [0.1 + 0.2, 1e-05, 1e16, 5e-324, 123456789.123456789, 2.5, 100.0]
    results = [Result(config={"bs": 16 * (i + 1), "f": weird[i % len(weird)], "flag": i % 2 == 0, "name": f"v{i % 3}"},
                      status=Status.OK if i % 4 else Status.LAUNCH_ERROR, time_ms=weird[i % len(weird)] * 3 if i % 4
                      else math.inf, samples=[weird[i % len(weird)], math.nan][: 1 + i % 2],
                      compile_ms=1 / 3, error="" if i % 4 else 'it said "no", then\nstopped', timestamp=1.7e9 + i / 7)
               for i in range(40)]
    store.put_stream(run, results)
    names = ["bs", "f", "flag", "name"]
    by_db, by_python = tmp_path / "db.csv", tmp_path / "py.csv"
    with by_db.open("w", newline="") as out:
        assert store.write_csv(run, names, out) == 40
    with by_python.open("w", newline="") as out:
        assert exporter._write_csv(out, store.iter_records(run), {n: [] for n in names}) == 40

    def cells(path):
        with path.open(newline="") as f:
            return [[_value(c) for c in row] for row in csv.reader(f)]

    assert cells(by_db) == cells(by_python)
    paged = tmp_path / "paged.csv"  # pages of 3 rows: SQLite builds every second one in a forked process
    with paged.open("w", newline="") as out:
        assert store.write_csv(run, names, out, page_rows=3) == 40
    assert paged.read_bytes() == by_db.read_bytes()
    numbers = ["bs", "f"]  # numbers only: SQLite reads the cells by one json_extract (an array)
    with by_db.open("w", newline="") as out:
        assert store.write_csv(run, numbers, out) == 40
    with by_python.open("w", newline="") as out:
        assert exporter._write_csv(out, store.iter_records(run), {n: [] for n in numbers}) == 40
    assert cells(by_db) == cells(by_python)
    if store.dialect == "postgresql":  # a text value that needs quoting: COPY quotes it; SQLite leaves it to Python
        store.put(*run, Result(config={"bs": 1, "f": 1.0, "flag": True, "name": "a,b"}, time_ms=1.0))
        with by_db.open("w", newline="") as out:
            assert store.write_csv(run, names, out) == 41
        assert cells(by_db)[-1][3] == "a,b"
    else:
        store.put(*run, Result(config={"bs": 1, "f": 1.0, "flag": True, "name": "a,b"}, time_ms=1.0))
        assert store.write_csv(run, names, io.StringIO()) is None


def _value(cell: str) -> object:
    """A CSV cell compared by value: numbers (and each of a samples list's) as floats, NaN as a marker."""
    try:
        return tuple("nan" if math.isnan(x) else x for x in map(float, cell.split())) if cell else ""
    except ValueError:
        return cell


def test_a_bulk_load_that_fails_half_way_leaves_the_store_as_it_was(store, tmp_path, monkeypatch):
    header, lines = cache_lines(300)
    broken = tmp_path / "broken.json"  # garbage after 250 good entries: the import stops with an error
    broken.write_text(header + "".join(lines[:250]) + '\n"x": {"p0": oops},' + "".join(lines[251:])[:-1] + "}\n}")
    good = tmp_path / "good.json"
    good.write_text(closed(header, lines))
    monkeypatch.setattr(bulk_module, "BULK_MIN_ROWS", 1)
    with pytest.raises(FormatError, match="invalid JSON"):
        import_file(store, broken, chunk_size=100)
    assert gc.isenabled()  # paused while the pipeline ran (pipeline.chunked_collection), resumed on the error
    indexes = {ix["name"] for ix in sa.inspect(store.db.engine).get_indexes("measurements")}
    assert store.count() == 0 and {"uq_m_hash", "ix_m_ok_run"} <= indexes  # rows and dropped indexes rolled back

    def foreign_keys():
        return sorted(fk["referred_table"] for fk in sa.inspect(store.db.engine).get_foreign_keys("measurements"))

    assert foreign_keys() == ["devices", "inputs", "problems"]  # (PostgreSQL drops them during the load)
    report = import_file(store, good, chunk_size=100)
    assert foreign_keys() == ["devices", "inputs", "problems"]
    assert report.written == 300 and store.count() == 300 == sum(1 for _ in store.iter_results())
    assert store.status_counts() == {"ok": 300 - len(range(3, 300, 7)), "compile_error": len(range(3, 300, 7))}
    run = report.runs[0]
    store.put(*run, Result(config={"p0": 16, "p1": 16, "p2": 16, "p3": 16}, time_ms=2.0))  # the counting resumed
    assert store.count() == 301 and store.status_counts()["ok"] == 301 - len(range(3, 300, 7))
    assert store.integrity_check() == "ok"
    if store.dialect == "sqlite":  # checked again on the pooled connection the loads used
        with store.db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []


def test_a_sqlite_bulk_load_into_a_run_the_store_does_not_hold_is_refused(tmp_path):
    with Store(tmp_path / "s.db") as store:  # (foreign keys are off during the load: the run is checked instead)
        device, problem, _ = store.run(DeviceInfo(name="d", platform="p"), "k", "src", "in")
        with pytest.raises(StoreError, match="does not hold all three"), store.loading(RunKey(device, problem, 99),
                                                                                        10 ** 6):
            pass
        with store.db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def _journal(path: Path) -> str:
    raw = sqlite3.connect(path)
    try:
        return raw.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        raw.close()  # an open connection would keep the file in WAL mode


def test_a_sqlite_bulk_write_alone_uses_the_rollback_journal_and_a_killed_one_is_rolled_back(tmp_path):
    db = tmp_path / "j.db"
    with Store(db) as store:
        store.count()  # an idle pooled connection of this store: closed by bulk_write
        with store.db.bulk_write() as conn:
            alone = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        with Store(db) as other, other.db.read() as reading:
            reading.exec_driver_sql("SELECT count(*) FROM measurements").all()
            with store.db.bulk_write() as conn:  # another connection holds the file: the WAL, no waiting
                shared = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    assert (alone, shared, _journal(db)) == ("delete", "wal", "wal")
    child = subprocess.run([sys.executable, "-c", f"""
import os, signal
from adaptune.records import DeviceInfo, Result
from adaptune.store import Store
from adaptune.store.db import encode_rows
store = Store({str(db)!r})
run = store.run(DeviceInfo(name="d", platform="p"), "k", "h", "i")
with store.db.bulk_write() as conn:
    conn.exec_driver_sql("PRAGMA cache_size=50")  # the rows spill into the file before the end
    for row in encode_rows(run, [(dict(p0=i), "ok", 1.0 + i, [], 0.0, 0.0, 0.0, {{}}, "", 0.0)
                                 for i in range(20_000)]).rows:
        conn.exec_driver_sql("INSERT INTO measurements (device_id, problem_id, input_id, config_key, config_hash, "
                             "config, status, time_ms, samples, compile_ms, verify_ms, benchmark_ms, observers, "
                             "error, timestamp, time_bin) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
    os.kill(os.getpid(), signal.SIGKILL)  # mid-transaction
"""], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert (tmp_path / "j.db-journal").exists() and db.stat().st_size > 2 ** 20  # a hot journal, rows in the file
    with Store(db) as store:  # the journal left behind is rolled back; the WAL is back
        assert store.integrity_check() == "ok" and store.count() == 0 and store.status_counts() == {}
    assert _journal(db) == "wal" and not (tmp_path / "j.db-journal").exists()
    with Store(":memory:") as memory:  # a private in-memory store keeps its one connection and its tables
        run = memory.run(DeviceInfo(name="d", platform="p"), "k", "h", "i")
        with memory.db.bulk_write() as conn:
            conn.exec_driver_sql("SELECT count(*) FROM measurements").all()
        assert memory.run(DeviceInfo(name="d", platform="p"), "k", "h", "i") == run and memory.count() == 0


def test_the_reader_encodes_a_chunk_when_it_waited_for_the_writer_as_long_as_encoding_one_takes():
    waited = [0.0]
    share = importer_module.ReaderShare(RunKey(1, 1, 1), lambda: waited[0])
    chunk = [record_of(Result(config={"x": i}, time_ms=1.0 + i)) for i in range(2000)]
    assert isinstance(share(chunk), Encoded)  # the first: it measures what encoding costs
    assert share.cost > 0
    assert not isinstance(share(chunk), Encoded)  # the writer keeps up: it encodes
    waited[0] += share.cost / 2
    assert not isinstance(share(chunk), Encoded)  # waited less than an encoding costs
    waited[0] += share.cost
    credit = share.credit + share.cost
    assert isinstance(share(chunk), Encoded)  # now the reader has the time
    assert share.credit == pytest.approx(max(0.0, credit - share.cost))  # and spent it


def test_a_postgresql_table_grown_by_chunked_writes_gets_statistics_without_waiting_for_autovacuum(pg_url):
    with Store(pg_url) as store:
        run = store.run(DeviceInfo(name="d", platform="p"), "k", "src", "in")
        with store.db.write() as conn:  # autovacuum's own ANALYZE would come at its own time: off for this test
            conn.exec_driver_sql("ALTER TABLE measurements SET (autovacuum_enabled = false)")

        def estimated_rows() -> float:  # -1 until the table is first analyzed (PostgreSQL 14+)
            with store.db.read() as conn:
                return conn.exec_driver_sql("SELECT reltuples FROM pg_class WHERE relname = 'measurements'").scalar()

        half = db_module.ANALYZE_MIN_ROWS // 2
        store.put_stream(run, (Result(config={"x": i}, time_ms=1.0 + i) for i in range(half)))
        assert estimated_rows() <= 0  # fewer than ANALYZE_MIN_ROWS written: not yet
        store.put_stream(run, (Result(config={"x": -i}, time_ms=1.0 + i) for i in range(1, 2 * half)))
        assert estimated_rows() == pytest.approx(store.count(), rel=0.05)
