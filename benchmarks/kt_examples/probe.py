"""Run one Kernel Tuner example script and record what each ``tune_kernel`` call returned.

    python -m benchmarks.kt_examples.probe {kernel_tuner|adaptune} example.py record.json

The script runs as ``__main__`` (``runpy``), unchanged; only the tool's ``tune_kernel`` is wrapped, so
every call appends its kernel, result count, best configuration and wall time to ``record.json`` (written
after each call: a run stopped by the time limit keeps the calls that finished).
"""

from __future__ import annotations

import json
import math
import runpy
import sys
import time
from pathlib import Path
from typing import Any


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return value if isinstance(value, int | float | str | bool) or value is None else str(value)


def summary(kernel_name: str, tune_params: dict[str, Any], results: list[dict[str, Any]], wall_s: float) -> dict:
    """Kernel, counts, best configuration and time of one call (failures carry a string time)."""
    ok = [r for r in results if "__error__" not in r and isinstance(r.get("time"), int | float)
          and math.isfinite(float(r["time"]))]
    best = min(ok, key=lambda r: float(r["time"])) if ok else None
    return {"kernel": kernel_name, "results": len(results), "ok": len(ok), "wall_s": wall_s,
            "best": {k: _jsonable(best[k]) for k in tune_params} if best else None,
            "best_time_ms": float(best["time"]) if best else None,
            "times_ms": {",".join(str(r[k]) for k in tune_params): float(r["time"]) for r in ok}}


def wrap(tool: str, record: Path) -> None:
    """Replace the tool's ``tune_kernel`` (module attribute and package attribute) by a recording one."""
    calls: list[dict[str, Any]] = []
    if tool == "kernel_tuner":
        import kernel_tuner
        import kernel_tuner.interface as module
    else:
        import adaptune as kernel_tuner
        import adaptune.integrations.kernel_tuner as module
    original = module.tune_kernel

    def tune_kernel(kernel_name: str, kernel_source: Any, problem_size: Any, arguments: Any, tune_params: Any,
                    *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        out = original(kernel_name, kernel_source, problem_size, arguments, tune_params, *args, **kwargs)
        calls.append(summary(kernel_name, dict(tune_params), out[0], time.perf_counter() - start))
        record.write_text(json.dumps(calls))
        return out

    module.tune_kernel = tune_kernel
    kernel_tuner.tune_kernel = tune_kernel


def main() -> None:
    tool, script, record = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    record.write_text("[]")
    wrap(tool, record)
    sys.argv = [str(script)]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
