"""``adaptune train`` and ``adaptune evaluate``: adaptive selection driven by a SPEC file.

A SPEC is a Python file (the user's own code, run like a test module) defining ``variant`` (a
CodeVariant), ``training_inputs()`` and ``test_inputs()``. Labels go to the results store (``--db``)
so that ``evaluate`` after ``train``, or a retrain with another model, never measures twice.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

REQUIRED = ("variant", "training_inputs", "test_inputs")


def load_spec(path: str | Path) -> ModuleType:
    """Import a SPEC file and check it defines what the commands need."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SPEC file {path} does not exist")
    spec = importlib.util.spec_from_file_location(f"adaptune_spec_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if missing:
        raise ValueError(f"SPEC {path} must define {', '.join(REQUIRED)}; missing: {', '.join(missing)}")
    from adaptune.adaptive import CodeVariant

    if not isinstance(module.variant, CodeVariant):
        raise ValueError(f"SPEC {path}: 'variant' must be a CodeVariant, not {type(module.variant).__name__}")
    return module


def _model_path(args: argparse.Namespace) -> Path:
    return Path(args.model_file) if args.model_file else Path(f"{Path(args.spec).stem}.adaptune.json")


def _finite(doc: Any) -> Any:
    if isinstance(doc, float) and not math.isfinite(doc):
        return None
    if isinstance(doc, dict):
        return {k: _finite(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_finite(v) for v in doc]
    return doc


def cmd_train(args: argparse.Namespace) -> int:
    module = load_spec(args.spec)
    cv = module.variant
    report = cv.train(module.training_inputs(), model=args.model, active=args.active, db=args.db,
                      repeats=args.repeats, progress=not (args.json or args.quiet))
    path = cv.save(_model_path(args))
    doc = {"model": report.model, "labels_used": report.labels_used, "labels": report.labels,
           "cv_fraction_of_oracle": report.cv_fraction_of_oracle, "model_scores": report.model_scores,
           "measured": report.measured, "reused": report.reused, "failures": len(report.failures),
           "learning_curve": report.learning_curve, "saved": str(path), "wall_s": report.wall_s}
    if args.json:
        print(json.dumps(_finite(doc), indent=1))
    else:
        scores = ", ".join(f"{k} {v:.3f}" for k, v in report.model_scores.items())
        print(f"{cv.name}: trained {report.model} on {report.labels_used} inputs "
              f"({report.measured} measurements, {report.reused} reused from {args.db}); "
              f"cross-validated fraction of oracle: {scores}; {len(report.failures)} failed runs; "
              f"saved {path}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from adaptune.adaptive import evaluate

    module = load_spec(args.spec)
    cv = module.variant
    path = _model_path(args)
    if path.exists():
        cv.load_model(path)
    else:
        cv.train(module.training_inputs(), model=args.model, db=args.db, repeats=args.repeats,
                 progress=not (args.json or args.quiet))
    report = evaluate(cv, module.test_inputs(), db=args.db, repeats=args.repeats, progress=not (args.json or args.quiet))
    if args.plot:
        plot_evaluation(report, args.plot)
    if args.json:
        doc = report.to_dict()
        if not args.per_input:
            doc.pop("per_input")
        print(json.dumps(_finite(doc), indent=1))
    else:
        print(report.summary())
    return 0


def plot_evaluation(report: Any, path: str | Path) -> Path:
    """Bars: the model's and each fixed variant's mean fraction of oracle; histogram of per-input values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [f"model ({report.model})", *report.fixed_variants]
    values = [report.mean_fraction_of_oracle, *report.fixed_variants.values()]
    left.bar(names, values, color=["C3"] + ["C0"] * len(report.fixed_variants))
    left.set_ylim(0, 1.05)
    left.set_ylabel("mean fraction of oracle")
    left.tick_params(axis="x", rotation=30)
    right.hist([p["fraction_of_oracle"] for p in report.per_input], bins=20, range=(0, 1), color="C3")
    right.set_xlabel("fraction of oracle per test input")
    right.set_ylabel("inputs")
    fig.suptitle(f"{report.name}: {report.n_inputs} test inputs, {report.labels_used} training labels")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


#: For the parser only (a test keeps it equal to ``adaptune.adaptive.MODEL_KINDS``).
MODEL_NAMES = ("svm", "tree", "knn", "forest", "boosting", "cost")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``train`` and ``evaluate`` (the adaptive layer is imported only when they run)."""

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("spec", help="Python SPEC file defining variant, training_inputs(), test_inputs()")
        p.add_argument("--model", default="svm", choices=["auto", *MODEL_NAMES], help="selection model")
        p.add_argument("--db", default="adaptune.db", help="results store (SQLite path or SQLAlchemy URL)")
        p.add_argument("--model-file", help="saved model (default: <spec>.adaptune.json)")
        p.add_argument("--repeats", type=int, default=7, help="interleaved timing repeats per label")
        p.add_argument("--json", action="store_true", help="print JSON instead of a summary")
        p.add_argument("--quiet", action="store_true", help="no progress bar (it is drawn only on a terminal anyway)")

    train = sub.add_parser("train", help="label training inputs, fit and save a selection model")
    common(train)
    train.add_argument("--active", type=int, metavar="N",
                       help="active learning: label at most N inputs (BvSB; default: label every input)")
    train.set_defaults(func=cmd_train)

    ev = sub.add_parser("evaluate", help="score the model on the SPEC's test inputs (fraction of oracle)")
    common(ev)
    ev.add_argument("--plot", metavar="FILE.png", help="write a PNG of the evaluation (default: no plot)")
    ev.add_argument("--per-input", action="store_true", help="include per-input rows in the JSON")
    ev.set_defaults(func=cmd_evaluate)
