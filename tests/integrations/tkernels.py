"""Small Triton kernels for the drop-in's tests, importable by adaptune's worker process (run under the interpreter)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton.jit: these kernels run on the CPU in CI

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from adaptune import triton as at  # noqa: E402


def _crash(_nargs: dict) -> None:
    if os.environ.get("TKERNELS_CRASH") == "1":
        os._exit(9)  # stands for a configuration that kills the process (an illegal address, say)


@at.autotune(configs=[at.Config({"BLOCK": 16}), at.Config({"BLOCK": 32}, pre_hook=_crash), at.Config({"BLOCK": 64})],
             key=["n"])
@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def make_args(key: dict) -> tuple:
    n = int(key["n"])
    x, y = torch.arange(n, dtype=torch.float32), torch.ones(n)
    return (lambda meta: (triton.cdiv(n, meta["BLOCK"]),)), (x, y, torch.empty(n), n), {}
