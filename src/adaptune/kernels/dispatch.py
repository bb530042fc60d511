"""Dispatch that keeps its choice with the input object it describes (a matrix, a graph, a key set).

Why: an iterative solver multiplies one matrix hundreds of times and a graph is searched from many
sources; their features, and so the model's choice, do not change between calls. Nitro computes features
once inputs are fixed; here the first call on an object selects (features + model + constraint check) and
stores the label in the object's ``extra`` dict, so a repeated call costs one dictionary look-up. The
object must not change after its first call (the kernels' DeviceMatrix / DeviceGraph never do; a caller
that rewrites a DeviceKeys' keys in place must call ``forget``).
"""

from __future__ import annotations

from typing import Any


class KeptDispatch:
    """Wraps a trained CodeVariant; the first argument of every call must carry an ``extra`` dict."""

    def __init__(self, cv: Any) -> None:
        self.cv = cv
        self._slot = ("choice", id(self))  # one slot a dispatcher in each object's `extra`

    def select(self, *args: Any) -> Any:
        """The label ``cv.select`` gives for these arguments, computed once per object and model (the slot
        holds the model it was computed with: installing a new model invalidates it)."""
        try:
            extra = args[0].extra
            entry = extra.get(self._slot)
        except (AttributeError, IndexError):
            _extra(args)  # raises the clear error
            raise
        params = self.cv.model_params
        if entry is not None and entry[0] is params:
            return entry[1]
        label = self.cv.select(*args)
        extra[self._slot] = (params, label)
        return label

    def __call__(self, *args: Any) -> Any:
        label = self.select(*args)
        fn = self.cv.variant_function(label.variant)
        return fn(*args, **label.params) if label.config else fn(*args)

    def forget(self, *args: Any) -> None:
        _extra(args).pop(self._slot, None)


def _extra(args: tuple[Any, ...]) -> dict[str, Any]:
    extra = getattr(args[0], "extra", None) if args else None
    if not isinstance(extra, dict):
        raise TypeError("KeptDispatch needs a first argument with an `extra` dict (DeviceMatrix, DeviceGraph, "
                        f"DeviceKeys), got {type(args[0]).__name__ if args else 'no arguments'}")
    return extra
