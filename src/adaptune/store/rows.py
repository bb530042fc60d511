"""A measurement as a database row and back: the one place that knows the column layout.

Writers encode a :class:`Result` into a plain tuple with its JSON columns already text, so bulk writes go
to the driver's ``executemany`` or PostgreSQL's ``COPY`` without a per-row SQLAlchemy round trip.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from adaptune.records import Result, Status
from adaptune.store.base import RunKey, StoredResult
from adaptune.store.codec import config_hash, config_key, dumps, time_bin

_OK = str(Status.OK)

COLUMNS = ("device_id", "problem_id", "input_id", "config_key", "config_hash", "config", "status", "time_ms",
           "samples", "compile_ms", "verify_ms", "benchmark_ms", "observers", "error", "timestamp", "time_bin")
"""Columns a writer fills, in the order of :func:`encode`'s tuple (``id`` is assigned by the database)."""
JSON_COLUMNS = frozenset({"config", "samples", "observers"})
KEY = COLUMNS.index("config_key")
CONFIG = COLUMNS.index("config")
HASH = COLUMNS.index("config_hash")
STATUS = COLUMNS.index("status")
BIN = COLUMNS.index("time_bin")


def _json(value: Any) -> str:
    """Strict JSON text (non-finite floats as null); orjson is ten times faster than ``json`` here."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    except TypeError:
        return dumps(value)


def fast_config_key(config: Mapping[str, Any]) -> str:
    """``codec.config_key`` of ``config``, by orjson when that gives the same text (the key is an identity:
    it must not change with the encoder): integer, boolean and ASCII string values. Floats (whose shortest
    form orjson and ``json`` spell differently, 1e-05 against 1e-5) take ``json``."""
    for v in config.values():
        kind = type(v)
        if not (kind is int or kind is bool or (kind is str and v.isascii())):
            return config_key(config)
    try:
        return orjson.dumps(config, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # keys that are not strings
        return config_key(config)


def encode_fields(run: RunKey, config: Mapping[str, Any], status: Any, time_ms: float, samples: Any,
                  compile_ms: float, verify_ms: float, benchmark_ms: float, observers: Mapping[str, float],
                  error: str, timestamp: float) -> tuple[Any, ...]:
    """The row of one result given by its fields (``Record``, in :class:`Result`'s order) in ``run``: a time only
    for successes (failures store NULL, read back as inf). Bulk imports call this straight from the file's
    entries, without building a Result."""
    status = str(status)
    time_ms = float(time_ms)
    stored_time = time_ms if status == _OK and math.isfinite(time_ms) else None
    config = config if type(config) is dict else dict(config)
    key = fast_config_key(config)
    return (run[0], run[1], run[2], key, config_hash(key), _json(config), status, stored_time,
            _json(samples if type(samples) is list else list(samples)), float(compile_ms), float(verify_ms),
            float(benchmark_ms), _json(observers), str(error or ""), float(timestamp), time_bin(stored_time))


def encode(run: RunKey, result: Result) -> tuple[Any, ...]:
    """The row of ``result`` in ``run`` (see :func:`encode_fields`)."""
    return encode_fields(run, result.config, result.status, result.time_ms, result.samples, result.compile_ms,
                         result.verify_ms, result.benchmark_ms, result.observers, result.error, result.timestamp)


def _loaded(value: Any) -> Any:
    """A JSON column as Python: drivers hand back text (SQLite) or decoded values (PostgreSQL json)."""
    return orjson.loads(value) if isinstance(value, str) else value


def decode(row: Any) -> Result:
    """A :class:`Result` from a row with the measurement columns (by name); JSON nulls become NaN."""
    observers = _loaded(row.observers) or {}
    if None in observers.values():
        observers = {k: (math.nan if v is None else v) for k, v in observers.items()}
    samples = _loaded(row.samples) or []
    if None in samples:
        samples = [math.nan if v is None else v for v in samples]
    return Result(config=_loaded(row.config), status=Status(row.status),
                  time_ms=math.inf if row.time_ms is None else row.time_ms, samples=samples,
                  compile_ms=row.compile_ms, verify_ms=row.verify_ms, benchmark_ms=row.benchmark_ms,
                  observers=observers, error=row.error or "", timestamp=row.timestamp)


def decode_stored(row: Any) -> StoredResult:
    """A :class:`StoredResult` from a row with ``id``, the run ids and the measurement columns."""
    return StoredResult(int(row.id), RunKey(int(row.device_id), int(row.problem_id), int(row.input_id)),
                        decode(row))
