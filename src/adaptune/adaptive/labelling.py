"""Labelling: measure every allowed label (variant [+ configuration]) of an input, robustly and once.

* All labels of one input are timed round-robin (one sample of each per round, the order rotated each
  round) so that clock or thermal drift hits every label alike; the statistic is the median.
* Each label first runs once untimed: its output is verified against the default's, exceptions and
  wrong results become failed records (never a crash), and its duration calibrates how many calls
  one sample must hold to be well above the timer's resolution.
* A failed constraint is recorded as ``constraint`` and costs infinity in training.
* Every result goes into a :class:`~adaptune.store.Store` (or an in-memory cache), keyed by
  (device, problem, input, label), so retraining or re-evaluating never measures twice.
"""

from __future__ import annotations

import hashlib
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.adaptive.shape import VariantShape
from adaptune.records import Result, Status

# ------------------------------------------------------------------------------------- labels


@dataclass(frozen=True, order=True)
class Label:
    """What a model predicts: a variant name and, for variants with a Space, one configuration."""

    variant: str
    config: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, variant: str, config: Mapping[str, Any] | None = None) -> Label:
        return cls(variant, tuple(sorted((config or {}).items())))

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.config)

    @property
    def store_config(self) -> dict[str, Any]:
        """The configuration as the store keys it: ``{"variant": name, **params}``."""
        return {"variant": self.variant, **self.params}

    def __str__(self) -> str:
        if not self.config:
            return self.variant
        return f"{self.variant}[{','.join(f'{k}={v}' for k, v in self.config)}]"


# ------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Input:
    """A named input. ``source`` is the argument tuple, or a zero-argument callable making it
    (so that a large test set never has to sit in memory at once)."""

    name: str
    source: Any

    def args(self) -> tuple[Any, ...]:
        made = self.source() if callable(self.source) else self.source
        return made if isinstance(made, tuple) else (made,)


def content_name(args: Sequence[Any]) -> str:
    """A stable name for an unnamed input: a hash of its contents (arrays by their bytes)."""
    h = hashlib.sha1()
    for a in args:
        arr = np.asarray(a) if isinstance(a, np.ndarray | list | int | float) else None
        if arr is not None and arr.dtype != object:
            h.update(str(arr.dtype).encode() + str(arr.shape).encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        else:
            h.update(repr(a).encode())
    return "sha1:" + h.hexdigest()[:16]


def as_inputs(items: Iterable[Any] | Mapping[str, Any]) -> list[Input]:
    """Accept ``{name: args}``, ``[(name, args | factory), ...]``, ``[Input, ...]`` or ``[args, ...]``."""
    if isinstance(items, Mapping):
        items = list(items.items())
    out: list[Input] = []
    for i, item in enumerate(items):
        if isinstance(item, Input):
            out.append(item)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            out.append(Input(item[0], item[1]))
        elif isinstance(item, tuple):
            out.append(Input(content_name(item), item))
        else:
            raise ValueError(f"input #{i} must be (name, args), (name, factory), an Input or an args tuple, "
                             f"not {type(item).__name__}")
    names = [x.name for x in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"input names must be unique; repeated: {', '.join(sorted(dup))}")
    return out


# ------------------------------------------------------------------------------------ caching


class MemoryCache:
    """Results kept for this process only (``db=None``)."""

    def __init__(self) -> None:
        self._results: dict[tuple[str, Label], Result] = {}

    def register_input(self, name: str, features: Mapping[str, float]) -> None:
        pass

    def get_many(self, name: str, labels: Sequence[Label]) -> dict[Label, Result]:
        return {lab: self._results[(name, lab)] for lab in labels if (name, lab) in self._results}

    def get_all(self, name: str) -> dict[Label, Result]:
        return {lab: res for (n, lab), res in self._results.items() if n == name}

    def put(self, name: str, label: Label, result: Result) -> None:
        self._results[(name, label)] = result


class StoreCache:
    """Results in an adaptune Store: one problem per code variant, one input row per input."""

    def __init__(self, store: Any, device_info: Any, problem: str, source_hash: str,
                 space_desc: dict[str, Any]) -> None:
        self.store = store
        self.device_id = store.device(device_info)
        self.problem_id = store.problem(problem, source_hash, space_desc)
        self._input_ids: dict[str, int] = {}

    def register_input(self, name: str, features: Mapping[str, float]) -> None:
        self._input_ids[name] = self.store.input(self.problem_id, name, dict(features))

    def _input_id(self, name: str) -> int:
        if name not in self._input_ids:
            self._input_ids[name] = self.store.input(self.problem_id, name)
        return self._input_ids[name]

    def get_many(self, name: str, labels: Sequence[Label]) -> dict[Label, Result]:
        from adaptune.store.codec import config_key

        found = self.store.get_many(self.device_id, self.problem_id, self._input_id(name),
                                    [lab.store_config for lab in labels])
        return {lab: found[config_key(lab.store_config)] for lab in labels
                if config_key(lab.store_config) in found}

    def get_all(self, name: str) -> dict[Label, Result]:
        """Everything stored for this input (searched configurations too): what a remote labeller reuses."""
        out = {}
        for res in self.store.results(problem_id=self.problem_id, device_id=self.device_id,
                                      input_id=self._input_id(name)):
            config = dict(res.config)
            variant = config.pop("variant", None)
            if variant is not None:
                out[Label.of(str(variant), config)] = res
        return out

    def put(self, name: str, label: Label, result: Result) -> None:
        self.store.put(self.device_id, self.problem_id, self._input_id(name), result)


# ---------------------------------------------------------------------------------- measuring


def _time_callable() -> Callable[..., list[float]] | None:
    try:
        from adaptune.measure.timing import time_callable
    except ImportError:  # measurement layer absent: use the private loop below
        return None
    return time_callable


@dataclass
class MeasureOptions:
    """How labels are measured. ``min_sample_ms``: a sample repeats a fast call until it lasts this long."""

    repeats: int = 7
    warmup: int = 1
    min_sample_ms: float = 1.0
    max_call_ms: float = math.inf  # a label whose untimed run exceeds this is recorded as a timeout
    verify: bool = True
    tie_margin: float = 0.05
    """Labels whose median is within this relative margin of the best get ``tie_repeats`` more rounds:
    a coin-flip label between near-equal variants teaches every model noise."""
    tie_repeats: int | None = None  # None: twice ``repeats``; 0 switches the extra rounds off


def outputs_match(reference: Any, output: Any, atol: float = 1e-6, rtol: float = 1e-5) -> bool:
    """Compare outputs: arrays (NumPy, CuPy via ``.get()``, SciPy sparse), sequences, mappings, numbers."""
    if hasattr(reference, "toarray") and hasattr(output, "toarray"):
        reference, output = reference.toarray(), output.toarray()
    if hasattr(reference, "get") and not isinstance(reference, Mapping):
        reference = reference.get()
    if hasattr(output, "get") and not isinstance(output, Mapping):
        output = output.get()
    if isinstance(reference, Mapping):
        return isinstance(output, Mapping) and reference.keys() == output.keys() and all(
            outputs_match(reference[k], output[k], atol, rtol) for k in reference)
    if isinstance(reference, list | tuple) and not isinstance(reference, np.ndarray):
        return isinstance(output, list | tuple) and len(reference) == len(output) and all(
            outputs_match(r, o, atol, rtol) for r, o in zip(reference, output, strict=True))
    try:
        ref, out = np.asarray(reference), np.asarray(output)
    except Exception:
        return bool(reference == output)
    if ref.shape != out.shape:
        return False
    if ref.dtype.kind in "fc" or out.dtype.kind in "fc":
        return bool(np.allclose(out, ref, atol=atol, rtol=rtol, equal_nan=True))
    return bool(np.array_equal(ref, out))


@dataclass
class _Runnable:
    label: Label
    call: Callable[[], Any]
    number: int = 1
    samples: list[float] = field(default_factory=list)
    metric_samples: list[dict[str, float]] = field(default_factory=list)


def measure_labels(cv: VariantShape, args: tuple[Any, ...], labels: Sequence[Label],
                   options: MeasureOptions) -> dict[Label, Result]:
    """Measure ``labels`` on one input: constraints, verification, then interleaved timing."""
    results: dict[Label, Result] = {}
    runnable: list[_Runnable] = []
    for lab in labels:
        constraint = cv.constraint_for(lab.variant)
        if constraint is not None:
            try:
                allowed = bool(constraint(*args))
                why = f"constraint {getattr(constraint, '__name__', 'constraint')} returned False"
            except Exception as exc:
                allowed, why = False, f"constraint raised {type(exc).__name__}: {exc}"
            if not allowed:
                results[lab] = Result.failure(lab.store_config, Status.CONSTRAINT, why)
                continue
        fn, params = cv.variant_function(lab.variant), lab.params
        runnable.append(_Runnable(lab, (lambda fn=fn, params=params: fn(*args, **params))))

    reference, have_reference = None, False
    if options.verify and runnable:
        default = cv.default_label
        try:
            reference, have_reference = cv.variant_function(default.variant)(*args, **default.params), True
        except Exception:  # the default cannot run here: nothing to verify against
            have_reference = False

    ready: list[_Runnable] = []
    for r in runnable:
        try:
            t0 = time.perf_counter()
            out = r.call()
            cv.synchronize()
            first_ms = (time.perf_counter() - t0) * 1e3
            for _ in range(max(0, options.warmup - 1)):
                r.call()
        except Exception as exc:
            results[r.label] = Result.failure(r.label.store_config, Status.LAUNCH_ERROR,
                                              f"{type(exc).__name__}: {exc}")
            continue
        if have_reference and not cv.verify_output(reference, out):
            results[r.label] = Result.failure(r.label.store_config, Status.WRONG_RESULT,
                                              "output differs from the default variant's")
            continue
        if first_ms > options.max_call_ms:
            results[r.label] = Result.failure(r.label.store_config, Status.TIMEOUT,
                                              f"took {first_ms:.1f} ms > max_call_ms {options.max_call_ms}")
            continue
        if cv.timer is None and cv.metrics is None and first_ms < options.min_sample_ms:
            r.number = max(1, min(10_000, math.ceil(options.min_sample_ms / max(first_ms, 1e-4))))
        ready.append(r)

    timer = _time_callable()
    ready = _rounds(cv, ready, options.repeats, timer, results)
    extra = 2 * options.repeats if options.tie_repeats is None else options.tie_repeats
    contenders = _near_best(cv, ready, options.tie_margin)
    if extra > 0 and len(contenders) >= 2:
        _rounds(cv, contenders, extra, timer, results)
        ready = [r for r in ready if r.label not in results]
    for r in ready:
        res = _median_result(cv, r)
        res.observers["cost"] = cv.cost_of(res)
        results[r.label] = res
    return results


def _rounds(cv: VariantShape, ready: list[_Runnable], rounds: int, timer: Callable[..., list[float]] | None,
            results: dict[Label, Result]) -> list[_Runnable]:
    """``rounds`` interleaved samples of every label (the order rotated each round); returns the
    labels still running (a label that raises becomes a failed result)."""
    for round_ in range(rounds):
        shift = round_ % max(1, len(ready))
        for r in ready[shift:] + ready[:shift]:
            try:
                _sample(cv, r, timer)
            except Exception as exc:
                results[r.label] = Result.failure(r.label.store_config, Status.LAUNCH_ERROR,
                                                  f"{type(exc).__name__}: {exc}")
        ready = [r for r in ready if r.label not in results]
    return ready


def _near_best(cv: VariantShape, ready: list[_Runnable], margin: float) -> list[_Runnable]:
    """Labels whose median objective is within ``margin`` of the best one (the close calls)."""
    costs = [(_median_cost(cv, r), r) for r in ready if r.samples]
    finite = [(c, r) for c, r in costs if math.isfinite(c)]
    if len(finite) < 2:
        return []
    best = min(c for c, _ in finite)
    return [r for c, r in finite if c <= best + abs(best) * margin]


def _median_result(cv: VariantShape, r: _Runnable) -> Result:
    observers = {k: statistics.median(m[k] for m in r.metric_samples) for k in r.metric_samples[0]} \
        if r.metric_samples else {}
    return Result.from_samples(r.label.store_config, r.samples, observers=observers)


def _median_cost(cv: VariantShape, r: _Runnable) -> float:
    try:
        return cv.cost_of(_median_result(cv, r))
    except (KeyError, TypeError, ValueError):  # an objective the samples so far cannot give
        return math.inf


def _sample(cv: VariantShape, r: _Runnable, timer: Callable[..., list[float]] | None) -> None:
    """One sample of one label: user metrics, a user timer, or wall time over ``r.number`` calls."""
    if cv.metrics is not None:
        m = {k: float(v) for k, v in cv.metrics(r.call).items()}
        r.metric_samples.append(m)
        r.samples.append(m.get("time_ms", math.nan))
        return
    if cv.timer is not None:
        r.samples.append(float(cv.timer(r.call)))
        return
    number, call = r.number, r.call

    def repeated() -> None:
        for _ in range(number):
            call()

    if timer is not None:
        ms = timer(repeated, (), repeats=1, warmup=0, sync=cv.sync)[0]
    else:
        t0 = time.perf_counter_ns()
        repeated()
        cv.synchronize()
        ms = (time.perf_counter_ns() - t0) * 1e-6
    r.samples.append(ms / number)


def cost(result: Result | None) -> float:
    """The minimised objective value recorded for a result (inf when it failed or is missing)."""
    if result is None or not result.ok:
        return math.inf
    return float(result.observers.get("cost", result.time_ms))
