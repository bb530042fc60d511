"""A tuning problem: what to run (a kernel or a callable), over which space, for which input."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.measure import CallableSpec, KernelSpec
from adaptune.measure.choice import ArgumentChoice
from adaptune.records import Result
from adaptune.space import Space


@dataclass
class Problem:
    """A kernel (or callable) plus its search space; ``input_name``/``features`` identify the input in the store.

    ``known_results``: measurements made before this run on the same device (a Kernel Tuner cache):
    tuning stores and reuses them as if measured, never measures them again.
    """

    name: str
    spec: KernelSpec | CallableSpec
    space: Space
    input_name: str = "default"
    features: dict[str, float] = field(default_factory=dict)
    known_results: list[Result] = field(default_factory=list)

    def space_description(self) -> dict[str, Any]:
        """A JSON-able description of the space, stored with the problem so a database explains itself."""
        return self.space.to_dict()

    def source_hash(self) -> str:
        """Identity of what is tuned: source text, kernel name, argument shapes/dtypes, scalar arguments' values,
        problem size and space. A scalar such as ``n`` changes the work (Kernel Tuner's ``reduction.py`` tunes one
        kernel for eleven values of it), so results stored for one value are never reused for another; array
        contents are not hashed (too costly for large inputs) -- name the input to tell them apart."""
        h = hashlib.sha256()
        spec = self.spec
        if isinstance(spec, KernelSpec):
            source = spec.source
            if isinstance(source, Path):
                source = source.read_text()
            if isinstance(source, str):
                h.update(source.encode())
            else:  # a generator: its code and what it makes of one configuration (a template's text)
                h.update(_code_identity(source))
                h.update(spec.text_for(self.space.config(self.space.default_index() or 0)).encode())
            h.update(spec.name.encode())
            h.update(repr(spec.problem_size if not callable(spec.problem_size) else "callable").encode())
            for arg in spec.arguments:
                if isinstance(arg, ArgumentChoice):
                    h.update(arg.describe().encode())
                    continue
                a = np.asarray(arg)
                value = a.item() if a.ndim == 0 and a.dtype.kind in "biufc" else ""  # numbers only: stable text
                h.update(f"{a.dtype.str}{a.shape}{value}".encode())
        else:
            h.update(_code_identity(spec.fn))
        h.update(json.dumps(self.space_description(), sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]


def _code_identity(fn: Any) -> bytes:
    """A function's name and byte code: what identifies a callable variant or a source generator."""
    fn = getattr(fn, "__func__", fn)  # a bound method (a template's render) by its function
    code = getattr(fn, "__code__", None)
    name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    return name.encode() + (code.co_code if code is not None else b"")
