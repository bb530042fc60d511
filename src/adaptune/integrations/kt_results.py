"""adaptune's results in Kernel Tuner's shapes: the list of result dicts, the env dict, the cache file.

A failed configuration's row is Kernel Tuner 1.5's: its failure in ``__error__`` (Kernel Tuner's ``InvalidConfig``,
``CompilationFailedConfig`` or ``RuntimeFailedConfig``, strings that print and serialise as their names) and no
``time`` or ``times``; adaptune's own status and error text ride along as ``adaptune_status``/``adaptune_error``.
The cache keeps the failure in ``time`` too (Kernel Tuner reads both forms). Failures Kernel Tuner raises at
instead of recording (``stops_kernel_tuner``) are left out of the rows by ``tune_kernel``.
"""

from __future__ import annotations

import math
import platform
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adaptune.integrations.kt_args import NVML_OBSERVABLES
from adaptune.records import DeviceInfo, Result, Status
from adaptune.space.safe_expr import compile_vector
from adaptune.store import load_kt_cache, write_kt_cache
from adaptune.store.kt_cache import STATUS_FAILURE
from adaptune.store.recorded import RecordedSpace, kt_key


class ErrorConfig(str):
    """A failure in place of a time; ``str`` of it is its class name, as in Kernel Tuner."""

    __slots__ = ()

    def __new__(cls) -> ErrorConfig:
        return super().__new__(cls, cls.__name__)

    def __repr__(self) -> str:
        return type(self).__name__

    def __getnewargs__(self) -> tuple[()]:  # type: ignore[override]  # pickles (and copies) without arguments
        return ()


class InvalidConfig(ErrorConfig):
    __slots__ = ()


class CompilationFailedConfig(ErrorConfig):
    __slots__ = ()


class RuntimeFailedConfig(ErrorConfig):
    __slots__ = ()


FAILURES = {c.__name__: c for c in (InvalidConfig, CompilationFailedConfig, RuntimeFailedConfig)}
# The failures Kernel Tuner 1.5 records as a row and goes on after (``core.py``: a compile that runs out of
# shared or local memory, a launch out of resources); at any other it raises, and the caller's script ends.
KERNEL_TUNER_SKIPS = re.compile(r"uses too much shared data|local memory limit exceeded|local memory \(\d+\) "
                                r"exceeds limit \(\d+\)|too many resources requested for launch|OUT_OF_RESOURCES|"
                                r"INVALID_WORK_GROUP_SIZE")
Metric = str | Callable[[dict[str, Any]], Any]


def failure_marker(result: Result) -> ErrorConfig:
    if result.status == Status.LAUNCH_ERROR and result.error.endswith("(not launched)"):
        return InvalidConfig()  # a block the device cannot run: Kernel Tuner leaves it out as invalid
    return FAILURES[STATUS_FAILURE.get(Status(result.status), "RuntimeFailedConfig")]()


def stops_kernel_tuner(row: Mapping[str, Any]) -> bool:
    """A failed row Kernel Tuner 1.5 never returns: it raises at that configuration instead (a wrong output, a
    compile error of the source, a crash, a hang), so a script written for it reads every row's ``time``."""
    failure = row.get("__error__")
    if failure is None or isinstance(failure, InvalidConfig):
        return False
    if row.get("adaptune_status") == "wrong_result":
        return True
    return KERNEL_TUNER_SKIPS.search(row.get("adaptune_error") or "") is None


def compute_metrics(row: dict[str, Any], metrics: Mapping[str, Metric] | None) -> None:
    """Kernel Tuner's metrics, in order (a metric may use the ones before it); text through safe_expr."""
    if not metrics:
        return
    if not isinstance(metrics, Mapping):
        raise ValueError("metrics must be a dict of name -> callable(params) or expression text")
    for name, how in metrics.items():
        if callable(how):
            row[name] = how(row)
        elif isinstance(how, str):
            compiled, _ = compile_vector(how, None, f"metric {name!r}")
            value, bad = compiled(row)
            row[name] = math.nan if bad is not None and bool(bad) else float(value)
        else:
            raise ValueError(f"metric {name!r} must be a callable(params) or an expression string")


def observed(result: Result, observables: Sequence[str]) -> dict[str, float]:
    """Kernel Tuner's observable names from adaptune's NVML observer, and output observers' values.

    ``nvml_energy`` is Kernel Tuner's: the mean power over the timed runs times one run's time (J per kernel
    run). NVML's energy counter advances only every few tens of milliseconds, so a short kernel's counter
    delta is often 0; the mean power (counter over the window, else the instantaneous reading) is not."""
    out: dict[str, float] = {}
    for name in observables:
        if name == "nvml_energy":
            power = result.observers.get(NVML_OBSERVABLES["nvml_power"])
            if power is not None and result.ok:
                out[name] = power * result.time_ms / 1e3
            continue
        value = result.observers.get(NVML_OBSERVABLES.get(name, name))  # an output observer's under its own key
        if value is not None:
            out[name] = value
    return out


def result_row(result: Result, names: Sequence[str], metrics: Mapping[str, Metric] | None,
               observables: Sequence[str], overhead_ms: float) -> dict[str, Any]:
    """One entry of ``tune_kernel``'s result list, as Kernel Tuner builds it."""
    row: dict[str, Any] = {n: result.config[n] for n in names}
    if result.ok:
        row["time"] = float(result.time_ms)
        row["times"] = [float(s) for s in result.samples]
    else:
        row["__error__"] = failure_marker(result)
    row.update(observed(result, observables))
    row["compile_time"] = float(result.compile_ms)
    row["verification_time"] = float(result.verify_ms)
    row["benchmark_time"] = float(result.benchmark_ms)
    if result.ok:
        compute_metrics(row, metrics)
    else:
        row["adaptune_status"] = str(result.status)
        row["adaptune_error"] = result.error
    row["timestamp"] = str(datetime.fromtimestamp(result.timestamp, UTC))
    row["strategy_time"] = 0.0
    row["framework_time"] = overhead_ms
    return row


def best_row(rows: list[dict[str, Any]], objective: str, higher_is_better: bool) -> dict[str, Any] | None:
    valid = [r for r in rows if "__error__" not in r and isinstance(r.get(objective), int | float)
             and math.isfinite(r[objective])]
    if not valid:
        return None
    pick = max if higher_is_better else min
    return pick(valid, key=lambda r: r[objective])


def environment(info: DeviceInfo, iterations: int, compiler_options: Sequence[str] | None,
                extra: Mapping[str, Any]) -> dict[str, Any]:
    """Kernel Tuner's ``env``: device and platform, plus what adaptune adds (store, strategy, counts)."""
    env: dict[str, Any] = {"device_name": info.name, "iterations": iterations,
                           "compiler_options": list(compiler_options or []),
                           "platform_name": info.platform, "driver_version": info.driver_version,
                           "python_version": platform.python_version(), "tool": "adaptune"}
    env.update(extra)
    return env


def add_total_timings(rows: list[dict[str, Any]], env: dict[str, Any], wall_ms: float) -> None:
    """Kernel Tuner's ``total_*_time`` sums and ``overhead_time``."""
    totals = {k: sum(r[k] for r in rows) for k in
              ("framework_time", "strategy_time", "compile_time", "verification_time", "benchmark_time")}
    for k, v in totals.items():
        env[f"total_{k}"] = v
    env["overhead_time"] = max(wall_ms - sum(totals.values()), 0.0)  # compiling ahead overlaps the rest


# ---------------------------------------------------------------------------------------------- cache
def cache_path(cache: str | Path) -> Path:
    """Kernel Tuner appends ``.json`` to a cache name that lacks it."""
    text = str(Path(cache).resolve()) if isinstance(cache, Path) else str(cache)
    return Path(text if text.endswith(".json") else text + ".json")


def read_cache(path: Path, device_name: str | None, kernel_name: str, problem_size: Any,
               names: list[str]) -> RecordedSpace | None:
    """The cache's results, after Kernel Tuner's checks (same device, kernel, problem size, parameters)."""
    if not path.is_file():
        return None
    recorded = load_kt_cache(path)
    where = f"cache {path}"
    if device_name is not None and recorded.device_name.strip() != device_name.strip():
        raise ValueError(f"{where} holds results for device {recorded.device_name!r}, not {device_name!r}")
    if recorded.kernel_name != kernel_name:
        raise ValueError(f"{where} holds results for kernel {recorded.kernel_name!r}, not {kernel_name!r}")
    if recorded.names != names:
        raise ValueError(f"{where} has the parameters {recorded.names}, this run has {names} (same names in the "
                         "same order are needed to look configurations up)")
    if (not callable(problem_size) and recorded.problem_size not in (None, "callable")
            and _sizes(recorded.problem_size) != _sizes(problem_size)):
        raise ValueError(f"{where} is for problem size {recorded.problem_size}, this run has {problem_size}")
    return recorded


def _sizes(size: Any) -> list[Any]:
    return [int(v) if isinstance(v, int | float) else v for v in (size if isinstance(size, list | tuple) else [size])]


def write_cache(path: Path, previous: RecordedSpace | None, results: list[Result], rows: list[dict[str, Any]],
                *, device_name: str, kernel_name: str, problem_size: Any, tune_params: Mapping[str, Sequence[Any]],
                objective: str) -> None:
    """Previous entries plus this run's, metrics and observables included, as a closed Kernel Tuner cache."""
    names = list(tune_params)
    merged: dict[str, Result] = {}
    params = {k: list(v) for k, v in tune_params.items()}
    if previous is not None:  # every earlier entry is kept; the header lists the values of both runs
        merged.update((kt_key(r.config, names), r) for r in previous.results)
        for n in names:
            params[n] += [v for v in previous.params[n] if v not in params[n]]
    for result, row in zip(results, rows, strict=True):
        extra = {k: float(v) for k, v in row.items()
                 if k not in result.config and isinstance(v, int | float) and not isinstance(v, bool)
                 and k not in ("time", "compile_time", "verification_time", "benchmark_time")}
        merged[kt_key(result.config, names)] = Result(**{**result.__dict__, "observers": {**result.observers, **extra}})
    size = "callable" if callable(problem_size) else problem_size
    write_kt_cache(path, RecordedSpace(device_name=device_name, kernel_name=kernel_name, problem_size=size,
                                       params=params,
                                       results=list(merged.values()), objective=objective))
