"""The live first call's choice is judged round by round: against each round's own best, weighted by how often
each variant was chosen, a refused variant counted as the default."""

from __future__ import annotations

import statistics

import pytest

from benchmarks.gpu_suite.prefetched import paired_fractions


def test_a_drifting_machine_is_judged_within_each_round():
    # the machine runs twice as slow in the second round; the pick "b" is 10 % behind "a" in both
    rounds = [{"a": 1.0, "b": 1.1}, {"a": 2.0, "b": 2.2}]
    assert paired_fractions({"b": 5}, rounds, default="a") == pytest.approx([1 / 1.1, 1 / 1.1])
    # each variant's median over these rounds (a 2.0, b 1.05) would call b the best by far; round by round it
    # is 5 % behind twice and best once
    drift = [{"a": 1.0, "b": 1.05}, {"a": 2.0, "b": 2.1}, {"a": 3.0, "b": 1.02}]
    fractions = paired_fractions({"b": 1}, drift, default="a")
    assert fractions == pytest.approx([1 / 1.05, 1 / 1.05, 1.0])
    assert statistics.median(fractions) == pytest.approx(1 / 1.05)


def test_choices_are_weighted_and_a_refused_variant_runs_the_default():
    rounds = [{"a": 1.0, "b": 2.0}]
    assert paired_fractions({"a": 3, "b": 1}, rounds, default="a") == pytest.approx([(3 * 1.0 + 0.5) / 4])
    assert paired_fractions({"gone": 2}, rounds, default="b") == pytest.approx([0.5])
