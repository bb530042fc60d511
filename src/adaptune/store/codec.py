"""JSON encoding shared by the database and the file formats: NumPy scalars, canonical config keys.

A configuration is identified in the database by its canonical JSON (sorted keys, no spaces), so that
the same configuration written from a dict in any key order, with Python or NumPy values, maps to one row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
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
