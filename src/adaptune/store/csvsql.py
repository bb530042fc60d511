"""CSV text of a run built by the database: the parameter cells in SQL, so an export no longer decodes every
row's JSON in Python (SQLite), or the whole line in ``COPY ... TO STDOUT`` (PostgreSQL).

A parameter's cells can be spelt in SQL when every value the run holds of it is of one kind, which the run's
``run_param_counts`` rows say without reading the run: numbers (their JSON text, the shortest text that reads
back as the same value), booleans (``True``/``False``, as Python writes them) or strings (on SQLite only those
that need no CSV quoting; PostgreSQL's COPY quotes as the csv module does). Anything else (lists, nulls, a
parameter of mixed kinds) leaves the export to Python (``plan`` returns None).

Floats: SQLite 3.40's own real-to-text (``printf('%!.17g')``) does not always read back as the same double,
so on SQLite the float columns stay Python's ``repr``; PostgreSQL (12+) prints the shortest exact text.
Bytes may then differ from Python's csv (``100`` for ``100.0``, ``1e-5`` for ``1e-05``, LF line ends from
PostgreSQL) but every value reads back identical.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from typing import Literal

import orjson

CSV_COLUMNS = ("status", "time_ms", "compile_ms", "verify_ms", "benchmark_ms", "samples", "timestamp", "error")
"""The columns of an exported CSV after the parameters."""
Kind = Literal["number", "bool", "text"]
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_NEEDS_QUOTES = re.compile(r'[,"\r\n]')


def _kind(text: str, dialect: str) -> Kind | None:
    """The kind of one parameter value given as JSON text, or None when SQL cannot spell it as Python does."""
    if _NUMBER.fullmatch(text):
        return "number"
    if text in ("true", "false"):
        return "bool"
    if text.startswith('"'):
        value = orjson.loads(text)
        if dialect == "postgresql" or not _NEEDS_QUOTES.search(value):
            return "text"
    return None


def plan(names: list[str], values: Iterable[tuple[str, str, int]], rows: int, dialect: str) -> list[Kind] | None:
    """Each parameter's kind from the run's (name, value as JSON text, rows) triples; None where one has none or
    is missing from some of the run's ``rows`` (Python's export then says which)."""
    if dialect == "sqlite" and (sqlite3.sqlite_version_info < (3, 38) or any('"' in n or "\\" in n for n in names)):
        return None  # no ``->`` operator before SQLite 3.38; quotes in a name: the JSON path would need escapes
    kinds: dict[str, set[Kind | None]] = {}
    present: dict[str, int] = {}
    for name, text, n in values:
        kinds.setdefault(name, set()).add(_kind(text, dialect))
        present[name] = present.get(name, 0) + int(n)
    found = [kinds.get(n, set()) for n in names]
    if any(len(k) != 1 or None in k for k in found) or any(present.get(n) != rows for n in names):
        return None
    return [next(iter(k)) for k in found]  # type: ignore[misc]


def _path(name: str) -> str:
    return "'$.\"" + name.replace("'", "''") + "\"'"


def _sqlite_cells(names: list[str], kinds: list[Kind]) -> str:
    """One SQLite text expression: the parameter cells of a row joined by commas (NULL when one is missing)."""
    cells = []
    for name, kind in zip(names, kinds, strict=True):
        if kind == "bool":
            cells.append(f"CASE config ->> {_path(name)} WHEN 1 THEN 'True' WHEN 0 THEN 'False' END")
        else:
            cells.append(f"(config {'->' if kind == 'number' else '->>'} {_path(name)})")
    return " || ',' || ".join(cells)


def sqlite_array(names: list[str], kinds: list[Kind]) -> bool:
    """Whether ``sqlite_select`` reads the parameter cells by one ``json_extract`` of every path (two or more
    numbers: a JSON array, its brackets trimmed, ``null`` where a value is missing): one parse of the
    configuration instead of one a parameter (2.4 s against 6.5 s for 10^6 rows of 10)."""
    return len(names) > 1 and all(kind == "number" for kind in kinds)


SQLITE_LINE = "%s,%s,%s,%s,%s,%s,%s,%s,%s\r\n"
"""A CSV line of a row of ``sqlite_select``: every cell text but the floats (Python's ``repr``)."""


def sqlite_select(names: list[str], kinds: list[Kind]) -> str:
    """A page of a run's CSV rows, ids in (low, high] (bound: problem, device, input, low, high): (the parameter
    cells (NULL, or ``null`` in them with ``sqlite_array``, where one is missing), status, time_ms or '',
    compile_ms, verify_ms, benchmark_ms, samples cell, timestamp, error cell), each a cell of ``SQLITE_LINE``."""
    samples = "replace(replace(substr(samples, 2, length(samples) - 2), ',', ' '), 'null', 'nan')"
    cells = (f"trim(json_extract(config, {', '.join(_path(n) for n in names)}), '[]')" if sqlite_array(names, kinds)
             else _sqlite_cells(names, kinds))
    quoted = " OR ".join(f"instr(error, {c}) > 0" for c in ("','", "'\"'", "char(13)", "char(10)"))
    error = f"CASE WHEN {quoted} THEN '\"' || replace(error, '\"', '\"\"') || '\"' ELSE error END"  # as csv_cell
    return (f"SELECT {cells}, status, coalesce(time_ms, ''), compile_ms, verify_ms, benchmark_ms, {samples}, "
            f"timestamp, {error} FROM measurements WHERE problem_id = ? AND device_id = ? AND input_id = ? "
            f"AND id > ? AND id <= ? ORDER BY id")


SQLITE_PAGE_END = ("SELECT id FROM measurements WHERE problem_id = ? AND device_id = ? AND input_id = ? AND id > ? "
                   "ORDER BY id LIMIT 1 OFFSET ?")
"""The id of the n-th row of a run after an id (bound: problem, device, input, id, n - 1): where a page ends."""


def postgres_copy(names: list[str], kinds: list[Kind], run: tuple[int, int, int]) -> str:
    """The COPY statement of one run's CSV file: a header (the parameters, then ``CSV_COLUMNS``), a row each.
    The configuration is parsed once a row (``json_to_record``: each value's text), not once a parameter."""
    cells = []
    for name, kind in zip(names, kinds, strict=True):
        value = f"c.{_pg_name(name)}"
        cells.append((f"CASE {value} WHEN 'true' THEN 'True' WHEN 'false' THEN 'False' END" if kind == "bool"
                      else value) + f" AS {_pg_name(name)}")
    record = ", ".join(f"{_pg_name(n)} text" for n in names)
    samples = "replace(replace(btrim(m.samples::text, '[]'), ',', ' '), 'null', 'nan') AS samples"
    device, problem, inp = (int(x) for x in run)
    return (f"COPY (SELECT {', '.join(cells)}, m.status, m.time_ms, m.compile_ms, m.verify_ms, m.benchmark_ms, "
            f"{samples}, m.timestamp, NULLIF(m.error, '') AS error FROM measurements m, json_to_record(m.config) "
            f"AS c({record}) WHERE m.problem_id = {problem} AND m.device_id = {device} AND m.input_id = {inp} "
            "ORDER BY m.id) TO STDOUT WITH (FORMAT csv, HEADER)")


def _pg_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def csv_cell(text: str) -> str:
    """A text cell as the csv module writes it: quoted (quotes doubled) when it holds a comma, quote or newline."""
    return '"' + text.replace('"', '""') + '"' if _NEEDS_QUOTES.search(text) else text

