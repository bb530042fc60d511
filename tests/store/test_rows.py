"""The column-at-a-time row encoder gives exactly the rows of the one-row-at-a-time encoder."""

import math

import numpy as np

from adaptune.records import Status
from adaptune.store.rows import encode_columns, encode_fields

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
