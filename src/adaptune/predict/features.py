"""Static features of a CUDA kernel for launch-configuration prediction.

Three groups, so models can be compared by what they need at prediction time:

* ``source_features``: counted from the CUDA text alone (loops, barriers, shared memory, index use,
  math calls, parameter roles by LS-CAT's naming rule).
* ``ptx_features``: instruction mix of the kernel's PTX (NVRTC, no GPU needed).
* device attributes (registers, static shared/local memory) are read from the loaded kernel by the
  harness and joined by the training script.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from adaptune.predict import corpus

_SOURCE_PATTERNS: dict[str, str] = {
    "for": r"\bfor\s*\(", "while": r"\bwhile\s*\(", "if": r"\bif\s*\(", "sync": r"__syncthreads\s*\(",
    "shared": r"__shared__", "extern_shared": r"extern\s+__shared__", "atomic": r"\batomic\w+\s*\(",
    "threadIdx_x": r"threadIdx\s*\.\s*x", "threadIdx_y": r"threadIdx\s*\.\s*y",
    "blockIdx_x": r"blockIdx\s*\.\s*x", "blockIdx_y": r"blockIdx\s*\.\s*y",
    "blockDim": r"blockDim\s*\.", "gridDim": r"gridDim\s*\.", "warp": r"__shfl\w*|warpSize|__ballot\w*",
    "double": r"\bdouble\b", "float": r"\bfloat\b", "math": r"\b(?:sqrtf?|expf?|logf?|powf?|sinf?|cosf?|tanhf?|"
    r"__expf|__logf|rsqrtf?|fabsf?|erff?)\s*\(",
    "index": r"\[", "mod_div": r"[%/](?![/*])", "return": r"\breturn\b", "device_call": r"__device__",
    "printf": r"\bprintf\s*\(",
}
_COMPILED = {k: re.compile(v) for k, v in _SOURCE_PATTERNS.items()}


def _kernel_text(source: str) -> str:
    return source[len(corpus.PRELUDE):] if source.startswith(corpus.PRELUDE) else source


def source_features(source: str, params: Sequence[corpus.Param]) -> dict[str, float]:
    """Counts over the kernel text plus parameter roles (log1p of counts, so scale does not dominate)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", _kernel_text(source), flags=re.S)
    f = {f"src_{k}": math.log1p(len(p.findall(text))) for k, p in _COMPILED.items()}
    f["src_lines"] = math.log1p(text.count("\n"))
    f["src_tokens"] = math.log1p(len(re.findall(r"\w+|[^\w\s]", text)))
    f["src_two_d"] = float(corpus.is_2d(text))
    f["par_n"] = float(len(params))
    f["par_pointers"] = float(sum(p.pointer for p in params))
    f["par_double_ptr"] = float(sum(p.pointer and p.dtype == "float64" for p in params))
    f["par_vector_ptr"] = float(sum(p.pointer and p.lanes > 1 for p in params))
    for role in ("X", "Y", "XY", "2", "1"):
        f[f"par_role_{role}"] = float(sum((not p.pointer) and corpus.size_role(p.name) == role for p in params))
    return f


_PTX_CLASSES: dict[str, str] = {
    "ld_global": r"\bld\.global", "st_global": r"\bst\.global", "ld_shared": r"\bld\.shared",
    "st_shared": r"\bst\.shared", "ld_local": r"\bld\.local|\bst\.local", "ld_param": r"\bld\.param",
    "bar": r"\bbar\.|\bbarrier\.", "atom": r"\batom\.|\bred\.", "fma": r"\bfma\.", "mul": r"\bmul\.|\bmad\.",
    "add": r"\badd\.|\bsub\.", "div": r"\bdiv\.|\brem\.|\brcp\.", "sfu": r"\bsqrt\.|\brsqrt\.|\bex2\.|\blg2\.|"
    r"\bsin\.|\bcos\.|\btanh\.", "f64": r"\.f64\b", "setp": r"\bsetp\.", "bra": r"\bbra\b", "cvt": r"\bcvt\.",
    "shfl": r"\bshfl\.", "call": r"\bcall\b",
}
_PTX_COMPILED = {k: re.compile(v) for k, v in _PTX_CLASSES.items()}


def ptx_features(ptx: str) -> dict[str, float]:
    """Instruction-mix counts of a PTX text (log1p), plus the instruction total and register declarations."""
    body = "\n".join(line for line in ptx.splitlines() if line.startswith("\t") and not line.startswith("\t//"))
    f = {f"ptx_{k}": math.log1p(len(p.findall(body))) for k, p in _PTX_COMPILED.items()}
    f["ptx_instructions"] = math.log1p(body.count(";"))
    regs = re.findall(r"\.reg\s+\.\w+\s+%\w+<(\d+)>", ptx)
    f["ptx_virtual_regs"] = math.log1p(sum(int(r) for r in regs))
    return f


ATTR_FEATURES = ("num_regs", "shared_size_bytes", "local_size_bytes", "const_size_bytes")


def attr_features(attrs: dict) -> dict[str, float]:
    """Compiled-kernel attributes as features (registers raw; memory sizes as log1p)."""
    f = {"attr_num_regs": float(attrs.get("num_regs") or 0)}
    for k in ATTR_FEATURES[1:]:
        f[f"attr_{k}"] = math.log1p(float(attrs.get(k) or 0))
    return f
