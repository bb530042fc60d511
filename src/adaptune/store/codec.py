"""JSON encoding shared by the database and the file formats: NumPy scalars, canonical config keys.

A configuration is identified in the database by its canonical JSON (sorted keys, no spaces), so that
the same configuration written from a dict in any key order, with Python or NumPy values, maps to one row.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Iterable, Mapping
from operator import methodcaller
from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """``obj`` with NumPy scalars/arrays and tuples turned into plain JSON types (recursively)."""
    if isinstance(obj, bool | int | str) or obj is None:
        return obj
    if isinstance(obj, float):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    raise TypeError(f"cannot store a value of type {type(obj).__name__} as JSON: {obj!r}")


def finite_or_none(obj: Any) -> Any:
    """Non-finite floats become ``None``: strict JSON (and PostgreSQL) has no NaN or Infinity."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite_or_none(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    """Strict JSON text of ``obj`` (NumPy values converted, non-finite floats as null)."""
    return json.dumps(finite_or_none(jsonable(obj)), allow_nan=False)


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical identity of a configuration: JSON with sorted keys and no whitespace."""
    return json.dumps(jsonable(dict(config)), sort_keys=True, separators=(",", ":"), allow_nan=False)


BINS_PER_OCTAVE = 64
"""Resolution of the stored time bins (``time_bin``): 1/64 of a doubling, about 1.1 %."""


def config_hash(key: str) -> int:
    """The 64-bit identity of a configuration key in its run: the first 8 bytes of its MD5, signed (PostgreSQL
    computes the same with ``('x' || left(md5(key), 16))::bit(64)::bigint``). Not a security property: a
    collision is detected by the stored key and handled (``schema.py``)."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:8], "big", signed=True)


_digest = methodcaller("digest")
_signed64 = struct.Struct(">q").unpack_from


def config_hashes(keys: Iterable[str]) -> list[int]:
    """:func:`config_hash` of each key, by C loops (``map``): a bulk import's million keys in a fraction of the
    time of a call each."""
    return [h for (h,) in map(_signed64, map(_digest, map(hashlib.md5, map(str.encode, keys))))]


def time_bin(time_ms: float | None) -> int | None:
    """The fine log-spaced bin of a successful time (``floor(log2(t) * BINS_PER_OCTAVE)``); None without one."""
    if time_ms is None or not 0.0 < time_ms < math.inf:
        return None
    return math.floor(math.log2(time_ms) * BINS_PER_OCTAVE)
