"""The results store and the interop formats.

``BaseStore`` is the interface every query goes through; ``Store`` implements it and keeps every measurement (SQLite file or any SQLAlchemy URL); ``RecordedSpace`` is one
kernel x device x input worth of results, read from or written to Kernel Tuner caches, T4 result
files and the store. ``load_t1`` reads T1 problem descriptions without evaluating anything.
"""

from adaptune.store.base import (
    BaseStore,
    DeviceRow,
    GroupSummary,
    HistogramBin,
    InputRow,
    Page,
    ProblemInfo,
    ProblemRow,
    RunKey,
    RunSummary,
    StoredResult,
    Trajectory,
    TrajectoryPoint,
)
from adaptune.store.codec import config_key
from adaptune.store.db import Store, open_store
from adaptune.store.errors import FormatError, StoreError
from adaptune.store.formats import load_recorded, write_recorded
from adaptune.store.kt_cache import load_kt_cache, parse_kt_cache, write_kt_cache
from adaptune.store.recorded import RecordedSpace
from adaptune.store.t1 import T1Argument, T1Spec, load_t1, t1_arrays
from adaptune.store.t4 import load_t4, write_t4

__all__ = [
    "BaseStore",
    "DeviceRow",
    "GroupSummary",
    "HistogramBin",
    "InputRow",
    "Page",
    "ProblemInfo",
    "ProblemRow",
    "RunKey",
    "RunSummary",
    "StoredResult",
    "Trajectory",
    "TrajectoryPoint",
    "FormatError",
    "RecordedSpace",
    "Store",
    "StoreError",
    "T1Argument",
    "T1Spec",
    "config_key",
    "load_kt_cache",
    "load_recorded",
    "load_t1",
    "load_t4",
    "open_store",
    "parse_kt_cache",
    "t1_arrays",
    "write_kt_cache",
    "write_recorded",
    "write_t4",
]
