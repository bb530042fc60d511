"""Kernels compiled in one process and loaded in another: compilation fanned out to CPU workers.

A measuring worker owns a device and compiles ahead in its own thread pool; on a cluster whose GPU nodes
have few cores, or with kernels that take seconds to compile, the compiler becomes the bottleneck. Then
separate CPU workers compile (:func:`compile_binary`) and the measuring worker only loads the result
(``Backend.load_binary``), which costs a module load instead of a compile.

- CUDA: NVRTC straight to a cubin for the GPU's real architecture (``sm_90``), through CuPy's thin NVRTC
  binding, so a compile node needs the CUDA libraries but no GPU. The options are those the CUDA backend's own
  compile (CuPy ``RawModule``) gives NVRTC (:func:`nvrtc_options`), so a binary made here is the code the worker
  would have made; a source whose headers hold host code is built by nvcc, as there (``backends.nvcc``).
- OpenCL: the program built on a device of the same kind (same platform, name and driver: the binary is
  device code) and its binary taken from the program.

A binary that cannot be made or loaded is never fatal: the measuring worker compiles the source itself, and
a kernel that really fails to compile is reported by that compile, as without fan-out.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adaptune.backends.base import CompileError
from adaptune.backends.nvcc import nvcc_cubin, refused_before, refuses_host_code, remember_refusal
from adaptune.backends.opencl import _BUILD_LOCK, _build_log, _cl, opencl_device_key, opencl_devices


@dataclass(frozen=True)
class KernelBinary:
    """Device code a worker can load: for ``target`` (``sm_90``, or an OpenCL device key), the symbol to
    look up (CUDA: NVRTC's lowered name of the kernel's name expression)."""

    platform: str
    target: str
    image: bytes
    symbol: str


@dataclass(frozen=True)
class CompileFailure:
    """What a compile elsewhere said where the kernel did not compile: handed to the worker in place of a
    binary when that compile was the worker's own (same compiler, same options), so the worker reports it
    without compiling again (a failing compile can take as long as a good one: tens of seconds)."""

    log: str


def cuda_target(compute_capability: str) -> str:
    """``"9.0"`` -> ``"sm_90"``: the real architecture a cubin is compiled for."""
    major, _, minor = str(compute_capability).partition(".")
    return f"sm_{int(major)}{int(minor or 0)}"


def compile_binary(platform: str, target: str, source: str, expr: str, options: Sequence[str]) -> KernelBinary:
    """Compile ``source`` (defines already in) for ``target``; raises :class:`CompileError`.
    (OpenCL: on this host's device of that kind.)"""
    if platform == "cuda":
        return _nvrtc_cubin(target, source, expr, tuple(options))
    if platform == "opencl":
        return _opencl_binary(target, source, expr, tuple(options))
    raise ValueError(f"no binaries for the {platform!r} backend")


def nvrtc_options(source: str, options: tuple[str, ...]) -> tuple[str, ...]:
    """The options CuPy's ``RawModule`` compiles ``source`` with: flush-to-zero always (CuPy adds ``-ftz=true``);
    where the source includes headers, also CuPy's include paths (its bundled CUB, Thrust and libcu++ first) and
    C++ dialect, as CuPy assembles them. That needs CuPy's import (~0.3 s in a fresh compile process), so a source
    without ``#include`` skips it: the paths cannot matter there, and CuPy 14's dialect, C++17, is NVRTC's own."""
    if "#include" in source:
        from cupy._core.core import assemble_cupy_compiler_options  # heavy: only for sources with headers

        options = tuple(assemble_cupy_compiler_options(tuple(options)))
    return (*options, "-ftz=true")


def _nvrtc_cubin(target: str, source: str, expr: str, options: tuple[str, ...]) -> KernelBinary:
    from cupy_backends.cuda.libs import nvrtc  # CuPy's binding of NVRTC; needs no GPU

    if refused_before(source, expr, options):
        return KernelBinary("cuda", target, *nvcc_cubin(target, source, expr, options))
    prog = nvrtc.createProgram(source, "kern.cu", (), ())
    try:
        nvrtc.addNameExpression(prog, expr)
        try:
            nvrtc.compileProgram(prog, [*nvrtc_options(source, options), f"-arch={target}"])
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            if not refuses_host_code(log):
                raise CompileError(f"NVRTC compilation failed: {exc}\n{log}", log=log) from None
            remember_refusal(source, expr, options)
            return KernelBinary("cuda", target, *nvcc_cubin(target, source, expr, options))
        return KernelBinary("cuda", target, bytes(nvrtc.getCUBIN(prog)), nvrtc.getLoweredName(prog, expr))
    finally:
        nvrtc.destroyProgram(prog)


def _opencl_binary(target: str, source: str, expr: str, options: tuple[str, ...]) -> KernelBinary:
    cl = _cl()
    found = [d for p, d in opencl_devices() if opencl_device_key(p, d) == target]
    if not found:
        raise CompileError(f"no OpenCL device here is {target!r} (an OpenCL binary is device code)")
    ctx = cl.Context([found[0]])
    try:
        with _BUILD_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = cl.Program(ctx, source).build(options=list(options))
    except cl.RuntimeError as exc:
        log = _build_log(str(exc))
        raise CompileError(f"OpenCL build failed:\n{log}", log=log) from None
    return KernelBinary("opencl", target, bytes(program.get_info(cl.program_info.BINARIES)[0]), expr)


def binary_target_of(info: Any) -> str | None:
    """The target of the device a ``DeviceInfo`` describes (what its worker's ``binary_target`` says)."""
    if info.platform == "cuda" and "compute_capability" in info.properties:
        return cuda_target(info.properties["compute_capability"])
    if info.platform.startswith("opencl:"):
        return f"{info.platform.split(':', 1)[1]}|{info.name}|{info.driver_version}"
    return None
