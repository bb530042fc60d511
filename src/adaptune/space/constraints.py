"""Constraints over parameters: restricted-expression text or plain Python callables."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.space.errors import ConstraintError
from adaptune.space.safe_expr import Compiled, compile_vector, truthy


@dataclass(frozen=True)
class Constraint:
    """A constraint parsed once and compiled to a vectorised NumPy function over columns."""

    text: str
    names: tuple[str, ...]
    _compiled: Compiled = field(repr=False, compare=False)

    def evaluate(self, columns: Mapping[str, Any], n: int | None = None) -> np.ndarray:
        """Boolean mask over rows; ``columns`` maps each name in :attr:`names` to an array or scalar.

        Rows on which a reached division or modulo by zero happened are False.
        """
        with np.errstate(all="ignore"):
            try:
                value, bad = self._compiled(columns)
                mask = truthy(value)
            except KeyError as e:
                raise ConstraintError(f"constraint {self.text!r} needs a value for {e.args[0]!r}") from None
            except (TypeError, ValueError, OverflowError) as e:
                raise ConstraintError(f"constraint {self.text!r} cannot be evaluated: {e}") from None
        if bad is not None:
            mask = mask & np.logical_not(bad)
        if n is None:
            n = max((np.size(columns[k]) for k in self.names if np.ndim(columns[k]) > 0), default=1)
        return np.broadcast_to(mask, (n,))

    def evaluate_one(self, values: Mapping[str, Any]) -> bool:
        """Scalar path for one configuration.

        It runs the same compiled closures on one-row arrays, so a single check and the
        vectorised enumeration can never disagree (overflow and division rules included).
        """
        columns = {k: np.asarray([values[k]]) for k in self.names if k in values}
        return bool(self.evaluate(columns, 1)[0])


@dataclass(frozen=True)
class CallableConstraint:
    """A Python callable taking the configuration dict and returning a bool.

    Checked one row at a time on the configurations that pass every text constraint, so it is
    orders of magnitude slower than text constraints; prefer text where it can say the same.
    """

    fn: Callable[[dict[str, Any]], Any]
    names: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))

    def evaluate_one(self, config: Mapping[str, Any]) -> bool:
        try:
            return bool(self.fn(dict(config)))
        except Exception as e:
            raise ConstraintError(f"callable constraint {self.text} raised {type(e).__name__}: {e} "
                                  f"on configuration {dict(config)}") from e


def parse_constraint(text: str, names: Collection[str] | None = None) -> Constraint:
    """Parse constraint ``text``; with ``names`` given, any other name is an error listing them."""
    known = None if names is None else frozenset(names)
    compiled, used = compile_vector(text, known)
    return Constraint(text=text.strip(), names=tuple(used), _compiled=compiled)
