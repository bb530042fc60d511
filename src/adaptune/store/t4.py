"""T4 result files: the auto-tuning community's results format (schema 1.0.0), as Kernel Tuner exports it.

``{"schema_version": "1.0.0", "metadata": {"timeunit": "milliseconds", ...}, "results": [{"timestamp",
"configuration", "objectives", "times": {"compilation", "benchmark", "framework", "search_algorithm",
"validation", "runtimes"}, "invalidity", "correctness", "measurements": [{"name", "value", "unit"}]}]}``.
The time keys follow Kernel Tuner's writer (the de-facto producer) and the schema's ``compilation_time`` is
accepted on reading. adaptune adds the space (device, kernel, problem size, parameter values) to
``metadata`` so a T4 file alone is enough to rebuild a recorded space.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from adaptune.records import Result, Status
from adaptune.store.codec import jsonable
from adaptune.store.errors import FormatError
from adaptune.store.files import read_text, write_text
from adaptune.store.kt_cache import STATUS_FAILURE, _number, _timestamp, iso_timestamp
from adaptune.store.recorded import RecordedSpace

SCHEMA_VERSION = "1.0.0"
INVALIDITY: dict[Status, str] = {
    Status.OK: "correct",
    Status.COMPILE_ERROR: "compile",
    Status.LAUNCH_ERROR: "runtime",
    Status.TIMEOUT: "timeout",
    Status.WRONG_RESULT: "correctness",
    Status.CONSTRAINT: "constraints",
}
STATUS_OF_INVALIDITY = {v: k for k, v in INVALIDITY.items()}
TO_MS = {"seconds": 1e3, "s": 1e3, "milliseconds": 1.0, "ms": 1.0, "microseconds": 1e-3, "us": 1e-3,
         "nanoseconds": 1e-6, "ns": 1e-6,
         "miliseconds": 1.0}  # sic: older Kernel Tuner versions wrote this spelling
# units of the metrics adaptune's observers and Kernel Tuner's observers report
UNITS = {"time": "ms", "energy": "J", "energy_j": "J", "ps_energy": "J", "power": "W", "power_w": "W",
         "nvml_power": "W", "ps_power": "W", "nvml_energy": "J", "core_freq": "MHz", "sm_clock_mhz": "MHz",
         "mem_freq": "MHz", "temperature": "C", "temperature_c": "C", "GFLOP/s": "GFLOP/s", "GFLOPS/W": "GFLOPS/W",
         "power_instant_w": "W", "power_peak_w": "W", "power_mean_sampled_w": "W", "energy_sampled_j": "J",
         "observed_s": "s"}
_TIME_KEYS = {"framework": "framework_time", "search_algorithm": "strategy_time"}


# ---------------------------------------------------------------------------------------------- writing
def result_to_t4(result: Result, names: list[str], objective: str) -> dict[str, Any]:
    status = Status(result.status)
    ok = status == Status.OK and math.isfinite(result.time_ms)
    times = {"compilation": float(result.compile_ms), "benchmark": float(result.benchmark_ms),
             "framework": float(result.observers.get("framework_time", 0.0)),
             "search_algorithm": float(result.observers.get("strategy_time", 0.0)),
             "validation": float(result.verify_ms), "runtimes": [float(s) for s in result.samples]}
    measurements = [{"name": "time", "value": float(result.time_ms) if ok else STATUS_FAILURE.get(status, "ErrorConfig"),
                     "unit": "ms"}]
    for name, value in result.observers.items():
        if name not in _TIME_KEYS.values():
            v = float(value)
            measurements.append({"name": name, "value": v if math.isfinite(v) else str(v), "unit": UNITS.get(name, "")})
    if result.error:
        measurements.append({"name": "error", "value": result.error, "unit": ""})
    return {"timestamp": iso_timestamp(result.timestamp),
            "configuration": {n: jsonable(result.config[n]) for n in names},
            "objectives": [objective], "times": times, "invalidity": INVALIDITY[status],
            "correctness": 0 if status == Status.WRONG_RESULT else 1, "measurements": measurements}


def recorded_to_t4(recorded: RecordedSpace) -> dict[str, Any]:
    names = recorded.names
    metadata = {"timeunit": "milliseconds", "generator": "adaptune", "device_name": recorded.device_name,
                "kernel_name": recorded.kernel_name, "problem_size": jsonable(recorded.problem_size),
                "objective": recorded.objective, "tune_params": jsonable(recorded.params)}
    return {"schema_version": SCHEMA_VERSION, "metadata": metadata,
            "results": [result_to_t4(r, names, recorded.objective) for r in recorded.results]}


def write_t4(path: str | Path, recorded: RecordedSpace) -> Path:
    """Write a T4 results file (valid against the T4 1.0.0 results schema)."""
    return write_text(path, json.dumps(recorded_to_t4(recorded), allow_nan=False))


# ---------------------------------------------------------------------------------------------- reading
def load_t4(path: str | Path) -> RecordedSpace:
    """Read a T4 results file (ours or Kernel Tuner's) into a RecordedSpace."""
    source = str(path)
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise FormatError(f"{source}: not a T4 results file (invalid JSON: {exc.msg} at line {exc.lineno})") from exc
    return t4_dict_to_recorded(data, source)


def is_t4(data: Any) -> bool:
    return isinstance(data, dict) and "results" in data and "schema_version" in data and "cache" not in data


def t4_dict_to_recorded(data: Any, source: str) -> RecordedSpace:
    if not is_t4(data) or not isinstance(data["results"], list):
        raise FormatError(f"{source}: not a T4 results file (needs 'schema_version' and a 'results' list)")
    space, scale = t4_header(data, source)
    dropped: set[str] = set()
    results = [t4_result(item, scale, f"{source}: results[{i}]", dropped) for i, item in enumerate(data["results"])]
    if not space.params:
        names = list(results[0].config) if results else []
        space.params = {n: sorted({r.config.get(n) for r in results}, key=lambda v: (str(type(v)), v)) for n in names}
    names = space.names
    for i, r in enumerate(results):
        if list(r.config) != names and set(r.config) != set(names):
            raise FormatError(f"{source}: results[{i}] configuration has parameters {list(r.config)}, "
                              f"expected {names}")
        r.config = {n: r.config[n] for n in names}
    if dropped:
        space.meta["dropped_fields"] = sorted(dropped)
    if not space.objective:  # not in the metadata: the one objective every result names, else time
        objectives = {o for item in data["results"] if isinstance(item, dict) for o in item.get("objectives") or []}
        space.objective = objectives.pop() if len(objectives) == 1 else "time"
    space.results = results
    return space


def t4_header(data: dict[str, Any], source: str) -> tuple[RecordedSpace, float]:
    """The space a T4 file's metadata describes (no results; ``params`` empty when it lists none, objective
    empty when it names none) and the factor from its time unit to milliseconds."""
    version = data.get("schema_version")
    if not isinstance(version, str) or version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise FormatError(f"{source}: T4 schema version {version!r} is not supported (reads {SCHEMA_VERSION})")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise FormatError(f"{source}: 'metadata' must be an object")
    unit = metadata.get("timeunit", "seconds")  # the methodology tools assume seconds when it is absent
    if unit not in TO_MS:
        raise FormatError(f"{source}: unknown 'timeunit' {unit!r} (one of {sorted(TO_MS)})")
    params = metadata.get("tune_params")
    if params is not None and (not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values())):
        raise FormatError(f"{source}: metadata 'tune_params' must map each parameter to a list of values")
    meta: dict[str, Any] = {"format": "t4", "source": source}
    space = RecordedSpace(device_name=str(metadata.get("device_name", "")),
                          kernel_name=str(metadata.get("kernel_name", "")),
                          problem_size=metadata.get("problem_size"),
                          params={n: list(v) for n, v in (params or {}).items()}, results=[],
                          objective=str(metadata.get("objective") or ""), meta=meta)
    return space, TO_MS[unit]


def t4_result(item: Any, scale: float, where: str, dropped: set[str]) -> Result:
    """One item of a T4 ``results`` list as a Result (times in milliseconds)."""
    if not isinstance(item, dict):
        raise FormatError(f"{where} must be an object")
    config, times, invalidity = item.get("configuration"), item.get("times"), item.get("invalidity")
    if not isinstance(config, dict):
        raise FormatError(f"{where}: 'configuration' must be an object")
    if not isinstance(times, dict):
        raise FormatError(f"{where}: 'times' must be an object")
    if invalidity not in STATUS_OF_INVALIDITY:
        raise FormatError(f"{where}: 'invalidity' {invalidity!r} is not one of {sorted(STATUS_OF_INVALIDITY)}")
    status = STATUS_OF_INVALIDITY[invalidity]

    def t(key: str) -> float:
        return _number(times[key], f"{where}: times.{key}") * scale if key in times else 0.0

    runtimes = times.get("runtimes", [])
    if not isinstance(runtimes, list):
        raise FormatError(f"{where}: times.runtimes must be a list of numbers")
    samples = [_number(s, f"{where}: times.runtimes") * scale for s in runtimes]
    compile_ms = t("compilation") if "compilation" in times else t("compilation_time")
    # framework/search times are always written (consumers expect the keys); a zero means "not recorded"
    observers = {obs: t(key) for key, obs in _TIME_KEYS.items() if key in times and t(key) != 0.0}

    measurements = item.get("measurements", [])
    if not isinstance(measurements, list):
        raise FormatError(f"{where}: 'measurements' must be a list")
    time_ms, error = None, ""
    for m in measurements:
        if not isinstance(m, dict) or not isinstance(m.get("name"), str) or "value" not in m:
            raise FormatError(f"{where}: each measurement needs a 'name' and a 'value'")
        name, value, unit = m["name"], m["value"], m.get("unit") or ""
        if name == "error" and isinstance(value, str):
            error = value
        elif name == "time":
            if _is_number(value):
                time_ms = float(value) * (TO_MS.get(unit, scale) if unit else scale)
        elif _is_number(value) or value in ("nan", "inf", "-inf"):
            observers[name] = float(value)
        elif not (isinstance(value, str) and value in STATUS_FAILURE.values()):
            dropped.add(name)
    if status == Status.OK:
        if time_ms is None:
            if not samples:
                raise FormatError(f"{where}: a correct result needs a 'time' measurement or runtimes")
            time_ms = statistics.median(samples)
    else:
        time_ms = math.inf
        error = error or str(invalidity)
    return Result(config=dict(config), status=status, time_ms=time_ms, samples=samples, compile_ms=compile_ms,
                  verify_ms=t("validation"), benchmark_ms=t("benchmark"), observers=observers, error=error,
                  timestamp=_timestamp(item.get("timestamp"), where))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
