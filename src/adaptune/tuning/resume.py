"""What a tuning run already measured, looked up in the store a batch of configurations at a time.

A resumed run asks its strategy as usual and, before measuring, asks the store which of the configurations
it is about to visit are stored: one indexed query per batch (``BaseStore.get_many``), so resuming a run of
ten million stored configurations costs what it visits, never a load of the whole run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from adaptune.records import Result
from adaptune.store.base import BaseStore, RunKey
from adaptune.store.codec import config_key


def adopt_known(store: BaseStore, ids: tuple[int, int, int], space, known: list[Result]) -> None:
    """Results measured elsewhere (a Kernel Tuner cache) into the store, unless it has them already: the
    run then reuses them like any stored result."""
    known = [r for r in known if r.config in space]
    if not known:
        return
    stored = store.get_many(*ids, [r.config for r in known])
    fresh = [r for r in known if config_key(r.config) not in stored]
    if fresh:
        store.put_many(*ids, fresh)


class StoredLookup:
    """Stored results of one run by configuration, fetched on demand and remembered (found or not)."""

    def __init__(self, store: BaseStore, run: tuple[int, int, int], space: Any, *, observed: bool = False) -> None:
        self.store, self.run, self.space = store, RunKey(*run), space
        self.observed = observed  # the run records observers: a stored success without them is measured again
        self._known: dict[str, Result | None] = {}  # space key -> stored result (None: not stored)

    def lookup(self, configs: Iterable[Mapping[str, Any]]) -> None:
        """Fetch the stored results of these configurations in one query (those not looked up yet)."""
        wanted = {self.space.key(c): c for c in configs}
        wanted = {k: c for k, c in wanted.items() if k not in self._known}
        if not wanted:
            return
        found = self.store.get_many(*self.run, wanted.values())
        for key, config in wanted.items():
            result = found.get(config_key(config))
            if result is not None and self.observed and result.ok and not result.observers:
                result = None  # measured earlier without observers (energy, power): what this run asks lacks
            self._known[key] = result

    def get(self, config: Mapping[str, Any]) -> Result | None:
        """The stored result of ``config``, or None (looked up alone if no batch covered it)."""
        key = self.space.key(config)
        if key not in self._known:
            self.lookup([config])
        return self._known[key]

    def add(self, config: Mapping[str, Any], result: Result) -> None:
        """Remember a result just measured (and stored by the caller)."""
        self._known[self.space.key(config)] = result
