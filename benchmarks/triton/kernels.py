"""The four tutorial kernels as the study sees them: realistic keys, inputs for a key, and one call.

Matmul and attention carry ``triton.autotune`` in the tutorial itself. Softmax and layer norm do not (the
tutorial picks ``num_warps`` by a heuristic), so the study decorates their ``@triton.jit`` kernels from
outside with a ``num_warps`` list (``Case.wrap``): the kernel text is the tutorial's, untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch
import triton

DEVICE = "cuda"
"""Where inputs live; the CPU pilot (Triton's interpreter) sets "cpu"."""
SHRINK = 1
"""Every size is divided by this (at least 16) for the CPU pilot; keys keep their real values."""
LLM_NK = [(4096, 4096), (12288, 4096), (11008, 4096), (4096, 11008), (5120, 5120), (15360, 5120),
          (13824, 5120), (5120, 13824), (8192, 8192), (10240, 8192), (28672, 8192), (8192, 28672)]
"""(N, K) of the projections of 7B, 13B and 70B Llama-style models (qkv, out, up, down)."""
HIDDEN = [2048, 3072, 4096, 5120, 6144, 8192]
SOFTMAX_COLS = [512, 1024, 2048, 3000, 4096, 5120, 8192, 11008, 16384]
WARPS = [1, 2, 4, 8, 16]


def tokens(rng: np.random.Generator, high: int = 16384) -> int:
    """A token count from 1 to ``high``, skewed toward small batches (log-uniform of a squared uniform)."""
    return int(min(high, max(1, round(2 ** (np.log2(high) * rng.random() ** 2)))))


@dataclass
class Case:
    """One kernel of the study: ``keys(rng, n)``, ``call(module, key) -> zero-arg call``, its bucketing."""

    name: str
    tutorial: str
    kernel: Callable[[ModuleType], Any]
    keys: Callable[[np.random.Generator, int], list[dict]]
    call: Callable[[ModuleType, dict], Callable[[], Any]]
    bucket: str  # the key entry rounded up to a power of two by hand-bucketing

    def wrap(self, module: ModuleType) -> None:
        """Softmax / layer norm: decorate the tutorial's jit kernel with the module's own autotune."""


def _s(size: int) -> int:
    return size if SHRINK == 1 else max(16, size // SHRINK)


def _unique(rng: np.random.Generator, n: int, draw: Callable[[], dict]) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for _ in range(50 * n):
        key = draw()
        seen.setdefault(tuple(key.values()), key)
        if len(seen) >= n:
            break
    return list(seen.values())


def _autotune_of(module: ModuleType) -> Callable[..., Any]:
    """The decorator the module's copy uses (``triton.autotune`` or ``adaptune.triton.autotune``)."""
    return module.adaptune.triton.autotune if hasattr(module, "adaptune") else triton.autotune


def _warps(configs_extra: dict | None = None) -> list[triton.Config]:
    return [triton.Config(dict(configs_extra or {}), num_warps=w, num_stages=None) for w in WARPS]


# ------------------------------------------------------------------------------------------ matmul
def _matmul_call(module: ModuleType, key: dict) -> Callable[[], Any]:
    m, n, k = _s(key["M"]), _s(key["N"]), _s(key["K"])
    a = torch.randn((m, k), device=DEVICE, dtype=torch.float16)
    b = torch.randn((k, n), device=DEVICE, dtype=torch.float16)
    return lambda: module.matmul(a, b)


MATMUL = Case("matmul", "matmul", lambda m: m.matmul_kernel,
              lambda rng, n: _unique(rng, n, lambda: dict(zip("MNK", (tokens(rng), *LLM_NK[rng.integers(len(LLM_NK))]),
                                                               strict=True))),
              _matmul_call, "M")


# ----------------------------------------------------------------------------------------- softmax
def _softmax_wrap(module: ModuleType) -> None:
    if not hasattr(module, "softmax_tuned"):
        module.softmax_tuned = _autotune_of(module)(_warps(), key=["n_rows", "n_cols"])(module.softmax_kernel)


def _softmax_call(module: ModuleType, key: dict) -> Callable[[], Any]:
    _softmax_wrap(module)
    rows, cols = _s(key["n_rows"]), _s(key["n_cols"])
    x = torch.randn((rows, cols), device=DEVICE, dtype=torch.float32)
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    kernel = module.softmax_tuned
    return lambda: kernel[(rows, 1, 1)](y, x, x.stride(0), y.stride(0), rows, cols, block, 2)


SOFTMAX = Case("softmax", "softmax", lambda m: (_softmax_wrap(m), m.softmax_tuned)[1],
               lambda rng, n: _unique(rng, n, lambda: {"n_rows": tokens(rng, 8192),
                                                       "n_cols": SOFTMAX_COLS[rng.integers(len(SOFTMAX_COLS))]}),
               _softmax_call, "n_rows")


# --------------------------------------------------------------------------------------- layer norm
def _ln_wrap(module: ModuleType) -> None:
    if not hasattr(module, "ln_fwd_tuned"):
        at = _autotune_of(module)
        module.ln_fwd_tuned = at(_warps(), key=["N"])(module._layer_norm_fwd_fused)
        module.ln_bwd_tuned = at(_warps(), key=["N"], reset_to_zero=["Lock", "DW", "DB"])(
            module._layer_norm_bwd_dx_fused)


def _ln_inputs(key: dict) -> dict:
    m, n = _s(key["M"]), _s(key["N"])
    x = torch.randn((m, n), device=DEVICE, dtype=torch.float16)
    return {"x": x, "w": torch.rand((n,), device=DEVICE, dtype=torch.float16),
            "b": torch.rand((n,), device=DEVICE, dtype=torch.float16), "y": torch.empty_like(x),
            "mean": torch.empty((m,), device=DEVICE, dtype=torch.float32),
            "rstd": torch.empty((m,), device=DEVICE, dtype=torch.float32),
            "block": min(65536 // x.element_size(), triton.next_power_of_2(n))}


def _ln_fwd_call(module: ModuleType, key: dict) -> Callable[[], Any]:
    _ln_wrap(module)
    t, kernel = _ln_inputs(key), module.ln_fwd_tuned
    m, n = t["x"].shape
    return lambda: kernel[(m,)](t["x"], t["y"], t["w"], t["b"], t["mean"], t["rstd"], t["x"].stride(0),
                                n, 1e-5, BLOCK_SIZE=t["block"])


def _ln_bwd_call(module: ModuleType, key: dict) -> Callable[[], Any]:
    _ln_wrap(module)
    t, kernel = _ln_inputs(key), module.ln_bwd_tuned
    m, n = t["x"].shape
    group = 64 if n > 8192 else 96 if n > 4096 else 128 if n > 1024 else 256  # the tutorial's heuristic
    locks = torch.zeros(2 * group, dtype=torch.int32, device=DEVICE)
    dw = torch.zeros((group, n), dtype=torch.float16, device=DEVICE)
    db = torch.zeros((group, n), dtype=torch.float16, device=DEVICE)
    dy, dx = torch.randn_like(t["x"]), torch.empty_like(t["x"])
    return lambda: kernel[(m,)](dx, dy, dw, db, t["x"], t["w"], t["mean"], t["rstd"], locks,
                                t["x"].stride(0), n, BLOCK_SIZE_N=t["block"], GROUP_SIZE_M=group)


def _ln_keys(rng: np.random.Generator, n: int) -> list[dict]:
    """The key is N alone (M is the grid): hidden sizes, multiples of 256 from 512 to 16,384 (63 distinct keys;
    the models' own 12 sizes alone could not fill a train and a test set of 20 each)."""
    return _unique(rng, n, lambda: {"M": 4096, "N": 256 * int(rng.integers(2, 65))})


LAYERNORM_FWD = Case("layernorm_fwd", "layernorm", lambda m: (_ln_wrap(m), m.ln_fwd_tuned)[1], _ln_keys,
                     _ln_fwd_call, "N")
LAYERNORM_BWD = Case("layernorm_bwd", "layernorm", lambda m: (_ln_wrap(m), m.ln_bwd_tuned)[1], _ln_keys,
                     _ln_bwd_call, "N")


# ---------------------------------------------------------------------------------------- attention
def _attention_call(module: ModuleType, key: dict) -> Callable[[], Any]:
    shape = (1, 32 // min(SHRINK, 32), max(128, _s(key["N_CTX"])), key["HEAD_DIM"])
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=torch.float16) for _ in range(3))
    return lambda: module.attention(q, k, v, False, 0.5, False)


ATTENTION = Case("attention", "attention", lambda m: m._attn_fwd,
                 lambda rng, n: _unique(rng, n, lambda: {"N_CTX": 128 * int(1 + rng.integers(64) * rng.random()),
                                                         "HEAD_DIM": int(rng.choice([64, 128]))}),
                 _attention_call, "N_CTX")

CASES = {c.name: c for c in (MATMUL, SOFTMAX, LAYERNORM_FWD, LAYERNORM_BWD, ATTENTION)}
