"""NVRTC through cuda-python's bindings: compile CUDA C++ to PTX or a cubin without a GPU or a context.

Why not CuPy: CuPy's RawModule needs a device (it asks the current one for its architecture), and
LS-CAT's working set is compiled in parallel processes, on this machine for filtering and PTX
features, and on the device for cubins, before any kernel runs.
"""

from __future__ import annotations

import ctypes
import glob
import os


class NvrtcError(RuntimeError):
    """Compilation failed; the message holds NVRTC's log."""


def _load_library() -> None:
    """Load libnvrtc from the nvidia-cuda-nvrtc wheel when the system loader cannot find it."""
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return
    for root in getattr(nvidia, "__path__", []):
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.*"))):
            if "builtins" not in lib:
                try:
                    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    continue
                os.environ.setdefault("LD_LIBRARY_PATH", os.path.dirname(lib))
                return


def available() -> bool:
    """True when cuda-python's NVRTC bindings and the library load."""
    try:
        compile_source('extern "C" __global__ void k() {}', "k", "ptx")
    except Exception:  # noqa: BLE001 - any import/load failure means "not here"
        return False
    return True


def compile_source(source: str, name: str, kind: str = "ptx", arch: int = 90,
                   options: tuple[str, ...] = ("-std=c++17",)) -> bytes:
    """Compile ``source`` for sm_``arch``: ``kind`` 'ptx' (compute_XX) or 'cubin' (sm_XX)."""
    _load_library()
    from cuda.bindings import nvrtc  # type: ignore[import-not-found]

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcError(f"nvrtcCreateProgram: {err}")
    target = f"compute_{arch}" if kind == "ptx" else f"sm_{arch}"
    opts = [f"--gpu-architecture={target}".encode(), *(o.encode() for o in options)]
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise NvrtcError(log.decode(errors="replace").strip()[:2000])
        if kind == "ptx":
            _, size = nvrtc.nvrtcGetPTXSize(prog)
            buf = b" " * size
            nvrtc.nvrtcGetPTX(prog, buf)
        else:
            _, size = nvrtc.nvrtcGetCUBINSize(prog)
            buf = b" " * size
            nvrtc.nvrtcGetCUBIN(prog, buf)
        return buf.rstrip(b"\0") if kind == "ptx" else buf
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
