"""Measurement: benchmark one configuration robustly in a worker process that may die.

``Measurer(spec, backend, settings, device).measure(config) -> Result``; ``time_callable`` for
in-process timing of Python code.
"""

from adaptune.measure.geometry import Geometry, SpecError, launch_geometry
from adaptune.measure.measurer import Measurer, MeasureSetupError
from adaptune.measure.observers import NVMLObserver, ObserverError
from adaptune.measure.spec import CallableSpec, KernelSpec, MeasureSettings
from adaptune.measure.timing import median_ci, time_callable
from adaptune.measure.verify import poison_value

__all__ = [
    "CallableSpec",
    "Geometry",
    "KernelSpec",
    "MeasureSettings",
    "MeasureSetupError",
    "Measurer",
    "NVMLObserver",
    "ObserverError",
    "SpecError",
    "launch_geometry",
    "median_ci",
    "poison_value",
    "time_callable",
]
