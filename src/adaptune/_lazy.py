"""Lazy public names: a package lists ``name -> module`` and imports a module only when a name is first used,
so ``import adaptune`` stays fast and optional dependencies load only when asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, names: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``names[name]``'s module on first use and caches it in ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        imported = importlib.import_module(module)
        value = imported if module == f"{package}.{name}" else getattr(imported, name)  # a submodule names itself
        namespace[name] = value
        return value

    return __getattr__
