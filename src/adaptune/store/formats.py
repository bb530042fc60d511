"""One entry point for recorded-space files: sniff Kernel Tuner cache vs T4 and read either."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from adaptune.store.db import Store, is_sqlite_file
from adaptune.store.files import read_text
from adaptune.store.kt_cache import kt_dict_to_recorded, parse_kt_cache, write_kt_cache
from adaptune.store.recorded import RecordedSpace
from adaptune.store.t4 import is_t4, t4_dict_to_recorded, write_t4


def load_recorded(path: str | Path) -> RecordedSpace:
    """Read a Kernel Tuner cache (.json/.json.gz/open form), a T4 results file, or an adaptune database
    holding one (device, problem, input), whichever ``path`` is."""
    source = str(path)
    if is_sqlite_file(path):
        with Store(path) as store:
            return RecordedSpace.from_store(store)
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return parse_kt_cache(text, source)  # maybe an unterminated cache; it raises if not
    if is_t4(data):
        return t4_dict_to_recorded(data, source)
    return kt_dict_to_recorded(data, source, {"format": "kernel_tuner", "source": source})


def write_recorded(path: str | Path, recorded: RecordedSpace, fmt: Literal["kt", "t4"] = "kt") -> Path:
    """Write ``recorded`` as a Kernel Tuner cache (``kt``) or a T4 results file (``t4``)."""
    if fmt == "kt":
        return write_kt_cache(path, recorded)
    if fmt == "t4":
        return write_t4(path, recorded)
    raise ValueError(f"unknown format {fmt!r}: use 'kt' or 't4'")
