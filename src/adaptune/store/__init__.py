"""The results store and the interop formats.

``BaseStore`` is the interface every query goes through; ``Store`` implements it over SQLite or PostgreSQL
and keeps every measurement. ``RecordedSpace`` is one kernel x device x input worth of results, read from or
written to Kernel Tuner caches, T4 result files and the store; ``import_file``/``export_run`` stream them
in bounded memory. ``load_t1`` reads T1 problem descriptions without evaluating anything.

Names load on first use (``_LAZY``), so code that only needs the interface (``adaptune.store.base``)
does not import SQLAlchemy.
"""

from __future__ import annotations

from adaptune._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    **dict.fromkeys(("BaseStore", "DeviceRow", "GroupSummary", "HistogramBin", "InputRow", "Page", "ProblemInfo",
                     "ProblemRow", "RunKey", "RunSummary", "StoredResult", "Trajectory", "TrajectoryPoint"),
                    "adaptune.store.base"),
    "config_key": "adaptune.store.codec",
    "MEMORY": "adaptune.store.db", "Store": "adaptune.store.db", "open_store": "adaptune.store.db",
    "FormatError": "adaptune.store.errors", "StoreError": "adaptune.store.errors",
    "load_recorded": "adaptune.store.formats", "write_recorded": "adaptune.store.formats",
    "ImportReport": "adaptune.store.importer", "import_file": "adaptune.store.importer",
    "export_run": "adaptune.store.exporter",
    "load_kt_cache": "adaptune.store.kt_cache", "parse_kt_cache": "adaptune.store.kt_cache",
    "write_kt_cache": "adaptune.store.kt_cache",
    "RecordedSpace": "adaptune.store.recorded",
    "T1Argument": "adaptune.store.t1", "T1Spec": "adaptune.store.t1", "load_t1": "adaptune.store.t1",
    "t1_arrays": "adaptune.store.t1",
    "load_t4": "adaptune.store.t4", "write_t4": "adaptune.store.t4",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr("adaptune.store", _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
