"""Vectorised enumeration of the valid configurations of a space.

The Cartesian product is never materialised. Parameters are bound one at a time (in an order
chosen so that constraints can be checked early), each partial table is expanded by the next
parameter's positions in bounded chunks, and every text constraint is applied to whole columns as
soon as all its names are bound. Blocks go depth-first, so memory stays near the size of the
result plus one chunk, whatever the Cartesian size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptune.space.constraints import Constraint

CHUNK_ROWS = 1 << 18
BITMAP_LIMIT = 1 << 28


@dataclass
class ConstraintStats:
    """How many partial configurations one constraint saw and let through."""

    text: str
    rows_in: int = 0
    rows_out: int = 0


def plan_order(sizes: Sequence[int], needs: Sequence[frozenset[int]]) -> list[int]:
    """Order to bind parameters: close constraints early, prefer small domains, free params last."""
    d = len(sizes)
    bound: set[int] = set()
    open_needs = [set(n) for n in needs if n]
    order: list[int] = []
    while len(order) < d:
        involved = {p for n in open_needs for p in n} - bound
        if not involved:
            order.extend(p for p in range(d) if p not in bound)
            break
        best = max(involved, key=lambda p, needs=open_needs: _score(p, needs, bound, sizes))
        order.append(best)
        bound.add(best)
        open_needs = [n for n in open_needs if not n <= bound]
    return order


def _score(p: int, open_needs: list[set[int]], bound: set[int], sizes: Sequence[int]) -> tuple[int, int, int, int]:
    closes = sum(1 for n in open_needs if n <= bound | {p})
    nearest = min((len(n - bound - {p}) for n in open_needs if p in n), default=len(sizes))
    return closes, -nearest, -sizes[p], -p


def mixed_radix_strides(sizes: Sequence[int]) -> np.ndarray:
    """Strides that make the code of a position tuple its rank in ``itertools.product`` order."""
    strides = np.ones(len(sizes), dtype=np.int64)
    for p in range(len(sizes) - 2, -1, -1):
        strides[p] = strides[p + 1] * sizes[p + 1]
    return strides


def sorted_codes(codes: np.ndarray, cartesian_size: int) -> np.ndarray:
    """Sort unique codes; a boolean bitmap over the Cartesian range beats a comparison sort when it is small."""
    if len(codes) < 2 or bool(np.all(codes[1:] > codes[:-1])):
        return codes
    if cartesian_size <= min(BITMAP_LIMIT, max(1 << 24, 32 * len(codes))):
        present = np.zeros(cartesian_size, dtype=bool)
        present[codes] = True
        return np.flatnonzero(present).astype(np.int64)
    return np.sort(codes)


def decode_codes(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Position table (n, d) int32 of mixed-radix codes, in the same row order."""
    table = np.empty((len(codes), len(sizes)), dtype=np.int32)
    strides = mixed_radix_strides(sizes)
    for p, (stride, size) in enumerate(zip(strides, sizes, strict=True)):
        table[:, p] = (codes // stride) % size  # one column at a time: unravel_index would hold all d at int64
    return table


class Enumerator:
    """Build the sorted table of valid position tuples for arrays of values and text constraints."""

    def __init__(self, names: Sequence[str], arrays: Sequence[np.ndarray], constraints: Sequence[Constraint],
                 constants: Mapping[str, Any], chunk_rows: int = CHUNK_ROWS):
        self.names = list(names)
        self.arrays = list(arrays)
        self.sizes = [len(a) for a in arrays]
        self.constants = dict(constants)
        self.chunk_rows = chunk_rows
        param_of = {n: i for i, n in enumerate(self.names)}
        needs = [frozenset(param_of[n] for n in c.names if n in param_of) for c in constraints]
        self.order = plan_order(self.sizes, needs)
        level_of = {p: k for k, p in enumerate(self.order)}
        self.schedule: list[list[int]] = [[] for _ in self.order]
        self.global_constraints = []
        for ci, need in enumerate(needs):
            if need:
                self.schedule[max(level_of[p] for p in need)].append(ci)
            else:
                self.global_constraints.append(ci)
        self.constraints = list(constraints)
        self.stats = [ConstraintStats(c.text) for c in constraints]
        self.param_of = param_of

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(table, codes)``: positions (n_valid, d) int32 and their sorted mixed-radix codes."""
        d = len(self.names)
        strides = mixed_radix_strides(self.sizes)
        empty = (np.zeros((0, d), dtype=np.int32), np.zeros(0, dtype=np.int64))
        for ci in self.global_constraints:
            stat = self.stats[ci]
            stat.rows_in += 1
            if not self.constraints[ci].evaluate(self.constants, 1)[0]:
                return empty
            stat.rows_out += 1
        level_strides = [strides[p] for p in self.order]
        parts = []
        for block in self._expand([], 0):
            code = block[0].astype(np.int64) * level_strides[0]
            for col, stride in zip(block[1:], level_strides[1:], strict=True):
                code += col * stride
            parts.append(code)
        if not parts:
            return empty
        codes = sorted_codes(np.concatenate(parts), math.prod(self.sizes))
        return decode_codes(codes, self.sizes), codes

    def _expand(self, cols: list[np.ndarray], level: int) -> Iterator[list[np.ndarray]]:
        p = self.order[level]
        m = self.sizes[p]
        rows = len(cols[0]) if cols else 1
        step = max(1, self.chunk_rows // m)
        last = level + 1 == len(self.order)
        for start in range(0, rows, step):
            part = [c[start:start + step] for c in cols]
            r = len(part[0]) if part else 1
            block = [np.repeat(c, m) for c in part]
            block.append(np.tile(np.arange(m, dtype=np.int32), r))
            block = self._filter(block, level)
            if len(block[0]) == 0:
                continue
            if last:
                yield block
            else:
                yield from self._expand(block, level + 1)

    def _filter(self, block: list[np.ndarray], level: int) -> list[np.ndarray]:
        values: dict[str, Any] = {}
        for ci in self.schedule[level]:
            constraint = self.constraints[ci]
            n = len(block[0])
            env: dict[str, Any] = {}
            for name in constraint.names:
                if name in self.param_of:
                    if name not in values:
                        p = self.param_of[name]
                        values[name] = self.arrays[p][block[self.order.index(p)]]
                    env[name] = values[name]
                else:
                    env[name] = self.constants[name]
            mask = constraint.evaluate(env, n)
            kept = int(np.count_nonzero(mask))
            stat = self.stats[ci]
            stat.rows_in += n
            stat.rows_out += kept
            if kept == n:
                continue
            block = [c[mask] for c in block]
            values = {k: v[mask] for k, v in values.items()}
            if kept == 0:
                break
        return block
