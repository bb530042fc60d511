"""``CodeVariant``: a named tunable function whose implementation is chosen per input by a model.

Nitro's model (seed 001, ch. 2) in Python: variants share one signature, the default is correct for
every input, features are cheap callables, constraints say when a variant may not run. Beyond Nitro,
a variant may carry a :class:`~adaptune.space.Space`; the model then picks (variant, configuration).
Dispatch (``cv(*args)``) evaluates the features, queries a compiled predictor (a few NumPy
operations, no scikit-learn call), checks the chosen variant's constraint and runs it.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import ModelParams, Predictor, compile_predictor
from adaptune.adaptive.device_features import cpu_device
from adaptune.adaptive.features import FeatureSet, PendingFeatures
from adaptune.adaptive.labelling import Label, MemoryCache, StoreCache, outputs_match
from adaptune.adaptive.persist import ModelFileError, load_into, read_document, save_model
from adaptune.adaptive.training import TrainReport, train_code_variant
from adaptune.records import DeviceInfo, Result

__all__ = ["CodeVariant", "TrainReport", "cpu_device", "load_code_variant"]

Objective = str | Callable[[Mapping[str, float]], float]
_array, _float = np.array, float  # module-level names: one dict look-up on the dispatch path


@dataclass
class _Variant:
    name: str
    fn: Callable[..., Any]
    space: Any = None
    strategy: str = "random"
    budget: int | None = None
    constraints: list[Callable[..., bool]] = field(default_factory=list)

    def constraint(self) -> Callable[..., bool] | None:
        if not self.constraints:
            return None
        if len(self.constraints) == 1:
            return self.constraints[0]
        cs = tuple(self.constraints)
        return lambda *args: all(c(*args) for c in cs)


@dataclass(frozen=True)
class _Dispatch:
    """Everything dispatch reads, swapped in one assignment so concurrent calls see a consistent model."""

    predict: Predictor
    labels: tuple[Label, ...]
    entries: tuple[tuple[Callable[..., Any], dict[str, Any], Callable[..., bool] | None], ...]
    params: ModelParams
    kind: str
    provenance: dict[str, Any]
    feature_fns: tuple[Callable[..., float], ...] = ()


class CodeVariant:
    """A tunable function: variants, features, constraints, a default, and a selection model.

    ``objective``: ``"time"`` (wall time, or ``timer``'s value), the name of a metric returned by
    ``metrics``, or a callable aggregating the metrics dict into one value; always minimised.
    ``timer(run) -> ms`` times one call of the zero-argument ``run`` (e.g. with CUDA events);
    ``sync()`` is called after each call in the default wall-clock timer (e.g. a device synchronise);
    ``metrics(run) -> dict`` measures several quantities of one call (e.g. time_ms and energy_j).
    ``verify``: compare every variant's output with the default's (True), not at all (False), or a
    callable ``(reference, output) -> bool``.
    """

    def __init__(self, name: str, *, objective: Objective = "time", timer: Callable[..., float] | None = None,
                 sync: Callable[[], Any] | None = None, metrics: Callable[..., Mapping[str, float]] | None = None,
                 verify: bool | Callable[[Any, Any], bool] = True, atol: float = 1e-6, rtol: float = 1e-5,
                 parallel_features: bool = False, device: DeviceInfo | None = None) -> None:
        if not name:
            raise ValueError("a CodeVariant needs a name")
        if isinstance(objective, str) and objective != "time" and metrics is None:
            raise ValueError(f"objective {objective!r} is a metric name, so pass metrics=callable(run) -> dict")
        self.name = name
        self.objective = objective
        self.timer, self.sync, self.metrics = timer, sync, metrics
        self.verify, self.atol, self.rtol = verify, atol, rtol
        self.parallel_features = parallel_features
        self.device = device
        self.features = FeatureSet()
        self._variants: dict[str, _Variant] = {}
        self._by_fn: dict[int, str] = {}
        self._default: str | None = None
        self._state: _Dispatch | None = None
        self._local = threading.local()
        self.last_training: TrainReport | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (for labelling on other processes or Ray workers): the per-thread feature state stays."""
        state = dict(self.__dict__)
        state.pop("_local", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    # ------------------------------------------------------------------------------ registration

    def variant(self, fn: Callable[..., Any] | None = None, *, name: str | None = None, default: bool = False,
                space: Any = None, strategy: str = "random", budget: int | None = None) -> Any:
        """Register a variant (usable bare, ``@cv.variant``, or with options ``@cv.variant(default=True)``).

        ``space``: an :class:`adaptune.space.Space` of keyword parameters the variant accepts; per
        training input its best configuration is searched with ``strategy`` under ``budget`` evaluations.
        """
        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            vname = name or getattr(f, "__name__", "")
            if not vname or vname == "<lambda>":
                raise ValueError("a lambda variant needs name=")
            if vname in self._variants:
                raise ValueError(f"variant {vname!r} is already registered in {self.name!r}")
            if space is not None and len(space) == 0:
                raise ValueError(f"variant {vname!r}: its space has no valid configuration")
            self._variants[vname] = _Variant(vname, f, space, strategy, budget)
            self._by_fn[id(f)] = vname
            if default:
                self.set_default(vname)
            self._state = None  # a model trained without this variant no longer describes the function
            return f

        return register(fn) if fn is not None else register

    def set_default(self, variant: Callable[..., Any] | str) -> None:
        """The variant that is correct for every input; run when a constraint fails or before training."""
        self._default = self._resolve(variant)

    def feature(self, fn: Callable[..., float] | None = None, *, name: str | None = None) -> Any:
        """Register an input feature: called with the variants' arguments, returns a number."""
        def register(f: Callable[..., float]) -> Callable[..., float]:
            self.features.add(f, name)
            self._state = None
            return f

        return register(fn) if fn is not None else register

    def constraint(self, variant: Callable[..., Any] | str) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
        """Decorator: ``fn(*args) -> bool`` says whether ``variant`` may run on these inputs."""
        vname = self._resolve(variant)

        def register(fn: Callable[..., bool]) -> Callable[..., bool]:
            self._variants[vname].constraints.append(fn)
            if self._state is not None:
                self._state = self._dispatch_for(self._state.params, self._state.labels, self._state.kind,
                                                 self._state.provenance)
            return fn

        return register

    def _resolve(self, variant: Callable[..., Any] | str) -> str:
        vname = variant if isinstance(variant, str) else self._by_fn.get(id(variant))
        if vname is None or vname not in self._variants:
            known = ", ".join(self._variants) or "none yet"
            raise KeyError(f"{variant!r} is not a variant of {self.name!r} (variants: {known})")
        return vname

    # ------------------------------------------------------------------------------ introspection

    @property
    def variant_names(self) -> list[str]:
        return list(self._variants)

    @property
    def feature_names(self) -> list[str]:
        return self.features.names

    @property
    def default_name(self) -> str:
        if not self._variants:
            raise ValueError(f"{self.name!r} has no variants")
        return self._default or next(iter(self._variants))

    @property
    def default_label(self) -> Label:
        return self._label_with_default_config(self.default_name)

    def _label_with_default_config(self, vname: str) -> Label:
        space = self._variants[vname].space
        if space is None:
            return Label(vname)
        idx = space.default_index()
        return Label.of(vname, space.config(0 if idx is None else idx))

    def plain_labels(self) -> list[Label]:
        """Initial candidate labels: each variant (with its default configuration if it has a Space)."""
        return [self._label_with_default_config(v) for v in self._variants]

    def parametrised_variants(self) -> list[str]:
        return [v.name for v in self._variants.values() if v.space is not None]

    def space_of(self, vname: str) -> Any:
        return self._variants[vname].space

    def strategy_of(self, vname: str) -> str:
        return self._variants[vname].strategy

    def budget_of(self, vname: str) -> int | None:
        return self._variants[vname].budget

    def variant_function(self, vname: str) -> Callable[..., Any]:
        return self._variants[vname].fn

    def constraint_for(self, vname: str) -> Callable[..., bool] | None:
        return self._variants[vname].constraint()

    def source_hash(self) -> str:
        """Identity of the code being tuned: variant, feature and constraint sources (or names)."""
        h = hashlib.sha1()
        for v in self._variants.values():
            for f in (v.fn, *v.constraints):
                try:
                    h.update(inspect.getsource(f).encode())
                except (OSError, TypeError):
                    h.update(getattr(f, "__qualname__", repr(f)).encode())
        h.update(",".join(self.feature_names).encode())
        return h.hexdigest()[:16]

    def synchronize(self) -> None:
        if self.sync is not None:
            self.sync()

    def verify_output(self, reference: Any, output: Any) -> bool:
        if callable(self.verify):
            return bool(self.verify(reference, output))
        return outputs_match(reference, output, self.atol, self.rtol) if self.verify else True

    def cost_of(self, result: Result) -> float:
        """The minimised objective of a measured result."""
        if not result.ok:
            return math.inf
        if callable(self.objective):
            return float(self.objective({"time_ms": result.time_ms, **result.observers}))
        if self.objective == "time":
            return float(result.time_ms)
        return float(result.observers[self.objective])

    # ------------------------------------------------------------------------------ dispatch

    def fix_inputs(self, *args: Any) -> None:
        """Start evaluating features for ``args`` now; the next ``cv()`` (no arguments) joins and runs."""
        self._local.pending = self.features.start(args, self.parallel_features)

    def features_of(self, *args: Any) -> np.ndarray:
        if self.parallel_features:
            return self.features.evaluate_parallel(args)
        return self.features.evaluate(args)

    def __call__(self, *args: Any) -> Any:
        """Features -> model -> constraint check -> variant (the default before training).

        The hot path reads one immutable snapshot (``self._state``), so it needs no lock: a model
        installed concurrently is seen whole or not at all. No keyword parsing, one small array.
        """
        state = self._state
        if not args:
            pending: PendingFeatures | None = getattr(self._local, "pending", None)
            if pending is not None:
                self._local.pending = None
                args = pending.args
                if state is None:
                    return self._variants[self.default_name].fn(*args)
                return self._run(state, state.predict(pending.result()), args)
        if state is None:
            return self._variants[self.default_name].fn(*args)
        if self.parallel_features:
            x = self.features.evaluate_parallel(args)
        else:
            x = _array([f(*args) for f in state.feature_fns], _float)
        fn, params, constraint = state.entries[state.predict(x)]
        if constraint is not None and not constraint(*args):
            fn, params, _ = state.entries[-1]  # the default, appended last
        return fn(*args, **params) if params else fn(*args)

    @staticmethod
    def _run(state: _Dispatch, i: int, args: tuple[Any, ...]) -> Any:
        fn, params, constraint = state.entries[i]
        if constraint is not None and not constraint(*args):
            fn, params, _ = state.entries[-1]  # the default, appended last
        return fn(*args, **params) if params else fn(*args)

    def predict(self, features: Sequence[float] | np.ndarray) -> Label:
        """The label the model picks for a feature vector (no constraint check)."""
        state = self._require_model()
        return state.labels[state.predict(np.asarray(features, float))]

    def select(self, *args: Any) -> Label:
        """The label ``cv(*args)`` would run, constraint fallback included; runs nothing else."""
        state = self._require_model()
        i = state.predict(self.features_of(*args))
        constraint = state.entries[i][2]
        if constraint is not None and not constraint(*args):
            return self.default_label
        return state.labels[i]

    def _require_model(self) -> _Dispatch:
        if self._state is None:
            raise ValueError(f"{self.name!r} has no model yet: call train() or load a saved one")
        return self._state

    @property
    def model_kind(self) -> str | None:
        return None if self._state is None else self._state.kind

    @property
    def model_params(self) -> ModelParams | None:
        return None if self._state is None else self._state.params

    @property
    def model_labels(self) -> list[Label]:
        return [] if self._state is None else list(self._state.labels)

    @property
    def provenance(self) -> dict[str, Any]:
        return {} if self._state is None else dict(self._state.provenance)

    def install_model(self, params: ModelParams, labels: Sequence[Label], kind: str,
                      provenance: Mapping[str, Any] | None = None) -> None:
        """Use a fitted model (label indices refer to ``labels``)."""
        for lab in labels:
            if lab.variant not in self._variants:
                raise ValueError(f"model label {lab} names no variant of {self.name!r} "
                                 f"(variants: {', '.join(self._variants)})")
        self._state = self._dispatch_for(params, tuple(labels), kind, dict(provenance or {}))

    def _dispatch_for(self, params: ModelParams, labels: tuple[Label, ...], kind: str,
                      provenance: dict[str, Any]) -> _Dispatch:
        entries = [(self._variants[lab.variant].fn, lab.params, self._variants[lab.variant].constraint())
                   for lab in labels]
        default = self.default_label
        entries.append((self._variants[default.variant].fn, default.params, None))
        return _Dispatch(compile_predictor(params), labels, tuple(entries), params, kind, provenance,
                         tuple(f.fn for f in self.features.features))

    # ------------------------------------------------------------------------------ training

    def open_cache(self, db: Any = None) -> Any:
        """Where labels live: ``None`` in memory; a path, URL or Store: the results store."""
        if db is None:
            return MemoryCache()
        # the storage layer (SQLAlchemy) only when labels are kept: a program that only dispatches never loads it
        from adaptune.store import Store

        store = db if isinstance(db, Store) else Store(db)
        space_desc = {"variants": self.variant_names, "features": self.feature_names,
                      "objective": self.objective if isinstance(self.objective, str) else "custom",
                      "spaces": {v: self._variants[v].space.names for v in self.parametrised_variants()}}
        return StoreCache(store, self.device or cpu_device(), self.name, self.source_hash(), space_desc)

    def train(self, inputs: Iterable[Any] | Mapping[str, Any], *, model: str = "svm", active: int | None = None,
              target: float | None = None, holdout: Iterable[Any] | Mapping[str, Any] | None = None,
              db: Any = None, repeats: int = 7, warmup: int = 1, min_sample_ms: float = 1.0,
              max_call_ms: float = math.inf, search_budget: int = 20, seed: int = 0,
              progress: bool = True, executor: str | None = None, address: str | None = None,
              ray_gpus: float | None = None) -> TrainReport:
        """Label training inputs (measured once, stored in ``db``), fit ``model`` and install it.

        ``model``: one of ``svm`` (default), ``tree``, ``knn``, ``cost``, ``forest``, ``boosting``, or
        ``auto`` (best cross-validated fraction of oracle). ``active=N``: label at most N inputs, chosen by
        best-vs-second-best margin (Nitro's ``itune``); ``target`` stops earlier once the fraction of oracle
        on ``holdout`` reaches it. ``executor="ray"``: the inputs are labelled in parallel on Ray actors (a
        cluster at ``address``, else a local one; docs/distributed.md), one input per call, ``ray_gpus`` GPUs
        per actor (None: one each when the cluster has GPUs).
        """
        self.last_training = train_code_variant(
            self, inputs, model=model, active=active, target=target, holdout=holdout, db=db, repeats=repeats,
            warmup=warmup, min_sample_ms=min_sample_ms, max_call_ms=max_call_ms, search_budget=search_budget,
            seed=seed, progress=progress, executor=executor, address=address, ray_gpus=ray_gpus)
        return self.last_training

    # ------------------------------------------------------------------------------ persistence

    def save(self, path: str | Path) -> Path:
        """Write the model as JSON (no code, no pickle): arrays, scaler, names, provenance."""
        return save_model(self, path)

    def load_model(self, path: str | Path) -> None:
        """Install a saved model; refused with a clear message if its features or variants differ."""
        load_into(self, path)

    @classmethod
    def load(cls, path: str | Path, variants: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]],
             features: Sequence[Callable[..., float]] | Mapping[str, Callable[..., float]] | None = None,
             constraints: Mapping[Any, Callable[..., bool]] | None = None, **options: Any) -> CodeVariant:
        """Rebuild a code variant from a saved model and the functions it names.

        ``features`` may be omitted only if ``variants`` come from a module whose functions carry the
        same names as the saved features (rare); normally pass them (a list in saved order, or by name).
        """
        return load_code_variant(path, variants, features, constraints, **options)

    def __repr__(self) -> str:
        model = self._state.kind if self._state else "untrained"
        return (f"CodeVariant({self.name!r}, variants={self.variant_names}, features={self.feature_names}, "
                f"model={model})")


def _named(items: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    if isinstance(items, Mapping):
        return dict(items)
    return {getattr(f, "__name__", ""): f for f in items}


def load_code_variant(path: str | Path, variants: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]],
                      features: Sequence[Callable[..., float]] | Mapping[str, Callable[..., float]] | None,
                      constraints: Mapping[Any, Callable[..., bool]] | None, **options: Any) -> CodeVariant:
    path = Path(path)
    doc = read_document(path)
    fns = _named(variants)
    missing = [v for v in doc["variants"] if v not in fns]
    if missing:
        raise ModelFileError(f"{path}: variants {missing} were not passed (got {sorted(fns)})")
    extra = sorted(set(fns) - set(doc["variants"]))
    if extra:
        raise ModelFileError(f"{path}: model was trained without variants {extra}")
    if features is None:
        raise ModelFileError(f"{path}: pass features= (the model needs {doc['features']})")
    if isinstance(features, Mapping):
        absent = [f for f in doc["features"] if f not in features]
        if absent:
            raise ModelFileError(f"{path}: features {absent} were not passed")
        feature_fns = [(n, features[n]) for n in doc["features"]]
    else:
        if len(features) != len(doc["features"]):
            raise ModelFileError(f"{path}: model needs {len(doc['features'])} features {doc['features']}, "
                                 f"got {len(features)}")
        feature_fns = list(zip(doc["features"], features, strict=True))
    cv = CodeVariant(doc["name"], **options)
    for vname in doc["variants"]:
        cv.variant(fns[vname], name=vname, default=vname == doc["default"])
    for fname, fn in feature_fns:
        cv.feature(fn, name=fname)
    for variant, fn in (constraints or {}).items():
        cv.constraint(variant)(fn)
    load_into(cv, path)
    return cv
