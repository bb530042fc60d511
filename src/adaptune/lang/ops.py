"""The operations the compiler knows: NumPy ufunc name -> C expression, and NumPy's dtype rules for each.

Output dtypes are never guessed: they come from calling the real NumPy ufunc on empty arrays of the
operand dtypes (Python scalars stay Python scalars, so NumPy 2's weak-scalar promotion applies).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

# C math functions named alike in CUDA and OpenCL; CUDA's float32 versions carry an "f" suffix.
MATH_FUNCS = ("sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
              "cosh", "tanh", "erf", "expm1", "log1p", "floor", "ceil", "fabs", "rint", "trunc", "pow",
              "atan2", "fmod", "cbrt", "exp2", "copysign")


def prelude() -> str:
    """Macros that make one generated text valid CUDA and OpenCL C (float32 vs float64 math names), and the
    helpers for NumPy's floor division and remainder (their semantics need more than one expression)."""
    cuda = "\n".join(f"#define AT_{f}_f {f}f\n#define AT_{f}_d {f}" for f in MATH_FUNCS)
    ocl = "\n".join(f"#define AT_{f}_f {f}\n#define AT_{f}_d {f}" for f in MATH_FUNCS)
    return f"#ifdef ADAPTUNE_CUDA\n{cuda}\n#else\n{ocl}\n#endif\n{_division_helpers()}"


@functools.cache
def _division_helpers() -> str:
    """``at_floor_divide_<t>`` and ``at_remainder_<t>`` per C type, with NumPy's semantics: floats follow
    ``npy_divmod`` (the quotient rounded so that ``div * b + mod == a``; ``x // 0`` is inf or nan, ``x % 0``
    nan); integers round toward minus infinity, the remainder takes the divisor's sign, ``x // 0 == x % 0 == 0``
    and ``MIN // -1`` wraps to ``MIN`` (C leaves both undefined). Double helpers only where the device has
    doubles."""
    out = []
    for t, sfx in (("float", "f"), ("double", "d")):
        body = f"""DEVICE {t} at_floor_divide_{t}({t} a, {t} b) {{
    if (b == 0) return a / b;
    {t} mod = AT_fmod_{sfx}(a, b);
    {t} div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div == 0) return AT_copysign_{sfx}(({t})0, a / b);
    {t} fl = AT_floor_{sfx}(div);
    return (div - fl > ({t})0.5) ? fl + 1 : fl;
}}
DEVICE {t} at_remainder_{t}({t} a, {t} b) {{
    {t} mod = AT_fmod_{sfx}(a, b);
    if (b == 0) return mod;
    if (mod == 0) return AT_copysign_{sfx}(({t})0, b);
    return ((b < 0) != (mod < 0)) ? mod + b : mod;
}}"""
        out.append(body if t == "float" else f"#if defined(ADAPTUNE_CUDA) || defined(cl_khr_fp64)\n{body}\n#endif")
    for t, ut in (("i32", "u32"), ("i64", "u64")):
        out.append(f"""DEVICE {t} at_floor_divide_{t}({t} a, {t} b) {{
    if (b == 0) return 0;
    if (b == -1) return ({t})(({ut})0 - ({ut})a);
    {t} q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}}
DEVICE {t} at_remainder_{t}({t} a, {t} b) {{
    if (b == 0 || b == -1) return 0;
    {t} r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}}""")
    for t in ("u8", "u32", "u64"):
        out.append(f"""DEVICE {t} at_floor_divide_{t}({t} a, {t} b) {{ return b == 0 ? ({t})0 : ({t})(a / b); }}
DEVICE {t} at_remainder_{t}({t} a, {t} b) {{ return b == 0 ? ({t})0 : ({t})(a % b); }}""")
    return "\n".join(out) + "\n"


def fn(name: str, dtype: np.dtype) -> str:
    return f"AT_{name}_{'f' if dtype == np.float32 else 'd'}"


Template = Callable[[list[str], np.dtype], str]


def _f(name: str) -> Template:
    return lambda a, dt: f"{fn(name, dt)}({', '.join(a)})"


def _bin(sym: str) -> Template:
    return lambda a, dt: f"({a[0]} {sym} {a[1]})"


def _maximum(a: list[str], dt: np.dtype) -> str:
    if dt.kind == "f":  # NumPy propagates NaN from either side
        return f"(({a[0]} != {a[0]} || {a[0]} > {a[1]}) ? {a[0]} : {a[1]})"
    return f"({a[0]} > {a[1]} ? {a[0]} : {a[1]})"


def _minimum(a: list[str], dt: np.dtype) -> str:
    if dt.kind == "f":
        return f"(({a[0]} != {a[0]} || {a[0]} < {a[1]}) ? {a[0]} : {a[1]})"
    return f"({a[0]} < {a[1]} ? {a[0]} : {a[1]})"


def _absolute(a: list[str], dt: np.dtype) -> str:
    if dt.kind == "f":
        return f"{fn('fabs', dt)}({a[0]})"
    if dt.kind in "ub":
        return a[0]
    return f"({a[0]} < 0 ? -{a[0]} : {a[0]})"


def _sign(a: list[str], dt: np.dtype) -> str:
    x = a[0]
    return f"(({x} > 0) - ({x} < 0))" if dt.kind != "f" else \
        f"({x} != {x} ? {x} : (({x} > 0) - ({x} < 0)))"


def _division(name: str) -> Template:
    """``floor_divide`` / ``remainder`` through the prelude's helper for the compute type (NumPy semantics)."""
    return lambda a, dt: f"at_{name}_{_C_NAMES[dt.name]}({a[0]}, {a[1]})"


_C_NAMES = {"float32": "float", "float64": "double", "int32": "i32", "int64": "i64", "uint8": "u8",
            "uint32": "u32", "uint64": "u64"}


def _square(a: list[str], dt: np.dtype) -> str:
    return f"({a[0]} * {a[0]})"


def _reciprocal(a: list[str], dt: np.dtype) -> str:
    return f"(({a[0]}) / ({a[0]}) / ({a[0]}))" if dt.kind != "f" else f"(1 / {a[0]})"


# name -> (number of inputs, template, kinds of compute dtype allowed: f float, i signed, u unsigned, b bool)
UFUNCS: dict[str, tuple[int, Template, str]] = {
    "add": (2, _bin("+"), "fiu"), "subtract": (2, _bin("-"), "fiu"), "multiply": (2, _bin("*"), "fiu"),
    "true_divide": (2, _bin("/"), "f"), "divide": (2, _bin("/"), "f"),
    "floor_divide": (2, _division("floor_divide"), "fiu"), "remainder": (2, _division("remainder"), "fiu"),
    "mod": (2, _division("remainder"), "fiu"),
    "power": (2, _f("pow"), "f"), "arctan2": (2, _f("atan2"), "f"), "fmod": (2, _f("fmod"), "f"),
    "maximum": (2, _maximum, "fiub"), "minimum": (2, _minimum, "fiub"),
    "greater": (2, _bin(">"), "fiub"), "greater_equal": (2, _bin(">="), "fiub"), "less": (2, _bin("<"), "fiub"),
    "less_equal": (2, _bin("<="), "fiub"), "equal": (2, _bin("=="), "fiub"), "not_equal": (2, _bin("!="), "fiub"),
    "logical_and": (2, _bin("&&"), "fiub"), "logical_or": (2, _bin("||"), "fiub"),
    "logical_xor": (2, lambda a, dt: f"(!{a[0]} != !{a[1]})", "fiub"),
    "bitwise_and": (2, _bin("&"), "iub"), "bitwise_or": (2, _bin("|"), "iub"), "bitwise_xor": (2, _bin("^"), "iub"),
    "negative": (1, lambda a, dt: f"(-{a[0]})", "fi"), "positive": (1, lambda a, dt: a[0], "fiu"),
    "absolute": (1, _absolute, "fiub"), "sign": (1, _sign, "fi"), "square": (1, _square, "fiu"),
    "logical_not": (1, lambda a, dt: f"(!{a[0]})", "fiub"), "invert": (1, lambda a, dt: f"(!{a[0]})", "b"),
    "reciprocal": (1, lambda a, dt: f"(1 / {a[0]})", "f"),
    "sqrt": (1, _f("sqrt"), "f"), "exp": (1, _f("exp"), "f"), "log": (1, _f("log"), "f"),
    "log2": (1, _f("log2"), "f"), "log10": (1, _f("log10"), "f"), "sin": (1, _f("sin"), "f"),
    "cos": (1, _f("cos"), "f"), "tan": (1, _f("tan"), "f"), "arcsin": (1, _f("asin"), "f"),
    "arccos": (1, _f("acos"), "f"), "arctan": (1, _f("atan"), "f"), "sinh": (1, _f("sinh"), "f"),
    "cosh": (1, _f("cosh"), "f"), "tanh": (1, _f("tanh"), "f"), "expm1": (1, _f("expm1"), "f"),
    "log1p": (1, _f("log1p"), "f"), "floor": (1, _f("floor"), "f"), "ceil": (1, _f("ceil"), "f"),
    "rint": (1, _f("rint"), "f"), "trunc": (1, _f("trunc"), "f"), "cbrt": (1, _f("cbrt"), "f"),
    "exp2": (1, _f("exp2"), "f"), "erf": (1, _f("erf"), "f"),
    "where": (3, lambda a, dt: f"({a[0]} ? {a[1]} : {a[2]})", "fiub"),
    "cast": (1, lambda a, dt: a[0], "fiub"),
}
# integer/bool variants that NumPy computes differently (bool add = logical or, integer floor division)
BOOL_OPS = {"add": "logical_or", "multiply": "logical_and", "maximum": "logical_or", "minimum": "logical_and",
            "bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor"}


@functools.lru_cache(maxsize=4096)
def _resolve(name: str, keys: tuple[Any, ...]) -> tuple[np.dtype, np.dtype]:
    samples = [np.empty(0, k) if isinstance(k, np.dtype) else _REPRESENTATIVE[k] for k in keys]
    if name == "where":
        out = np.where(np.empty(0, bool), samples[1], samples[2]).dtype
        return out, out
    ufunc = getattr(np, name if hasattr(np, name) else "exp")  # erf follows exp's float rules
    with np.errstate(all="ignore"):
        result = ufunc(*samples)
    out = np.asarray(result).dtype
    compute = out
    if out.kind == "b" and name not in ("logical_not", "invert"):  # comparisons: the common input type
        compute = np.result_type(*samples)
    elif name == "logical_not":
        compute = np.result_type(samples[0])
    return out, compute


def resolve(name: str, operands: list[Any]) -> tuple[np.dtype, np.dtype]:
    """(output dtype, compute dtype) of ``np.<name>`` over operands (dtypes, or Python scalars)."""
    # Python scalars are resolved by type with a representative value (weak promotion depends on type only);
    # the cache key carries the type's name, because 1, 1.0 and True are equal (and hash alike) as keys
    keys = tuple([o if isinstance(o, np.dtype) else type(o).__name__ for o in operands])
    return _resolve(name, keys)


_REPRESENTATIVE = {"bool": True, "int": 1, "float": 1.0}


REDUCTIONS = {"add": "0", "multiply": "1", "maximum": None, "minimum": None, "logical_or": "0",
              "logical_and": "1"}


@functools.lru_cache(maxsize=256)
def reduce_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """NumPy's result dtype of ``np.<op>.reduce`` (e.g. int32 sums accumulate in int64, bools count); cached:
    asking NumPy costs a reduction (~3 µs), on every recorded ``sum``."""
    ufunc = getattr(np, op)
    return np.asarray(ufunc.reduce(np.zeros(1, dtype))).dtype


def identity(op: str, dtype: np.dtype) -> str:
    """C literal of the reduction's neutral element in ``dtype``."""
    if op in ("add", "logical_or"):
        return "0"
    if op in ("multiply", "logical_and"):
        return "1"
    if dtype.kind == "f":
        inf = "F32_INF" if dtype == np.float32 else "F64_INF"
        return f"(-{inf})" if op == "maximum" else inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:  # bool
        return "0" if op == "maximum" else "1"
    value = info.min if op == "maximum" else info.max
    if dtype == np.int64 and value == info.min:
        return "(-9223372036854775807LL - 1)"
    suffix = {"int64": "LL", "uint32": "u", "int32": "", "uint8": ""}[dtype.name]
    return f"({value}{suffix})" if value >= 0 else f"(-{-value - 1}{suffix} - 1)"


def combine(op: str, a: str, b: str, dtype: np.dtype) -> str:
    """C expression combining two partial results of reduction ``op``."""
    if op == "add":
        return f"({a} + {b})"
    if op == "multiply":
        return f"({a} * {b})"
    if op == "maximum":
        return _maximum([a, b], dtype)
    if op == "minimum":
        return _minimum([a, b], dtype)
    if op == "logical_or":
        return f"({a} || {b})"
    return f"({a} && {b})"
