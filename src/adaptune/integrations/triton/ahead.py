"""Before deployment: tune a kernel over a list of keys, and import Triton's own ``cache_results`` files.

``tune_ahead`` measures each (key, configuration) in adaptune's worker process by default, so a
configuration that kills the process (illegal address, a hang) becomes a failure row and the next one
runs in a fresh worker; the rows land in the same store the decorator reads at run time.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triton import Config

from adaptune.distributed import Executor, LocalExecutor
from adaptune.integrations.triton.autotuner import Autotuner
from adaptune.integrations.triton.configs import config_dict, key_name, named_key
from adaptune.integrations.triton.timings import default_db
from adaptune.measure import CallableSpec, MeasureSettings
from adaptune.records import Result, Status
from adaptune.store import Store
from adaptune.store.codec import config_key

MakeArgs = Callable[[Mapping[str, Any]], tuple[Any, Sequence[Any], Mapping[str, Any]]]
"""``make_args(key) -> (grid, args, kwargs)``: the launch of the kernel for one key of the tuning list."""


def resolve(ref: str) -> Any:
    """``"package.module:name"`` -> the object (how a worker process and the CLI find a kernel)."""
    module, sep, name = ref.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{ref!r} is not a reference of the form package.module:name")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def reference(kernel: Autotuner) -> str:
    """The ``module:name`` a worker imports the kernel by (its function's module and name)."""
    ref = f"{kernel.base_fn.__module__}:{kernel.base_fn.__name__}"
    if kernel.base_fn.__module__ == "__main__":
        raise ValueError(f"{kernel.kernel_name} is defined in __main__; a worker process cannot import it: "
                         "move it into a module or pass isolate=False")
    return ref


@dataclass
class AheadReport:
    """What ahead-of-time tuning did: keys tuned, configurations measured or reused, failures by key."""

    keys: int = 0
    measured: int = 0
    reused: int = 0
    failed: dict[str, list[str]] = field(default_factory=dict)
    best: dict[str, dict[str, Any]] = field(default_factory=dict)


def launch_key(kernel: Autotuner, grid: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
               ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The tuning key a call with these arguments has, and the keyword arguments ``run`` receives."""
    launch = {**kwargs, "grid": grid, "warmup": False}
    return kernel.key_of(args, launch), launch


def _measure_one(kernel: Autotuner, key_values: Mapping[str, Any], make_args: MakeArgs,
                 index: int | None) -> list[Result]:
    """Measure configuration ``index`` (None: every pruned one) of one key, through the store."""
    grid, args, kwargs = make_args(key_values)
    key, launch = launch_key(kernel, grid, args, kwargs)
    kernel.nargs = dict(zip(kernel.arg_names, args, strict=False))
    try:
        configs = kernel.prune_configs(launch) if index is None else [kernel.configs[index]]
    finally:
        kernel.nargs = None
    return kernel._measure_all(key, configs, tuple(args), launch)


def _worker_call(job: Mapping[str, Any], kernel_ref: str, make_args: MakeArgs, db: str, keys: list[dict]) -> None:
    """Runs in adaptune's worker process: one (key, configuration), stored there; timed by ``do_bench``."""
    if isinstance(job.get("device"), int):
        import torch  # the worker's GPU (a LocalExecutor device); Ray actors see only their own as 0

        if torch.cuda.is_available():
            torch.cuda.set_device(job["device"])
    kernel = resolve(kernel_ref)
    if not isinstance(kernel, Autotuner):
        raise TypeError(f"{kernel_ref} is a {type(kernel).__name__}, not an adaptune.triton.autotune kernel")
    kernel.use_db(db)
    _measure_one(kernel, keys[job["key"]], make_args, job["config"])


def _db_for_worker(db: Any) -> str:
    """The path or URL the worker opens (a ``Store`` object cannot travel; its SQLite file can)."""
    if db is None:
        return default_db()
    if isinstance(db, Store):
        if db.path is None:
            raise ValueError("pass the database URL, not a Store object, to tune a server store in the worker")
        return str(db.path)
    return str(db)


def _run_jobs(executor: Executor, spec: CallableSpec, jobs: list[dict], timeout_s: float,
              record: Callable[[dict, Result | None, str], None]) -> None:
    """Every job on the executor's idle workers; ``record(job, result or None, error)`` as each one ends."""
    executor.start(spec, "python", MeasureSettings(repeats=1, warmup=0, verify=False, timeout_s=timeout_s))
    devices = getattr(executor, "devices", None)
    todo, idle, busy, dead = list(jobs), list(range(executor.n_workers)), 0, 0
    try:
        while todo or busy:
            while todo and idle:
                worker = idle.pop()
                executor.submit(worker, {**todo.pop(0), **({"device": devices[worker]} if devices else {})})
                busy += 1
            for done in executor.wait():
                if done.kind == "recovered":
                    idle.append(done.worker)
                elif done.kind == "dead":
                    dead += 1
                else:
                    busy -= 1
                    record(done.config, done.result, done.error)
                    if done.result is not None:
                        idle.append(done.worker)
            if dead == executor.n_workers:  # nobody left to measure: what is left is a failure, not a hang
                for job in todo:
                    record(job, None, "every worker died")
                break
    finally:
        executor.close()


def tune_ahead(kernel: Autotuner | str, keys: Iterable[Mapping[str, Any]], make_args: MakeArgs | str, *,
               db: str | None = None, isolate: bool = True, executor: Executor | None = None,
               timeout_s: float = 120.0) -> AheadReport:
    """Measure every configuration of ``kernel`` for every key (``make_args(key) -> (grid, args, kwargs)``).

    ``isolate``: each (key, configuration) in adaptune's worker process (a crash or hang is recorded as a
    failure row, the worker restarts); False measures in this process. ``executor``: where the workers run
    (default one local worker; ``LocalExecutor([0, 1])`` for two GPUs here, ``RayExecutor()`` for a cluster's,
    with a store they all reach); it is closed at the end. Rows already stored are reused.
    """
    ref = kernel if isinstance(kernel, str) else None
    kernel = resolve(kernel) if isinstance(kernel, str) else kernel
    make_args = resolve(make_args) if isinstance(make_args, str) else make_args
    if not isinstance(kernel, Autotuner):
        raise TypeError(f"expected an adaptune.triton.autotune kernel, got {type(kernel).__name__}")
    if db is not None:
        kernel.use_db(db)
    key_list = [dict(k) for k in keys]
    timings, dicts = kernel.timings(), [config_dict(c) for c in kernel.configs]
    names, before = [], []
    for values in key_list:
        grid, args, kwargs = make_args(values)
        key, _ = launch_key(kernel, grid, args, kwargs)
        names.append((key_name(key), named_key(kernel.keys, key)))
        before.append(timings.get(names[-1][0], dicts))
    report = AheadReport(keys=len(key_list), reused=sum(len(b) for b in before))
    if not isolate:
        for values in key_list:
            _measure_one(kernel, values, make_args, None)
    else:
        def record(job: dict, result: Result | None, error: str) -> None:
            (name, named), d = names[job["key"]], dicts[job["config"]]
            if (result is None or not result.ok) and config_key(d) not in timings.get(name, [d]):
                status = result.status if result is not None else Status.LAUNCH_ERROR
                timings.put(name, named, [Result.failure(d, status, f"worker: {result.error if result else error}")])

        jobs = [{"key": i, "config": j} for i in range(len(key_list)) for j, d in enumerate(dicts)
                if config_key(d) not in before[i]]
        spec = CallableSpec(_worker_call, arguments=[ref or reference(kernel), make_args, _db_for_worker(kernel._db),
                                                      key_list])
        _run_jobs(executor or LocalExecutor([0]), spec, jobs, timeout_s, record)
    for (name, _), stored in zip(names, before, strict=True):
        after = timings.get(name, dicts)
        report.measured += len(after) - len(stored)
        failed = [str(r.error or r.status) for r in after.values() if not r.ok]
        if failed:
            report.failed[name] = failed
        ok = [r for r in after.values() if r.ok]
        if ok:
            report.best[name] = min(ok, key=lambda r: r.time_ms).config
    return report


# -------------------------------------------------------------------------------- Triton's cache files
def _triton_cache_dir_name(kernel: Autotuner, key: tuple[Any, ...], configs: Sequence[Config]) -> str:
    """The folder name Triton's ``check_disk_cache`` gives these (key, configurations) of this kernel now."""
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.compiler.compiler import make_backend
    from triton.runtime.cache import triton_key
    from triton.runtime.driver import driver

    fn = kernel.fn
    while not hasattr(fn, "cache_key"):
        fn = fn.fn
    parts = [triton_key(), make_backend(driver.active.get_current_target()).hash(), fn.cache_key,
             str(sorted(get_cache_invalidating_env_vars().items())), str(key)] + [str(c) for c in configs]
    return hashlib.sha256("-".join(parts).encode("utf-8")).hexdigest()


def _expected_dir(kernel: Autotuner, key: tuple[Any, ...], configs: Sequence[Config]) -> str:
    try:
        return _triton_cache_dir_name(kernel, key, configs)
    except Exception as exc:  # noqa: BLE001 - no GPU driver (the interpreter), another backend, ...
        raise ValueError(f"cannot check which kernel version wrote a Triton cache file here ({type(exc).__name__}: "
                         f"{exc}); pass verify=False to take the files as written by the current source") from exc


def import_triton_cache(kernel: Autotuner, paths: Iterable[str | Path], *, verify: bool = True) -> int:
    """Store the timings of Triton ``cache_results=True`` files (``<fn>.autotune.json``) as rows; returns how many.

    ``paths``: files, or folders searched for this kernel's files (``~/.triton/cache``). ``verify``: keep only
    files whose cache folder matches the kernel's current source, backend and configurations (needs the GPU
    driver); without it a file is taken as belonging to the current source.
    """
    name = kernel.kernel_name
    files: list[Path] = []
    for p in (Path(x).expanduser() for x in paths):
        files.extend(sorted(p.rglob(f"{name}.autotune.json")) if p.is_dir() else [p])
    timings, rows = kernel.timings(), 0
    for path in files:
        try:
            data = json.loads(path.read_text())
            key = tuple(data["key"])
            pairs = [(Config(**c), t) for c, t in data["configs_timings"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"{path}: not a Triton autotune cache file ({type(exc).__name__}: {exc}); skipped",
                          RuntimeWarning, stacklevel=2)
            continue
        if verify and path.parent.name != _expected_dir(kernel, key, [c for c, _ in pairs]):
            warnings.warn(f"{path}: written for another version of {name} (or other configurations); skipped",
                          RuntimeWarning, stacklevel=2)
            continue
        results = []
        for config, timing in pairs:
            values = [float(v) for v in (timing if isinstance(timing, list) else [timing])]
            finite = values[0] == values[0] and values[0] != float("inf")
            results.append(Result(config_dict(config), Status.OK, values[0], [values[0]]) if finite
                           else Result.failure(config_dict(config), Status.COMPILE_ERROR, "inf in Triton's cache"))
        timings.put(key_name(key), named_key(kernel.keys, key), results)
        rows += len(results)
    return rows
