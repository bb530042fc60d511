"""Adaptive selection: code variants chosen per input by a trained model (Nitro, seed 001 ch. 2).

Public names: :class:`CodeVariant`, :func:`evaluate`, :class:`EvaluationReport`, :class:`TrainReport`,
:class:`Label`, :class:`Input`, :func:`learning_curves`, :data:`MODEL_KINDS`, :class:`ModelFileError`.
"""

from adaptune.adaptive.active import learning_curves
from adaptune.adaptive.code_variant import CodeVariant
from adaptune.adaptive.device_features import cpu_device
from adaptune.adaptive.evaluate import EvaluationReport, evaluate
from adaptune.adaptive.labelling import Input, Label
from adaptune.adaptive.models import MODEL_KINDS
from adaptune.adaptive.persist import ModelFileError
from adaptune.adaptive.training import TrainReport

__all__ = ["MODEL_KINDS", "CodeVariant", "EvaluationReport", "Input", "Label", "ModelFileError", "TrainReport",
           "cpu_device", "evaluate", "learning_curves"]
