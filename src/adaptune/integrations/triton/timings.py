"""The one place the Triton drop-in talks to adaptune's store.

Every (kernel source hash, device, key, configuration) timing is one row: the kernel is a problem named
after the function and keyed by its source hash (a changed kernel is a new problem, so stale timings
are never read), each tuning key is an input of it, each configuration a measurement. SQLite by default,
any SQLAlchemy URL (PostgreSQL) for a store several processes or machines share.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from adaptune.records import DeviceInfo, Result
from adaptune.store import Store
from adaptune.store.codec import config_key

DEFAULT_DB_ENV = "ADAPTUNE_TRITON_DB"


def default_db() -> str:
    """``$ADAPTUNE_TRITON_DB``, else ``~/.cache/adaptune/triton.db`` (created on first use)."""
    chosen = os.environ.get(DEFAULT_DB_ENV)
    if chosen:
        return chosen
    folder = Path.home() / ".cache" / "adaptune"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder / "triton.db")


class KernelTimings:
    """Stored timings of one kernel version on one device, by tuning key and configuration."""

    def __init__(self, db: str | Path | Store | None, kernel: str, source_hash: str, device: DeviceInfo,
                 key_names: Sequence[str]) -> None:
        self._owned = not isinstance(db, Store)  # a Store the caller handed in is the caller's to close
        self.store = db if isinstance(db, Store) else Store(db if db is not None else default_db())
        self.device_id = self.store.device(device)
        self.problem_id = self.store.problem(f"triton:{kernel}", source_hash,
                                             {"kind": "triton", "key": list(key_names)})
        self._inputs: dict[str, int] = {}
        self._lock = threading.Lock()

    def _input(self, name: str, features: Mapping[str, Any] | None = None) -> int:
        with self._lock:
            found = self._inputs.get(name)
        if found is None or features is not None:
            found = self.store.input(self.problem_id, name, features)
            with self._lock:
                self._inputs[name] = found
        return found

    def get(self, name: str, configs: Iterable[Mapping[str, Any]]) -> dict[str, Result]:
        """Stored results of ``configs`` for the key named ``name``, by config key."""
        return self.store.get_many(self.device_id, self.problem_id, self._input(name), list(configs))

    def put(self, name: str, key: Mapping[str, Any], results: Sequence[Result]) -> None:
        """Store one row per configuration measured for a key (``key``: its named values, kept as features)."""
        self.store.put_many(self.device_id, self.problem_id, self._input(name, key), results)

    def table(self, configs: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[list[float]]]:
        """Every stored key of this kernel and device with its time per configuration (inf: not measured or failed)."""
        keys = [config_key(c) for c in configs]
        named, costs = [], []
        for row in self.store.inputs(self.problem_id):
            found = self.store.get_many(self.device_id, self.problem_id, row.id, configs)
            if not found:
                continue
            named.append(dict(row.features))
            costs.append([found[k].time_ms if k in found else float("inf") for k in keys])
        return named, costs

    def close(self) -> None:
        if self._owned:
            self.store.close()
