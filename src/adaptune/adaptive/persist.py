"""Saved models: one JSON file that loads without executing anything (no pickle, no code).

Arrays are stored as ``{"dtype", "shape", "data"}`` with nested lists; Python writes floats with
the shortest repr that round-trips, so float64 parameters come back bit for bit and predictions
after load are identical. The file names the features and variants it was trained with; loading it
into a code variant whose features or variants differ is refused with a message saying what differs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import KINDS, ModelParams
from adaptune.adaptive.labelling import Label
from adaptune.adaptive.shape import VariantShape

FORMAT = "adaptune.code_variant"
VERSION = 1
_DTYPES = {"float64", "float32", "int64", "int32", "bool"}


class ModelFileError(ValueError):
    """A saved model that cannot be used here: unreadable, another format, or another code variant."""


def _encode_array(a: np.ndarray) -> dict[str, Any]:
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}


def _decode_array(name: str, d: Any) -> np.ndarray:
    if not isinstance(d, dict) or d.get("dtype") not in _DTYPES or not isinstance(d.get("data"), list):
        raise ModelFileError(f"array {name!r} is malformed (needs dtype in {sorted(_DTYPES)}, shape, data)")
    a = np.asarray([math.inf if v == "inf" else v for v in d["data"]], dtype=d["dtype"])
    try:
        return a.reshape(d["shape"])
    except (ValueError, TypeError) as exc:
        raise ModelFileError(f"array {name!r}: {exc}") from exc


def _jsonable_float(v: float) -> Any:
    return "inf" if v == math.inf else v


def to_document(cv: VariantShape) -> dict[str, Any]:
    params = cv.model_params
    if params is None:
        raise ValueError(f"{cv.name!r} has no model to save: train it first")
    arrays = {}
    for k, a in params.arrays.items():
        enc = _encode_array(np.asarray(a))
        if enc["dtype"].startswith("float"):
            enc["data"] = [_jsonable_float(v) for v in enc["data"]]  # JSON has no infinity
        arrays[k] = enc
    return {
        "format": FORMAT, "version": VERSION, "name": cv.name,
        "features": cv.feature_names, "variants": cv.variant_names, "default": cv.default_name,
        "labels": [{"variant": lab.variant, "config": lab.params} for lab in cv.model_labels],
        "model": {"kind": params.kind, "scalars": params.scalars, "arrays": arrays},
        "provenance": cv.provenance,
    }


def save_model(cv: VariantShape, path: str | Path) -> Path:
    path = Path(path)
    doc = to_document(cv)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, allow_nan=False))
    tmp.replace(path)  # never leave a half-written model behind
    return path


def read_document(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path}: not a readable adaptune model ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelFileError(f"{path}: not an adaptune code-variant model (format {doc.get('format')!r})"
                             if isinstance(doc, dict) else f"{path}: not an adaptune model")
    if doc.get("version") != VERSION:
        raise ModelFileError(f"{path}: model format version {doc.get('version')} is not supported (need {VERSION})")
    kind = doc.get("model", {}).get("kind")
    if kind not in KINDS:
        raise ModelFileError(f"{path}: unknown model kind {kind!r}")
    return doc


def params_of(doc: dict[str, Any]) -> tuple[ModelParams, list[Label]]:
    m = doc["model"]
    arrays = {k: _decode_array(k, v) for k, v in m.get("arrays", {}).items()}
    labels = [Label.of(d["variant"], d.get("config") or {}) for d in doc.get("labels", [])]
    return ModelParams(m["kind"], arrays, dict(m.get("scalars", {}))), labels


def _check_matches(cv: VariantShape, doc: dict[str, Any], path: Path) -> None:
    if doc["features"] != cv.feature_names:
        raise ModelFileError(f"{path}: model was trained with features {doc['features']}, "
                             f"but {cv.name!r} has {cv.feature_names}")
    missing = sorted({lab["variant"] for lab in doc["labels"]} - set(cv.variant_names))
    if missing:
        raise ModelFileError(f"{path}: model chooses variants {missing} that {cv.name!r} does not have "
                             f"(it has {cv.variant_names})")
    if sorted(doc["variants"]) != sorted(cv.variant_names):
        raise ModelFileError(f"{path}: model was trained with variants {doc['variants']}, "
                             f"but {cv.name!r} has {cv.variant_names}")


def load_into(cv: VariantShape, path: str | Path) -> None:
    path = Path(path)
    doc = read_document(path)
    _check_matches(cv, doc, path)
    params, labels = params_of(doc)
    try:
        cv.install_model(params, labels, params.kind, doc.get("provenance", {}))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path}: model parameters are inconsistent ({type(exc).__name__}: {exc})") from exc
