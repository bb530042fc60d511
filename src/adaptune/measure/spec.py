"""What to measure (a kernel or a callable) and how (repeats, warm-up, timeout, observers).

Specs travel to the worker process pickled (cloudpickle) over a socket between our own processes;
they are never written to or read from files. Callables in a spec (answer checks, geometry,
problem sizes, callable variants) may be importable functions (sent by reference) or functions,
lambdas and closures defined in a script or notebook (sent by value).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.backends.signature import check_kernel_arguments
from adaptune.measure.choice import ArgumentChoice

Tolerance = float | Sequence[float | None]
Answer = Sequence[Any] | Callable[[list[Any]], bool] | None
SizeTerm = int | str | Callable[[dict[str, Any]], int]
LANGS = ("opencl", "cuda", "c")


def _check_arguments(arguments: Sequence[Any]) -> None:
    for i, arg in enumerate(arguments):
        if isinstance(arg, np.ndarray | np.generic | ArgumentChoice):
            continue
        hint = " such as np.int32(n)" if isinstance(arg, int | float | bool) else ""
        raise TypeError(f"kernel argument {i} is a {type(arg).__name__}; pass NumPy arrays and NumPy "
                        f"scalars{hint} so the kernel gets the right types")


def _check_answer(answer: Answer, n: int, what: str) -> None:
    if answer is None or callable(answer):
        return
    if not isinstance(answer, Sequence) or isinstance(answer, str | bytes):
        raise TypeError(f"answer must be a list aligned with the {what}, or a callable(outputs) -> bool")
    if n and len(answer) != n:
        raise ValueError(f"answer has {len(answer)} entries but there are {n} {what}; "
                         "use None for entries that are not checked")


def _check_tolerance(name: str, tol: Tolerance, n: int) -> None:
    if isinstance(tol, int | float):
        if tol < 0 or math.isnan(tol):
            raise ValueError(f"{name} must be >= 0, got {tol}")
        return
    if n and len(tol) != n:
        raise ValueError(f"{name} has {len(tol)} entries but there are {n} outputs")


def looks_like_a_filename(source: str) -> bool:
    """Kernel Tuner's rule (``kernel_tuner.util.looks_like_a_filename``) for a kernel source string that
    names a file: at most 250 characters, none of ``();{}\\``, no ``__global__ ``, ``__kernel ``, ``void ``
    or ``float ``, and one of ``.c``, ``.opencl``, ``.F``, ``.jl`` in it (``.cl`` and ``.cu`` contain ``.c``)."""
    return (len(source) <= 250 and not any(c in source for c in "();{}\\")
            and not any(s in source for s in ("__global__ ", "__kernel ", "void ", "float "))
            and any(s in source for s in (".c", ".opencl", ".F", ".jl")))


@dataclass(eq=False)
class KernelSpec:
    """An OpenCL or CUDA kernel with its arguments and launch-geometry rules (Kernel Tuner's).

    ``source``: the kernel text, a file (a ``Path``, or a string that Kernel Tuner would take for a file
    name, :func:`looks_like_a_filename`; a file that does not exist is "not found: PATH"), or a code generator
    ``callable(config) -> str`` (Kernel Tuner's generators and template ``render`` methods), called once per
    configuration.

    ``problem_size``: int, param name, callable(config) or a tuple of up to 3 of these.
    ``grid_div``: per dimension a list of param names / ints / expressions whose product divides
    the problem size (default ``block_size_x``/``_y``/``_z``). ``geometry(config) -> (grid, block)``
    overrides both. ``restore_inputs``: True (every array), False, or argument indices restored
    device-to-device before every launch. ``poison_outputs``: fill checked outputs with NaN /
    0x7f.. before the checked run, so a kernel that skips elements cannot pass by accident. Only the
    outputs ``answer`` checks are copied back (a callable answer: all, or those its ``reads`` attribute lists).
    ``shared_mem``: dynamic shared memory per block in bytes (CUDA only): an int, a parameter
    name or expression, or callable(config). ``check_arguments``: compare the arguments with the
    kernel's parameter list (count, pointer or scalar, element type) before anything is launched.
    ``constant_args``: CUDA ``__constant__`` symbols by name, filled after each compile (Kernel Tuner's
    ``cmem_args``; cuda backend only). An argument may be an :class:`ArgumentChoice` (a tuning parameter
    picks it, e.g. its precision). ``output_metrics``: callables(outputs) -> {name: value} run on the checked
    run's outputs (error metrics against a reference, Kernel Tuner's output observers); their values are
    recorded with the result's observers.
    """

    source: str | Path | Callable[[dict[str, Any]], str]
    name: str
    arguments: Sequence[Any]
    problem_size: SizeTerm | Sequence[SizeTerm] = 1
    grid_div: Sequence[Any] | None = None
    block_size_names: Sequence[str] = ("block_size_x", "block_size_y", "block_size_z")
    answer: Answer = None
    atol: Tolerance = 1e-6
    rtol: Tolerance = 1e-5
    lang: str | None = None
    compiler_options: Sequence[str] = ()
    defines: Mapping[str, Any] | None = None
    template_params: Sequence[str] | None = None
    restore_inputs: bool | Sequence[int] = True
    geometry: Callable[[dict[str, Any]], tuple[Sequence[int], Sequence[int]]] | None = None
    poison_outputs: bool = True
    shared_mem: SizeTerm = 0
    check_arguments: bool = True
    constant_args: Mapping[str, np.ndarray] | None = None
    output_metrics: Sequence[Callable[[list[Any]], Mapping[str, float]]] = ()
    source_text: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.source, str) and looks_like_a_filename(self.source):
            self.source = Path(self.source)
        if isinstance(self.source, Path):
            if not self.source.is_file():
                raise FileNotFoundError(f"not found: {self.source}")
            try:
                self.source_text = self.source.read_text()
            except OSError as exc:
                raise ValueError(f"cannot read kernel source {self.source}: {exc}") from None
            if self.lang is None:
                self.lang = {".cl": "opencl", ".cu": "cuda", ".cuh": "cuda"}.get(self.source.suffix)
        elif isinstance(self.source, str):
            self.source_text = self.source
        elif callable(self.source):
            self.source_text = ""  # generated per configuration: nothing to check up front
        else:
            raise TypeError("source must be the kernel text (str), a pathlib.Path to it, or callable(config) -> str")
        if not self.name or not isinstance(self.name, str):
            raise ValueError("name must be the kernel function's name")
        if self.lang is not None and self.lang not in LANGS:
            raise ValueError(f"lang must be one of {LANGS}, got {self.lang!r}")
        self.arguments = list(self.arguments)
        _check_arguments(self.arguments)
        chosen = any(isinstance(a, ArgumentChoice) for a in self.arguments)  # types differ per configuration
        if self.check_arguments and self.source_text and not chosen:
            check_kernel_arguments(self.source_text, self.name, self.arguments, self.defines)
        _check_answer(self.answer, len(self.arguments), "kernel arguments")
        _check_tolerance("atol", self.atol, len(self.arguments))
        _check_tolerance("rtol", self.rtol, len(self.arguments))
        if len(self.block_size_names) > 3:
            raise ValueError("block_size_names has at most 3 names (x, y, z)")
        if self.grid_div is not None and len(self.grid_div) > 3:
            raise ValueError("grid_div has at most 3 entries (x, y, z)")
        if not isinstance(self.restore_inputs, bool):
            bad = [i for i in self.restore_inputs if not 0 <= int(i) < len(self.arguments)]
            if bad:
                raise ValueError(f"restore_inputs names arguments {bad} that do not exist")
        if self.constant_args and self.lang == "opencl":
            raise ValueError("constant_args (CUDA __constant__ memory) need the cuda backend")
        if self.template_params is not None and self.lang == "opencl":
            raise ValueError("template_params need C++ templates: only the cuda backend has them")

    def text_for(self, config: Mapping[str, Any]) -> str:
        """The kernel text of one configuration (the generator's output for a generated source)."""
        if not callable(self.source):
            return self.source_text
        text = self.source(dict(config))
        if not isinstance(text, str):
            raise TypeError(f"the kernel source generator returned {type(text).__name__}, not the kernel text (str)")
        return text

    def restored_indices(self) -> list[int]:
        """Array arguments put back to their initial contents before every launch."""
        def array(a: Any) -> bool:
            return isinstance(a, np.ndarray) or (isinstance(a, ArgumentChoice) and a.is_array())

        if self.restore_inputs is True:
            return [i for i, a in enumerate(self.arguments) if array(a)]
        if self.restore_inputs is False:
            return []
        return sorted({int(i) for i in self.restore_inputs if array(self.arguments[int(i)])})


@dataclass(frozen=True)
class GeneratedSources:
    """A code generator's texts made ahead, one per configuration (``names``: the parameters keying ``texts``):
    the source to hand the worker for a generator that cannot travel to it (a jinja2 ``Template.render``).
    It lives in a module the worker imports anyway, so unpickling it imports nothing more (a function of
    ``adaptune.integrations`` would import the integrations and, through them, the search strategies and
    scikit-learn: 2 s of the worker's start)."""

    names: tuple[str, ...]
    texts: Mapping[tuple[Any, ...], str]

    def __call__(self, config: Mapping[str, Any]) -> str:
        return self.texts[tuple(config[n] for n in self.names)]


@dataclass(eq=False)
class CallableSpec:
    """A Python variant ``fn(config, *arguments) -> outputs`` (one array, a tuple of them, or None).

    ``answer``: list aligned with the outputs (None = not checked) or callable(outputs) -> bool.
    ``restore_inputs``: copy the arguments back before every call, for callables that work in place.
    """

    fn: Callable[..., Any]
    arguments: Sequence[Any] = ()
    answer: Answer = None
    atol: Tolerance = 1e-6
    rtol: Tolerance = 1e-5
    restore_inputs: bool = False

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError("fn must be callable as fn(config, *arguments)")
        self.arguments = list(self.arguments)
        _check_answer(self.answer, 0, "outputs")
        _check_tolerance("atol", self.atol, 0)
        _check_tolerance("rtol", self.rtol, 0)


@dataclass(frozen=True)
class MeasureSettings:
    """How to measure one configuration.

    ``repeats="auto"`` repeats until the 95 % confidence interval of the median is within
    ``auto_rel_ci`` of it (at least ``auto_min_repeats``, at most ``auto_max_repeats`` runs or
    ``auto_max_seconds`` of benchmarking). ``timeout_s`` bounds one configuration's runs;
    ``compile_timeout_s`` bounds its compilation. Observers are read-only (``"nvml"``).
    """

    repeats: int | str = 7
    warmup: int = 1
    timeout_s: float = 10.0
    verify: bool = True
    observers: Sequence[str] = ()
    compile_timeout_s: float = 300.0
    compile_workers: int | None = None
    cache_dir: str | None = None
    auto_min_repeats: int = 5
    auto_max_repeats: int = 100
    auto_max_seconds: float = 2.0
    auto_rel_ci: float = 0.02
    #: Racing: stop repeating after the first two timed runs when both are slower than ``discard_factor`` times
    #: the best time so far (passed in by the tuner). A configuration that far behind cannot become the
    #: best, so its remaining repeats are wasted device time. None measures every repeat.
    discard_factor: float | None = None
    #: Keep the device busy just before each timed run of a short kernel, so that the timed window holds the
    #: kernel alone, not also the host's enqueue latency (CUDA: :data:`adaptune.backends.cuda.HOLD_NS`); off
    #: while observers read the device's power. Off by default: times of kernels measured with it are a few
    #: microseconds shorter than those of library calls or callables measured without it.
    hold_short_launches: bool = False
    #: Timed warm-up runs until the kernel's speed is steady, before the timed repeats (:func:`timing.settle`):
    #: the steady speed, not the one just after the build. Off by default, as in Kernel Tuner, whose clock the
    #: drop-in is judged on: on PoCL (2 cores) the first ~10 runs after a build were up to 2-3x slower, and
    #: settling them cost Kernel Tuner's OpenCL examples 15-20 % more wall time (kt_examples README).
    settle: bool = False

    def __post_init__(self) -> None:
        if self.repeats != "auto" and (not isinstance(self.repeats, int) or self.repeats < 1):
            raise ValueError(f"repeats must be a positive int or 'auto', got {self.repeats!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be an int >= 0, got {self.warmup!r}")
        if self.discard_factor is not None and not self.discard_factor > 1:
            raise ValueError(f"discard_factor must be > 1 (or None), got {self.discard_factor!r}")
        for name in ("timeout_s", "compile_timeout_s", "auto_max_seconds", "auto_rel_ci"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if not 1 <= self.auto_min_repeats <= self.auto_max_repeats:
            raise ValueError("need 1 <= auto_min_repeats <= auto_max_repeats")
        if isinstance(self.observers, str):
            object.__setattr__(self, "observers", (self.observers,))
        unknown = set(self.observers) - {"nvml"}
        if unknown:
            raise ValueError(f"unknown observers {sorted(unknown)}; available: nvml")
