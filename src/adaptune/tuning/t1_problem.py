"""Turn a Kernel Tuner T1 problem file into a tuning Problem (parsed, never evaluated)."""

from __future__ import annotations

from pathlib import Path

from adaptune.measure import KernelSpec
from adaptune.space import Space
from adaptune.store import load_t1, t1_arrays
from adaptune.tuning.problem import Problem

_LANGUAGES = {"opencl": "opencl", "cuda": "cuda", "cupy": "cuda", "hip": None}


def problem_from_t1(path: str | Path, seed: int = 0) -> Problem:
    """Space from TuningParameters + Conditions, kernel and launch rule from KernelSpecification.

    T1 files carry no reference output, so results are not verified (as in Kernel Tuner).
    """
    t1 = load_t1(path)
    language = t1.language.lower()
    if language not in _LANGUAGES or _LANGUAGES[language] is None:
        raise ValueError(f"{t1.path}: Language {t1.language!r} is not supported (OpenCL, CUDA)")
    if t1.global_size_type and t1.global_size_type.upper() not in ("CUDA", "OPENCL"):
        raise ValueError(f"{t1.path}: GlobalSizeType {t1.global_size_type!r} is not supported")
    space = Space(t1.params, constraints=t1.constraints, defaults=t1.defaults or None)
    block_names = tuple(t1.local_size.get(axis, "1") for axis in "XYZ")
    block_names = tuple(name if name in t1.params else f"block_size_{axis}"
                        for name, axis in zip(block_names, "xyz", strict=True))
    grid_div = tuple(list(d) if d is not None else [] for d in t1.grid_div)
    problem_size = tuple(t1.problem_size) if len(t1.problem_size) > 1 else t1.problem_size[0]
    spec = KernelSpec(
        source=t1.kernel_file.read_text(), name=t1.kernel_name, arguments=t1_arrays(t1, seed=seed),
        problem_size=problem_size, grid_div=grid_div, block_size_names=block_names,
        lang=_LANGUAGES[language], compiler_options=tuple(t1.compiler_options), shared_mem=t1.shared_memory,
    )
    return Problem(t1.benchmark_name or t1.kernel_name, spec, space)
