"""Training a code variant: label inputs (or choose them by active learning), fit a model, report.

``CodeVariant.train`` is this function; it lives here, a layer below ``code_variant``, because it is
what needs the data sets (``dataset``) and active learning (``active``), which themselves read a code
variant only through :class:`~adaptune.adaptive.shape.VariantShape`.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from adaptune.adaptive.active import active_learn
from adaptune.adaptive.dataset import LabelledSet
from adaptune.adaptive.device_features import cpu_device
from adaptune.adaptive.labelling import MeasureOptions, as_inputs
from adaptune.adaptive.models import MODEL_KINDS, choose_model, fit_model
from adaptune.adaptive.shape import VariantShape


@dataclass
class TrainReport:
    """What training did: the model, its cross-validated quality, and what it cost to label."""

    model: str
    labels: list[str]
    labels_used: int
    inputs: list[str]
    cv_fraction_of_oracle: float | None
    model_scores: dict[str, float]
    hyperparameters: dict[str, Any]
    measured: int
    reused: int
    failures: list[dict[str, str]]
    wall_s: float
    learning_curve: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def train_code_variant(cv: VariantShape, inputs: Iterable[Any] | Mapping[str, Any], *, model: str = "svm",
                       active: int | None = None, target: float | None = None,
                       holdout: Iterable[Any] | Mapping[str, Any] | None = None, db: Any = None, repeats: int = 7,
                       warmup: int = 1, min_sample_ms: float = 1.0, max_call_ms: float = math.inf,
                       search_budget: int = 20, seed: int = 0, progress: bool = True, executor: str | None = None,
                       address: str | None = None, ray_gpus: float | None = None) -> TrainReport:
    """What ``CodeVariant.train`` does (its docstring describes the options)."""

    if not cv.variant_names:
        raise ValueError(f"{cv.name!r} has no variants to train")
    if not cv.feature_names:
        raise ValueError(f"{cv.name!r} has no features: register some with cv.feature(...)")
    if model != "auto" and model not in MODEL_KINDS:
        raise ValueError(f"unknown model {model!r}; choose one of: auto, {', '.join(MODEL_KINDS)}")
    t0 = time.perf_counter()
    pool = as_inputs(inputs)
    if not pool:
        raise ValueError("no training inputs")
    cache = cv.open_cache(db)
    options = MeasureOptions(repeats=repeats, warmup=warmup, min_sample_ms=min_sample_ms,
                             max_call_ms=max_call_ms, verify=bool(cv.verify))
    lset = LabelledSet(cv, pool, cache, options, search_budget=search_budget, seed=seed,
                       progress=progress, description=f"{cv.name}: labelling", executor=executor,
                       address=address, ray_gpus=ray_gpus)
    curve = None
    if active:
        held = None
        if holdout is not None:
            held = LabelledSet(cv, as_inputs(holdout), cache, options, search_budget=search_budget,
                               seed=seed, progress=progress, description=f"{cv.name}: hold-out")
        result = active_learn(lset, int(active), holdout=held, target=target, kind="svm" if model == "auto"
                              else model, seed=seed, progress=progress)
        rows, curve = result.rows, result.curve
    else:
        lset.label()
        rows = list(range(len(pool)))
    features = lset.features[rows]
    costs, runtime = lset.costs(rows)
    scores: dict[str, float] = {}
    if model == "auto":
        fitted, scores = choose_model(features, costs, runtime, seed=seed)
    else:
        fitted = fit_model(model, features, costs, runtime, seed=seed)
        scores = {model: float(fitted.cv_fraction or 0.0)}
    failures = [{"input": pool[r].name, "label": str(lab), "status": str(res.status), "error": res.error}
                for r in rows for lab, res in lset.results[r].items() if not res.ok]
    provenance = {
        "device": (cv.device or cpu_device()).to_dict(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "inputs": [pool[r].name for r in rows], "model": fitted.kind, "hyperparameters": fitted.hyper,
        "cv_fraction_of_oracle": fitted.cv_fraction, "repeats": repeats,
        "objective": cv.objective if isinstance(cv.objective, str) else "custom",
    }
    cv.install_model(fitted.params, lset.labels, fitted.kind, provenance)
    measured = lset.measured_now
    total = sum(len(lset.results[r]) for r in rows)
    return TrainReport(
        model=fitted.kind, labels=[str(lab) for lab in lset.labels], labels_used=len(rows),
        inputs=[pool[r].name for r in rows], cv_fraction_of_oracle=fitted.cv_fraction,
        model_scores=scores, hyperparameters=fitted.hyper, measured=measured,
        reused=max(0, total - measured), failures=failures, wall_s=time.perf_counter() - t0,
        learning_curve=curve)
