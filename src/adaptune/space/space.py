"""The search space: parameters, constraints, and the table of valid configurations.

Valid configurations are rows of :attr:`Space.table` (positions into each parameter's values),
ordered as ``itertools.product`` over the parameters in declaration order. Each row also has a
mixed-radix code (its rank in the Cartesian product); codes are sorted, so mapping a
configuration to its index is a ``searchsorted`` and never a scan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from adaptune.space import neighbours as nb
from adaptune.space.constraints import CallableConstraint, Constraint, parse_constraint
from adaptune.space.enumeration import CHUNK_ROWS, ConstraintStats, Enumerator, mixed_radix_strides
from adaptune.space.errors import ConstraintError
from adaptune.space.params import Param

ConstraintLike = str | Callable[[dict[str, Any]], Any]


def _as_params(params: Mapping[str, Sequence[Any]] | Sequence[Param],
               defaults: Mapping[str, Any] | None) -> tuple[Param, ...]:
    if isinstance(params, Mapping):
        built = [p if isinstance(p, Param) else Param(name, p) for name, p in params.items()]
    else:
        built = []
        for p in params:
            if not isinstance(p, Param):
                raise TypeError(f"expected Param objects or a mapping name -> values, got {p!r}")
            built.append(p)
    if not built:
        raise ValueError("a space needs at least one parameter")
    seen: set[str] = set()
    for p in built:
        if p.name in seen:
            raise ValueError(f"parameter {p.name!r} is declared twice")
        seen.add(p.name)
    if defaults:
        unknown = sorted(set(defaults) - seen)
        if unknown:
            raise ValueError(f"defaults name unknown parameters {unknown}; parameters are {sorted(seen)}")
        built = [Param(p.name, p.values, defaults[p.name]) if p.name in defaults else p for p in built]
    return tuple(built)


def _as_constants(constants: Mapping[str, Any] | None, names: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in (constants or {}).items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"constant name {name!r} must be a Python identifier")
        if name in names:
            raise ValueError(f"constant {name!r} has the same name as a parameter")
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"constant {name!r} must be an int or float, got {value!r}")
        out[name] = value
    return out


class Space:
    """Parameters plus constraints, with their valid configurations enumerated up front.

    Text constraints use the restricted expression language of :mod:`adaptune.space.safe_expr`
    and are checked on whole columns. Callables take the configuration dict and return a bool;
    they are checked row by row on the survivors of the text constraints (much slower).
    """

    def __init__(self, params: Mapping[str, Sequence[Any]] | Sequence[Param],
                 constraints: Sequence[ConstraintLike] | ConstraintLike | None = (),
                 defaults: Mapping[str, Any] | None = None,
                 constants: Mapping[str, Any] | None = None,
                 *, chunk_rows: int = CHUNK_ROWS):
        if constraints is None:
            constraints = ()
        elif isinstance(constraints, str) or callable(constraints):
            constraints = [constraints]
        self.params: tuple[Param, ...] = _as_params(params, defaults)
        self.names: tuple[str, ...] = tuple(p.name for p in self.params)
        self.constants: dict[str, Any] = _as_constants(constants, set(self.names))
        self._param_index = {n: i for i, n in enumerate(self.names)}
        self.cartesian_size: int = math.prod(len(p) for p in self.params)
        if self.cartesian_size >= 2**63:
            raise ValueError(f"the Cartesian size {self.cartesian_size} does not fit in 64 bits; split the space")
        self._arrays = [p.array() for p in self.params]
        self._env_constants = {k: np.asarray(v) for k, v in self.constants.items()}
        text, calls = self._parse_constraints(constraints)
        self.constraints: tuple[Constraint | CallableConstraint, ...] = tuple(text) + tuple(calls)
        self._text_constraints = text
        self._callable_constraints = calls

        enumerator = Enumerator(self.names, self._arrays, text, self._env_constants, chunk_rows)
        table, codes = enumerator.run()
        stats = enumerator.stats
        if len(table) and calls:
            table, codes, call_stats = self._apply_callables(table, codes)
            stats = stats + call_stats
        if len(table) == 0:
            raise ConstraintError(self._empty_message(stats))
        table.flags.writeable = False
        codes.flags.writeable = False
        self._table = table
        self._codes = codes
        self._strides = mixed_radix_strides([len(p) for p in self.params])
        self._sizes = np.array([len(p) for p in self.params], dtype=np.int64)
        self._encoding_luts = [self._lut(p) for p in self.params]

    # ----------------------------------------------------------------- construction helpers
    def _parse_constraints(self, constraints: Sequence[ConstraintLike]
                           ) -> tuple[list[Constraint], list[CallableConstraint]]:
        known = set(self.names) | set(self.constants)
        text: list[Constraint] = []
        calls: list[CallableConstraint] = []
        for c in constraints:
            if isinstance(c, Constraint):
                c = c.text
            if isinstance(c, str):
                parsed = parse_constraint(c, known)
                first = {n: (self._arrays[self._param_index[n]][:1] if n in self._param_index
                             else self._env_constants[n]) for n in parsed.names}
                parsed.evaluate(first, 1)  # surfaces type errors (e.g. str * int) now, with the text
                text.append(parsed)
            elif isinstance(c, CallableConstraint):
                calls.append(c)
            elif callable(c):
                calls.append(CallableConstraint(c))
            else:
                raise ConstraintError(f"a constraint must be a string or a callable, got {type(c).__name__}: {c!r}")
        return text, calls

    def _apply_callables(self, table: np.ndarray, codes: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, list[ConstraintStats]]:
        stats = []
        keep = np.ones(len(table), dtype=bool)
        for c in self._callable_constraints:
            stat = ConstraintStats(c.text, rows_in=int(keep.sum()))
            for row in np.flatnonzero(keep):
                if not c.evaluate_one(self._row_config(table[row])):
                    keep[row] = False
            stat.rows_out = int(keep.sum())
            stats.append(stat)
        return table[keep], codes[keep], stats

    def _empty_message(self, stats: list[ConstraintStats]) -> str:
        culprit = next((s for s in stats if s.rows_in > 0 and s.rows_out == 0), None)
        detail = "; ".join(f"{s.text!r}: {s.rows_in} -> {s.rows_out}" for s in stats if s.rows_in)
        if culprit is not None:
            head = f"no valid configuration: constraint {culprit.text!r} removed every remaining one"
        else:
            head = "no valid configuration: the constraints together remove every configuration"
        return f"{head} (Cartesian size {self.cartesian_size}; partial configurations in -> out per constraint: {detail})"

    @staticmethod
    def _lut(p: Param) -> np.ndarray:
        n = len(p)
        if p.ordinal:
            return (np.arange(n, dtype=np.float64) / max(n - 1, 1))[:, None]
        return np.eye(n, dtype=np.float64)

    # ----------------------------------------------------------------- basic access
    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        return (f"Space({len(self.params)} params, {len(self)} valid of {self.cartesian_size}, "
                f"{len(self.constraints)} constraints)")

    def __contains__(self, config: object) -> bool:
        return isinstance(config, Mapping) and self.find(config) is not None

    @property
    def constraint_texts(self) -> tuple[str | Callable[[dict[str, Any]], Any], ...]:
        """The constraints as given: text for expressions, the callable itself otherwise."""
        return tuple(c.text for c in self._text_constraints) + tuple(c.fn for c in self._callable_constraints)

    @property
    def table(self) -> np.ndarray:
        """Positions of the valid configurations, (n_valid, n_params) int32, read-only."""
        return self._table

    @property
    def codes(self) -> np.ndarray:
        """Rank of each valid configuration in the Cartesian product (sorted, int64, read-only)."""
        return self._codes

    def param(self, name: str) -> Param:
        try:
            return self.params[self._param_index[name]]
        except KeyError:
            raise KeyError(f"unknown parameter {name!r}; parameters are {list(self.names)}") from None

    def _row_config(self, row: np.ndarray) -> dict[str, Any]:
        return {p.name: p.values[int(k)] for p, k in zip(self.params, row, strict=True)}

    def _check_index(self, i: int) -> int:
        n = len(self)
        if not isinstance(i, int | np.integer) or isinstance(i, bool):
            raise TypeError(f"index must be an integer, got {i!r}")
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for a space of {n} valid configurations")
        return int(i) % n

    def config(self, i: int) -> dict[str, Any]:
        """The configuration at valid index ``i`` as ``{name: value}``."""
        return self._row_config(self._table[self._check_index(i)])

    def configs(self) -> Iterator[dict[str, Any]]:
        for row in self._table:
            yield self._row_config(row)

    def column(self, name: str) -> np.ndarray:
        """Values of parameter ``name`` over all valid configurations (bool kinds as bool)."""
        p = self.param(name)
        values = p.array()[self._table[:, self._param_index[name]]]
        return values.astype(bool) if p.kind == "bool" else values

    # ----------------------------------------------------------------- lookup
    def positions(self, config: Mapping[str, Any]) -> np.ndarray | None:
        """Positions of the config's values, or None if a value is not in its parameter's domain.

        Raises KeyError if a parameter is missing; extra keys are ignored.
        """
        out = np.empty(len(self.params), dtype=np.int64)
        for j, p in enumerate(self.params):
            if p.name not in config:
                raise KeyError(f"configuration lacks parameter {p.name!r}: {dict(config)}")
            pos = p.position(config[p.name])
            if pos is None:
                return None
            out[j] = pos
        return out

    def find(self, config: Mapping[str, Any]) -> int | None:
        """Valid index of ``config``, or None if it is outside the domain or violates a constraint."""
        pos = self.positions(config)
        if pos is None:
            return None
        code = int(pos @ self._strides)
        row = int(np.searchsorted(self._codes, code))
        if row < len(self._codes) and self._codes[row] == code:
            return row
        return None

    def index(self, config: Mapping[str, Any]) -> int:
        """Valid index of ``config``; KeyError if it is not a valid configuration."""
        row = self.find(config)
        if row is None:
            raise KeyError(f"not a valid configuration of this space: {dict(config)}")
        return row

    def is_valid(self, config: Mapping[str, Any]) -> bool:
        """Domain and constraint check for any dict, without consulting the table."""
        try:
            pos = self.positions(config)
        except KeyError:
            return False
        if pos is None:
            return False
        values = {p.name: p.values[int(k)] for p, k in zip(self.params, pos, strict=True)}
        env = {**values, **self.constants}
        return (all(c.evaluate_one(env) for c in self._text_constraints)
                and all(c.evaluate_one(values) for c in self._callable_constraints))

    def key(self, config: Mapping[str, Any]) -> str:
        """Kernel Tuner's cache key: the values joined by commas in parameter order."""
        return ",".join(str(config[n]) for n in self.names)

    def default_config(self) -> dict[str, Any] | None:
        if any(p.default is None for p in self.params):
            return None
        return {p.name: p.default for p in self.params}

    def default_index(self) -> int | None:
        """Index of the all-defaults configuration; None if a default is missing or it is invalid."""
        config = self.default_config()
        return None if config is None else self.find(config)

    # ----------------------------------------------------------------- models and search
    def encode(self, idx: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Feature matrix for surrogate models, (n, d) float in [0, 1].

        Ordinal parameters (numbers, bools) give position / (len - 1); strings give one-hot columns.
        """
        rows = self._table if idx is None else self._table[np.asarray(idx, dtype=np.int64)]
        if rows.ndim == 1:
            rows = rows[None, :]
        out = np.empty((len(rows), sum(lut.shape[1] for lut in self._encoding_luts)), dtype=np.float64)
        col = 0
        for j, lut in enumerate(self._encoding_luts):
            width = lut.shape[1]
            if width == 1:
                out[:, col] = lut[:, 0][rows[:, j]]
            else:
                out[:, col:col + width] = lut[rows[:, j]]
            col += width
        return out

    def encoding_labels(self) -> list[str]:
        """Column names of :meth:`encode`: ``name`` or ``name=value`` for one-hot columns."""
        labels = []
        for p in self.params:
            labels.extend([p.name] if p.ordinal else [f"{p.name}={v}" for v in p.values])
        return labels

    def neighbours(self, i: int, method: str = "adjacent") -> np.ndarray:
        """Valid indices near index ``i`` (ascending); methods in :mod:`adaptune.space.neighbours`."""
        method = nb.normalise_method(method)
        i = self._check_index(i)
        if nb.candidate_count(method, self._sizes) < len(self):
            cand = nb.candidates(method, self._table[i].astype(np.int64), self._sizes)
            return nb.lookup(self._codes, np.sort(cand @ self._strides))
        return nb.scan(method, self._table, i)

    def sample(self, rng: np.random.Generator | int | None, n: int) -> np.ndarray:
        """Up to ``n`` distinct valid indices drawn uniformly (all of them, shuffled, if n >= len)."""
        rng = np.random.default_rng(rng)
        if n < 0:
            raise ValueError(f"sample size must be >= 0, got {n}")
        return rng.choice(len(self), size=min(int(n), len(self)), replace=False).astype(np.int64)

    # ----------------------------------------------------------------- description
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (callables appear by name and cannot be rebuilt from it)."""
        return {
            "params": {p.name: list(p.values) for p in self.params},
            "defaults": {p.name: p.default for p in self.params if p.default is not None},
            "constraints": [c.text for c in self._text_constraints],
            "callable_constraints": [c.text for c in self._callable_constraints],
            "constants": dict(self.constants),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Space:
        if d.get("callable_constraints"):
            raise ValueError(f"cannot rebuild callable constraints {d['callable_constraints']} from a description")
        return cls(d["params"], d.get("constraints", ()), d.get("defaults") or None, d.get("constants") or None)
