"""Exporting one run of a store as a Kernel Tuner cache, a T4 file or CSV, streamed in bounded memory.

Rows come from ``BaseStore.iter_results`` a chunk at a time and go straight to the file (gzip when the name
ends in .gz); the file is written under a temporary name and moved into place at the end, so a failed or
killed export never leaves a half-written file where the old one was.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import IO, Any, Literal

import orjson

from adaptune.records import Result
from adaptune.store.base import BaseStore, Record, RunKey
from adaptune.store.codec import jsonable
from adaptune.store.csvsql import CSV_COLUMNS, csv_cell
from adaptune.store.db import Store
from adaptune.store.kt_cache import result_to_kt_entry
from adaptune.store.recorded import kt_key
from adaptune.store.t4 import SCHEMA_VERSION, result_to_t4

ExportFormat = Literal["kt", "t4", "csv"]


@contextmanager
def _atomic_text(path: Path) -> Iterator[IO[str]]:
    """A text file (gzip when named .gz) written under a temporary name, moved over ``path`` when complete."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as raw:
            packed = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.suffix == ".gz" else None
            text = io.TextIOWrapper(packed or raw, encoding="utf-8", newline="")
            yield text
            text.flush()
            text.detach()  # leave ``raw`` open for the trailer and fsync
            if packed is not None:
                packed.close()  # writes the gzip trailer; ``raw`` stays open (it was handed in)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _results(store: BaseStore, run: RunKey) -> Iterator[Result]:
    return (s.result for s in store.iter_results(run.problem_id, run.device_id, run.input_id))


def _params(store: BaseStore, run: RunKey, described: Any) -> dict[str, list]:
    """The parameters and their values: from the problem's space description, else one pass over the run."""
    if isinstance(described, dict) and described:
        return {str(k): list(v) for k, v in described.items()}
    seen: dict[str, dict[Any, None]] = {}
    for r in _results(store, run):
        for k, v in r.config.items():
            seen.setdefault(k, {})[v] = None
    return {k: sorted(v, key=lambda x: (str(type(x)), x)) for k, v in seen.items()}


def _config(result: Result, names: list[str]) -> dict[str, Any]:
    missing = [n for n in names if n not in result.config]
    if missing:
        raise ValueError(f"result {result.config} lacks parameter(s) {missing} of the stored space")
    return {n: result.config[n] for n in names}


def export_run(store: BaseStore, run: RunKey, path: str | Path, fmt: ExportFormat = "kt") -> int:
    """Write one run of ``store`` to ``path`` as a Kernel Tuner cache (``kt``), T4 or CSV; returns the rows.

    Memory stays one chunk of rows whatever the size of the run."""
    path, run = Path(path), RunKey(*run)
    problem = store.problem_info(run.problem_id)
    space = problem.space
    params = _params(store, run, space.get("params"))
    features = next((i.features for i in store.inputs(run.problem_id) if i.id == run.input_id), {})
    head = {"device_name": store.device_info(run.device_id).name,
            "kernel_name": space.get("kernel_name") or problem.name,
            "problem_size": jsonable(features.get("problem_size", space.get("problem_size"))),
            "objective": space.get("objective", "time")}
    writers = {"kt": _write_kt, "t4": _write_t4}
    if fmt not in (*writers, "csv"):
        raise ValueError(f"unknown format {fmt!r}: use one of {sorted((*writers, 'csv'))}")
    with _atomic_text(path) as out:
        if fmt == "csv":  # from the stored fields: the format of bulk exports; by the database where it can
            written = store.write_csv(run, list(params), out) if isinstance(store, Store) else None
            return written if written is not None else _write_csv(out, store.iter_records(run), params)
        return writers[fmt](out, _results(store, run), head, params)


def _write_kt(out: IO[str], results: Iterator[Result], head: dict[str, Any], params: dict[str, list]) -> int:
    """Laid out as Kernel Tuner writes a cache: its header, then one entry a line."""
    names = list(params)
    header = {"device_name": head["device_name"], "kernel_name": head["kernel_name"],
              "problem_size": head["problem_size"], "tune_params_keys": names, "tune_params": jsonable(params),
              "objective": head["objective"], "cache": {}}
    out.write(json.dumps(header, indent="")[:-3])  # ends with '"cache": {'
    n = 0
    for r in results:
        _config(r, names)
        entry = result_to_kt_entry(r, names)
        out.write(("\n" if n == 0 else ",\n") + json.dumps(kt_key(r.config, names)) + ": "
                  + orjson.dumps(entry).decode())
        n += 1
    out.write("}\n}")
    return n


def _write_t4(out: IO[str], results: Iterator[Result], head: dict[str, Any], params: dict[str, list]) -> int:
    """A T4 results file with one result a line (which the streaming reader takes at full speed)."""
    names = list(params)
    metadata = {"timeunit": "milliseconds", "generator": "adaptune", **head, "tune_params": jsonable(params)}
    out.write(f'{{"schema_version": "{SCHEMA_VERSION}", "metadata": {json.dumps(metadata)}, "results": [')
    n = 0
    for r in results:
        _config(r, names)
        out.write(("\n" if n == 0 else ",\n") + orjson.dumps(result_to_t4(r, names, head["objective"])).decode())
        n += 1
    out.write("\n]}\n")
    return n


def _write_csv(out: IO[str], records: Iterator[Record], params: dict[str, list]) -> int:
    """One row a configuration: its parameters, then ``CSV_COLUMNS`` (what ``adaptune import`` reads back).

    Lines are built here from the stored fields (``Record``), as the csv module would write them (minimal
    quoting, CRLF; floats as ``repr``), at half its cost: only text cells are checked for quoting."""
    names = list(params)
    writer = csv.writer(out)
    writer.writerow([*names, *CSV_COLUMNS])
    values = itemgetter(*names) if len(names) > 1 else (lambda c: (c[names[0]],))
    n = 0
    for block in _blocks(records, 2_000):
        lines = []
        for config, status, t, samples, compile_ms, verify_ms, benchmark_ms, _, error, timestamp in block:
            try:
                cells = values(config)
            except KeyError:
                _config(Result(config=config), names)  # raises, naming what is missing
            if str in map(type, cells):
                cells = [csv_cell(c) if type(c) is str else c for c in cells]
            lines.append(f"{','.join(map(str, cells))},{csv_cell(status)},{'' if t == math.inf else t},{compile_ms},"
                         f"{verify_ms},{benchmark_ms},{' '.join(map(repr, samples))},{timestamp},"
                         f"{csv_cell(error) if error else ''}\r\n")
        out.write("".join(lines))
        n += len(lines)
    return n


def _blocks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while block := list(islice(items, size)):
        yield block
