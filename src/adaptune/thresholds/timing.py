"""Run times per (dataset, executed path): measured once, live, then replayed to every tuner.

A program's run time on a dataset depends only on which comparisons it made and how they came out (the
path), so one measurement per (dataset, path) serves every assignment that takes that path. ``PathTimes``
keeps those samples, measures a missing path when it has a live ``measure`` function, and saves/loads them
as JSON so the tuners can be replayed on timings recorded elsewhere (the H100).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from adaptune.thresholds.model import Assignment, ThresholdModel, enumerate_exact
from adaptune.thresholds.tree import format_print_sizes, parse_print_sizes

Measure = Callable[[str, Assignment], list[float]]
PathKey = tuple[str, tuple[tuple[int, ...], ...]]


class PathNotRecorded(KeyError):
    """A replayed tuner reached a (dataset, path) that was never measured."""


class PathTimes:
    """Samples (ms) per (dataset, path); ``measure(dataset, assignment)`` fills a missing one when given."""

    def __init__(self, model: ThresholdModel, measure: Measure | None = None) -> None:
        self.model = model
        self.measure = measure
        self.table: dict[PathKey, list[float]] = {}
        self.versions: dict[PathKey, Assignment] = {}
        self.measure_wall_s = 0.0
        self._keys: dict[tuple, PathKey] = {}  # signature memo: tuners revisit the same assignments

    def key(self, dataset: str, assignment: Mapping[str, int]) -> PathKey:
        memo = (dataset, tuple(sorted(assignment.items())))
        found = self._keys.get(memo)
        if found is None:
            if len(self._keys) > 2_000_000:
                self._keys.clear()
            found = self._keys[memo] = (dataset, self.model.dataset_signature(dataset, assignment))
        return found

    def samples(self, dataset: str, assignment: Mapping[str, int]) -> list[float]:
        key = self.key(dataset, assignment)
        found = self.table.get(key)
        if found is not None:
            return found
        if self.measure is None:
            raise PathNotRecorded(f"no recorded timing for dataset {dataset!r} on path {key[1]}")
        t0 = time.perf_counter()
        found = [float(x) for x in self.measure(dataset, self.model.complete(assignment))]
        self.measure_wall_s += time.perf_counter() - t0
        if not found:
            raise ValueError(f"measuring {dataset!r} returned no samples")
        self.table[key] = found
        self.versions[key] = self.model.complete(assignment)
        return found

    def mean(self, dataset: str, assignment: Mapping[str, int]) -> float:
        s = self.samples(dataset, assignment)
        return sum(s) / len(s)

    def total(self, assignment: Mapping[str, int], datasets: Iterable[str] | None = None) -> float:
        """Sum over datasets of the mean run time (ms): what the tuners minimise."""
        return sum(self.mean(d, assignment) for d in (datasets or self.model.datasets))

    def record_every_path(self, datasets: Iterable[str] | None = None, progress: Callable[[str, int], None]
                          | None = None) -> int:
        """Measure every distinct path of each dataset (enumerated exactly, per dataset); returns the count."""
        count = 0
        for d in datasets or list(self.model.datasets):
            paths = enumerate_exact(self.model.subset([d]))
            for a in paths:
                self.samples(d, a)
            count += len(paths)
            if progress is not None:
                progress(d, len(paths))
        return count

    def to_json(self) -> dict[str, Any]:
        return {"print_sizes": format_print_sizes(self.model.decls), "datasets": self.model.datasets,
                "entries": [{"dataset": d, "path": [list(f) for f in sig], "samples_ms": s,
                             "assignment": self.versions.get((d, sig), {})}
                            for (d, sig), s in self.table.items()]}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json()))

    @classmethod
    def from_json(cls, model: ThresholdModel, data: Mapping[str, Any]) -> PathTimes:
        """Replayed timings (no measuring). Entries of datasets the model lacks are ignored."""
        out = cls(model)
        try:
            entries = data["entries"]
            for e in entries:
                if e["dataset"] not in model.datasets:
                    continue
                sig = tuple(tuple(int(x) for x in f) for f in e["path"])
                samples = [float(x) for x in e["samples_ms"]]
                if not samples:
                    raise ValueError(f"entry for {e['dataset']!r} has no samples")
                out.table[(e["dataset"], sig)] = samples
                out.versions[(e["dataset"], sig)] = {k: int(v) for k, v in e.get("assignment", {}).items()}
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a path-timings file: missing or bad field {exc}") from exc
        return out


def model_from_json(data: Mapping[str, Any], multi_parent: str = "refuse") -> ThresholdModel:
    """The threshold model a timings file was recorded for (its ``print_sizes`` text and flows)."""
    try:
        decls = parse_print_sizes(data["print_sizes"])
        datasets = {str(k): [{str(n): int(v) for n, v in f.items()} for f in flows]
                    for k, flows in data["datasets"].items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"timings file has no threshold model: missing or bad field {exc}") from exc
    return ThresholdModel(decls, datasets, multi_parent)


def to_store(times: PathTimes, store: Any, device_name: str, program: str, platform: str = "") -> int:
    """Put every recorded (dataset, path) into an adaptune ``Store``: problem ``thresholds:<program>``, one
    input per dataset, config = the full threshold assignment that was run. Returns the count."""
    from adaptune.records import DeviceInfo, Result

    dev = store.device(DeviceInfo(device_name, platform or "unknown"))
    text = format_print_sizes(times.model.decls)
    prob = store.problem(f"thresholds:{program}", hashlib.sha256(text.encode()).hexdigest()[:16],
                         {"thresholds": times.model.names})
    count = 0
    for (dataset, _sig), samples in times.table.items():
        inp = store.input(prob, dataset)
        config = times.versions.get((dataset, _sig)) or {}
        store.put(dev, prob, inp, Result.from_samples(dict(config), list(samples)))
        count += 1
    return count


def live_measure(program: Any, data: Mapping[str, Any], sync: Callable[[], Any], *, repeats: int = 10,
                 warmup: int = 1) -> Measure:
    """Time ``program.run(data[dataset], assignment)`` in this process (wall clock, synchronised)."""
    from adaptune.measure import time_callable

    def measure(dataset: str, assignment: Assignment) -> list[float]:
        item = data[dataset]
        return time_callable(lambda: program.run(item, assignment), repeats=repeats, warmup=warmup, sync=sync,
                             max_seconds=60.0)

    return measure
