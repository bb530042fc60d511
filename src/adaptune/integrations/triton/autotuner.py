"""``adaptune.triton.autotune``: ``triton.autotune`` with a store, a model for unseen keys and policies.

It is Triton's own ``Autotuner`` (hooks, pruning, ``do_bench``, ``warmup`` are inherited unchanged) with
``run`` replaced. A key seen before costs what Triton's cache hit costs: the key tuple is built the same
way (key-argument values, then every argument's dtype) and looked up in one dict. A key never seen is
handled by the policy:

* ``"tune"``: benchmark the configurations, as Triton does, but only those the store has no row for;
* ``"predict"``: a model trained on the stored keys picks the configuration; nothing is benchmarked;
* ``"predict+tune"``: predict now, then measure the model's top-k for that key on a background thread
  (on copies of the arguments; or, with ``measure_after_hits=N``, on the N-th call) and refit the model.

Copies are made of tensor arguments only; other objects (tensor descriptors) are shared with the caller.
Under Triton's interpreter (``TRITON_INTERPRET=1``, not thread-safe) a launch waits for the background.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import queue
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import triton
from triton import Config
from triton.runtime import autotuner as _triton_autotuner
from triton.runtime.driver import driver

from adaptune.integrations.triton.configs import (
    Features,
    config_dict,
    configs_from_space,
    default_features,
    key_name,
    named_key,
)
from adaptune.integrations.triton.environment import (
    device_info,
    host_bench,
    interpreting,
    private_copy,
    side_stream,
)
from adaptune.integrations.triton.selector import DEFAULT_KINDS, Selector, fit_selector
from adaptune.integrations.triton.timings import KernelTimings
from adaptune.records import Result, Status
from adaptune.space import Space
from adaptune.store import Store
from adaptune.store.codec import config_key

POLICIES = ("tune", "predict", "predict+tune")
POLICY_ENV = "ADAPTUNE_TRITON_POLICY"
"""Default policy where the decorator names none: switch a deployed program without editing its kernels."""
_COMPILE_ERRORS = ("OutOfResources", "PTXASError", "CompilationError", "CompileTimeAssertionFailure")


class AutotuneError(RuntimeError):
    """A key no configuration could run for: the message counts the failures and quotes the first error."""


@dataclass(frozen=True)
class TuneSettings:
    """How unseen keys are handled beyond the policy.

    ``top_k``: configurations ``predict+tune`` measures per predicted key. ``measure_after_hits``: None
    measures on a background thread at once; N measures synchronously on the key's N-th call.
    ``model_kinds``: adaptune selection models tried (cross-validated choice). ``refit_after``: newly
    measured keys before the model is refitted.
    """

    top_k: int = 3
    measure_after_hits: int | None = None
    model_kinds: tuple[str, ...] = DEFAULT_KINDS
    refit_after: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.measure_after_hits is not None and self.measure_after_hits < 1:
            raise ValueError(f"measure_after_hits must be None or >= 1, got {self.measure_after_hits}")


@dataclass
class TuneStats:
    """What tuning cost so far: seconds spent measuring on the caller's thread and in the background."""

    measured: int = 0
    reused: int = 0
    predicted: int = 0
    caller_s: float = 0.0
    background_s: float = 0.0
    fit_s: float = 0.0
    fits: list[str] = field(default_factory=list)


def _failure_summary(kernel: str, key: tuple[Any, ...], results: Sequence[Result]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r.status)] = counts.get(str(r.status), 0) + 1
    first = next((r for r in results if r.error), None)
    text = (f"{kernel}: no configuration ran for key {key}: all {len(results)} failed "
            f"({', '.join(f'{n} {s}' for s, n in counts.items())})")
    if first is not None:
        text += f"; first error ({first.config}):\n{first.error.strip()}"
    return text


class Autotuner(_triton_autotuner.Autotuner):
    """Triton's ``Autotuner`` whose unseen keys go through adaptune's store and model (see module doc)."""

    def __init__(self, fn: Any, arg_names: Sequence[str], configs: Sequence[Config] | None, key: Sequence[str],
                 reset_to_zero: Sequence[str] | None, restore_value: Sequence[str] | None, *,
                 space: Space | None = None, features: Features | None = None, db: str | Path | Store | None = None,
                 policy: str | None = None, settings: TuneSettings | None = None, **triton_options: Any) -> None:
        name = getattr(fn, "__name__", type(fn).__name__)
        policy = policy or os.environ.get(POLICY_ENV) or "tune"
        if isinstance(key, str):
            raise TypeError(f"{name}: key must be a list of argument names, got the string {key!r}")
        unknown = [k for k in key if k not in arg_names]
        if unknown:
            raise ValueError(f"{name}: key {unknown[0]!r} names no argument of the kernel "
                             f"(its arguments: {', '.join(arg_names)})")
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
        if space is not None:
            if configs:
                raise ValueError(f"{name}: pass configs or space=, not both")
            configs = configs_from_space(space)
        super().__init__(fn, list(arg_names), list(configs or []), list(key), reset_to_zero, restore_value,
                         **triton_options)
        self.kernel_name = name
        self.policy, self.settings = policy, settings or TuneSettings()
        self.features: Features = features or default_features
        self.stats = TuneStats()
        self._db = db
        self._timings: KernelTimings | None = None
        self._arg_set = frozenset(self.arg_names)
        self._launch: dict[tuple[Any, ...], tuple[Config, dict[str, Any]]] = {}
        self._pending: dict[tuple[Any, ...], list[Any]] = {}  # predicted keys waiting for N hits
        self._selector: Selector | None = None
        self._new_keys = 0
        self._measure_lock = threading.RLock()
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._warned_no_model = False
        self._interpreted = interpreting()

    # ---------------------------------------------------------------------------------- hot path
    def run(self, *args: Any, **kwargs: Any) -> Any:
        if len(self.configs) > 1:
            all_args = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
            # dtype objects, not their names: hashing them is cheaper than str(); a miss converts (Triton's key)
            raw = tuple([all_args[k] for k in self.keys]
                        + [v.dtype for k, v in all_args.items() if k in self._arg_set and hasattr(v, "dtype")])
            found = self._launch.get(raw)
            if found is None:
                found = self._miss(raw, args, kwargs)
            config, launch = found
        else:
            config = self.configs[0]
            launch = config.all_kwargs()
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**dict(zip(self.arg_names, args, strict=False)), **kwargs, **launch})
        if self._interpreted:  # Triton's interpreter is not thread-safe: one launch at a time with the background
            with self._measure_lock:
                return self.fn.run(*args, **kwargs, **launch)
        return self.fn.run(*args, **kwargs, **launch)

    def key_of(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
        """Triton's tuning key of a call: the key arguments' values, then every argument's dtype name."""
        all_args = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
        return tuple([all_args[k] for k in self.keys]
                     + [str(v.dtype) for k, v in all_args.items() if k in self._arg_set and hasattr(v, "dtype")])

    # ---------------------------------------------------------------------------------- unseen keys
    def _install(self, key: tuple[Any, ...], config: Config, raw: tuple[Any, ...] | None = None
                 ) -> tuple[Config, dict[str, Any]]:
        """``key``: Triton's form (dtype names), in ``self.cache``; ``raw``: the hot path's (dtype objects)."""
        entry = (config, config.all_kwargs())
        self.cache[key] = config
        self._launch[key if raw is None else raw] = entry
        self._pending.pop(key, None)
        return entry

    def _miss(self, raw: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Config, dict]:
        n = len(self.keys)
        key = raw[:n] + tuple(str(d) for d in raw[n:])
        self.nargs = dict(zip(self.arg_names, args, strict=False))
        try:
            found = self.cache.get(key)  # installed under Triton's key only (prime, import)
            if found is not None:
                return self._install(key, found, raw)
            pending = self._pending.get(key)
            if pending is not None:  # predicted, waiting for its N-th call to be measured
                pending[2] += 1
                if pending[2] < (self.settings.measure_after_hits or 0):
                    return pending[0], pending[1]
                return self._install(key, self._tune(key, pending[3], args, kwargs, caller=True), raw)
            pruned = self.prune_configs(kwargs)
            if self.policy == "tune":
                return self._install(key, self._tune(key, pruned, args, kwargs, caller=True), raw)
            return self._predict(key, raw, pruned, args, kwargs)
        finally:
            self.nargs = None

    def _predict(self, key: tuple[Any, ...], raw: tuple[Any, ...], pruned: list[Config], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> tuple[Config, dict[str, Any]]:
        if self._selector is None:
            self.fit()
        allowed = {id(c) for c in pruned}
        if self._selector is None:
            if not self._warned_no_model:
                warnings.warn(f"{self.kernel_name}: no stored timings to predict from yet; using the first "
                              "configuration until some are measured", RuntimeWarning, stacklevel=4)
                self._warned_no_model = True
            ranked = pruned
        else:
            x = np.asarray(self.features(named_key(self.keys, key)), float)
            ranked = [self.configs[i] for i in self._selector.ranked(x, len(self.configs)) if id(self.configs[i]) in allowed]
            ranked += [c for c in pruned if c not in ranked]
        self.stats.predicted += 1
        choice = ranked[0]
        if self.policy == "predict":
            return self._install(key, choice, raw)
        candidates = ranked[:self.settings.top_k]
        if self.settings.measure_after_hits is not None:
            entry = (choice, choice.all_kwargs())
            self._pending[key] = [entry[0], entry[1], 1, candidates]
            if self.settings.measure_after_hits <= 1:
                return self._install(key, self._tune(key, candidates, args, kwargs, caller=True), raw)
            return entry
        self._enqueue(key, raw, candidates, args, kwargs)
        return self._install(key, choice, raw)

    def _tune(self, key: tuple[Any, ...], configs: Sequence[Config], args: tuple[Any, ...], kwargs: dict[str, Any],
              *, caller: bool) -> Config:
        """Measure the configurations the store has no row for; return the fastest of all of them."""
        t0 = time.perf_counter()
        with self._measure_lock:
            results = self._measure_all(key, configs, args, kwargs)
        spent = time.perf_counter() - t0
        if caller:
            self.stats.caller_s += spent
        else:
            self.stats.background_s += spent
        times = [r.time_ms for r in results]
        if not any(math.isfinite(t) for t in times):
            raise AutotuneError(_failure_summary(self.kernel_name, key, results))
        best = configs[int(np.argmin(times))]
        full_nargs = {**dict(zip(self.arg_names, args, strict=False)), **kwargs, **best.all_kwargs()}
        self.pre_hook(full_nargs, reset_only=True)
        return best

    def _measure_all(self, key: tuple[Any, ...], configs: Sequence[Config], args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> list[Result]:
        timings = self.timings()
        name, dicts = key_name(key), [config_dict(c) for c in configs]
        stored = timings.get(name, dicts)
        self.stats.reused += len(stored)
        fresh = [self.measure(c, args, kwargs) for c, d in zip(configs, dicts, strict=True)
                 if config_key(d) not in stored]
        if fresh:
            timings.put(name, named_key(self.keys, key), fresh)
            self.stats.measured += len(fresh)
            self._new_keys += 1
        by_key = {**stored, **{config_key(r.config): r for r in fresh}}
        return [by_key[config_key(d)] for d in dicts]

    def measure(self, config: Config, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Result:
        """Benchmark one configuration as Triton's ``_bench`` does; a failure becomes a record, not a raise."""
        conflicts = kwargs.keys() & config.kwargs.keys()
        if conflicts:
            raise ValueError(f"Conflicting meta-parameters: {', '.join(conflicts)}."
                             " Make sure that you don't re-define auto-tuned symbols.")
        current = dict(kwargs, **config.all_kwargs())
        full_nargs = {**dict(zip(self.arg_names, args, strict=False)), **current}

        def kernel_call() -> None:
            if config.pre_hook:
                config.pre_hook(full_nargs)
            self.pre_hook(full_nargs)
            try:
                self.fn.run(*args, **current)
            except Exception as exc:
                try:
                    self.post_hook(full_nargs, exception=exc)
                finally:
                    raise  # noqa: B012 - the kernel's own error is the one to report
            self.post_hook(full_nargs, exception=None)

        t0 = time.perf_counter()
        as_dict = config_dict(config)
        try:
            timing = self.do_bench(kernel_call, quantiles=(0.5, 0.2, 0.8))
        except Exception as exc:  # a configuration that cannot run is a record, as in Triton (inf)
            kind = Status.COMPILE_ERROR if type(exc).__name__ in _COMPILE_ERRORS else Status.LAUNCH_ERROR
            return Result.failure(as_dict, kind, f"{type(exc).__name__}: {exc}",
                                  benchmark_ms=(time.perf_counter() - t0) * 1e3)
        values = [float(v) for v in (timing if isinstance(timing, Sequence) else [timing])]
        if not math.isfinite(values[0]):
            return Result.failure(as_dict, Status.LAUNCH_ERROR, "do_bench returned no finite time")
        extra = {"p20_ms": values[1], "p80_ms": values[2]} if len(values) == 3 else {}
        return Result(as_dict, Status.OK, values[0], [values[0]], benchmark_ms=(time.perf_counter() - t0) * 1e3,
                      observers=extra)

    @property
    def do_bench(self) -> Callable[..., Any]:  # Triton's property, with a host timer for its interpreter
        if self._do_bench is None:
            self._do_bench = host_bench if interpreting() else driver.active.get_benchmarker()
        return self._do_bench

    # ---------------------------------------------------------------------------------- background
    def _enqueue(self, key: tuple[Any, ...], raw: tuple[Any, ...], candidates: Sequence[Config],
                 args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        copies = tuple(private_copy(a) for a in args), {k: private_copy(v) for k, v in kwargs.items()}
        job = (key, raw, list(candidates), *copies)
        self._jobs.put(job)
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._background, name=f"adaptune-{self.kernel_name}",
                                            daemon=True)
            self._worker.start()

    def _background(self) -> None:
        stream = side_stream()
        while True:
            key, raw, candidates, args, kwargs = self._jobs.get()
            try:
                with stream:
                    best = self._tune(key, candidates, args, kwargs, caller=False)
                self._install(key, best, raw)
                if self._new_keys >= self.settings.refit_after:
                    self.fit()
            except Exception as exc:  # noqa: BLE001 - the caller keeps the predicted config; say why
                warnings.warn(f"{self.kernel_name}: background tuning of key {key} failed: {exc}",
                              RuntimeWarning, stacklevel=1)
            finally:
                self._jobs.task_done()

    def wait(self) -> None:
        """Block until every background measurement queued so far is done (tests, benchmarks, shutdown)."""
        self._jobs.join()

    # ---------------------------------------------------------------------------------- store + model
    def use_db(self, db: str | Path | Store | None) -> None:
        """Read and write another store from now on (the in-memory cache of choices is kept)."""
        if self._timings is not None:
            self._timings.close()
        self._db, self._timings, self._selector = db, None, None

    def timings(self) -> KernelTimings:
        """This kernel's rows in the store (opened on first use, never at import)."""
        if self._timings is None:
            self._timings = KernelTimings(self._db, self.kernel_name, self.source_hash(), device_info(),
                                          self.keys)
        return self._timings

    def source_hash(self) -> str:
        """Triton's own cache key of the kernel (source and what it calls) where it has one, else its source."""
        jit = self.fn
        while not hasattr(jit, "cache_key") and hasattr(jit, "fn") and not inspect.isfunction(jit):
            jit = jit.fn
        if hasattr(jit, "cache_key"):
            return str(jit.cache_key)
        text = f"triton {triton.__version__}\n{inspect.getsource(self.base_fn)}"
        return hashlib.sha256(text.encode()).hexdigest()

    def fit(self) -> Selector | None:
        """(Re)train the model on every stored key of this kernel; None while nothing is stored."""
        t0 = time.perf_counter()
        named, costs = self.timings().table([config_dict(c) for c in self.configs])
        ordered = [{**{k: n.get(k) for k in self.keys}, "dtypes": n.get("dtypes", [])} for n in named]
        self._new_keys = 0
        selector = fit_selector(ordered, costs, self.features, self.settings.model_kinds, self.settings.seed)
        if selector is not None:
            self._selector = selector
            self.stats.fits.append(selector.kind)
        self.stats.fit_s += time.perf_counter() - t0
        return selector

    def prime(self, keys: Sequence[tuple[Any, ...]]) -> int:
        """Load the stored best configuration of each key into the in-memory cache; returns how many had one."""
        timings, dicts = self.timings(), [config_dict(c) for c in self.configs]
        loaded = 0
        for key in keys:
            stored = timings.get(key_name(tuple(key)), dicts)
            times = [stored[config_key(d)].time_ms if config_key(d) in stored else math.inf for d in dicts]
            if any(math.isfinite(t) for t in times):
                self._install(tuple(key), self.configs[int(np.argmin(times))])
                loaded += 1
        return loaded


def autotune(configs: Sequence[Config] | None, key: Sequence[str], prune_configs_by: Mapping[str, Any] | None = None,
             reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
             pre_hook: Callable[..., Any] | None = None, post_hook: Callable[..., Any] | None = None,
             warmup: int | None = None, rep: int | None = None, use_cuda_graph: bool = False,
             do_bench: Callable[..., Any] | None = None, cache_results: bool = False, *,
             space: Space | None = None, features: Features | None = None, db: str | Path | Store | None = None,
             policy: str | None = None, settings: TuneSettings | None = None) -> Callable[[Any], Autotuner]:
    """Decorator with ``triton.autotune``'s signature, plus adaptune's ``space``, ``features``, ``db``,
    ``policy`` (default ``$ADAPTUNE_TRITON_POLICY``, else ``"tune"``) and ``settings`` (module doc).

    ``cache_results`` is accepted and left to the store, which keeps every timing; Triton's cache files
    are read by :func:`adaptune.triton.import_triton_cache`."""

    def decorator(fn: Any) -> Autotuner:
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value, space=space,
                         features=features, db=db, policy=policy, settings=settings, pre_hook=pre_hook,
                         post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results)

    return decorator
