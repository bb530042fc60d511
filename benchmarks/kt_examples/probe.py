"""Run one Kernel Tuner example script and record what each ``tune_kernel`` call returned.

    python -m benchmarks.kt_examples.probe {kernel_tuner|adaptune} example.py record.json
    python -m benchmarks.kt_examples.probe referee example.py referee.json pairs.json ROUNDS

The script runs as ``__main__`` (``runpy``; a ``test_*.py`` file under pytest), unchanged; only the tool's
``tune_kernel`` is wrapped, so every call appends its kernel, result count, best configuration and wall time
to ``record.json`` (written after each call: a run stopped by the time limit keeps the calls that finished);
each call's kernel and space size (before restrictions) go to ``record.started.json`` as it starts.

``referee`` runs the same unchanged script with Kernel Tuner and re-times, per ``tune_kernel`` call, the two
best configurations that ``pairs.json`` names (Kernel Tuner's and adaptune's, from the two tools' runs) with
the call's own arguments (``referee.py``).

For Kernel Tuner on a CUDA machine without PyCUDA, ``KT_CUDA_LANG=CuPy`` makes its ``lang=None``/``"CUDA"``
calls use its CuPy backend (its CUDA backend is PyCUDA, which has no wheel), and CuPy's device UUID is padded
back to 16 bytes (CuPy cuts it at the first zero byte and Kernel Tuner's CuPy backend then fails).
"""

from __future__ import annotations

import inspect
import json
import math
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.peers import pad_cupy_uuid
from benchmarks.kt_examples.referee import read_pairs, replay_call


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return value if isinstance(value, int | float | str | bool) or value is None else str(value)


#: the env entries that say where a call's time went (both tools' totals; adaptune's phases)
TIMING_KEYS = ("total_framework_time", "total_strategy_time", "total_compile_time", "total_verification_time",
               "total_benchmark_time", "overhead_time", "phases", "worker_start", "worker_stats")


#: Kernel Tuner's objectives where higher is better (its ``util.objective_default_map``)
HIGHER_IS_BETTER = {"fitness", "GFLOP/s", "TFLOP/s", "GB/s", "TB/s", "GFLOPS/W", "TFLOPS/W", "GFLOP/J", "TFLOP/J"}


def objective_of(kwargs: dict[str, Any]) -> tuple[str, bool]:
    """The call's objective and whether higher is better (Kernel Tuner's defaults: time, lower)."""
    objective = kwargs.get("objective") or "time"
    higher = kwargs.get("objective_higher_is_better")
    return objective, bool(higher) if higher is not None else objective in HIGHER_IS_BETTER


def summary(kernel_name: str, tune_params: dict[str, Any], results: list[dict[str, Any]], wall_s: float,
            env: dict[str, Any] | None = None, objective: tuple[str, bool] = ("time", False)) -> dict:
    """Kernel, counts, best configuration (by the call's objective) and its time of one call (failures carry a
    string time), and the env's timings (ms)."""
    name, higher = objective
    ok = [r for r in results if "__error__" not in r and all(
        isinstance(r.get(k), int | float) and math.isfinite(float(r[k])) for k in {"time", name})]
    best = (max if higher else min)(ok, key=lambda r: float(r[name])) if ok else None
    return {"kernel": kernel_name, "results": len(results), "ok": len(ok), "wall_s": wall_s,
            "objective": name, "higher_is_better": higher,
            "best": {k: _jsonable(best[k]) for k in tune_params} if best else None,
            "best_time_ms": float(best["time"]) if best else None,
            "best_objective": float(best[name]) if best else None,
            "times_ms": {",".join(str(r[k]) for k in tune_params): float(r["time"]) for r in ok},
            "timings_ms": {k: _jsonable(v) if not isinstance(v, dict) else v for k, v in (env or {}).items()
                           if k in TIMING_KEYS}}


def wrap(tool: str, record: Path, referee: tuple[list[dict[str, Any] | None], int] | None = None) -> None:
    """Replace the tool's ``tune_kernel`` (module attribute and package attribute) by a recording one; with
    ``referee`` (the pairs to judge per call, rounds), by Kernel Tuner's replay of each call's pair."""
    calls: list[dict[str, Any]] = []
    started: list[dict[str, Any]] = []
    if tool == "adaptune":
        import adaptune as kernel_tuner
        import adaptune.integrations.kernel_tuner as module
    else:
        import kernel_tuner
        import kernel_tuner.interface as module
    original, original_run = module.tune_kernel, module.run_kernel
    signature = inspect.signature(original)
    cuda_lang = os.environ.get("KT_CUDA_LANG") if tool != "adaptune" else None
    if cuda_lang:
        pad_cupy_uuid()

    def lang(kwargs: dict[str, Any], n_positional: int, lang_position: int) -> dict[str, Any]:
        if cuda_lang and n_positional <= lang_position and str(kwargs.get("lang") or "CUDA").upper() == "CUDA":
            kwargs = {**kwargs, "lang": cuda_lang}
        return kwargs

    def tune_kernel(kernel_name: str, kernel_source: Any, problem_size: Any, arguments: Any, tune_params: Any,
                    *args: Any, **kwargs: Any) -> Any:
        started.append({"kernel": kernel_name, "configs": math.prod(len(v) for v in dict(tune_params).values())})
        record.with_suffix(".started.json").write_text(json.dumps(started))
        kwargs = lang(kwargs, len(args), 8)
        start = time.perf_counter()
        if referee is None:
            out = original(kernel_name, kernel_source, problem_size, arguments, tune_params, *args, **kwargs)
            calls.append(summary(kernel_name, dict(tune_params), out[0], time.perf_counter() - start, out[1],
                                 objective_of(kwargs)))
        else:
            pairs, rounds = referee
            call = dict(signature.bind(kernel_name, kernel_source, problem_size, arguments, tune_params, *args,
                                       **kwargs).arguments)
            pair = pairs[len(calls)] if len(calls) < len(pairs) else None
            try:
                entry, out = replay_call(original, call, pair, rounds, objective_of(kwargs))
            except Exception as exc:  # recorded for this call, then the script fails as it would
                calls.append({"kernel": kernel_name, "configs": pair, "replayed": False,
                              "why": f"Kernel Tuner raised {type(exc).__name__}: {str(exc)[:300]}"})
                record.write_text(json.dumps(calls))
                raise
            calls.append({**entry, "wall_s": time.perf_counter() - start})
        record.write_text(json.dumps(calls))
        return out

    def run_kernel(*args: Any, **kwargs: Any) -> Any:
        return original_run(*args, **lang(kwargs, len(args) - 5, 3))

    module.tune_kernel, module.run_kernel = tune_kernel, run_kernel
    kernel_tuner.tune_kernel, kernel_tuner.run_kernel = tune_kernel, run_kernel


def main() -> None:
    tool, script, record = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    record.write_text("[]")
    wrap(tool, record, (read_pairs(Path(sys.argv[4])), int(sys.argv[5])) if tool == "referee" else None)
    if script.name.startswith("test_"):
        import pytest

        raise SystemExit(pytest.main(["-q", "-p", "no:cacheprovider", str(script)]))
    sys.argv = [str(script)]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
