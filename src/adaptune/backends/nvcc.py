"""CUDA kernels built by nvcc where NVRTC refuses them: sources whose headers hold host code.

Why: Kernel Tuner's default ``lang="CUDA"`` compiles with nvcc (PyCUDA's ``SourceModule``), so a kernel that
includes ``<cub/cub.cuh>`` (its ``examples/cuda/expdist.py``) builds there. adaptune's CUDA backend compiles with
NVRTC (CuPy), which stops at the first host function in such a header ("... is not allowed in JIT mode"): every
configuration would be a compile error. Such a source is built by nvcc into a cubin for the GPU's architecture
instead, with the options NVRTC got (the user's, and CuPy's flush-to-zero, so both compilers make the same
arithmetic), and the kernel is looked up in the cubin's symbols. Only NVRTC's refusal of host code sends a
source here: any other NVRTC error is the kernel's own and is reported as it is.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from adaptune.backends.base import CompileError

#: NVRTC's words for host code in a source it compiles (a header written for nvcc, such as CUB's)
HOST_CODE_REFUSED = "is not allowed in JIT mode"
#: nvcc options that name an architecture (the cubin's is the GPU's own)
ARCH_OPTION = re.compile(r"^(?:-arch|--gpu-architecture)(?:=|$)")
COMPILE_TIMEOUT_S = 600
LOG_CHARS = 4000


def refuses_host_code(log: str) -> bool:
    """Whether an NVRTC log says the source holds host code (which nvcc would build)."""
    return HOST_CODE_REFUSED in log


def kernel_identity(source: str, expr: str, options: Sequence[str]) -> tuple[str, int, tuple[str, ...]]:
    """The kernel a source with its configuration's defines is (``backends.base.inject_defines`` puts them before
    ``#line 1``): NVRTC's refusal of its headers' host code holds for every configuration of it."""
    return expr, hash(source.split("#line 1\n", 1)[-1]), tuple(options)


_REFUSED: set[tuple[str, int, tuple[str, ...]]] = set()  # this process's kernels NVRTC refused for host code


def refused_before(source: str, expr: str, options: Sequence[str]) -> bool:
    """Whether NVRTC refused this kernel's host code in this process already (then nvcc builds it at once)."""
    return kernel_identity(source, expr, options) in _REFUSED


def remember_refusal(source: str, expr: str, options: Sequence[str]) -> None:
    """NVRTC refused this kernel's host code: its other configurations go to nvcc without asking NVRTC again."""
    _REFUSED.add(kernel_identity(source, expr, options))


def without_arch(options: Sequence[str]) -> list[str]:
    """The options less any architecture they name (with its value, when that is the next option)."""
    out, i = [], 0
    while i < len(options):
        if ARCH_OPTION.match(options[i]):
            i += 1 if "=" in options[i] else 2
            continue
        out.append(options[i])
        i += 1
    return out


def nvcc_cubin(target: str, source: str, expr: str, options: Sequence[str]) -> tuple[bytes, str]:
    """``source`` (defines already in) built by nvcc into a cubin for ``target`` (``sm_90``): the image and the
    symbol of the kernel ``expr`` names. Raises :class:`CompileError` with nvcc's log."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise CompileError("NVRTC refuses this source's host code, and nvcc (which builds it) is not on PATH")
    with tempfile.TemporaryDirectory(prefix="adaptune_nvcc_") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.cubin"
        src.write_text(source)
        command = [nvcc, "-cubin", f"-arch={target}", "-ftz=true", *without_arch(options), "-o", str(out), str(src)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CompileError(f"nvcc took over {COMPILE_TIMEOUT_S} s") from None
        if done.returncode != 0:
            log = (done.stderr + done.stdout).strip()[-LOG_CHARS:]
            raise CompileError(f"nvcc compilation failed ({' '.join(command[1:-3])}):\n{log}", log=log)
        image = out.read_bytes()
    return image, kernel_symbol(image, expr)


def kernel_symbol(image: bytes, expr: str) -> str:
    """The symbol of the kernel ``expr`` names in a cubin: ``expr`` itself (``extern "C"``), else the one kernel
    whose demangled name is ``expr`` called (C++ linkage, a template instance)."""
    kernels = [name[len(".text."):] for name in elf_section_names(image) if name.startswith(".text.")]
    if expr in kernels:
        return expr
    found = [k for k, plain in zip(kernels, demangled(kernels), strict=True)
             if re.search(rf"(?:^|\s){re.escape(expr)}\(", plain)]
    if len(found) != 1:
        raise CompileError(f"kernel {expr!r} is not one of the cubin's kernels ({', '.join(kernels) or 'none'})")
    return found[0]


def demangled(symbols: list[str]) -> list[str]:
    """C++ symbols as declarations, by the CUDA toolkit's ``cu++filt`` (unchanged where it is missing)."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None or not symbols:
        return list(symbols)
    done = subprocess.run([tool], input="\n".join(symbols), capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    return lines if done.returncode == 0 and len(lines) == len(symbols) else list(symbols)


def elf_section_names(image: bytes) -> list[str]:
    """Section names of a 64-bit little-endian ELF file (a cubin names each kernel's code ``.text.<symbol>``).
    Hand-written: the standard library reads no ELF, and the section header table is all that is needed."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        raise CompileError("nvcc wrote no 64-bit little-endian ELF cubin")

    def number(at: int, size: int) -> int:
        return int.from_bytes(image[at:at + size], "little")

    table, entry, count, names_index = number(0x28, 8), number(0x3A, 2), number(0x3C, 2), number(0x3E, 2)
    names_at = number(table + names_index * entry + 0x18, 8)  # the section-name string table's offset
    out = []
    for i in range(count):
        start = names_at + number(table + i * entry, 4)
        out.append(image[start:image.index(b"\0", start)].decode(errors="replace"))
    return out
