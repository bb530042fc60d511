"""Launch geometry from a configuration, with Kernel Tuner's rules.

``grid = ceil(problem_size / prod(grid_div))`` per dimension, ``block`` from the block-size
parameters (x defaults to 256, y and z to 1, as in Kernel Tuner). An OpenCL NDRange is
``grid * block``. Expressions in ``grid_div`` go through the space layer's restricted evaluator,
never ``eval``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from adaptune.measure.spec import KernelSpec

DEFAULT_BLOCK = (256, 1, 1)


class SpecError(ValueError):
    """The spec cannot give a geometry or defines for a configuration (a bug in the spec, not the kernel)."""


@dataclass(frozen=True)
class Geometry:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    problem_size: tuple[int, int, int]
    shared_mem: int = 0

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@lru_cache(maxsize=256)
def _compiled(text: str) -> Any:
    from adaptune.space.safe_expr import compile_vector

    try:
        return compile_vector(text, None, "grid_div expression")[0]
    except ValueError as exc:  # ConstraintError is a ValueError
        raise SpecError(str(exc)) from None


def evaluate_term(term: Any, config: Mapping[str, Any], what: str) -> int:
    """An int, a parameter name, an expression over parameters, or a callable(config)."""
    if callable(term):
        value = term(dict(config))
    elif isinstance(term, bool):
        raise SpecError(f"{what}: {term!r} is a bool, expected a size")
    elif isinstance(term, int):
        value = term
    elif isinstance(term, str):
        if term in config:
            value = config[term]
        else:
            try:
                value, bad = _compiled(term)(config)
            except KeyError as exc:
                raise SpecError(f"{what} {term!r} uses {exc.args[0]!r}, which is not a parameter of this "
                                f"configuration (parameters: {', '.join(config) or 'none'})") from None
            if bad is not None and bool(bad):
                raise SpecError(f"{what} {term!r} divides by zero for {dict(config)}")
    else:
        raise SpecError(f"{what}: cannot use {term!r} ({type(term).__name__}); give an int, a name or an expression")
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise SpecError(f"{what} {term!r} gave {value!r}, not an integer") from None
    if as_int != value:
        raise SpecError(f"{what} {term!r} gave {value!r}, not an integer")
    return as_int


def _triple(values: Sequence[int]) -> tuple[int, int, int]:
    v = [int(x) for x in values] + [1, 1, 1]
    if len(values) > 3:
        raise SpecError(f"at most 3 dimensions, got {list(values)}")
    return (v[0], v[1], v[2])


def problem_size(spec: KernelSpec, config: Mapping[str, Any]) -> tuple[int, int, int]:
    ps = spec.problem_size
    if callable(ps):
        ps = ps(dict(config))
    terms = list(ps) if isinstance(ps, list | tuple) else [ps]
    return _triple([evaluate_term(t, config, "problem_size") for t in terms])


def block_size(spec: KernelSpec, config: Mapping[str, Any]) -> tuple[int, int, int]:
    block = list(DEFAULT_BLOCK)
    for i, name in enumerate(spec.block_size_names):
        if name in config:
            block[i] = evaluate_term(name, config, "block size")
    return _triple(block)


def grid_divisor(spec: KernelSpec, config: Mapping[str, Any], dim: int) -> int:
    divs = None if spec.grid_div is None or dim >= len(spec.grid_div) else spec.grid_div[dim]
    if divs is None:  # default: divide by the block size of this dimension (1 if it is not tuned)
        name = spec.block_size_names[dim] if dim < len(spec.block_size_names) else None
        return block_size(spec, config)[dim] if name in config or dim == 0 else 1
    if isinstance(divs, int | str) or callable(divs):
        divs = [divs]
    return math.prod(evaluate_term(d, config, f"grid_div[{dim}]") for d in divs)


def launch_geometry(spec: KernelSpec, config: Mapping[str, Any]) -> Geometry:
    """Grid (in blocks), block (in threads) and problem size for one configuration."""
    size = problem_size(spec, config)
    if spec.geometry is not None:
        out = spec.geometry(dict(config))
        try:
            grid, block = out
        except (TypeError, ValueError):
            raise SpecError(f"geometry(config) must return (grid, block), got {out!r}") from None
        g, b = _triple(list(grid)), _triple(list(block))
    else:
        b = block_size(spec, config)
        divisors = [grid_divisor(spec, config, d) for d in range(3)]
        if any(d <= 0 for d in divisors):
            raise SpecError(f"grid divisors {divisors} must be positive for {dict(config)}")
        g = _triple([-(-size[d] // divisors[d]) for d in range(3)])
    if min(*g, *b) <= 0:
        raise SpecError(f"grid {g} and block {b} must be positive for {dict(config)}")
    shared = evaluate_term(spec.shared_mem, config, "shared_mem") if spec.shared_mem else 0
    if shared < 0:
        raise SpecError(f"shared_mem is {shared} bytes for {dict(config)}")
    return Geometry(g, b, size, shared)


def kernel_defines(spec: KernelSpec, config: Mapping[str, Any], geo: Geometry) -> dict[str, Any]:
    """Defines for one configuration: parameters (minus template parameters), block and grid
    sizes, problem sizes, and the spec's own constants, like Kernel Tuner."""
    templated = set(spec.template_params or ())
    out: dict[str, Any] = {k: v for k, v in config.items() if k not in templated}
    for axis, b, g, p in zip("xyz", geo.block, geo.grid, geo.problem_size, strict=True):
        if f"block_size_{axis}" not in templated:
            out.setdefault(f"block_size_{axis}", b)
        out.setdefault(f"grid_size_{axis}", g)
        out.setdefault(f"problem_size_{axis}", p)
    for name, value in (spec.defines or {}).items():
        if name in config:
            raise SpecError(f"define {name!r} clashes with the tuning parameter of the same name")
        out[name] = value
    out.setdefault("adaptune", 1)
    return out


def template_args(spec: KernelSpec, config: Mapping[str, Any]) -> list[Any] | None:
    if not spec.template_params:
        return None
    missing = [n for n in spec.template_params if n not in config]
    if missing:
        raise SpecError(f"template parameters {missing} are not in the configuration")
    return [config[n] for n in spec.template_params]
