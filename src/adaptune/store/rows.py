"""A measurement as a database row and back: the one place that knows the column layout.

Writers encode a :class:`Result` into a plain tuple with its JSON columns already text, so bulk writes go
to the driver's ``executemany`` or PostgreSQL's ``COPY`` without a per-row SQLAlchemy round trip.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import orjson

from adaptune.records import Result, Status
from adaptune.store.base import RecordColumns, RunKey, StoredResult
from adaptune.store.codec import BINS_PER_OCTAVE, config_hash, config_hashes, config_key, dumps, time_bin

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


_KEY_VALUES = frozenset({int, bool, str})
_sorted_json = partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)
_json_bytes = partial(orjson.dumps, option=orjson.OPT_SERIALIZE_NUMPY)


def encode_columns(run: RunKey, records: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
    """:func:`encode_fields` of every record at once, a column at a time (C loops of ``map`` instead of a
    Python call per row: a few µs a row less, most of a bulk import's encoding), or None where a column
    holds what only the per-row encoder spells right (a float or non-ASCII parameter value, NumPy values):
    the caller then encodes row by row. The same tuples either way (tested)."""
    if not records:
        return []
    configs, *fields = zip(*records, strict=True)
    if set(map(type, configs)) != {dict}:
        return None
    values = list(chain.from_iterable(map(dict.values, configs)))
    kinds = set(map(type, values))
    if not kinds <= _KEY_VALUES or (str in kinds and not all(v.isascii() for v in values if type(v) is str)):
        return None
    layouts = set(map(tuple, configs))
    try:
        if kinds == {int} and len(layouts) == 1 and len(configs[0]) > 1 and _in_int64(values):
            keys, config_texts = _int_texts(next(iter(layouts)), list(map(tuple, map(dict.values, configs))))
        else:  # the key: the canonical text, as fast_config_key
            keys = list(map(bytes.decode, map(_sorted_json, configs)))
            config_texts = list(map(bytes.decode, map(_json_bytes, configs)))
        return _assemble(run, keys, config_texts, *fields)
    except TypeError:
        return None


def encode_block(run: RunKey, block: RecordColumns) -> list[tuple[Any, ...]] | None:
    """:func:`encode_columns` of a block's records without building them: the configurations' texts straight
    from their value tuples (integer values of two or more parameters; else None, and the caller encodes
    ``block.records()``). The same tuples (tested)."""
    values = block.values
    if len(block.names) < 2 or not values:
        return None
    flat = list(chain.from_iterable(values))
    if set(map(type, flat)) != {int} or not _in_int64(flat):
        return None
    keys, config_texts = _int_texts(block.names, values)
    try:
        return _assemble(run, keys, config_texts, *block[2:])
    except TypeError:
        return None


def _in_int64(values: list[int]) -> bool:
    return min(values) >= -(2 ** 63) and max(values) < 2 ** 63


def _assemble(run: RunKey, keys: list[str], config_texts: list[str], statuses: Sequence[Any],
              times: Sequence[float], samples: Sequence[Any], compile_ms: Sequence[float],
              verify_ms: Sequence[float], benchmark_ms: Sequence[float], observers: Sequence[Any],
              errors: Sequence[Any], stamps: Sequence[float]) -> list[tuple[Any, ...]]:
    """The rows given each configuration's key and text and the records' other fields as columns."""
    sample_texts = list(map(bytes.decode, map(_json_bytes, samples)))
    observer_texts = list(map(bytes.decode, map(_json_bytes, observers)))
    hashes = config_hashes(keys)
    status_texts = list(map(str, statuses))
    stored = [t if s == _OK and -math.inf < t < math.inf else None
              for s, t in zip(status_texts, map(float, times), strict=True)]
    log2, floor = math.log2, math.floor
    bins = [floor(log2(t) * BINS_PER_OCTAVE) if t is not None and t > 0.0 else None for t in stored]
    error_texts: Any = errors if set(errors) <= {""} else [str(e or "") for e in errors]
    n = len(keys)
    return list(zip(repeat(run[0], n), repeat(run[1], n), repeat(run[2], n), keys, hashes,
                    config_texts, status_texts, stored, sample_texts, map(float, compile_ms),
                    map(float, verify_ms), map(float, benchmark_ms), observer_texts, error_texts,
                    map(float, stamps), bins, strict=True))


def _int_texts(layout: Sequence[str], values: list[tuple[int, ...]]) -> tuple[list[str], list[str]]:
    """The keys and JSON texts of configurations of integers sharing one layout (of two or more names; their
    values in its order), by one ``%`` template each: the same text as orjson's (names spelt by orjson), in a
    third of its time."""
    def template(names: Sequence[str]) -> str:
        return "{" + ",".join(orjson.dumps(k).decode().replace("%", "%%") + ":%d" for k in names) + "}"

    ordered = sorted(layout)
    texts = list(map(template(layout).__mod__, values))
    if list(layout) == ordered:
        return texts, texts
    where = [list(layout).index(n) for n in ordered]
    return list(map(template(ordered).__mod__, map(itemgetter(*where), values))), texts


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
