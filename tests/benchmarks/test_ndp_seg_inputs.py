"""The segmented-reduce study's inputs: more training inputs leave the test set as earlier runs drew it."""

from __future__ import annotations

from types import SimpleNamespace

from benchmarks.ndp import run


def _inputs(more: int, monkeypatch) -> dict[str, list]:
    monkeypatch.setattr(run, "SEG_TRAIN_MORE", more)
    parts: dict[str, list] = {"train": [], "test": []}
    for part, i, spec in run.seg_inputs(SimpleNamespace(cuda=True), 1.0, 2024):
        parts[part].append((i, spec))
    return parts


def test_extra_training_inputs_come_after_the_test_set_and_leave_it_unchanged(monkeypatch):
    before, after = _inputs(0, monkeypatch), _inputs(30, monkeypatch)
    assert after["test"] == before["test"]
    assert after["train"][:30] == before["train"]
    assert len(after["train"]) == 60
    assert [i for i, _ in after["train"]] == list(range(60))  # indices go on: the families keep cycling
    assert len({spec for _, spec in after["train"] + after["test"]}) == 100  # new draws, none repeated
