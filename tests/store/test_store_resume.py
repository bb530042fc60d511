"""Resume at scale: which configurations of a space are stored is one indexed query per batch, counted on a
real store by SQLAlchemy's own statement events."""

from __future__ import annotations

import sqlalchemy as sa

from adaptune.records import DeviceInfo, Result
from adaptune.space import Space
from adaptune.store import Store
from adaptune.store.db import LOOKUP_BATCH
from adaptune.tuning.resume import StoredLookup


def test_a_batch_of_asks_is_one_query_per_lookup_batch(tmp_path):
    space = Space({"a": list(range(40)), "b": list(range(50))})  # 2,000 configurations
    with Store(tmp_path / "resume.db") as store:
        run = store.run(DeviceInfo("GPU", "test"), "p", "h", "i")
        stored = [space.config(i) for i in range(0, len(space), 3)]
        store.put_stream(run, [Result.from_samples(c, [1.0]) for c in stored])
        statements: list[str] = []
        sa.event.listen(store.db.engine, "before_cursor_execute",
                        lambda conn, cursor, statement, *rest: statements.append(statement))
        lookup = StoredLookup(store, run, space)
        asked = [space.config(i) for i in range(1000)]
        lookup.lookup(asked)
        selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert len(selects) == -(-1000 // LOOKUP_BATCH)  # one per batch, however large the run
        statements.clear()
        found = [i for i, c in enumerate(asked) if lookup.get(c) is not None]
        assert found == list(range(0, 1000, 3)) and statements == []  # answered from the batch
        assert lookup.get(space.config(1998)) is not None  # a configuration outside it: one query of its own
        assert sum(s.lstrip().upper().startswith("SELECT") for s in statements) == 1


def test_a_run_that_observes_measures_again_what_was_stored_without_observers(tmp_path):
    space = Space({"a": [1, 2, 3]})
    with Store(tmp_path / "observed.db") as store:
        run = store.run(DeviceInfo("GPU", "test"), "p", "h", "i")
        store.put_stream(run, [Result.from_samples({"a": 1}, [1.0]),  # an earlier run without observers
                               Result.from_samples({"a": 2}, [1.0], observers={"power_w": 90.0})])
        plain = StoredLookup(store, run, space)
        observed = StoredLookup(store, run, space, observed=True)
        assert plain.get({"a": 1}) is not None and plain.get({"a": 2}) is not None
        assert observed.get({"a": 1}) is None  # lacks what this run records: measured again
        assert observed.get({"a": 2}).observers == {"power_w": 90.0}
