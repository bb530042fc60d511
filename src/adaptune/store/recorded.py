"""A recorded search space: every measured configuration of one kernel on one device for one input.

It is the common currency of the interop formats (Kernel Tuner caches, T4 files) and of replay: search
strategies are compared on recorded spaces with a simulated clock instead of a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptune.records import DeviceInfo, Result
from adaptune.store.base import BaseStore, RunKey
from adaptune.store.codec import jsonable

RECORDED_PLATFORM = "recorded"
"""Platform of a device known only by name (imported from a file, not probed by a backend)."""


def kt_key(config: Mapping[str, Any], names: list[str]) -> str:
    """Kernel Tuner's cache key: the values in parameter order joined by commas (``str`` of each)."""
    return ",".join(str(config[n]) for n in names)


def problem_size_name(problem_size: Any) -> str:
    """A readable input name for a problem size: ``4096x4096``, ``100`` (or ``default`` when unknown)."""
    if hasattr(problem_size, "item") and getattr(problem_size, "ndim", 1) == 0:
        problem_size = problem_size.item()  # a NumPy scalar (``numpy.int32(n)``, as Kernel Tuner's examples pass)
    if problem_size is None or (isinstance(problem_size, str | list | tuple) and len(problem_size) == 0):
        return "default"
    if isinstance(problem_size, list | tuple):
        return "x".join(str(v.item() if hasattr(v, "item") else v) for v in problem_size)
    return str(problem_size)


@dataclass
class RecordedSpace:
    """Results of one kernel on one device and one input, with the parameter values that define the space."""

    device_name: str
    kernel_name: str
    problem_size: Any
    params: dict[str, list]
    results: list[Result]
    objective: str = "time"
    meta: dict[str, Any] = field(default_factory=dict)
    _index: dict[str, Result] | None = field(default=None, init=False, repr=False, compare=False)
    _index_size: int = field(default=-1, init=False, repr=False, compare=False)

    @property
    def names(self) -> list[str]:
        return list(self.params)

    def key(self, config: Mapping[str, Any]) -> str:
        return kt_key(config, self.names)

    def by_key(self) -> dict[str, Result]:
        """Results by Kernel Tuner key (the last result wins for a repeated configuration)."""
        return {self.key(r.config): r for r in self.results}

    def lookup(self, config: Mapping[str, Any]) -> Result | None:
        """The result of one configuration, or None if it was not recorded."""
        if self._index is None or self._index_size != len(self.results):
            self._index, self._index_size = self.by_key(), len(self.results)
        return self._index.get(self.key(config))

    def best(self) -> Result | None:
        ok = [r for r in self.results if r.ok and math.isfinite(r.time_ms)]
        return min(ok, key=lambda r: r.time_ms) if ok else None

    @property
    def cartesian_size(self) -> int:
        return math.prod(len(v) for v in self.params.values())

    # ------------------------------------------------------------------ database
    def to_store(self, store: BaseStore, name: str | None = None, *, input_name: str | None = None,
                 source_hash: str | None = None, device: DeviceInfo | None = None) -> RunKey:
        """Write every result into ``store`` (one transaction); returns the run (device_id, problem_id, input_id).

        The problem is named ``name`` (default: the kernel name); its identity hash is ``source_hash``
        (default: the recorded one, else ``recorded:<kernel name>``) so a second import of the same
        file updates instead of duplicating.
        """
        run = self.register(store, name, input_name=input_name, source_hash=source_hash, device=device)
        store.put_many(*run, self.results)
        return run

    def register(self, store: BaseStore, name: str | None = None, *, input_name: str | None = None,
                 source_hash: str | None = None, device: DeviceInfo | None = None) -> RunKey:
        """The run this space's results belong to in ``store`` (device, problem, input), registered."""
        device = device or DeviceInfo(name=self.device_name, platform=self.meta.get("platform", RECORDED_PLATFORM),
                                      driver=str(self.meta.get("driver", "")))
        source_hash = source_hash or self.meta.get("source_hash") or f"recorded:{self.kernel_name}"
        space = {"params": jsonable(self.params), "kernel_name": self.kernel_name,
                 "problem_size": jsonable(self.problem_size), "objective": self.objective}
        constraints = self.meta.get("constraints")
        if constraints:
            space["constraints"] = list(constraints)
        return store.run(device, name or self.kernel_name, source_hash,
                         input_name or problem_size_name(self.problem_size), space_desc=space,
                         features={"problem_size": jsonable(self.problem_size)})

    @classmethod
    def from_store(cls, store: BaseStore, device_id: int | None = None, problem_id: int | None = None,
                   input_id: int | None = None) -> RecordedSpace:
        """The stored results of one (device, problem, input); an id may be left out when only one fits."""
        problems = [p.id for p in store.problems()]
        if problem_id is None:
            if len(problems) != 1:
                raise ValueError(f"{store.label} holds {len(problems)} problems; pass problem_id "
                                 f"(one of {problems})")
            problem_id = problems[0]
        if problem_id not in problems:
            raise KeyError(f"no problem with id {problem_id} in {store.label}")
        pairs = [(d, i) for d, i in store.measured_pairs(problem_id)
                 if (device_id is None or d == device_id) and (input_id is None or i == input_id)]
        if device_id is None or input_id is None:
            if len(pairs) > 1:
                raise ValueError(f"problem {problem_id} in {store.label} has measurements for several "
                                 f"(device_id, input_id) pairs {pairs}; pass device_id and input_id")
            if not pairs:
                raise ValueError(f"problem {problem_id} in {store.label} has no measurements to export")
            device_id, input_id = pairs[0]
        problem = store.problem_info(problem_id)
        inputs = {i.id: i for i in store.inputs(problem_id)}
        if input_id not in inputs:
            raise KeyError(f"no input with id {input_id} for problem {problem_id} in {store.label}")
        results = store.results(problem_id=problem_id, device_id=device_id, input_id=input_id)
        space = problem.space
        params = _params_from(space.get("params"), results)
        problem_size = inputs[input_id].features.get("problem_size", space.get("problem_size"))
        info = store.device_info(device_id)
        meta = {"platform": info.platform, "driver": info.driver, "source_hash": problem.source_hash,
                "problem_name": problem.name, "input_name": inputs[input_id].name}
        if space.get("constraints"):
            meta["constraints"] = list(space["constraints"])
        return cls(device_name=info.name, kernel_name=space.get("kernel_name") or problem.name,
                   problem_size=problem_size, params=params, results=results,
                   objective=space.get("objective", "time"), meta=meta)


def _params_from(described: Any, results: list[Result]) -> dict[str, list]:
    """Parameter values from a space description, else the sorted distinct values seen in the results."""
    if isinstance(described, Mapping) and described:
        return {str(k): list(v) for k, v in described.items()}
    params: dict[str, set] = {}
    for r in results:
        for k, v in r.config.items():
            params.setdefault(k, set()).add(v)
    return {k: sorted(v, key=lambda x: (str(type(x)), x)) for k, v in params.items()}
