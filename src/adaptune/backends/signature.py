"""Read a kernel's parameter list (OpenCL C or CUDA) so arguments can be checked before any launch.

Why: a float64 array passed to a ``float *`` parameter runs without complaint and reads garbage, and a
wrong scalar width corrupts every later argument in CUDA. This is a small hand-written scanner, not a
C parser: it finds ``__kernel``/``__global__`` functions by name, splits their parameters and maps the
base types (with the source's own ``typedef``s and simple ``#define`` aliases) to NumPy dtypes. A type
it cannot resolve (a struct, a template parameter, a macro that depends on the configuration) is left
unchecked rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_BASE_TYPES: dict[str, str] = {
    "float": "float32", "double": "float64", "half": "float16", "__half": "float16",
    "char": "int8", "signed char": "int8", "unsigned char": "uint8", "uchar": "uint8",
    "short": "int16", "signed short": "int16", "unsigned short": "uint16", "ushort": "uint16",
    "int": "int32", "signed int": "int32", "signed": "int32", "unsigned int": "uint32", "unsigned": "uint32",
    "uint": "uint32", "long": "int64", "signed long": "int64", "unsigned long": "uint64", "ulong": "uint64",
    "long long": "int64", "unsigned long long": "uint64", "long int": "int64", "unsigned long int": "uint64",
    "long long int": "int64", "unsigned long long int": "uint64", "std::size_t": "uint64",
    "size_t": "uint64", "ptrdiff_t": "int64", "bool": "bool",
    "int8_t": "int8", "uint8_t": "uint8", "int16_t": "int16", "uint16_t": "uint16",
    "int32_t": "int32", "uint32_t": "uint32", "int64_t": "int64", "uint64_t": "uint64",
}
_VECTOR = re.compile(r"^(u?(?:char|short|int|long)|float|double|half)(2|3|4|8|16)$")
_QUALIFIERS = {
    "const", "volatile", "restrict", "__restrict__", "__restrict", "__global", "global", "__local", "local",
    "__constant", "constant", "__private", "private", "__read_only", "read_only", "__write_only", "write_only",
    "GLOBAL", "LOCAL", "RESTRICT", "CONSTANT", "__grid_constant__", "struct",
}
#: qualifiers that are keywords in both languages (OpenCL's address spaces are plain identifiers in CUDA)
_NEVER_NAMES = {"const", "volatile", "restrict", "__restrict__", "__restrict", "struct", "__global", "__local",
                "__constant", "__private", "__read_only", "__write_only", "__grid_constant__"}
_KERNEL_MARK = r"(?:__kernel|\bkernel|__global__|\bKERNEL)\b"


class ArgumentMismatchError(TypeError):
    """The arguments passed do not match the kernel's parameter list; the message names the parameter."""


@dataclass(frozen=True)
class KernelParam:
    name: str
    type_text: str          # the declared base type as written, qualifiers removed
    pointer: bool
    dtype: np.dtype | None  # None when the type could not be resolved (left unchecked)
    lanes: int = 1          # components of a vector type (float4 -> 4), 1 for scalars
    depth: int = 0          # levels of indirection: '*' and '[]' (float ** -> 2)
    reference: bool = False  # declared with '&' (C++ reference)


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def _aliases(source: str, defines: Mapping[str, Any]) -> dict[str, str]:
    """typedef and object-like #define aliases whose every definition in the source agrees."""
    found: dict[str, set[str]] = {}
    for target, alias in re.findall(r"\btypedef\s+([A-Za-z_][\w\s]*?)\s+([A-Za-z_]\w*)\s*;", source):
        found.setdefault(alias, set()).add(" ".join(target.split()))
    for alias, target in re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)[ \t]+([A-Za-z_][\w \t]*?)\s*$", source, re.M):
        found.setdefault(alias, set()).add(" ".join(target.split()))
    aliases = {alias: next(iter(targets)) for alias, targets in found.items() if len(targets) == 1}
    for key, value in defines.items():
        aliases[str(key)] = str(value)
    return aliases


def _resolve(type_text: str, aliases: Mapping[str, str]) -> np.dtype | None:
    text = type_text
    for _ in range(8):  # alias chains are short; a cycle must not loop forever
        if text in _BASE_TYPES:
            return np.dtype(_BASE_TYPES[text])
        vector = _VECTOR.match(text)
        if vector:
            return _resolve(vector.group(1), aliases)
        words = text.split()
        if len(words) > 1 and all(w in aliases or w in {"unsigned", "signed", "long", "short"} for w in words):
            text = " ".join(aliases.get(w, w) for w in words)
            continue
        if text not in aliases:
            return None
        text = " ".join(w for w in aliases[text].split() if w not in _QUALIFIERS)
    return None


def _balanced(source: str, start: int) -> str | None:
    """The text inside the parentheses opening at ``start``."""
    depth = 0
    for i in range(start, len(source)):
        if source[i] == "(":
            depth += 1
        elif source[i] == ")":
            depth -= 1
            if depth == 0:
                return source[start + 1:i]
    return None


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip() and p.strip() != "void"]


def _lanes(type_text: str, aliases: Mapping[str, str]) -> int:
    """Components of a vector type, following aliases; 1 for anything else."""
    for _ in range(8):
        vector = _VECTOR.match(type_text)
        if vector:
            return int(vector.group(2))
        if type_text not in aliases:
            return 1
        type_text = " ".join(w for w in aliases[type_text].split() if w not in _QUALIFIERS)
    return 1


def _parse_param(text: str, aliases: Mapping[str, str]) -> KernelParam:
    pointer = "*" in text or "[" in text or "&" in text
    depth = text.count("*") + text.count("[")
    reference = "&" in text
    text = re.sub(r"\[[^\]]*\]", " ", text).replace("*", " ").replace("&", " ")
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)
    words = text.split()
    # the last word names the parameter even when it is spelt like a qualifier ("float constant" in CUDA)
    named = len(words) > 1 and words[-1] not in _NEVER_NAMES and any(w not in _QUALIFIERS for w in words[:-1])
    name = words[-1] if named else ""
    type_words = [w for w in (words[:-1] if named else words) if w not in _QUALIFIERS]
    type_text = " ".join(type_words)
    return KernelParam(name, type_text, pointer, _resolve(type_text, aliases), _lanes(type_text, aliases), depth,
                       reference)


def parse_parameter(text: str, aliases: Mapping[str, str] | None = None) -> KernelParam:
    """One parameter declaration (``"const float4 *v"``) as a :class:`KernelParam`; ``aliases`` maps
    typedef names to their types. Shared with adaptune.predict.corpus (LS-CAT's parameter lists)."""
    return _parse_param(text, aliases or {})


def kernel_parameters(source: str, name: str, defines: Mapping[str, Any] | None = None) -> list[KernelParam] | None:
    """The parameters of kernel ``name`` in ``source``, or None when no such kernel is found."""
    clean = _strip_comments(source)
    pattern = re.compile(_KERNEL_MARK + r"[^;{}]*?\b" + re.escape(name) + r"\s*\(")
    match = pattern.search(clean)
    if match is None:
        return None
    inside = _balanced(clean, match.end() - 1)
    if inside is None:
        return None
    aliases = _aliases(clean, defines or {})
    return [_parse_param(p, aliases) for p in _split_top_level(inside)]


def check_kernel_arguments(source: str, name: str, arguments: Sequence[Any],
                           defines: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`ArgumentMismatchError` naming the first parameter the arguments do not fit."""
    params = kernel_parameters(source, name, defines)
    if params is None:
        return  # the compiler will say that the kernel does not exist
    if len(params) != len(arguments):
        listing = ", ".join(f"{p.type_text}{' *' if p.pointer else ''} {p.name}".strip() for p in params)
        raise ArgumentMismatchError(f"kernel {name!r} takes {len(params)} parameters ({listing}) but "
                                    f"{len(arguments)} arguments were given")
    for i, (param, arg) in enumerate(zip(params, arguments, strict=True)):
        label = f"parameter {i} ({param.name or 'unnamed'}: {param.type_text}{' *' if param.pointer else ''}) of kernel {name!r}"
        if param.pointer and not isinstance(arg, np.ndarray):
            raise ArgumentMismatchError(f"{label} is a pointer but argument {i} is a {type(arg).__name__}; "
                                        "pass a NumPy array")
        if not param.pointer and isinstance(arg, np.ndarray):
            raise ArgumentMismatchError(f"{label} is a scalar but argument {i} is an array of shape {arg.shape}; "
                                        f"pass np.{param.dtype or 'int32'}(value)")
        got = np.dtype(arg.dtype)
        if param.dtype is not None and got != param.dtype:
            fix = f"arr.astype(np.{param.dtype})" if param.pointer else f"np.{param.dtype}(value)"
            raise ArgumentMismatchError(f"{label} expects {param.dtype} but argument {i} is {got}; pass {fix} "
                                        "(or KernelSpec(..., check_arguments=False) for a type this check "
                                        "does not understand)")
