"""Measurement: benchmark one configuration robustly in a worker process that may die.

``Measurer(spec, backend, settings, device).measure(config) -> Result``; ``time_callable`` for
in-process timing of Python code.

Names are resolved on first use (PEP 562): the worker process imports ``adaptune.measure.worker`` and
what it needs, not the parent's side (the Measurer, cloudpickle) -- a worker's start is a tuning call's
fixed cost.
"""

from __future__ import annotations

from adaptune._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "Geometry": "adaptune.measure.geometry", "SpecError": "adaptune.measure.geometry",
    "launch_geometry": "adaptune.measure.geometry",
    "Measurer": "adaptune.measure.measurer", "MeasureSetupError": "adaptune.measure.measurer",
    "NVMLObserver": "adaptune.measure.observers", "ObserverError": "adaptune.measure.observers",
    "CallableSpec": "adaptune.measure.spec", "GeneratedSources": "adaptune.measure.spec",
    "KernelSpec": "adaptune.measure.spec", "MeasureSettings": "adaptune.measure.spec",
    "median_ci": "adaptune.measure.timing", "time_callable": "adaptune.measure.timing",
    "poison_value": "adaptune.measure.verify",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr("adaptune.measure", _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
