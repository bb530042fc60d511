"""Neighbourhoods on the valid table, for local search.

Methods (positions are indices into each parameter's value list):

* ``"hamming"``: differs in exactly one parameter, by any amount;
* ``"adjacent"``: every parameter at most one position away, at least one differs;
* ``"strictly-adjacent"``: exactly one parameter moves by exactly one position.

Kernel Tuner 1.5 spells the first ``"Hamming"`` (accepted here too).
When the candidate set is small it is generated and looked up by code (``searchsorted``);
otherwise the whole table is compared at once.
"""

from __future__ import annotations

import itertools

import numpy as np

METHODS = ("hamming", "adjacent", "strictly-adjacent")


def normalise_method(method: str) -> str:
    m = method.lower() if isinstance(method, str) else method
    if m not in METHODS:
        raise ValueError(f"unknown neighbour method {method!r}; choose one of {', '.join(METHODS)}")
    return m


def candidate_count(method: str, sizes: np.ndarray) -> int:
    if method == "hamming":
        return int((sizes - 1).sum())
    if method == "strictly-adjacent":
        return 2 * len(sizes)
    return 3 ** len(sizes) - 1


def candidates(method: str, origin: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """All in-domain position tuples that are neighbours of ``origin`` (not checked against constraints)."""
    d = len(sizes)
    rows = []
    if method == "hamming":
        for p in range(d):
            others = np.delete(np.arange(sizes[p]), origin[p])
            block = np.repeat(origin[None, :], len(others), axis=0)
            block[:, p] = others
            rows.append(block)
    elif method == "strictly-adjacent":
        for p in range(d):
            for step in (-1, 1):
                cand = origin.copy()
                cand[p] += step
                rows.append(cand[None, :])
    else:
        steps = np.array(list(itertools.product((-1, 0, 1), repeat=d)), dtype=np.int64)
        steps = steps[np.any(steps != 0, axis=1)]
        rows.append(origin[None, :] + steps)
    if not rows:
        return np.zeros((0, d), dtype=np.int64)
    cand = np.concatenate(rows).astype(np.int64)
    inside = np.all((cand >= 0) & (cand < sizes), axis=1)
    return cand[inside]


def scan(method: str, table: np.ndarray, i: int) -> np.ndarray:
    """Neighbour rows of row ``i`` by a column-at-a-time pass over the table.

    Rows that already exceed the method's budget are dropped after each column, so later
    columns only touch the few rows still in the running and no (n, d) temporary is built.
    """
    origin = table[i]
    rows = np.arange(len(table))
    spent = np.zeros(len(table), dtype=np.int32)  # differing params (hamming) or total moves
    for p in range(table.shape[1]):
        diff = np.abs(table[rows, p] - origin[p])
        if method == "adjacent":
            keep = diff <= 1
            spent = spent[keep] | diff[keep]
        else:
            spent = spent + ((diff != 0) if method == "hamming" else diff)
            keep = spent <= 1
            spent = spent[keep]
        rows = rows[keep]
    return rows[spent == 1]


def lookup(codes: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Rows whose code is in ``wanted`` (sorted ascending); codes must be sorted and unique."""
    if len(codes) == 0 or len(wanted) == 0:
        return np.zeros(0, dtype=np.int64)
    rows = np.searchsorted(codes, wanted)
    rows = np.minimum(rows, len(codes) - 1)
    return np.sort(rows[codes[rows] == wanted])
