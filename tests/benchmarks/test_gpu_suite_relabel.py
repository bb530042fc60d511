"""Relabelling one benchmark: more training inputs leave its test inputs as they were, and a later run of it takes
its place in the recorded run the offline rules and the live check read."""

from __future__ import annotations

import json

import pytest

from benchmarks.gpu_suite.run import RESULTS, SETS, SORT_RELABELLED, input_sets, load_raw


@pytest.mark.parametrize("name", sorted(SETS))
def test_train_scale_adds_training_inputs_and_keeps_the_test_inputs(name):
    train, test = input_sets(name, 1.0, 2024)
    more_train, same_test = input_sets(name, 1.0, 2024, train_scale=3.0)
    assert same_test == test
    assert len(more_train) == round(3 * len(train))


def test_the_committed_relabelling_is_round_4s_inputs_with_more_training_ones():
    round4 = json.loads((RESULTS / "gpu_suite_h100_raw.json").read_text())["benchmarks"]["sort"]
    later = json.loads(SORT_RELABELLED.read_text())
    names = [r["name"] for r in later["benchmarks"]["sort"]["test"]]
    assert names == [r["name"] for r in round4["test"]]
    assert len(later["benchmarks"]["sort"]["train"]) == round(later["train_scale"] * len(round4["train"]))


def test_replace_takes_the_later_runs_benchmarks_and_says_so(tmp_path):
    raw = {"commit": "a", "benchmarks": {"sort": {"test": [1], "v": "old"}, "bfs": {"test": [2], "v": "kept"}}}
    later = {"commit": "b", "label_rounds": 5, "benchmarks": {"sort": {"test": [3], "v": "new"}}}
    (tmp_path / "raw.json").write_text(json.dumps(raw))
    (tmp_path / "later.json").write_text(json.dumps(later))
    merged = load_raw(tmp_path / "raw.json", [str(tmp_path / "later.json")])
    assert merged["benchmarks"]["sort"]["v"] == "new" and merged["benchmarks"]["bfs"]["v"] == "kept"
    assert merged["replaced"] == {"sort": {"file": "later.json", "commit": "b", "label_rounds": 5, "train_scale": 1.0}}
    assert "replaced" not in load_raw(tmp_path / "raw.json")


def test_a_partial_later_run_is_refused(tmp_path):
    (tmp_path / "raw.json").write_text(json.dumps({"benchmarks": {"sort": {"test": [1]}}}))
    (tmp_path / "later.json").write_text(json.dumps({"benchmarks": {"sort": {"test": [], "partial": True}}}))
    with pytest.raises(ValueError, match="later.json: sort is not a finished run"):
        load_raw(tmp_path / "raw.json", [str(tmp_path / "later.json")])
