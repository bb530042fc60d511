"""The column-at-a-time row encoder gives exactly the rows of the one-row-at-a-time encoder."""

import math

import numpy as np

from adaptune.records import Status
from adaptune.store.base import RecordColumns
from adaptune.store.db import chunks, encode_rows, encode_stream
from adaptune.store.kt_cache import EntryReader
from adaptune.store.rows import encode_block, encode_columns, encode_fields

RUN = (1, 2, 3)


def record(config, status=Status.OK, time_ms=1.5, samples=(1.5, 1.25), observers=None, error="", ts=1e9):
    return (config, status, time_ms, list(samples), 10.0, 0, 2.5, observers or {"power": 7.0}, error, ts)


def test_columns_encode_as_rows_do_or_hand_back():
    chunks = {
        "integers, sorted names": [record({"a": i, "b": 2 * i}) for i in range(5)],
        "integers, names out of order": [record({"b": i, "a": 1}) for i in range(3)],
        "failures and odd times": [record({"a": 1, "b": 2}, Status.COMPILE_ERROR, math.inf, (), error="boom"),
                                   record({"a": 2, "b": 2}, Status.OK, math.nan, (math.nan, 1.0)),
                                   record({"a": 3, "b": 2}, Status.OK, 0.0), record({"a": 4, "b": 2}, "ok", 3)],
        "booleans and strings": [record({"a": True, "b": "x"}), record({"a": False, "b": "y%d"})],
        "one name": [record({"a": 5}), record({"a": 6})],
        "layouts differ": [record({"a": 1, "b": 2}), record({"b": 1, "a": 2}), record({"a": 1})],
        "numpy samples": [record({"a": 1, "b": 2}, samples=np.array([1.0, 2.0]))],
        "large integers": [record({"a": 2 ** 63, "b": 1}), record({"a": -(2 ** 63), "b": 1})],
    }
    for what, records in chunks.items():
        assert encode_columns(RUN, records) == [encode_fields(RUN, *r) for r in records], what
    # what only the per-row encoder spells as codec.config_key does: handed back
    for config in ({"a": 1.5, "b": 2}, {"a": "é", "b": 1}, {"a": np.int64(3), "b": 1}):
        assert encode_columns(RUN, [record(config)]) is None
    assert encode_columns(RUN, []) == []


def test_blocks_of_checked_entries_encode_as_their_records_in_chunks_of_the_size_asked():
    names = ["b", "a"]  # out of order: the key's text sorts them
    entries = [{"b": i % 7, "a": i, "time": "CompilationFailedConfig" if i % 5 == 0 else 0.5 + i,
                "times": [1.0, 2], "compile_time": 3, "power": 1.5, "timestamp": "2024-01-02 03:04:05+00:00"}
               for i in range(23)]
    members = [(f"{e['b']},{e['a']}", e) for e in entries]
    reader = EntryReader(names, None)
    block = reader.block(members[:17], set())
    assert isinstance(block, RecordColumns) and block.records() == reader.many(members[:17], set())
    assert not isinstance(reader.block([*members[:3], ("9,9", entries[3])], set()), RecordColumns)  # a bad key
    stream = [*block.records()[:2], block.cut(2, 17), *reader.many(members[17:], set())]
    records = block.records() + reader.many(members[17:], set())
    for size in (4, 10, 100):
        got = list(encode_stream(RUN, stream, size))
        assert [len(c.rows) for c in got] == [len(c) for c in chunks(records, size)]
        assert got == [encode_rows(RUN, c) for c in chunks(records, size)]
    assert encode_block(RUN, block) == encode_columns(RUN, block.records())
    assert encode_block(RUN, RecordColumns(("a",), *block.cut(0, 2)[1:])) is None  # one name: the records' way
