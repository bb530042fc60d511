"""Kernel Tuner's own NVMLObserver objects, as its examples build them, read by the drop-in (no GPU needed:
the object is only read, never started)."""

from __future__ import annotations

import pytest

from adaptune.integrations.kt_args import UnsupportedOption, observer_names

nvml = pytest.importorskip("kernel_tuner.observers.nvml")


def test_power_observables_kernel_tuner_moves_aside_are_still_reported():
    """KT's NVMLObserver keeps nvml_energy / nvml_power in its continuous observer, not in ``observables``
    (its vector_add_observers.py example computes a metric from p["nvml_energy"])."""
    obs = nvml.NVMLObserver(["nvml_energy", "temperature"])
    assert "nvml_energy" not in obs.observables  # what the drop-in once read alone
    assert observer_names([obs]) == (("nvml",), ["nvml_energy", "temperature"], [])
    assert observer_names([nvml.NVMLObserver(["core_freq", "nvml_power"])])[1] == ["nvml_power", "core_freq"]


def test_an_observable_adaptune_cannot_report_is_refused_by_name():
    with pytest.raises(UnsupportedOption, match="power_readings"):
        observer_names([nvml.NVMLObserver(["power_readings"])])
