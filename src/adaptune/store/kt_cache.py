"""Kernel Tuner cache files (.json, .json.gz, and the unterminated "open" form a crash leaves behind).

A cache is ``{device_name, kernel_name, problem_size, tune_params_keys, tune_params, objective,
cache: {"v1,v2,...": {param: value, ..., time, times, compile_time, ...}}}``; failures are the strings
``InvalidConfig``, ``CompilationFailedConfig``, ``RuntimeFailedConfig`` in place of a time. The file is
read as JSON only: nothing in it is ever evaluated or unpickled.
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import chain, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from adaptune.records import Result, Status
from adaptune.store.base import RecordColumns
from adaptune.store.codec import jsonable
from adaptune.store.errors import FormatError
from adaptune.store.files import read_text, write_text
from adaptune.store.recorded import RecordedSpace, kt_key

FAILURE_STATUS: dict[str, Status] = {
    "InvalidConfig": Status.CONSTRAINT,
    "CompilationFailedConfig": Status.COMPILE_ERROR,
    "RuntimeFailedConfig": Status.LAUNCH_ERROR,
    "ErrorConfig": Status.LAUNCH_ERROR,
}
STATUS_FAILURE: dict[Status, str] = {
    Status.CONSTRAINT: "InvalidConfig",
    Status.COMPILE_ERROR: "CompilationFailedConfig",
    Status.LAUNCH_ERROR: "RuntimeFailedConfig",
    Status.TIMEOUT: "RuntimeFailedConfig",
    Status.WRONG_RESULT: "RuntimeFailedConfig",
}
TIMING_FIELDS = {"compile_time": "compile_ms", "verification_time": "verify_ms", "benchmark_time": "benchmark_ms"}
# adaptune's own extras: statuses Kernel Tuner cannot express (timeout, wrong_result) and error text.
STATUS_FIELD, ERROR_FIELD = "adaptune_status", "adaptune_error"
_RESERVED = {"time", "times", "timestamp", STATUS_FIELD, ERROR_FIELD, *TIMING_FIELDS}
_CACHE_OPENING = re.compile(r'(?<!\\)"cache"\s*:\s*\{')
_PLAIN_NUMBERS = frozenset({int, float})
_ENTRY_START = re.compile(r',\s*"')


# ---------------------------------------------------------------------------------------------- reading
def load_kt_cache(path: str | Path) -> RecordedSpace:
    """Read a Kernel Tuner cache file; an unterminated (crashed) cache yields every complete entry."""
    return parse_kt_cache(read_text(path), source=str(path))


def parse_kt_cache(text: str, source: str = "<text>") -> RecordedSpace:
    """Parse the text of a Kernel Tuner cache (closed or open form); ``source`` names it in errors."""
    meta: dict[str, Any] = {"format": "kernel_tuner", "source": source}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        data = _parse_open_cache(text, source, exc)
        meta["recovered_open_cache"] = True
        meta["dropped_partial_entry"] = data.pop("__partial__")
    return kt_dict_to_recorded(data, source, meta)


def _parse_open_cache(text: str, source: str, first_error: json.JSONDecodeError) -> dict[str, Any]:
    """Recover the header and every complete ``"key": {...}`` entry of a cache that was never closed."""
    match = _CACHE_OPENING.search(text)
    if match is None:
        raise FormatError(f"{source}: not a Kernel Tuner cache (invalid JSON: {first_error.msg} at line "
                          f"{first_error.lineno} column {first_error.colno}, and no \"cache\" section)")
    head = text[: match.start()].rstrip().rstrip(",") + "}"
    try:
        header = json.loads(head)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{source}: not a Kernel Tuner cache (header is not JSON: {exc.msg})") from exc
    if not isinstance(header, dict):
        raise FormatError(f"{source}: not a Kernel Tuner cache (header is not a JSON object)")
    decoder = json.JSONDecoder()
    entries: dict[str, Any] = {}
    pos, n, partial = match.end(), len(text), False
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n or text[pos] == "}":
            break
        try:
            key, value, pos = _decode_entry(decoder, text, pos)
        except json.JSONDecodeError as exc:
            if _complete_entry_after(decoder, text, pos + 1):
                raise FormatError(f"{source}: corrupt Kernel Tuner cache: {exc.msg} at line {exc.lineno} "
                                  f"column {exc.colno}") from exc
            partial = True  # the entry being written when the process died: nothing complete follows
            break
        entries[key] = value
    header["cache"] = entries
    header["__partial__"] = partial
    return header


def _decode_entry(decoder: json.JSONDecoder, text: str, pos: int) -> tuple[str, Any, int]:
    """Decode one ``"key": value`` pair at ``pos``; JSONDecodeError if it is incomplete or malformed."""
    n = len(text)
    key, pos = decoder.raw_decode(text, pos)
    if not isinstance(key, str):
        raise json.JSONDecodeError("entry key is not a string", text, pos)
    while pos < n and text[pos] in " \t\r\n":
        pos += 1
    if pos >= n or text[pos] != ":":
        raise json.JSONDecodeError("expected ':' after the entry key", text, pos)
    pos += 1
    while pos < n and text[pos] in " \t\r\n":
        pos += 1
    value, pos = decoder.raw_decode(text, pos)
    return key, value, pos


def _complete_entry_after(decoder: json.JSONDecoder, text: str, start: int) -> bool:
    """Whether a whole entry follows a bad one: then the file is corrupt inside, not cut off by a crash."""
    for candidate in _ENTRY_START.finditer(text, start):
        try:
            _, value, _ = _decode_entry(decoder, text, candidate.end() - 1)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):  # an entry, not a field inside the cut-off entry
            return True
    return False


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), type(value).__name__)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatError(f"{where} must be a number, not {_kind(value)} ({value!r:.60})")
    return float(value)


def kt_dict_to_recorded(data: Any, source: str, meta: dict[str, Any] | None = None) -> RecordedSpace:
    """Validate a decoded Kernel Tuner cache and turn it into a RecordedSpace."""
    if not isinstance(data, dict) or "cache" not in data:
        raise FormatError(f"{source}: not a Kernel Tuner cache (needs an object with 'tune_params_keys' and 'cache')")
    cache = data["cache"]
    if not isinstance(cache, dict):
        raise FormatError(f"{source}: 'cache' must be an object of entries, not {_kind(cache)}")
    space, names = kt_header(data, source, meta)
    reader = EntryReader(names, space.params or None)
    dropped: set[str] = set()
    space.results = [Result(*reader.fields(key, entry, f"{source}: entry {key!r}", dropped))
                     for key, entry in cache.items()]
    if not space.params:
        space.params = {n: sorted({r.config[n] for r in space.results}, key=lambda v: (str(type(v)), v))
                        for n in names}
    if dropped:
        space.meta["dropped_fields"] = sorted(dropped)
    return space


def kt_header(data: Any, source: str, meta: dict[str, Any] | None = None) -> tuple[RecordedSpace, list[str]]:
    """The space a cache's header describes (no results yet), validated, and its parameter names. ``params``
    is empty when the header lists no ``tune_params``: the values are then the ones the entries hold."""
    meta = dict(meta or {})
    if not isinstance(data, dict) or "tune_params_keys" not in data:
        raise FormatError(f"{source}: not a Kernel Tuner cache (needs an object with 'tune_params_keys' and 'cache')")
    names = data["tune_params_keys"]
    if not isinstance(names, list) or not all(isinstance(k, str) for k in names):
        raise FormatError(f"{source}: 'tune_params_keys' must be a list of parameter names")
    tune_params = data.get("tune_params")
    if tune_params is not None:
        if not isinstance(tune_params, dict) or not all(isinstance(v, list) for v in tune_params.values()):
            raise FormatError(f"{source}: 'tune_params' must map each parameter to a list of values")
        if list(tune_params) != names:
            raise FormatError(f"{source}: 'tune_params' {list(tune_params)} disagrees with "
                              f"'tune_params_keys' {names}")
    for field_name in ("device_name", "kernel_name"):
        if field_name in data and not isinstance(data[field_name], str):
            raise FormatError(f"{source}: '{field_name}' must be a string, not {_kind(data[field_name])}")
    objective = data.get("objective", "time")
    if isinstance(objective, list) and objective and all(isinstance(o, str) for o in objective):
        meta["objectives"], objective = list(objective), objective[0]  # multi-objective run: first is primary
    if not isinstance(objective, str):
        raise FormatError(f"{source}: 'objective' must be a name or a list of names, not {_kind(objective)}")
    space = RecordedSpace(device_name=data.get("device_name", ""), kernel_name=data.get("kernel_name", ""),
                          problem_size=data.get("problem_size"),
                          params={n: list(tune_params[n]) for n in names} if tune_params else {},
                          results=[], objective=objective, meta=meta)
    return space, list(names)


def entry_to_result(key: str, entry: Any, names: list[str], allowed: dict[str, list] | None,
                    where: str, dropped: set[str]) -> Result:
    """One cache entry as a Result, validated (see :class:`EntryReader`)."""
    return Result(*EntryReader(names, allowed).fields(key, entry, where, dropped))


class EntryReader:
    """Validates cache entries and gives each one's fields in :class:`Result`'s order (a ``Record``): a large
    import runs this once per entry and writes the fields without building a Result. The entries of one cache
    share a layout (the same fields in the same order), so what each field is (parameter, reserved, extra) is
    worked out once per layout, not once per entry."""

    def __init__(self, names: list[str], allowed: dict[str, list] | None) -> None:
        self.names = list(names)
        self._names_set = frozenset(self.names)
        self._values = itemgetter(*self.names) if len(self.names) > 1 else (
            (lambda e: (e[self.names[0]],)) if self.names else (lambda e: ()))
        self.allowed = [allowed[n] for n in self.names] if allowed is not None else None
        if self.allowed is not None:
            with contextlib.suppress(TypeError):  # unhashable values in 'tune_params': the lists
                self.allowed = [frozenset(v) for v in self.allowed]  # same answers as the lists, in O(1)
        self._extras: dict[tuple[str, ...], tuple[str, ...]] = {}  # fields beyond the parameters, per layout

    def fields(self, key: str, entry: Any, where: str, dropped: set[str]) -> tuple[Any, ...]:
        names = self.names
        if type(entry) is not dict:
            raise FormatError(f"{where} must be an object, not {_kind(entry)}")
        try:
            values = self._values(entry)
        except KeyError:
            missing = [n for n in names if n not in entry]
            raise FormatError(f"{where} lacks tunable parameter(s) {missing} listed in 'tune_params_keys'") from None
        config = dict(zip(names, values, strict=True))
        if ",".join(map(str, values)) != key:
            raise FormatError(f"{where}: its parameters {config} give the key {kt_key(config, names)!r}, "
                              f"not {key!r}")
        if self.allowed is not None and not all(map(operator.contains, self.allowed, values)):
            bad = next(n for n, v, ok in zip(names, values, self.allowed, strict=True) if v not in ok)
            raise FormatError(f"{where}: {bad}={config[bad]!r} is not among the values in 'tune_params'")
        layout = tuple(entry)
        extras = self._extras.get(layout)
        if extras is None:
            extras = self._extras[layout] = tuple(k for k in layout if k not in config)
        observers: dict[str, float] = {}
        failure = None  # a failure string in a field other than 'time' (old caches)
        if str in map(type, values):  # a parameter's value may be a failure string too
            failure = next((v for v in values if type(v) is str and v in FAILURE_STATUS), None)
        for k in extras:
            v = entry[k]
            kind = type(v)
            if kind is float or kind is int:
                if k not in _RESERVED:
                    observers[k] = float(v)
            elif kind is str and v in FAILURE_STATUS:
                if failure is None and k != ERROR_FIELD:
                    failure = v
            elif k not in _RESERVED:
                dropped.add(k)  # lists/strings/objects of other tools: reported in meta, not silently lost
        status, error, time_ms = _status_of(entry, failure, where)
        samples = entry.get("times", [])
        if type(samples) is not list:
            raise FormatError(f"{where}: 'times' must be a list of numbers, not {_kind(samples)}")
        if not all(type(s) in _PLAIN_NUMBERS for s in samples):  # fast path first; details only on failure
            for s in samples:
                _number(s, f"{where}: 'times'")
        timings = [_number(entry[k], f"{where}: '{k}'") if k in entry else 0.0 for k in TIMING_FIELDS]
        return (config, status, time_ms, [float(s) for s in samples], *timings, observers, error,
                _timestamp(entry.get("timestamp"), where))


    def many(self, members: list[tuple[str, Any]], dropped: set[str]) -> list[tuple[Any, ...] | FormatError]:
        """:meth:`fields` of many entries (each a Record, or the FormatError that entry gives), a column at a
        time where they share a layout: the type and value checks of a column are one pass of C loops (``set``
        of the types, a subset test of the values) instead of Python work per entry and field. Entries the
        column pass cannot vouch for (a failure string outside 'time', a non-finite time, an unusual field) and
        every entry of a layout it cannot take go through :meth:`fields`, which gives the same Record or the
        error."""
        out: list[Any] = [None] * len(members)
        entries = list(map(itemgetter(1), members))
        layouts = list(map(tuple, entries)) if set(map(type, entries)) == {dict} else None
        by_layout: dict[tuple[str, ...], list[int]] = {}
        if layouts and len(set(layouts)) == 1:  # the usual: every entry of the block laid out alike
            by_layout[layouts[0]] = list(range(len(members)))
        else:
            for i, entry in enumerate(entries):
                by_layout.setdefault(tuple(entry) if type(entry) is dict else (), []).append(i)
        for layout, rows in by_layout.items():
            checked, good = self._columns(layout, rows, members)
            slow = rows if checked is None else []
            if checked is not None:
                for i, ok, record in zip(rows, good, checked.records(), strict=True):
                    if ok:
                        out[i] = record
                    else:
                        slow.append(i)
            for i in slow:
                key, entry = members[i]
                try:
                    out[i] = self.fields(key, entry, f"entry {key!r}", dropped)
                except FormatError as exc:
                    out[i] = exc
        return out

    def block(self, members: list[tuple[str, Any]], dropped: set[str]) -> RecordColumns | list[Any]:
        """The entries as one :class:`RecordColumns` where the column checks vouch for every one of them (one
        layout, nothing unusual: a bulk import then builds no record per entry), else :meth:`many`'s list."""
        entries = list(map(itemgetter(1), members))
        if entries and set(map(type, entries)) == {dict}:
            layouts = set(map(tuple, entries))
            if len(layouts) == 1:
                checked, good = self._columns(layouts.pop(), list(range(len(members))), members)
                if checked is not None and all(good):
                    return checked
        return self.many(members, dropped)

    def _columns(self, layout: tuple[str, ...], rows: list[int], members: list[tuple[str, Any]]
                 ) -> tuple[RecordColumns | None, list[bool]]:
        """The entries of one layout (``rows``) as columns, with which of them the column checks vouch for (the
        others may hold anything); None where the checks cannot take this layout or block at all."""
        names = self.names
        fields = set(layout)
        if (not layout or len(fields) != len(layout) or not fields.issuperset(names) or "time" not in fields
                or "timestamp" not in fields or STATUS_FIELD in fields or ERROR_FIELD in fields or len(names) < 1):
            return None, []
        entries = [members[i][1] for i in rows] if len(rows) < len(members) else list(map(itemgetter(1), members))
        columns = dict(zip(layout, map(list, zip(*map(dict.values, entries), strict=True)), strict=True))
        allowed = self.allowed
        for j, n in enumerate(names):
            column = columns[n]
            if not set(map(type, column)) <= _PLAIN_NUMBERS:  # strings may be failures; bools: fields()
                return None, []
            if allowed is not None and not (isinstance(allowed[j], frozenset) and allowed[j].issuperset(column)):
                return None, []
        values = list(zip(*(columns[n] for n in names), strict=True))
        spelt = ",".join(["%s"] * len(names)).__mod__  # the key Kernel Tuner writes: ",".join(map(str, values))
        if [members[i][0] for i in rows] != list(map(spelt, values)):
            return None, []
        observed = [k for k in layout if k not in _RESERVED and k not in self._names_set]
        for k in (*observed, *(k for k in TIMING_FIELDS if k in fields)):
            if not set(map(type, columns[k])) <= _PLAIN_NUMBERS:
                return None, []
        n = len(rows)
        times = columns["time"]
        status_of = FAILURE_STATUS.get  # a failure string in 'time': that failure, its string the error text
        statuses = [Status.OK if type(t) in _PLAIN_NUMBERS and math.isfinite(t) else
                    status_of(t) if type(t) is str else None for t in times]
        good = [s is not None for s in statuses]
        errors = ["" if s is Status.OK or s is None else t for s, t in zip(statuses, times, strict=True)]
        times = [float(t) if s is Status.OK else math.inf for s, t in zip(statuses, times, strict=True)]
        samples = _sample_lists(columns.get("times"), n, good)
        timings = [list(map(float, columns[k])) if k in fields else [0.0] * n for k in TIMING_FIELDS]
        observers = (list(map(dict, map(zip, repeat(observed), zip(*(map(float, columns[k]) for k in observed),
                                                                       strict=True))))
                     if observed else [{} for _ in rows])
        stamps = _timestamps(columns["timestamp"])
        if None in stamps:  # a timestamp that does not read
            good = [ok and s is not None for ok, s in zip(good, stamps, strict=True)]
        return RecordColumns(tuple(names), values, statuses, times, samples, *timings, observers, errors,
                             stamps), good


def _sample_lists(column: list[Any] | None, n: int, good: list[bool]) -> list[Any]:
    """The 'times' of a column of entries as lists of floats; an entry whose 'times' is not a list of numbers
    is marked not good (the per-entry reader then says what is wrong)."""
    if column is None:
        return [[] for _ in range(n)]
    if set(map(type, column)) == {list}:
        kinds = set(map(type, chain.from_iterable(column)))
        if kinds <= {float}:
            return column  # the decoded lists themselves: nothing to convert
        if kinds <= _PLAIN_NUMBERS:
            return [list(map(float, s)) for s in column]
    for r, s in enumerate(column):
        if not (type(s) is list and set(map(type, s)) <= _PLAIN_NUMBERS):
            good[r] = False
    return [list(map(float, s)) if ok else None for s, ok in zip(column, good, strict=True)]


def _timestamps(column: list[Any]) -> list[float | None]:
    """The seconds of a column of 'timestamp' values, each distinct text parsed once (a cache's entries often
    share a few); None where one does not read (the per-entry reader then says why)."""
    def read(value: Any) -> float | None:
        try:
            return _timestamp(value, "")
        except FormatError:
            return None

    if set(map(type, column)) == {str}:
        return list(map({text: read(text) for text in set(column)}.__getitem__, column))
    return list(map(read, column))


def _status_of(entry: dict[str, Any], other_failure: str | None, where: str) -> tuple[Status, str, float]:
    """(status, error text, time_ms) of one entry; failure strings may sit in 'time' or (old caches) elsewhere."""
    value = entry.get("time")
    failure = value if isinstance(value, str) else other_failure
    own = entry.get(STATUS_FIELD)
    error = entry.get(ERROR_FIELD, "")
    if not isinstance(error, str):
        raise FormatError(f"{where}: '{ERROR_FIELD}' must be a string")
    if own is not None:
        try:
            own = Status(own)
        except ValueError:
            raise FormatError(f"{where}: '{STATUS_FIELD}' {own!r} is not one of "
                              f"{[str(s) for s in Status]}") from None
    if failure is not None:
        status = own if own is not None and own != Status.OK else FAILURE_STATUS.get(failure, Status.LAUNCH_ERROR)
        return status, error or failure, math.inf
    if value is None:
        raise FormatError(f"{where} has neither a 'time' nor a failure string")
    time_ms = _number(value, f"{where}: 'time'")
    if not math.isfinite(time_ms):
        return Status.LAUNCH_ERROR, error or f"non-finite time {value}", math.inf
    return Status.OK, error, time_ms


def _timestamp(value: Any, where: str) -> float:
    if value is None:
        return time.time()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise FormatError(f"{where}: 'timestamp' {value!r} is not an ISO date") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    raise FormatError(f"{where}: 'timestamp' must be a string, not {_kind(value)}")


def iso_timestamp(seconds: float) -> str:
    """Kernel Tuner's timestamp text: ``2023-12-22 09:54:05.502007+00:00``."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(sep=" ")


# ---------------------------------------------------------------------------------------------- writing
def result_to_kt_entry(result: Result, names: list[str]) -> dict[str, Any]:
    """One cache entry as Kernel Tuner writes it: params, time (or failure string), timings, metrics."""
    entry: dict[str, Any] = {n: jsonable(result.config[n]) for n in names}
    status = Status(result.status)
    if status == Status.OK and math.isfinite(result.time_ms):
        entry["time"] = float(result.time_ms)
    else:
        entry["time"] = STATUS_FAILURE.get(status, "RuntimeFailedConfig")
    if result.samples:
        entry["times"] = [float(s) for s in result.samples]
    for k, attr in TIMING_FIELDS.items():
        entry[k] = float(getattr(result, attr))
    for k in ("strategy_time", "framework_time"):
        entry[k] = float(result.observers.get(k, 0.0))
    for k, v in result.observers.items():
        if k not in entry:
            entry[k] = float(v)
    entry["timestamp"] = iso_timestamp(result.timestamp)
    if status != Status.OK and STATUS_FAILURE.get(status) is not None and FAILURE_STATUS[entry["time"]] != status:
        entry[STATUS_FIELD] = str(status)  # timeout / wrong_result: Kernel Tuner has no word for them
    if result.error and result.error != entry["time"]:
        entry[ERROR_FIELD] = result.error
    return entry


def recorded_to_kt_text(recorded: RecordedSpace) -> str:
    """The text of a closed cache, laid out exactly as Kernel Tuner writes one (header, one entry a line)."""
    names = recorded.names
    header = {"device_name": recorded.device_name, "kernel_name": recorded.kernel_name,
              "problem_size": jsonable(recorded.problem_size), "tune_params_keys": names,
              "tune_params": jsonable(recorded.params), "objective": recorded.objective, "cache": {}}
    parts = [json.dumps(header, indent="")[:-3]]  # ends with '"cache": {' like Kernel Tuner's own header
    entries: dict[str, dict[str, Any]] = {}
    for r in recorded.results:  # a repeated configuration: the last result wins, as in the database
        missing = [n for n in names if n not in r.config]
        if missing:
            raise ValueError(f"result {r.config} lacks parameter(s) {missing} of the recorded space")
        entries[kt_key(r.config, names)] = result_to_kt_entry(r, names)
    lines = ["\n" + json.dumps({k: e})[1:-1] for k, e in entries.items()]
    return parts[0] + ",".join(lines) + "}\n}"


def write_kt_cache(path: str | Path, recorded: RecordedSpace) -> Path:
    """Write a closed Kernel Tuner cache (gzip when the name ends in .gz); Kernel Tuner 1.5 reads it back."""
    return write_text(path, recorded_to_kt_text(recorded))


def kt_cache_from_mapping(data: Mapping[str, Any], source: str = "<dict>") -> RecordedSpace:
    """A RecordedSpace from an already-decoded cache object (e.g. Kernel Tuner's own ``read_cache``)."""
    clean = dict(data)  # its __error__ objects by their names (Kernel Tuner 1.5 leaves 'time' out of a failure)
    clean["cache"] = {k: {f: str(v) if f == "__error__" else v for f, v in e.items()
                          if f != "__error__" or str(v) in FAILURE_STATUS} for k, e in dict(data["cache"]).items()}
    return kt_dict_to_recorded(clean, source, {"format": "kernel_tuner", "source": source})
