"""Per-input selection of a trained code variant: what its model chooses for each stored input against the oracle.

A code variant keeps its labels in the store as one problem (named like the variant), one input per
test input (with its features) and one configuration ``{"variant": name, **params}`` per label. The
model comes from its saved JSON file (``CodeVariant.save``), read without executing anything; it is
matched to the problem by name and predicts from the features stored with each input.

Triton keys (issue 23) land the same way, one input per key, so this page already shows the best
configuration per key; the hook for the drop-in's own choices is ``SavedModel``: once it saves its
per-key model in this format (features = the key's values), ``--model`` shows its choice per key too.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adaptune.adaptive.compiled import compile_predictor
from adaptune.adaptive.labelling import Label
from adaptune.adaptive.persist import ModelFileError, params_of, read_document
from adaptune.dashboard.queries import finite
from adaptune.store.base import BaseStore
from adaptune.store.codec import config_key

_FAMILY_SPLIT = re.compile(r"[/:_\-.]")


def family(input_name: str) -> str:
    """The family of an input: its name up to the first separator (``banded_1024`` -> ``banded``)."""
    head = _FAMILY_SPLIT.split(input_name, maxsplit=1)[0]
    return head or input_name


def label_text(config: Mapping[str, Any] | None) -> str:
    """A stored variant configuration as the label a person reads (``tiled[block=64]``)."""
    if not config:
        return "—"
    config = dict(config)
    variant = config.pop("variant", None)
    if variant is None:
        return ", ".join(f"{k}={v}" for k, v in config.items())
    return str(Label.of(str(variant), config))


@dataclass(frozen=True)
class SavedModel:
    """A trained model read from its JSON file: the problem it is for, its features and its predictor."""

    path: str
    name: str
    features: list[str]
    labels: list[Label]
    predict: Any

    @classmethod
    def load(cls, path: str | Path) -> SavedModel:
        doc = read_document(path)
        params, labels = params_of(doc)
        try:
            predict = compile_predictor(params)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelFileError(f"{path}: model parameters are inconsistent ({exc})") from exc
        return cls(str(path), str(doc.get("name", "")), list(doc.get("features", [])), labels, predict)

    def choose(self, features: Mapping[str, Any]) -> dict[str, Any] | None:
        """The store configuration the model picks for these features (None when one is missing)."""
        try:
            x = np.array([float(features[f]) for f in self.features], dtype=float)
        except (KeyError, TypeError, ValueError):
            return None
        return self.labels[int(self.predict(x))].store_config


def selection(store: BaseStore, problem_id: int, device_id: int, model: SavedModel | None) -> dict[str, Any]:
    """Per input: oracle, best fixed choice and the model's choice with their fractions of the oracle.

    One summary query for the oracles, then one indexed lookup per input for the candidate
    configurations (the oracles' and the model's choices): bounded by the number of inputs.
    """
    oracles = {g.key: g for g in store.input_summaries(problem_id, device_id) if g.best_config is not None}
    features = {i.id: i for i in store.inputs(problem_id)}
    candidates = {config_key(g.best_config): g.best_config for g in oracles.values()}
    chosen: dict[int, dict[str, Any] | None] = {}
    if model is not None:
        for input_id in oracles:
            chosen[input_id] = model.choose(features[input_id].features) if input_id in features else None
            if chosen[input_id] is not None:
                candidates[config_key(chosen[input_id])] = chosen[input_id]
    times: dict[int, dict[str, float | None]] = {}
    for input_id in oracles:
        found = store.get_many(device_id, problem_id, input_id, list(candidates.values()))
        times[input_id] = {k: finite(r.time_ms) for k, r in found.items()}
    fixed_key = _best_fixed(oracles, times, candidates)
    rows = []
    for input_id, g in oracles.items():
        oracle = g.best_time_ms
        pick = chosen.get(input_id)
        pick_time = times[input_id].get(config_key(pick)) if pick is not None else None
        fixed_time = times[input_id].get(fixed_key) if fixed_key else None
        rows.append({
            "name": g.name, "family": family(g.name), "oracle": label_text(g.best_config),
            "oracle_ms": finite(oracle), "chosen": label_text(pick) if model is not None else "",
            "chosen_ms": pick_time, "chosen_fraction": _fraction(oracle, pick_time) if model is not None else None,
            "fixed_fraction": _fraction(oracle, fixed_time),
            "features": dict(features[input_id].features) if input_id in features else {},
        })
    return {"rows": rows, "fixed": label_text(candidates.get(fixed_key)) if fixed_key else "—",
            "families": _by_family(rows)}


def _fraction(oracle: float, time_ms: float | None) -> float:
    """Oracle time over the chosen time: 1 is the oracle, 0 a choice that failed or was never measured."""
    return round(oracle / time_ms, 4) if time_ms else 0.0


def _best_fixed(oracles: Mapping[int, Any], times: Mapping[int, Mapping[str, float | None]],
                candidates: Mapping[str, Any]) -> str | None:
    """The candidate with the highest mean fraction of the oracle over all inputs (the best single choice)."""
    if not oracles:
        return None
    def score(key: str) -> float:
        return float(np.mean([_fraction(g.best_time_ms, times[i].get(key)) for i, g in oracles.items()]))
    return max(sorted(candidates), key=score)


def _by_family(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["family"]].append(r)
    out = []
    for name, members in sorted(groups.items()):
        chosen = [r["chosen_fraction"] for r in members if r["chosen_fraction"] is not None]
        out.append({"family": name, "inputs": len(members),
                    "chosen_fraction": round(float(np.mean(chosen)), 4) if chosen else None,
                    "fixed_fraction": round(float(np.mean([r["fixed_fraction"] for r in members])), 4)})
    return out

