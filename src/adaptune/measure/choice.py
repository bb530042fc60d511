"""Kernel arguments that differ per configuration (Kernel Tuner's ``Tunable`` and ``TunablePrecision``).

An :class:`ArgumentChoice` is one kernel argument whose value a tuning parameter picks: one of ``options``
(``Tunable``: a matrix or its transpose), or ``base`` cast to the dtype ``casts`` names for that value
(``TunablePrecision``: the same data in half, float or double). The casts are made where the argument is
used, the first time a configuration needs that precision, so only the base array travels to the worker
process and a precision no configuration visits is never made.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np


@lru_cache(maxsize=64)
def _expression(text: str) -> Any:
    # imported here, as in measure.geometry: only expression keys need the parser (not the worker's start)
    from adaptune.space.safe_expr import compile_vector

    return compile_vector(text, None, "argument choice key")[0]


@dataclass(frozen=True, eq=False)
class ArgumentChoice:
    """``key``: the parameter whose value picks, an expression of the parameters (never ``eval``-ed), or
    ``callable(config) -> value``."""

    key: str | Callable[[dict[str, Any]], Hashable]
    options: Mapping[Hashable, Any] | None = None
    base: np.ndarray | np.generic | None = None
    casts: Mapping[Hashable, Any] | None = None

    def __post_init__(self) -> None:
        if (self.options is None) == (self.casts is None):
            raise ValueError("an ArgumentChoice has either options or a base array with casts")
        if self.casts is not None and not isinstance(self.base, np.ndarray | np.generic):
            raise TypeError("casts need a NumPy base array (or scalar) to cast")
        if not callable(self.key) and not isinstance(self.key, str):
            raise TypeError("key must be a parameter name or callable(config)")

    @property
    def values(self) -> list[Hashable]:
        return list(self.options if self.options is not None else self.casts or {})

    def pick(self, config: Mapping[str, Any]) -> Hashable:
        """The key's value in ``config``; a KeyError naming the valid values when it is none of them."""
        if callable(self.key):
            value = self.key(dict(config))
        elif self.key in config:
            value = config[self.key]
        else:
            value = _expression(self.key)(config)[0]
            value = value.item() if isinstance(value, np.generic | np.ndarray) else value
        if value not in self.values:
            raise KeyError(f"{value!r} is not a valid parameter value, should be one of: "
                           f"{', '.join(map(str, self.values))}")
        return value

    def make(self, value: Hashable) -> Any:
        """The argument for ``value`` (a cast is made here, each call anew: the caller keeps what it reuses)."""
        if self.options is not None:
            return self.options[value]
        return self.base.astype(self.casts[value])  # type: ignore[index, union-attr]

    def describe(self) -> str:
        """What identifies the argument in a store key: the key and each value's dtype and shape."""
        key = self.key if isinstance(self.key, str) else getattr(self.key, "__qualname__", "callable")
        shape = np.shape(self.base) if self.options is None else None
        parts = [f"{v!r}:{np.dtype(self.casts[v]).str}{shape}" if self.casts is not None
                 else f"{v!r}:{np.asarray(self.options[v]).dtype.str}{np.shape(self.options[v])}"  # type: ignore[index]
                 for v in self.values]
        return f"choice({key};{','.join(parts)})"

    def is_array(self) -> bool:
        sample = self.base if self.options is None else next(iter(self.options.values()), None)
        return isinstance(sample, np.ndarray)
