"""Measurement: benchmark one configuration robustly in a worker process that may die.

``Measurer(spec, backend, settings, device).measure(config) -> Result``; ``time_callable`` for
in-process timing of Python code.

Names are resolved on first use (PEP 562): the worker process imports ``adaptune.measure.worker`` and
what it needs, not the parent's side (the Measurer, cloudpickle) -- a worker's start is a tuning call's
fixed cost.
"""

from __future__ import annotations

from adaptune._lazy import lazy_getattr

#: public names by the module that defines them
_MODULES = {
    "geometry": ("Geometry", "SpecError", "launch_geometry"),
    "measurer": ("Measurer", "MeasureSetupError"),
    "observers": ("NVMLObserver", "ObserverError"),
    "spec": ("CallableSpec", "GeneratedSources", "KernelSpec", "MeasureSettings"),
    "timing": ("median_ci", "time_callable"),
    "verify": ("poison_value",),
}
_LAZY = {name: f"adaptune.measure.{module}" for module, names in _MODULES.items() for name in names}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr("adaptune.measure", _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
