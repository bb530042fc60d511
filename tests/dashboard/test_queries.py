"""The dashboard's translation layer, without a browser: URLs, grid filters, families, escaping, axes."""

from __future__ import annotations

import pytest

from adaptune.dashboard import figures
from adaptune.dashboard.queries import PARAM_PREFIX, _filters, parse_run_path, run_path
from adaptune.dashboard.selection import family, label_text
from adaptune.store.base import RunKey


def test_run_paths_round_trip_and_refuse_anything_else():
    run = RunKey(device_id=3, problem_id=7, input_id=11)
    assert run_path(run) == "/run/7/3/11" and parse_run_path(run_path(run)) == run
    for bad in ("/run/1/2", "/run/1/2/x", "/run/1/2/3/4", "/problem/1", "/run/-1/2/3", ""):
        assert parse_run_path(bad) is None


def test_grid_filters_become_store_filters_with_parameter_types():
    model = {"status": {"filter": " Compile_Error "}, PARAM_PREFIX + "block_size_x": {"filter": "128"},
             PARAM_PREFIX + "kind": {"filter": "tiled"}, PARAM_PREFIX + "unknown": {"filter": "1"},
             PARAM_PREFIX + "tile": {"filter": 2.0}}
    status, where = _filters(model, ["block_size_x", "kind", "tile"])
    assert status == "compile_error"
    assert where == {"block_size_x": 128, "kind": "tiled", "tile": 2}
    assert isinstance(where["tile"], int)
    with pytest.raises(ValueError):
        _filters({"status": {"filter": "no such status"}}, [])


def test_input_families_and_variant_labels():
    assert [family(n) for n in ("banded_1024", "web/graph-3", "sorted", "_odd")] == ["banded", "web", "sorted", "_odd"]
    assert label_text({"variant": "tiled", "block": 64}) == "tiled[block=64]"
    assert label_text({"variant": "plain"}) == "plain" and label_text(None) == "—"


def test_figure_text_is_escaped_for_plotly():
    hostile = "<script>alert(1)</script>"
    assert figures.text(hostile) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    fig = figures.best_so_far({hostile: [{"evaluation": 1, "elapsed_s": 0.0, "best_ms": 1.0}]}, x="evaluation",
                              title=hostile)
    assert "<script>" not in fig.to_json()


def test_few_distinct_parameter_values_are_evenly_spaced_categories():
    values, ticks = figures._axis_values([1024, 16, 256, 16])
    assert values == [2.0, 0.0, 1.0, 0.0] and ticks["ticktext"] == ["16", "256", "1024"]
    many = list(range(figures.CATEGORIES + 1))
    assert figures._axis_values(many) == ([float(v) for v in many], {})
    values, ticks = figures._axis_values(["b", "a", "b"])
    assert values == [1.0, 0.0, 1.0] and ticks["ticktext"] == ["a", "b"]
