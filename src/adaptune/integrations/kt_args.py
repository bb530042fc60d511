"""Kernel Tuner's ``tune_kernel`` arguments as adaptune objects: a KernelSpec, a Space, a strategy, observers.

Each function translates one argument (or a few that belong together) and raises a one-line error naming
the Kernel Tuner parameter when adaptune cannot honour it. Nothing here evaluates text: restrictions,
problem sizes and grid divisors given as strings go through :mod:`adaptune.space.safe_expr`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cloudpickle
import numpy as np

from adaptune.accuracy import AccuracyObserver, TunablePrecision, observe_outputs
from adaptune.measure import GeneratedSources, KernelSpec
from adaptune.measure.choice import ArgumentChoice
from adaptune.records import DeviceInfo, Result
from adaptune.search import STRATEGIES as ADAPTUNE_STRATEGIES
from adaptune.space import Space

DEFAULT_BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
#: Threads per block on the backends where every device allows the same: CUDA has allowed 1 024 since compute
#: capability 2.0 (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"), and Kernel
#: Tuner's C backend sets 1 024. An OpenCL device's own limit is known only once it is opened (in the worker, not
#: here: a driver loaded in this process would stop the worker being forked): :func:`within_device_threads`.
FIXED_MAX_THREADS = {"cuda": 1024, "c": 1024}
#: Kernel Tuner's ``lang`` (upper-cased) -> adaptune backend; the others have no adaptune backend.
LANGS = {"CUDA": "cuda", "CUPY": "cuda", "NVCUDA": "cuda", "OPENCL": "opencl", "C": "c"}
#: Kernel Tuner's strategies -> adaptune's of the same family (docs/kernel_tuner.md).
STRATEGIES = {
    "brute_force": "brute_force", "random_sample": "random",
    "genetic_algorithm": "genetic", "diff_evo": "differential_evolution", "pso": "differential_evolution",
    "firefly_algorithm": "differential_evolution",
    "simulated_annealing": "annealing", "dual_annealing": "annealing", "basinhopping": "annealing",
    "greedy_ils": "greedy_ils", "greedy_mls": "greedy_ils", "ordered_greedy_mls": "greedy_ils", "mls": "greedy_ils",
    "minimize": "greedy_ils",
    "bayes_opt": "bayes", "skopt": "bayes",
}
#: Kernel Tuner's NVML observables -> the keys of adaptune's NVML observer (per-run energy is divided out).
NVML_OBSERVABLES = {"nvml_energy": "energy_j", "nvml_power": "power_w", "temperature": "temperature_c",
                    "core_freq": "sm_clock_mhz"}


class UnsupportedOption(ValueError):  # noqa: N818 - reads as the error it is: "UnsupportedOption: cmem_args ..."
    """A Kernel Tuner parameter adaptune cannot honour (never silently ignored)."""


def refuse(name: str, why: str) -> UnsupportedOption:
    return UnsupportedOption(f"{name}: {why} (adaptune.tune_kernel refuses it rather than ignore it)")


# ---------------------------------------------------------------------------------------------- kernel
def looks_like_a_filename(text: str) -> bool:
    """Kernel Tuner's test (``util.looks_like_a_filename``): short, no code characters, a source suffix."""
    if len(text) > 250 or any(c in text for c in "();{}\\"):
        return False
    if any(s in text for s in ("__global__ ", "__kernel ", "void ", "float ")):
        return False
    return any(s in text for s in (".c", ".opencl", ".F", ".jl"))


def kernel_text(source: Any) -> str | Callable[[dict[str, Any]], str]:
    """The kernel text (read from a file when it names one) or the code generator itself."""
    if callable(source):
        return source
    if isinstance(source, Path):
        return source.read_text()
    if isinstance(source, str):
        if looks_like_a_filename(source):
            path = Path(source)
            if not path.is_file():
                raise FileNotFoundError(f"kernel_source {source!r} looks like a file name but there is no such file")
            return path.read_text()
        return source
    raise TypeError(f"kernel_source must be code, a file name, a list of files or a callable, not {type(source).__name__}")


def split_sources(kernel_source: Any) -> tuple[Any, list[str]]:
    """(the kernel's own source, include options for the supporting files of a list of files)."""
    if isinstance(kernel_source, list | tuple):
        if not kernel_source:
            raise ValueError("kernel_source is an empty list")
        dirs = sorted({str(Path(f).resolve().parent) for f in kernel_source[1:]})
        return kernel_source[0], [f"-I{d}" for d in dirs]
    return kernel_source, []


def detect_lang(text: str | Callable[..., str], lang: str | None) -> str:
    """adaptune's backend for Kernel Tuner's ``lang`` (detected from the code when None)."""
    if lang is None:
        if callable(text):
            raise TypeError("lang: give the language (e.g. lang='OpenCL') when kernel_source is a code generator")
        lowered = text.lower()
        lang = "CUDA" if "__global__" in lowered else "OpenCL" if "__kernel" in lowered else "C"
    backend = LANGS.get(str(lang).upper())
    if backend is None:
        raise refuse("lang", f"{lang!r} has no adaptune backend (adaptune runs CUDA, CuPy, NVCUDA, OpenCL and C code)")
    return backend


def source_backend(kernel_source: Any, lang: str | None) -> str:
    """adaptune's backend for this kernel source and ``lang`` (what :func:`kernel_spec` will choose)."""
    return detect_lang(kernel_text(split_sources(kernel_source)[0]), lang)


def device_argument(backend: str, kernel_source: Any, platform: int, device: int, compiler: str | None) -> Any:
    """What adaptune's backend takes as its device: OpenCL (platform, device); CUDA the device index; C (Kernel
    Tuner ignores the device there) the compiler and the suffix of the user's file, which pick how it compiles."""
    if backend == "c":
        own = split_sources(kernel_source)[0]
        named = isinstance(own, str | Path) and looks_like_a_filename(str(own))
        return compiler or "g++", Path(own).suffix if named and Path(own).suffix else None
    if compiler:
        raise refuse("compiler", "adaptune compiles CUDA and OpenCL kernels with the device's own compiler "
                     "(NVRTC, OpenCL); a host compiler is chosen only for lang='C'")
    return (platform, device) if backend == "opencl" else device


def host_arguments(arguments: Sequence[Any], what: str = "arguments") -> list[Any]:
    """NumPy arrays and scalars; CuPy arrays and torch tensors are copied to the host (adaptune uploads them)."""
    return [host_value(arg, i, what) for i, arg in enumerate(arguments)]


def host_value(arg: Any, i: int, what: str) -> Any:
    if type(arg).__module__.startswith("kernel_tuner"):
        raise refuse(what, f"entry {i} is a Kernel Tuner {type(arg).__name__}; pass NumPy arrays")
    if hasattr(arg, "__cuda_array_interface__") and hasattr(arg, "get"):  # CuPy
        return arg.get()
    if type(arg).__module__.startswith("torch"):
        return arg.detach().cpu().numpy()
    return arg


def kernel_arguments(arguments: Sequence[Any]) -> list[Any]:
    """:func:`host_arguments`, with Kernel Tuner's ``Tunable`` arguments as :class:`ArgumentChoice`."""
    out = []
    for i, arg in enumerate(arguments):
        choice = tunable_argument(arg, i)
        out.append(choice if choice is not None else host_value(arg, i, "arguments"))
    return out


def tunable_argument(arg: Any, i: int) -> ArgumentChoice | None:
    """A ``Tunable``/``TunablePrecision`` (Kernel Tuner's own, recognised by its ``param_key`` and arrays, or
    :mod:`adaptune.accuracy`'s) as an :class:`ArgumentChoice`; None for any other argument."""
    key = getattr(arg, "param_key", None)
    if key is None or not (callable(key) or isinstance(key, str)):
        return None
    if isinstance(arg, TunablePrecision):  # adaptune's: nothing cast yet
        return ArgumentChoice(key, base=host_value(arg.array, i, "arguments"), casts=arg.dtypes)
    variants = dict(getattr(arg, "data", None) or {})
    if not variants:
        raise refuse("arguments", f"entry {i} ({type(arg).__name__}) has no arrays to choose from")
    arrays = {k: host_value(v, i, "arguments") for k, v in variants.items()}
    widest = max(arrays.values(), key=lambda a: np.dtype(a.dtype).itemsize)
    if (type(arg).__name__ == "TunablePrecision" and widest.dtype.kind == "f"
            and all(np.shape(a) == np.shape(widest) for a in arrays.values())):
        # Kernel Tuner cast every precision of the same array up front: the widest travels to the worker and
        # the others are cast from it where a configuration needs them (the same values: one rounding each)
        return ArgumentChoice(key, base=widest, casts={k: a.dtype for k, a in arrays.items()})
    return ArgumentChoice(key, options=arrays)


def template_instance(kernel_name: str, param_names: Sequence[str]) -> tuple[str, list[str] | None, dict[str, str]]:
    """``vector_add<float, block_size_x>``: (``vector_add``, its template arguments as parameter names, the
    literal ones as hidden one-value parameters). A name without tunable arguments stays as it is."""
    if "<" not in kernel_name or not kernel_name.endswith(">"):
        return kernel_name, None, {}
    base, _, inner = kernel_name.partition("<")
    args, depth, current = [], 0, ""
    for ch in inner[:-1]:
        depth += (ch in "<(") - (ch in ">)")
        if ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += ch
    args.append(current.strip())
    if not any(a in param_names for a in args):
        return kernel_name, None, {}
    hidden = {f"_kt_template_{i}": a for i, a in enumerate(args) if a not in param_names}
    names = [a if a in param_names else f"_kt_template_{i}" for i, a in enumerate(args)]
    return base.strip(), names, hidden


def problem_size_terms(problem_size: Any) -> Any:
    """Kernel Tuner's problem size (int, expression, tuple of those or callable) with NumPy ints made plain."""
    if callable(problem_size):
        return problem_size
    if isinstance(problem_size, np.integer):
        return int(problem_size)
    if isinstance(problem_size, list | tuple):
        if len(problem_size) > 3:
            raise ValueError(f"problem_size has {len(problem_size)} dimensions; at most 3")
        return tuple(int(p) if isinstance(p, np.integer) else p for p in problem_size)
    return problem_size


def grid_divisors(x: Any, y: Any, z: Any) -> list[Any] | None:
    """``grid_div_x/y/z`` as adaptune's per-dimension list (None keeps the block-size default)."""
    divs = [x, y, z]
    if all(d is None for d in divs):
        return None
    return [list(d) if isinstance(d, tuple) else d for d in divs]


def block_names(names: Sequence[str] | None) -> tuple[str, ...]:
    names = list(names or [])
    if len(names) > 3 or not all(isinstance(n, str) for n in names):
        raise ValueError("block_size_names must be a list of at most 3 names")
    return tuple(names + list(DEFAULT_BLOCK_NAMES[len(names):]))


def shared_memory(smem_args: Mapping[str, Any] | None, backend: str) -> Any:
    """Dynamic shared memory per block from Kernel Tuner's ``smem_args={"size": ...}`` (CUDA only)."""
    if not smem_args:
        return 0
    if backend != "cuda":
        raise refuse("smem_args", "dynamic shared memory needs a CUDA kernel; in OpenCL size __local arrays with a "
                     "tunable parameter")
    unknown = sorted(set(smem_args) - {"size"})
    if unknown:
        raise refuse("smem_args", f"keys {unknown}: only 'size' is supported")
    return smem_args.get("size", 0)


def portable_source(spec: KernelSpec, space: Space, limit: int = 100_000) -> KernelSpec:
    """A generator the worker process cannot receive (a jinja2 ``Template.render`` does not survive pickling)
    is run here, once per configuration, and the worker gets the texts."""
    if not callable(spec.source):
        return spec
    try:
        cloudpickle.loads(cloudpickle.dumps(spec.source))
        return spec
    except Exception:  # noqa: BLE001 - whatever the pickler raises, the texts are made here instead
        pass
    if len(space) > limit:
        raise ValueError(f"kernel_source: this code generator cannot be sent to the worker process, and the space "
                         f"has {len(space)} configurations (more than {limit}) to generate ahead")
    configs = (space.config(i) for i in range(len(space)))
    texts = {tuple(c[n] for n in space.names): spec.text_for(c) for c in configs}
    return replace(spec, source=GeneratedSources(space.names, texts))


def constant_memory(cmem_args: Mapping[str, Any] | None, backend: str) -> dict[str, Any] | None:
    """Kernel Tuner's ``cmem_args`` (CUDA ``__constant__`` symbols by name) as host arrays."""
    if not cmem_args:
        return None
    if backend != "cuda":
        raise refuse("cmem_args", "constant memory arguments need a CUDA kernel")
    return dict(zip(cmem_args, host_arguments(list(cmem_args.values()), "cmem_args"), strict=True))


def with_callable_defines(text: str | Callable[[dict[str, Any]], str], defines: Mapping[str, Any]
                          ) -> tuple[str | Callable[[dict[str, Any]], str], dict[str, Any]]:
    """Kernel Tuner's defines whose value is callable(params) become lines of a generated source."""
    constant = {k: v for k, v in defines.items() if not callable(v)}
    per_config = {k: v for k, v in defines.items() if callable(v)}
    if not per_config:
        return text, constant

    def generate(config: dict[str, Any]) -> str:
        body = text(config) if callable(text) else text
        lines = "".join(f"#define {k} {fn(config)}\n" for k, fn in per_config.items())
        return lines + "#line 1\n" + body

    return generate, constant


def kernel_spec(kernel_name: str, kernel_source: Any, problem_size: Any, arguments: Sequence[Any], *,
                lang: str | None, grid_div: list[Any] | None, block_size_names: Sequence[str] | None,
                answer: Any = None, atol: float = 1e-6, verify: Callable[..., Any] | None = None,
                smem_args: Mapping[str, Any] | None = None, compiler_options: Sequence[str] | None = None,
                defines: Mapping[str, Any] | None = None, template: tuple[str, list[str] | None] | None = None,
                cmem_args: Mapping[str, Any] | None = None, output_observers: Sequence[Any] = ()
                ) -> tuple[KernelSpec, str]:
    """(KernelSpec, backend name) for one Kernel Tuner call; ``template``: :func:`template_instance`'s name
    and template parameters."""
    own, includes = split_sources(kernel_source)
    text = kernel_text(own)
    backend = detect_lang(text, lang)
    text, constant_defines = with_callable_defines(text, defines or {})
    name, template_params = template or (kernel_name, None)
    return KernelSpec(
        source=text, name=name, template_params=template_params, arguments=kernel_arguments(arguments),
        problem_size=problem_size_terms(problem_size), grid_div=grid_div,
        block_size_names=block_names(block_size_names), answer=checked_answer(answer, verify, atol, bool(output_observers)),
        atol=atol, lang=backend, compiler_options=[*(compiler_options or []), *includes],
        defines=constant_defines or None, shared_mem=shared_memory(smem_args, backend),
        restore_inputs=False,  # as Kernel Tuner: arguments are uploaded once, not copied back before every run
        constant_args=constant_memory(cmem_args, backend),
        check_arguments="<" not in kernel_name and not callable(text),  # a template instance: vector_add<float>
        output_metrics=output_metrics(output_observers, answer),
    ), backend


def checked_answer(answer: Any, verify: Callable[..., Any] | None, atol: float, observed: bool = False) -> Any:
    """``answer`` as adaptune checks it; with ``verify``, a callable that asks ``verify(answer, outputs, atol=)``;
    with output observers and no ``verify``, a check that passes (Kernel Tuner: the observers judge the outputs)."""
    if answer is not None:
        answer = host_arguments(answer, "answer") if isinstance(answer, list | tuple) else answer
    if verify is None and not observed:
        return answer
    if answer is None:
        raise ValueError(f"{'verify' if verify else 'observers'}: this needs the answer it compares against")
    takes_atol = verify is not None and "atol" in getattr(getattr(verify, "__code__", None), "co_varnames", ("atol",))

    def check(outputs: list[Any]) -> bool:
        if verify is None:
            return True
        shown = [None if a is None else o for a, o in zip(answer, outputs, strict=False)]
        return bool(verify(answer, shown, atol=atol) if takes_atol else verify(answer, shown))

    check.reads = [i for i, a in enumerate(answer) if a is not None]  # type: ignore[attr-defined]  # only these are copied back
    return check


def output_metrics(observers: Sequence[Any], answer: Any) -> list[Callable[[list[Any]], dict[str, float]]]:
    """Kernel Tuner's output observers as the spec's ``output_metrics``: each sees the answer and the outputs."""
    if not observers:
        return []
    reference = host_arguments(answer, "answer")
    return [partial(observe_outputs, obs, reference) for obs in observers]


# ---------------------------------------------------------------------------------------------- space
def tuned_block_sizes(block_size_names: Sequence[str], tune_params: Mapping[str, Any]) -> list[str]:
    """The block sizes among the tuned parameters: those whose product Kernel Tuner holds to ``max_threads``."""
    return [n for n in block_size_names if n in tune_params]


def thread_limit(backend: str, block_size_names: Sequence[str], tune_params: Mapping[str, Any]) -> str | None:
    """Kernel Tuner's default restriction: the product of the block sizes among the tuned parameters at most the
    device's threads per block (its ``Searchspace`` adds ``MaxProdConstraint(max_threads)``), so such blocks are
    neither in the space nor measured; None where there is no block size or the limit is the device's own."""
    tuned = tuned_block_sizes(block_size_names, tune_params)
    limit = FIXED_MAX_THREADS.get(backend)
    return f"{' * '.join(tuned)} <= {limit}" if tuned and limit else None


def within_device_threads(results: list[Result], device: DeviceInfo, block_size_names: Sequence[str],
                          tune_params: Mapping[str, Any]) -> list[Result]:
    """The same rule where the limit is the device's own (OpenCL: ``CL_DEVICE_MAX_WORK_GROUP_SIZE``, Kernel
    Tuner's ``max_threads`` there). The worker refused those blocks before compiling them ("not launched", a few
    ms each); dropping their results leaves what Kernel Tuner's space gives (they stay in the store)."""
    limit = device.properties.get("max_work_group_size")
    tuned = tuned_block_sizes(block_size_names, tune_params)
    if not limit or not tuned:
        return results
    return [r for r in results if math.prod(int(r.config[n]) for n in tuned) <= limit]


def search_space(tune_params: Mapping[str, Sequence[Any]], restrictions: Any, hidden: Mapping[str, Any],
                 added: str | None = None) -> Space:
    """The space: restrictions as safe expressions (strings) or callables, never ``eval``, then ``added``
    (:func:`thread_limit`); ``hidden`` one-value parameters (literal template arguments) come last."""
    if not isinstance(tune_params, Mapping) or not tune_params:
        raise ValueError("tune_params must be a dict of parameter name -> list of values")
    params = {**{k: list(v) for k, v in tune_params.items()}, **{k: [v] for k, v in hidden.items()}}
    empty = [k for k, v in params.items() if not v]
    if empty:
        raise ValueError(f"tune_params {empty} have no values")
    if restrictions is None:
        constraints: list[Any] = []
    elif callable(restrictions) or isinstance(restrictions, str):
        constraints = [restrictions]
    else:
        constraints = list(restrictions)
    for c in constraints:
        if not (isinstance(c, str) or callable(c)):
            raise refuse("restrictions", f"{type(c).__name__} entries are not supported; give strings or callables")
    if added is not None and added not in constraints:
        constraints.append(added)
    return Space(params, [_params_call(c) if callable(c) else c for c in constraints])


def _params_call(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], Any]:
    """A callable restriction of Kernel Tuner takes the parameter dict (or, for lambdas of several
    named arguments, the parameter values by name)."""
    code = getattr(fn, "__code__", None)
    names = code.co_varnames[: code.co_argcount] if code is not None else ()
    if len(names) > 1:
        return lambda config: fn(**{n: config[n] for n in names})
    return fn


# ---------------------------------------------------------------------------------------------- strategy
@dataclass(frozen=True)
class KernelTunerStrategy:
    """One of ``adaptune.strategies``: Kernel Tuner's strategy modules (``kernel_tuner.strategies.minimize``)
    passed as ``strategy=`` name the strategy, as their name does."""

    name: str


#: ``import adaptune as kernel_tuner`` then ``strategy=kernel_tuner.strategies.minimize``: each Kernel Tuner
#: strategy adaptune has a counterpart for.
strategies = SimpleNamespace(**{name: KernelTunerStrategy(name) for name in STRATEGIES})


def strategy_choice(strategy: Any, strategy_options: Mapping[str, Any] | None, space_size: int
                    ) -> tuple[str, dict[str, Any], int | None, float | None]:
    """(adaptune strategy, its options, max evaluations, time limit in seconds)."""
    if strategy is None:
        strategy = "brute_force"
    if isinstance(strategy, KernelTunerStrategy):
        strategy = strategy.name
    if not isinstance(strategy, str):
        raise refuse("strategy", f"custom strategy objects ({type(strategy).__name__}) are not supported; "
                     f"use one of {', '.join(sorted(STRATEGIES))}")
    ours = STRATEGIES.get(strategy)
    if ours is None:
        raise refuse("strategy", f"{strategy!r} has no adaptune counterpart; use one of {', '.join(sorted(STRATEGIES))}")
    options = dict(strategy_options or {})
    max_fevals = options.pop("max_fevals", None)
    time_limit = options.pop("time_limit", None)
    fraction = options.pop("fraction", None)
    if fraction is not None:
        if strategy != "random_sample":
            raise refuse("strategy_options", "'fraction' is an option of random_sample only")
        max_fevals = min(max_fevals or space_size, max(1, math.ceil(float(fraction) * space_size)))
    known = set(ADAPTUNE_STRATEGIES[ours].options)
    foreign = sorted(set(options) - known)
    if foreign:
        raise refuse("strategy_options", f"{foreign} are Kernel Tuner options of {strategy!r} that adaptune's "
                     f"{ours!r} does not have (it takes max_fevals, time_limit and {sorted(known) or 'nothing else'})")
    return ours, options, (int(max_fevals) if max_fevals is not None else None), \
        (float(time_limit) if time_limit is not None else None)


# ---------------------------------------------------------------------------------------------- observers
def observer_names(observers: Sequence[Any] | None) -> tuple[tuple[str, ...], list[str], list[AccuracyObserver]]:
    """(adaptune observers, Kernel Tuner observables to report, output observers) from Kernel Tuner's observer
    objects: NVML's and ``AccuracyObserver`` (Kernel Tuner's own, by its shape, or adaptune.accuracy's)."""
    wanted: list[str] = []
    devices: tuple[str, ...] = ()
    outputs: list[AccuracyObserver] = []
    for obs in observers or ():
        kind = type(obs).__name__
        if hasattr(obs, "process_output") and callable(getattr(obs, "metric", None)) and isinstance(
                getattr(obs, "key", None), str):
            # its metric function travels to the worker; Kernel Tuner's class itself is not needed there
            outputs.append(obs if isinstance(obs, AccuracyObserver) else AccuracyObserver(obs.metric, obs.key))
            wanted.append(obs.key)
            continue
        if kind != "NVMLObserver":
            raise refuse("observers", f"{kind} is not supported; adaptune observes NVML power and energy "
                         "(kernel_tuner.observers.nvml.NVMLObserver) and the accuracy of the outputs "
                         "(kernel_tuner.accuracy.AccuracyObserver)")
        # Kernel Tuner's NVMLObserver moves the power observables (nvml_energy, nvml_power, power_readings)
        # out of ``observables`` into its ``continuous_observer``: read both
        power = list(getattr(getattr(obs, "continuous_observer", None), "observables", None) or [])
        observables = [*power, *(getattr(obs, "observables", None) or [])] or ["nvml_energy", "nvml_power"]
        unknown = sorted(set(observables) - set(NVML_OBSERVABLES))
        if unknown:
            raise refuse("observers", f"NVML observables {unknown} are not supported; adaptune reports "
                         f"{sorted(NVML_OBSERVABLES)}")
        wanted += [o for o in observables if o not in wanted]
        devices = ("nvml",)
    return devices, wanted, outputs


def setup_log(kernel_name: str, log: Any) -> None:
    """Kernel Tuner's ``log=level``: a log file named after the kernel and the time."""
    if log:
        logging.basicConfig(filename=kernel_name + datetime.now().strftime("%Y%m%d-%H:%M:%S") + ".log", level=log)
