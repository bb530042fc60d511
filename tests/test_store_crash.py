"""A real writer process SIGKILLed mid-run: the database stays sound and keeps every completed put."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading

import sqlalchemy as sa

from adaptune.store import Store

WRITER = textwrap.dedent("""
    import sys
    from adaptune.records import DeviceInfo, Result
    from adaptune.store import Store

    store = Store(sys.argv[1])
    d = store.device(DeviceInfo(name="crash GPU", platform="cpu"))
    p = store.problem("crash", "h", {"params": {"i": list(range(100000))}})
    i = store.input(p, "default")
    print("ready", flush=True)
    for n in range(100000):
        store.put(d, p, i, Result.from_samples({"i": n}, [float(n), float(n) + 1.0], observers={"n": n}))
        print(n, flush=True)  # printed only after the put's transaction committed
""")


def test_sigkill_mid_run_loses_nothing_committed(tmp_path):
    path = tmp_path / "crash.db"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout.readline().strip() == "ready"
        done: list[int] = []
        with Store(path) as reader:  # a second process reads while the writer writes
            while len(done) < 150:
                done.append(int(proc.stdout.readline()))
                if len(done) == 50:
                    assert reader.count() >= 50
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    with Store(path) as store:
        assert store.integrity_check() == "ok"
        stored = {r.config["i"]: r for r in store.results()}
        assert set(done) <= set(stored)  # every put that reported success is there
        # the writer may run ahead of what was read from its pipe, but what is stored is a gapless prefix
        assert set(stored) == set(range(len(stored)))
        last = stored[done[-1]]
        assert last.ok and last.time_ms == done[-1] + 0.5 and last.samples == [done[-1], done[-1] + 1.0]
        (device_id, input_id), = store.measured_pairs(store.problems()[0].id)
        store.put(device_id, store.problems()[0].id, input_id, last)  # and it is writable again
        assert store.count() == len(stored)


CONCURRENT_WRITER = textwrap.dedent("""
    import sys
    from adaptune.records import DeviceInfo, Result
    from adaptune.store import Store

    path, worker = sys.argv[1], int(sys.argv[2])
    with Store(path) as store:
        d = store.device(DeviceInfo(name="shared GPU", platform="cpu"))
        p = store.problem("shared", "h", {"params": {"i": list(range(200))}})
        i = store.input(p, "default")
        for n in range(worker, 200, 2):  # the two workers interleave over one space
            store.put(d, p, i, Result.from_samples({"i": n}, [float(worker)]))
        store.put_many(d, p, i, [Result.from_samples({"i": 1000 + worker * 100 + k}, [1.0]) for k in range(50)])
""")


def test_two_processes_write_one_database(tmp_path):
    path = tmp_path / "shared.db"
    script = tmp_path / "writer.py"
    script.write_text(CONCURRENT_WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(path), str(w)], stderr=subprocess.PIPE, text=True)
             for w in (0, 1)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    with Store(path) as store:
        assert len(store.devices()) == 1 and len(store.problems()) == 1 and len(store.inputs()) == 1
        by_i = {r.config["i"]: r.time_ms for r in store.results()}
        assert len(by_i) == 200 + 100
        assert all(by_i[n] == n % 2 for n in range(200))
        assert store.integrity_check() == "ok"



def test_opening_waits_for_a_writer_while_the_file_is_switched_to_the_wal(tmp_path):
    """Switching to the WAL reads the file, then writes it; SQLite refuses that upgrade at once, without its busy
    timeout, while another connection holds the write lock (two processes opening a fresh file together)."""
    path = tmp_path / "rollback.db"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode=DELETE")  # as a bulk load leaves it while it runs
    holder.execute("BEGIN IMMEDIATE")  # the write lock, as a second opener switching the file at the same moment
    release = threading.Timer(0.5, holder.execute, ["COMMIT"])
    release.start()
    try:
        with Store(path) as store:  # waits for the lock instead of failing with "database is locked"
            store.problem("after", "h", {"params": {"i": [1]}})
    finally:
        release.join()
        holder.close()
    with Store(path) as store:
        assert [p.name for p in store.problems()] == ["after"]
        assert store.db.rows(sa.text("PRAGMA journal_mode"))[0][0] == "wal"
