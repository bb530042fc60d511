"""Translate between Triton's ``Config`` objects, adaptune's ``Space`` and the store's plain dicts.

A configuration is stored as one flat dict: the meta-parameters plus ``num_warps``, ``num_stages``,
``num_ctas`` and ``maxnreg`` where set, so a row means the same thing whichever list it came from.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from triton import Config

from adaptune.space import Space

LAUNCH_FIELDS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
"""Config fields that are launch options, not meta-parameters."""

Features = Callable[[Mapping[str, Any]], Sequence[float]]
"""``features(key) -> floats``: ``key`` maps each key argument to its value and ``"dtypes"`` to a tuple."""


def config_dict(config: Config) -> dict[str, Any]:
    """The store's form of a Triton config: meta-parameters and the launch options that are set."""
    out = dict(config.kwargs)
    for name in LAUNCH_FIELDS:
        value = getattr(config, name, None)
        if value is not None:
            out[name] = value
    return out


def from_dict(values: Mapping[str, Any]) -> Config:
    """A Triton config from a flat dict (a ``Space`` point or a stored row)."""
    launch = {k: values[k] for k in LAUNCH_FIELDS if k in values}
    return Config({k: v for k, v in values.items() if k not in LAUNCH_FIELDS}, **launch)


def configs_from_space(space: Space) -> list[Config]:
    """Every valid point of ``space`` (constraints applied) as a Triton config."""
    configs = [from_dict(point) for point in space.configs()]
    if not configs:
        raise ValueError("the space has no valid configuration (its constraints exclude every point)")
    return configs


def key_name(key: tuple[Any, ...]) -> str:
    """The store's input name of a tuning key: its values, as Triton prints them."""
    return ",".join(str(v) for v in key)


def named_key(names: Sequence[str], key: tuple[Any, ...]) -> dict[str, Any]:
    """A tuning key as ``{argument: value, ..., "dtypes": (...)}``: values first, dtype strings after."""
    named: dict[str, Any] = {n: v if v is None or isinstance(v, bool | int | float | str) else str(v)
                             for n, v in zip(names, key[:len(names)], strict=True)}
    named["dtypes"] = [str(d) for d in key[len(names):]]
    return named


def _log2(value: Any) -> float:
    """Sizes matter by their order of magnitude: signed log2(1 + |v|); bools and None are 0/1."""
    if value is None or isinstance(value, bool):
        return float(bool(value))
    if isinstance(value, int | float):
        return math.copysign(math.log2(1.0 + abs(float(value))), float(value))
    return _category(str(value))


def _category(text: str) -> float:
    """A stable code in [0, 1) for a categorical value (a dtype, a string argument)."""
    return (zlib.crc32(text.encode()) % 1000) / 1000.0


def default_features(key: Mapping[str, Any]) -> list[float]:
    """The key's values, log2-scaled, then one code per dtype."""
    values = [_log2(v) for k, v in key.items() if k != "dtypes"]
    return values + [_category(d) for d in key.get("dtypes", ())]
