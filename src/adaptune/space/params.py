"""One tunable parameter: a name and an ordered, finite list of values of one kind."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

KINDS = ("int", "float", "str", "bool")
_NO_DEFAULT: Any = None


def _normalise(value: Any) -> Any:
    """NumPy scalars -> the Python scalar they hold, so values hash, print and compare plainly."""
    return value.item() if isinstance(value, np.generic) else value


def _kind_of(name: str, values: Sequence[Any]) -> str:
    kinds = set()
    for v in values:
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, int):
            if not -(2**63) <= v < 2**63:
                raise ValueError(f"parameter {name!r}: value {v} does not fit in 64 bits")
            kinds.add("int")
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError(f"parameter {name!r}: value {v!r} is not finite")
            kinds.add("float")
        elif isinstance(v, str):
            kinds.add("str")
        else:
            raise ValueError(f"parameter {name!r}: value {v!r} has unsupported type {type(v).__name__} "
                             f"(use int, float, str or bool)")
    if kinds == {"int", "float"}:
        return "float"  # e.g. [0.5, 1, 2]: one numeric axis
    if len(kinds) > 1:
        raise ValueError(f"parameter {name!r} mixes value kinds {sorted(kinds)}; use one of int, float, str, bool")
    return kinds.pop()


@dataclass(frozen=True)
class Param:
    """A tunable parameter. ``values`` keeps the user's order: it defines positions and neighbours."""

    name: str
    values: tuple[Any, ...]
    default: Any = _NO_DEFAULT
    kind: str = field(init=False)
    _positions: dict[Any, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"parameter name {self.name!r} must be a Python identifier")
        if isinstance(self.values, str | bytes) or not hasattr(self.values, "__iter__"):
            raise ValueError(f"parameter {self.name!r}: values must be a sequence, got {self.values!r}")
        values = tuple(_normalise(v) for v in self.values)
        if not values:
            raise ValueError(f"parameter {self.name!r} has an empty value list")
        kind = _kind_of(self.name, values)
        positions: dict[Any, int] = {}
        for i, v in enumerate(values):
            if v in positions:
                raise ValueError(f"parameter {self.name!r} lists value {v!r} twice "
                                 f"(positions {positions[v]} and {i})")
            positions[v] = i
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "_positions", positions)
        default = _normalise(self.default)
        object.__setattr__(self, "default", default)
        if default is not None and self.position(default) is None:
            raise ValueError(f"default {default!r} of parameter {self.name!r} is not one of its values {list(values)}")

    def __len__(self) -> int:
        return len(self.values)

    @property
    def ordinal(self) -> bool:
        """Numeric and bool values have an order that encodings keep; strings are categories."""
        return self.kind != "str"

    def position(self, value: Any) -> int | None:
        """Position of ``value`` in :attr:`values`, or None; True never matches 1 and vice versa."""
        value = _normalise(value)
        if isinstance(value, bool) != (self.kind == "bool"):
            return None
        if isinstance(value, str) != (self.kind == "str"):
            return None
        try:
            return self._positions.get(value)
        except TypeError:  # unhashable
            return None

    def array(self) -> np.ndarray:
        """Values as a NumPy array for vectorised constraints (bool as 0/1 int, like Python arithmetic)."""
        if self.kind == "str":
            return np.array(self.values, dtype=np.str_)
        if self.kind == "float":
            return np.array(self.values, dtype=np.float64)
        return np.array(self.values, dtype=np.int64)
