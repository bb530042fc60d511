"""T1 input files: the auto-tuning community's problem description (kernel, parameters, arguments).

T1 files are shared between groups, so everything in them is untrusted: "Values" strings go only through
``adaptune.space.parse_values``, "Conditions" only through ``parse_constraint``, and "Size" expressions
are rewritten (``ProblemSize[i]``, ``max(param)``, ``min(param)`` replaced by numbers) and accepted only if
what is left is plain arithmetic. Nothing is ever passed to ``eval``. (Kernel Tuner's own reader evals.)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.space import ConstraintError, Space, parse_constraint, parse_values
from adaptune.store.errors import FormatError

PARAM_TYPES = {"int": int, "uint": int, "float": float, "bool": bool, "string": str}
# T1 argument types -> (NumPy scalar type, components per element)
DTYPES: dict[str, tuple[type, int]] = {
    "bool": (np.bool_, 1), "int8": (np.int8, 1), "uint8": (np.uint8, 1), "int16": (np.int16, 1),
    "uint16": (np.uint16, 1), "int32": (np.int32, 1), "uint32": (np.uint32, 1), "int64": (np.int64, 1),
    "uint64": (np.uint64, 1), "int": (np.int32, 1), "uint": (np.uint32, 1), "half": (np.float16, 1),
    "float": (np.float32, 1), "double": (np.float64, 1),
    **{f"{base}{n}": (t, n) for base, t in (("half", np.float16), ("float", np.float32), ("double", np.float64))
       for n in (2, 4, 8, 16)},
}
_SIZE_PROBLEM = re.compile(r"ProblemSize\s*\[\s*(\d+)\s*\]")
_SIZE_MINMAX = re.compile(r"\b(max|min)\s*\(\s*([A-Za-z_]\w*)\s*\)")
_SIZE_ARITHMETIC = re.compile(r"[0-9+\-*/%(). \t]*")  # all that may remain after substitution


@dataclass(frozen=True)
class T1Argument:
    """One kernel argument of a T1 file, with its "Size" already resolved to a number of elements."""

    name: str
    type: str
    memory_type: str  # Vector | Scalar | Local | Symbol
    access: str = "ReadWrite"
    fill_type: str = "Constant"
    size: int = 1
    fill_value: float = 0.0
    output: bool = False
    constant_memory: bool = False  # "MemType": "Constant" (CUDA __constant__ / cmem_args)
    random_seed: int | None = None
    data_source: Path | None = None


@dataclass
class T1Spec:
    """Everything a T1 file says about a tuning problem (no code run to read it)."""

    path: Path
    benchmark_name: str
    params: dict[str, list]
    param_types: dict[str, str]
    defaults: dict[str, Any]
    constraints: list[str]
    kernel_file: Path
    kernel_name: str
    language: str
    compiler_options: list[str]
    global_size_type: str | None
    local_size: dict[str, str]
    global_size: dict[str, str]
    grid_div: tuple[list[str] | None, list[str] | None, list[str] | None]
    problem_size: list[int]
    arguments: list[T1Argument]
    shared_memory: int = 0
    device: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)
    budget: list[dict[str, Any]] = field(default_factory=list)
    simulation_input: Path | None = None

    def space(self) -> Space:
        """The search space: parameters, defaults and the "Conditions" as constraints."""
        return Space(self.params, self.constraints, defaults=self.defaults or None)

    @property
    def output_indices(self) -> list[int]:
        return [i for i, a in enumerate(self.arguments) if a.output]


class _Reader:
    """Field access on the decoded T1 object with errors that name the file and the field."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, message: str) -> FormatError:
        return FormatError(f"{self.path}: {where}: {message}")

    def get(self, obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str,
            default: Any = ...) -> Any:
        if key not in obj:
            if default is ...:
                raise self.fail(where, f"missing '{key}'")
            return default
        value = obj[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            names = "/".join(t.__name__ for t in _as_tuple(kind))
            raise self.fail(where, f"'{key}' must be {names}, not {type(value).__name__}")
        return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def load_t1(path: str | Path) -> T1Spec:
    """Read a T1 input file; any code-like text in it is rejected with an error naming the field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: not a T1 file (invalid JSON: {exc})") from exc
    r = _Reader(path)
    if not isinstance(data, dict):
        raise FormatError(f"{path}: not a T1 file (top level must be an object)")
    space = r.get(data, "ConfigurationSpace", dict, "T1 file")
    kernel = r.get(data, "KernelSpecification", dict, "T1 file")
    general = r.get(data, "General", dict, "T1 file", {})

    params, types, defaults = _read_params(r, r.get(space, "TuningParameters", list, "ConfigurationSpace"))
    constraints = _read_conditions(r, r.get(space, "Conditions", list, "ConfigurationSpace", []), params)

    kernel_file = Path(r.get(kernel, "KernelFile", str, "KernelSpecification"))
    if not kernel_file.is_absolute():
        kernel_file = (path.parent / kernel_file).resolve()
    problem_size = r.get(kernel, "ProblemSize", (list, int), "KernelSpecification", [])
    problem_size = [problem_size] if isinstance(problem_size, int) else problem_size
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in problem_size):
        raise r.fail("KernelSpecification", "'ProblemSize' must be a list of integers")
    grid_div = tuple(_read_grid_div(r, kernel, axis) for axis in "XYZ")
    sim = r.get(kernel, "SimulationInput", str, "KernelSpecification", None)
    arguments = [_read_argument(r, a, i, params, problem_size)
                 for i, a in enumerate(r.get(kernel, "Arguments", list, "KernelSpecification", []))]
    return T1Spec(
        path=path, benchmark_name=str(general.get("BenchmarkName") or kernel.get("BenchmarkName") or ""),
        params=params, param_types=types, defaults=defaults, constraints=constraints,
        kernel_file=kernel_file, kernel_name=r.get(kernel, "KernelName", str, "KernelSpecification"),
        language=r.get(kernel, "Language", str, "KernelSpecification"),
        compiler_options=_strings(r, kernel, "CompilerOptions", "KernelSpecification"),
        global_size_type=r.get(kernel, "GlobalSizeType", str, "KernelSpecification", None),
        local_size=_axes(r, kernel, "LocalSize"), global_size=_axes(r, kernel, "GlobalSize"),
        grid_div=grid_div,  # type: ignore[arg-type]
        problem_size=problem_size, arguments=arguments,
        shared_memory=r.get(kernel, "SharedMemory", int, "KernelSpecification", 0) or 0,
        device=r.get(kernel, "Device", dict, "KernelSpecification", {}),
        search=r.get(data, "Search", dict, "T1 file", {}), budget=r.get(data, "Budget", list, "T1 file", []),
        simulation_input=None if sim is None else (path.parent / sim),
    )


def _read_params(r: _Reader, items: list[Any]) -> tuple[dict[str, list], dict[str, str], dict[str, Any]]:
    params: dict[str, list] = {}
    types: dict[str, str] = {}
    defaults: dict[str, Any] = {}
    for i, item in enumerate(items):
        where = f"TuningParameters[{i}]"
        if not isinstance(item, dict):
            raise r.fail(where, "must be an object")
        name = r.get(item, "Name", str, where)
        where = f"TuningParameters[{i}] ({name})"
        if not name.isidentifier():
            raise r.fail(where, f"parameter name {name!r} is not an identifier")
        if name in params:
            raise r.fail(where, f"parameter {name!r} is declared twice")
        kind = r.get(item, "Type", str, where, "int")
        if kind not in PARAM_TYPES:
            raise r.fail(where, f"'Type' {kind!r} is not one of {sorted(PARAM_TYPES)}")
        text = r.get(item, "Values", (str, list), where)
        try:
            values = parse_values(text) if isinstance(text, str) else list(text)
        except ConstraintError as exc:
            raise r.fail(where, f"'Values' rejected: {exc}") from None
        if not values:
            raise r.fail(where, "'Values' is empty")
        expected = PARAM_TYPES[kind]
        for v in values:
            ok = isinstance(v, expected) and not (expected is not bool and isinstance(v, bool))
            if expected is float and isinstance(v, int) and not isinstance(v, bool):
                ok = True
            if not ok:
                raise r.fail(where, f"value {v!r} is not of Type {kind!r}")
        params[name], types[name] = values, kind
        if "Default" in item:
            if item["Default"] not in values:
                raise r.fail(where, f"'Default' {item['Default']!r} is not among its values")
            defaults[name] = item["Default"]
    if not params:
        raise r.fail("ConfigurationSpace", "no TuningParameters")
    return params, types, defaults


def _read_conditions(r: _Reader, items: list[Any], params: dict[str, list]) -> list[str]:
    out = []
    for i, item in enumerate(items):
        where = f"Conditions[{i}]"
        if not isinstance(item, dict):
            raise r.fail(where, "must be an object")
        text = r.get(item, "Expression", str, where)
        try:
            parse_constraint(text, params)
        except ConstraintError as exc:
            raise r.fail(where, f"'Expression' rejected: {exc}") from None
        out.append(text)
    return out


def _strings(r: _Reader, obj: dict[str, Any], key: str, where: str) -> list[str]:
    values = r.get(obj, key, list, where, [])
    if not all(isinstance(v, str) for v in values):
        raise r.fail(where, f"'{key}' must be a list of strings")
    return list(values)


def _axes(r: _Reader, kernel: dict[str, Any], key: str) -> dict[str, str]:
    axes = r.get(kernel, key, dict, "KernelSpecification", {})
    out = {}
    for axis, value in axes.items():
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise r.fail(f"KernelSpecification.{key}", f"axis {axis!r} must be a string expression")
        out[axis] = str(value)
    return out


def _read_grid_div(r: _Reader, kernel: dict[str, Any], axis: str) -> list[str] | None:
    values = r.get(kernel, f"GridDiv{axis}", list, "KernelSpecification", [])
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
        raise r.fail("KernelSpecification", f"'GridDiv{axis}' must list parameter names or integers")
    return [str(v) for v in values] or None


def resolve_size(text: str, params: dict[str, list], problem_size: list[int]) -> int:
    """Number of elements of a "Size" expression such as ``(ProblemSize[0]+max(filter_width)-1) * 2``.

    ``ProblemSize[i]`` and ``max(p)``/``min(p)`` over a parameter's values are substituted, then only
    plain arithmetic may remain; it is computed by the restricted evaluator of ``adaptune.space``.
    """
    def problem(m: re.Match[str]) -> str:
        i = int(m.group(1))
        if i >= len(problem_size):
            raise ValueError(f"ProblemSize[{i}] is out of range (ProblemSize has {len(problem_size)} entries)")
        return f"({problem_size[i]})"

    def minmax(m: re.Match[str]) -> str:
        fn, name = m.group(1), m.group(2)
        if name not in params:
            raise ValueError(f"{fn}({name}) names no tunable parameter")
        values = params[name]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise ValueError(f"{fn}({name}) needs numeric values")
        return f"({max(values) if fn == 'max' else min(values)})"

    arithmetic = _SIZE_MINMAX.sub(minmax, _SIZE_PROBLEM.sub(problem, text))
    if not _SIZE_ARITHMETIC.fullmatch(arithmetic):
        leftover = re.sub(r"[0-9+\-*/%(). \t]", "", arithmetic)
        raise ValueError(f"only ProblemSize[i], max(param), min(param) and arithmetic are allowed "
                         f"(found {leftover[:40]!r})")
    try:
        (value,) = parse_values(f"[{arithmetic}]")
    except ConstraintError as exc:
        raise ValueError(str(exc)) from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"size must be a non-negative integer, got {value!r}")
    return value


def _read_argument(r: _Reader, item: Any, i: int, params: dict[str, list], problem_size: list[int]) -> T1Argument:
    where = f"Arguments[{i}]"
    if not isinstance(item, dict):
        raise r.fail(where, "must be an object")
    name = r.get(item, "Name", str, where, f"arg{i}")
    where = f"Arguments[{i}] ({name})"
    kind = r.get(item, "Type", str, where)
    if kind not in DTYPES and kind != "custom":
        raise r.fail(where, f"'Type' {kind!r} is not one of {sorted(DTYPES)} or 'custom'")
    memory = r.get(item, "MemoryType", str, where)
    if memory not in ("Vector", "Scalar", "Local", "Symbol"):
        raise r.fail(where, f"'MemoryType' {memory!r} is not Vector, Scalar, Local or Symbol")
    size_field = r.get(item, "Size", (int, str), where, 1)
    try:
        size = size_field if isinstance(size_field, int) else resolve_size(size_field, params, problem_size)
    except ValueError as exc:
        raise r.fail(where, f"'Size' {size_field!r} rejected: {exc}") from None
    if size < 0:
        raise r.fail(where, f"'Size' {size} is negative")
    source = r.get(item, "DataSource", str, where, None)
    return T1Argument(
        name=name, type=kind, memory_type=memory, access=r.get(item, "AccessType", str, where, "ReadWrite"),
        fill_type=r.get(item, "FillType", str, where, "Constant"), size=size,
        fill_value=float(r.get(item, "FillValue", (int, float), where, 0.0)),
        output=bool(r.get(item, "Output", (int, bool), where, 0)),
        constant_memory=item.get("MemType") == "Constant",
        random_seed=r.get(item, "RandomSeed", int, where, None),
        data_source=None if source is None else (r.path.parent / source),
    )


def t1_arrays(spec: T1Spec, seed: int = 0) -> list[np.ndarray | np.generic]:
    """Host data for the kernel arguments: Constant/Zero/Random fills (seeded), BinaryRaw files, scalars.

    Random fills draw uniformly from [0, FillValue) (standard normal when FillValue is 0); each argument
    has its own stream (its RandomSeed, else ``seed`` + its position), so arrays are reproducible.
    """
    out: list[np.ndarray | np.generic] = []
    for i, arg in enumerate(spec.arguments):
        where = f"{spec.path}: Arguments[{i}] ({arg.name})"
        if arg.type == "custom":
            raise FormatError(f"{where}: 'custom' argument types need a user-supplied array")
        scalar, lanes = DTYPES[arg.type]
        if arg.memory_type == "Scalar":
            out.append(scalar(arg.fill_value))
            continue
        if arg.memory_type not in ("Vector", "Symbol"):
            raise FormatError(f"{where}: MemoryType {arg.memory_type!r} has no host array")
        n = arg.size * lanes
        fill = arg.fill_type
        if fill == "Constant":
            data = np.full(n, arg.fill_value, dtype=scalar)
        elif fill == "Zero":
            data = np.zeros(n, dtype=scalar)
        elif fill == "Random":
            rng = np.random.default_rng(arg.random_seed if arg.random_seed is not None else seed + i)
            if np.issubdtype(scalar, np.integer) or scalar is np.bool_:
                high = max(int(arg.fill_value), 1)
                data = rng.integers(0, high + 1, size=n).astype(scalar)
            elif arg.fill_value:
                data = (rng.random(n) * arg.fill_value).astype(scalar)
            else:
                data = rng.standard_normal(n).astype(scalar)
        elif fill == "BinaryRaw":
            if arg.data_source is None:
                raise FormatError(f"{where}: FillType BinaryRaw needs a 'DataSource' file")
            data = np.fromfile(arg.data_source, dtype=scalar)  # raw numbers only: nothing is unpickled
            if data.size != n:
                raise FormatError(f"{where}: {arg.data_source} holds {data.size} values, 'Size' says {n}")
        else:
            raise FormatError(f"{where}: FillType {fill!r} is not supported (Constant, Zero, Random, BinaryRaw); "
                              f"Generator/Script fills would run code from the file")
        out.append(data)
    return out
