"""A tuning problem: what to run (a kernel or a callable), over which space, for which input."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.measure import CallableSpec, KernelSpec
from adaptune.space import Space


@dataclass
class Problem:
    """A kernel (or callable) plus its search space; ``input_name``/``features`` identify the input in the store."""

    name: str
    spec: KernelSpec | CallableSpec
    space: Space
    input_name: str = "default"
    features: dict[str, float] = field(default_factory=dict)

    def space_description(self) -> dict[str, Any]:
        """A JSON-able description of the space, stored with the problem so a database explains itself."""
        return self.space.to_dict()

    def source_hash(self) -> str:
        """Identity of what is tuned: source text, kernel name, argument shapes/dtypes, problem size and space."""
        h = hashlib.sha256()
        spec = self.spec
        if isinstance(spec, KernelSpec):
            source = spec.source
            if isinstance(source, Path):
                source = source.read_text()
            h.update(source.encode())
            h.update(spec.name.encode())
            h.update(repr(spec.problem_size if not callable(spec.problem_size) else "callable").encode())
            for arg in spec.arguments:
                a = np.asarray(arg)
                h.update(f"{a.dtype.str}{a.shape}".encode())
        else:
            fn = spec.fn
            h.update(f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}".encode())
            code = getattr(fn, "__code__", None)
            if code is not None:
                h.update(code.co_code)
        h.update(json.dumps(self.space_description(), sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]
