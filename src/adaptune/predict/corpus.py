"""LS-CAT corpus handling: kernel signatures, NVRTC-ready source, launch shapes and argument sizing.

Pure Python (no GPU, no CuPy), so the working set can be built and checked on any machine before
device time is spent. The rules follow LS-CAT's runner (``src/multi_runtimes.py``) where they are
sound and deviate where they are not; every deviation is listed in docs/predict.md:

* 1-D block shapes are launched x-major ``(n, 1)``; LS-CAT's generated ``main`` launched ``(1, n)``.
* Buffers hold ``2 * X * Y`` (runs 1-2) or ``4 * X * Y + 65536`` (runs 3-) *elements* of their type,
  filled with values; LS-CAT allocated ``X * Y`` *bytes*, uninitialised.
* Kernels that never read a ``.y`` index get a 1-D launch covering ``X * Y`` threads with the
  shape's thread count, so every shape does the same work.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adaptune.backends import signature

#: LS-CAT's 20 thread-block shapes: 4 two-dimensional, then 16 one-dimensional (64..1024), x-major.
SHAPES: tuple[tuple[int, int], ...] = (
    (8, 8), (16, 16), (24, 24), (32, 32),
    *((n, 1) for n in range(64, 1025, 64)),
)
#: LS-CAT's seven square matrix sizes (XSIZE = YSIZE).
LSCAT_SIZES: tuple[int, ...] = (240, 496, 784, 1016, 1232, 1680, 2024)
#: Index of the "always 1024" shape (1024, 1) in SHAPES.
SHAPE_1024 = SHAPES.index((1024, 1))

_DIM_Y = re.compile(r"\b(threadIdx|blockIdx|blockDim)\s*\.\s*y\b")


class CorpusError(ValueError):
    """A kernel that the harness cannot run as-is (the message names the cause)."""


@dataclass(frozen=True)
class Param:
    """One kernel parameter: C type text, name, numpy dtype of a lane, lanes, pointer or scalar."""

    ctype: str
    name: str
    dtype: str
    lanes: int
    pointer: bool


def _from_signature(kp: signature.KernelParam, ctype: str) -> Param:
    """A corpus Param from backends.signature's reading of a declaration; CorpusError where the harness
    cannot build the argument (references, pointers to pointers, unknown or by-value vector types)."""
    if kp.reference or "<" in kp.type_text:
        raise CorpusError(f"unsupported parameter type {ctype!r} {kp.name!r}")
    if not kp.name.isidentifier():
        raise CorpusError(f"parameter name {kp.name!r} is not an identifier")
    if kp.depth > 1:
        raise CorpusError(f"pointer-to-pointer parameter {ctype!r} {kp.name!r}")
    if kp.dtype is None or kp.lanes > 4 or (kp.lanes > 1 and not kp.pointer):
        raise CorpusError(f"unsupported parameter type {ctype!r} {kp.name!r}")
    return Param(ctype, kp.name, kp.dtype.name, kp.lanes, kp.pointer)


def parse_param(ctype: str, name: str) -> Param:
    """Classify one ``(type, name)`` pair from LS-CAT's kernel list; CorpusError if unsupported.
    The declaration is read by :func:`adaptune.backends.signature.parse_parameter`."""
    if "[" in name or "&" in ctype:
        raise CorpusError(f"unsupported parameter type {ctype!r} {name!r}")
    return _from_signature(signature.parse_parameter(f"{ctype} {name}"), ctype)


def parse_params(variables: str | Sequence[tuple[str, str]]) -> list[Param]:
    """Parse LS-CAT's parameter list (the CSV's literal list of tuples; literal_eval, never eval)."""
    pairs = ast.literal_eval(variables) if isinstance(variables, str) else variables
    return [parse_param(str(t), str(n)) for t, n in pairs]


# --- argument sizing (LS-CAT's name heuristic, src/multi_runtimes.py:find_value) -----------------------
_WIDTH_C, _WIDTH_E = ("width",), ("w", "rows", "n_a", "ixsize")
_HEIGHT_C, _HEIGHT_E = ("height", "iysize"), ("h", "cols", "n_b")
_SIZE_C, _SIZE_E = ("size",), ("n",)
_IRR_C = ("pitch", "batch", "stride", "spatial", "filter", "scale", "alpha", "beta")
_IRR_E = ("a", "b", "c", "d3", "d2", "d1", "m", "dim", "seed", "value", "offset", "pad")


def size_role(name: str) -> str:
    """LS-CAT's role of a scalar by its name: 'X', 'Y', 'XY', '2' or '1' (same order of tests)."""
    low = name.lower()
    if any(s in low for s in _WIDTH_C) or low in _WIDTH_E:
        return "X"
    if any(s in low for s in _HEIGHT_C) or low in _HEIGHT_E:
        return "Y"
    if low in _SIZE_E or any(s in low for s in _SIZE_C):
        return "XY"
    if any(s in low for s in _IRR_C) or low in _IRR_E:
        return "2"
    return "1"


def scalar_value(name: str, x: int, y: int) -> int:
    """The value LS-CAT gives a scalar parameter at matrix size (x, y)."""
    return {"X": x, "Y": y, "XY": x * y, "2": 2, "1": 1}[size_role(name)]


#: Buffer sizing rules: "2xy" (runs 1-2: 2*X*Y elements) and "4xy+64k" (runs 3-5: 4*X*Y + 65536
#: elements, so kernels that index 3 or 4 values a thread, or overrun a guard by a block, stay in bounds);
#: "index": 4xy+64k, or a pointer's highest index read from the source (adaptune.predict.indexbound)
#: + 1 when that is larger and at most INDEX_RULE_CAP elements.
BUFFER_RULES = ("2xy", "4xy+64k", "index")

#: Most elements the ``index`` rule gives one pointer (2 GiB of doubles; an H100 has 80 GB).
INDEX_RULE_CAP = 1 << 28


def buffer_elements(x: int, y: int, rule: str = "2xy", bound: int | None = None) -> int:
    """Elements per pointer argument under ``rule`` (LS-CAT: X * Y bytes; see the module docstring);
    ``bound`` is the pointer's highest index for the ``index`` rule (None: not bounded)."""
    if rule == "2xy":
        return 2 * x * y
    if rule == "4xy+64k":
        return 4 * x * y + 65536
    if rule == "index":
        base = 4 * x * y + 65536
        return bound + 1 if bound is not None and base < bound + 1 <= INDEX_RULE_CAP else base
    raise CorpusError(f"unknown buffer rule {rule!r}; known: {', '.join(BUFFER_RULES)}")


# --- launch geometry ----------------------------------------------------------------------------------
def is_2d(source: str) -> bool:
    """True when the kernel reads a ``.y`` thread/block index or dimension."""
    return _DIM_Y.search(source) is not None


def launch_geometry(shape: tuple[int, int], x: int, y: int, two_d: bool
                    ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block) for a shape at matrix size (x, y): LS-CAT's grid rule for 2-D kernels,
    a 1-D launch of the same thread count covering x*y threads otherwise."""
    bx, by = shape
    if two_d:
        return (math.ceil(x / bx), math.ceil(y / by), 1), (bx, by, 1)
    threads = bx * by
    return (math.ceil(x * y / threads), 1, 1), (threads, 1, 1)


def dynamic_shared_bytes(source: str, shape: tuple[int, int]) -> int:
    """Dynamic shared memory for kernels that declare ``extern __shared__``: 8 bytes a thread."""
    if re.search(r"extern\s+__shared__", source):
        return min(8 * shape[0] * shape[1], 48 * 1024)
    return 0


# --- source preparation for NVRTC ---------------------------------------------------------------------
PRELUDE = """\
typedef unsigned int uint; typedef unsigned char uchar; typedef unsigned short ushort;
typedef unsigned long ulong;
typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t;
typedef unsigned short uint16_t; typedef int int32_t; typedef unsigned int uint32_t;
typedef long long int64_t; typedef unsigned long long uint64_t;
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38F
#endif
#ifndef FLT_MIN
#define FLT_MIN 1.175494351e-38F
#endif
#ifndef DBL_MAX
#define DBL_MAX 1.7976931348623158e+308
#endif
#ifndef INT_MAX
#define INT_MAX 2147483647
#endif
#ifndef INT_MIN
#define INT_MIN (-2147483647 - 1)
#endif
#ifndef UINT_MAX
#define UINT_MAX 0xffffffffU
#endif
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef NULL
#define NULL 0
#endif
"""

#: Headers whose content NVRTC provides itself or the kernel does not need: their includes are dropped.
_SYSTEM_HEADER_TEXT = """
stdio.h stdlib.h string.h math.h cmath float.h limits.h stdint.h cstdint cstdio cstdlib cstring assert.h
cassert time.h ctime stdbool.h getopt.h sys/time.h unistd.h iostream fstream sstream vector algorithm
chrono cuda.h cuda_runtime.h cuda_runtime_api.h device_launch_parameters.h device_functions.h
math_functions.h math_constants.h cuda_fp16.h cuda_runtime_api.h helper_cuda.h helper_functions.h
vector_types.h vector_functions.h sm_20_atomic_functions.h sm_11_atomic_functions.h
sm_12_atomic_functions.h sm_13_double_functions.h cuda_device_runtime_api.h driver_types.h
"""
SYSTEM_HEADERS = frozenset(_SYSTEM_HEADER_TEXT.split())

_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"].*$', re.M)
_REJECT = re.compile(r"\b(template|texture|surface|curand\w*|cub::|thrust::|std::|__ldg_tex|tex1D|tex2D|"
                     r"cooperative_groups|asm)\b")


def prepare_source(kernel_source: str, includes_h: str, name: str) -> str:
    """NVRTC-ready text for one corpus kernel: prelude + includes.h + kernel, system includes dropped,
    the kernel given C linkage. CorpusError if it needs a local header or an unsupported feature."""
    parts = []
    for label, text in (("includes.h", includes_h), ("kernel", kernel_source)):
        for inc in _INCLUDE.findall(text):
            if inc != "includes.h" and inc not in SYSTEM_HEADERS:
                raise CorpusError(f"{label} includes local header {inc!r}")
        parts.append(_INCLUDE.sub("", text))
    body = "\n".join(parts)
    found = _REJECT.search(body)
    if found:
        raise CorpusError(f"uses unsupported feature {found.group(0)!r}")
    pattern = re.compile(r"(__global__\s+(?:static\s+)?void\s+" + re.escape(name) + r"\s*\()")
    if len(pattern.findall(body)) != 1:
        raise CorpusError(f"expected one definition of __global__ void {name}(...)")
    body = pattern.sub(r'extern "C" \1', body)
    return PRELUDE + body


@dataclass(frozen=True)
class Arg:
    """How to build one argument at a size: a buffer (dtype, lanes, elements) or a scalar value."""

    param: Param
    value: float | int | None = None   # scalars
    elements: int = 0                  # buffers: elements (each of `lanes` lanes)


def build_args(params: Sequence[Param], x: int, y: int, rule: str = "2xy",
               bounds: Mapping[str, int | None] | None = None) -> list[Arg]:
    """Argument plan for matrix size (x, y) by the documented sizing rule (buffer ``rule``; ``bounds``:
    each pointer's highest index, for the ``index`` rule)."""
    out = []
    for p in params:
        if p.pointer:
            out.append(Arg(p, elements=buffer_elements(x, y, rule, (bounds or {}).get(p.name))))
        else:
            out.append(Arg(p, value=scalar_value(p.name, x, y)))
    return out


def kernel_row(row: Mapping[str, str]) -> str:
    """Stable kernel id ``<repo>/<directory>`` of a kernel_list.csv row."""
    return f"{row['Repo']}/{row['underdirectory']}"


def params_from_source(source: str, name: str) -> list[Param]:
    """Parameters of ``__global__ void name(...)`` read from CUDA text by
    :func:`adaptune.backends.signature.kernel_parameters` (types LS-CAT supports only)."""
    found = signature.kernel_parameters(source, name)
    if found is None:
        raise CorpusError(f"no __global__ void {name}(...) in the source")
    return [_from_signature(kp, kp.type_text + " *" * kp.depth) for kp in found]
