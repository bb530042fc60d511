"""The dashboard in a real browser over a real store: each page draws the stored points, a run started
after the page opened appears without a reload, names are shown as text, a broken store gets a clear page.

Slow (tuning runs on PoCL, a server process, Chromium): marked ``slow``, still run in CI.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import numpy as np
import pytest
from dashboard_harness import HOSTILE, REFUSED_TILE, ROOT, screenshot, tune, write_spec

from adaptune.adaptive import CodeVariant
from adaptune.adaptive.objectives import metrics, pareto
from adaptune.store import Store

pytestmark = pytest.mark.slow
PLOT = "#{} .js-plotly-plot"


def plot_data(pg, graph_id: str) -> list[dict]:
    """The traces plotly drew in one graph (read from the page, as the browser has them)."""
    pg.wait_for_selector(PLOT.format(graph_id), timeout=30_000)
    pg.wait_for_function(f"document.querySelector('{PLOT.format(graph_id)}').data?.length > 0", timeout=30_000)
    return pg.evaluate(f"Array.from(document.querySelector('{PLOT.format(graph_id)}').data)"
                       ".map(t => ({x: t.x, y: t.y, type: t.type, name: t.name, dimensions: t.dimensions}))")


def grid_text(pg, grid_id: str, expect: str, timeout: float = 30_000) -> str:
    """The grid's text once it shows ``expect`` (scrolled into view: AG Grid draws rows only when visible)."""
    pg.locator(f"#{grid_id}").scroll_into_view_if_needed(timeout=timeout)
    pg.wait_for_function(f"document.getElementById('{grid_id}')?.innerText.includes({expect!r})", timeout=timeout)
    return pg.locator(f"#{grid_id}").inner_text()


def runs_of(db) -> list:
    with Store(db) as store:
        return store.runs()


def test_home_lists_every_run_and_opens_one(tuned_store, serve, page):
    server = serve(tuned_store)
    page.goto(server.url + "/")
    text = grid_text(page, "runs-grid", "n=200000")
    runs = runs_of(tuned_store)
    assert len(runs) == 3
    for run in runs:
        assert run.input in text
        assert f"{run.counts.get('compile_error', 0)}" in text
    assert "compile_error" in text  # failures by kind
    screenshot(page, "problems")
    page.get_by_text("n=200000").first.click()
    page.wait_for_url(re.compile(r"/run/\d+/\d+/\d+$"))
    page.wait_for_selector("#run-title")
    assert page.locator("#run-title").inner_text() == "vector_add"
    assert not page.errors


def test_run_page_plots_the_stored_measurements(tuned_store, serve, page):
    run = next(r for r in runs_of(tuned_store) if r.input == "n=50000")
    with Store(tuned_store) as store:
        trajectory = store.trajectory(run.run)
        ok = store.page(run.run, limit=1000, status="ok").rows
        failed = store.page(run.run, limit=1000, status="compile_error").rows
    server = serve(tuned_store)
    page.goto(f"{server.url}/run/{run.run.problem_id}/{run.run.device_id}/{run.run.input_id}")
    (curve,) = plot_data(page, "fig-trajectory-evals")
    assert curve["y"][: len(trajectory.points)] == pytest.approx([p.best_ms for p in trajectory.points])
    assert curve["x"][-1] == trajectory.evaluations
    (parcoords,) = plot_data(page, "fig-parcoords")
    assert sorted(parcoords["dimensions"][-1]["values"]) == pytest.approx(sorted(r.result.time_ms for r in ok))
    panels = plot_data(page, "fig-params")
    assert len(panels) == 2 and sorted(panels[0]["y"]) == pytest.approx(sorted(r.result.time_ms for r in ok))
    spread = plot_data(page, "fig-spread")
    assert sum(spread[0]["y"]) == len(ok) and spread[1]["y"] == [len(failed)]
    best = min(ok, key=lambda r: r.result.time_ms).result
    code = page.locator("#best-code").inner_text()
    assert all(f'"{k}": {v}' in code for k, v in best.config.items())
    # the table: every configuration, failures with their compiler error; filter by status in the store
    table = grid_text(page, "config-grid", "compile_error")
    assert "is refused by this kernel" in table
    screenshot(page, "run")
    page.locator("#config-grid .ag-header-cell[col-id='status'] .ag-header-cell-filter-button").click()
    page.locator(".ag-filter input").first.fill("compile_error")
    rows = "#config-grid .ag-center-cols-container .ag-row"
    page.wait_for_function(f"document.querySelectorAll({rows!r}).length == {len(failed)}", timeout=15_000)
    assert all(status == "compile_error" for status in page.locator(f"{rows} [col-id='status']").all_inner_texts())
    assert failed and all(r.result.config["tile_size_x"] == REFUSED_TILE for r in failed)
    assert not page.errors


def test_a_run_started_after_the_page_opened_appears_live(tmp_path, tuned_store, serve, page):
    db = tmp_path / "live.db"
    tune(write_spec(tmp_path, "first", name="vector_add", n=30_000), db)
    server = serve(db)
    page.goto(server.url + "/")
    grid_text(page, "runs-grid", "vector_add")
    proc = tune(write_spec(tmp_path, "second", name="started_later", n=30_000), db, wait=False)
    try:
        grid_text(page, "runs-grid", "started_later", timeout=120_000)  # no reload: the 2 s timer brings it
    finally:
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    # the evaluation count follows the run to its end
    total = runs_of(db)[-1].measurements
    page.wait_for_function("document.getElementById('runs-grid').innerText.includes('started_later')", timeout=5000)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and f"{total}" not in _row_of(page, "started_later"):
        time.sleep(0.5)
    row = _row_of(page, "started_later")
    assert f"\t{total}\t" in row, f"{row!r}; indicator: {page.locator('#live').inner_text()!r}"
    assert page.url.endswith("/") and not page.errors
    # the run's page shows every row, its table included, while the timer keeps polling
    page.get_by_text("started_later").first.click()
    page.wait_for_selector("#run-title")
    grid_text(page, "config-grid", "compile_error")
    shown = "dash_ag_grid.getApi('config-grid').getDisplayedRowCount()"
    page.wait_for_function(f"{shown} == {total}", timeout=30_000)
    page.wait_for_timeout(5000)  # two more polls: the table refreshed in place, still whole
    assert page.evaluate(shown) == total and not page.errors


def _row_of(pg, text: str) -> str:
    return pg.locator("#runs-grid .ag-center-cols-container .ag-row", has_text=text).inner_text().replace("\n", "\t")


def test_hostile_names_are_shown_as_text(tuned_store, serve, page):
    run = next(r for r in runs_of(tuned_store) if r.problem == HOSTILE)
    server = serve(tuned_store)
    page.goto(server.url + "/")
    assert HOSTILE in grid_text(page, "runs-grid", HOSTILE)
    page.goto(f"{server.url}/run/{run.run.problem_id}/{run.run.device_id}/{run.run.input_id}")
    page.wait_for_selector("#run-title")
    assert page.locator("#run-title").inner_text() == HOSTILE
    assert HOSTILE in page.locator("#best-code").inner_text()
    page.goto(f"{server.url}/problem/{run.run.problem_id}")
    assert page.locator("#compare-title").inner_text() == HOSTILE
    plot_data(page, "fig-compare-evals")
    assert page.dialogs == [] and not page.errors
    assert page.evaluate("document.querySelectorAll('script:not([src])').length") <= 3  # Dash's own config


@pytest.mark.parametrize("target", ["not_a_db.txt", "postgresql://adaptune@127.0.0.1:1/nothing", "missing.db"])
def test_a_broken_store_gives_a_clear_page(tmp_path, serve, page, target):
    if target.endswith(".txt"):
        (tmp_path / target).write_text("this is not a database\n")
    if "://" not in target:
        target = str(tmp_path / target)
    server = serve(target)
    page.goto(server.url + "/")
    page.wait_for_selector("#error-text")
    assert page.locator("h1").inner_text() == "Cannot read the store"
    message = page.locator("#error-text").inner_text()
    assert "not_a_db.txt" in message or "port 1 failed: Connection refused" in message or "missing.db" in message
    assert "Traceback" not in page.content()
    if target.endswith(".txt"):
        screenshot(page, "broken_store")
    assert not (tmp_path / "missing.db").exists()  # read-only: never creates a database


def test_compare_page_draws_every_run_of_a_problem(tuned_store, serve, page):
    problem_id = next(r for r in runs_of(tuned_store) if r.problem == "vector_add").run.problem_id
    server = serve(tuned_store)
    page.goto(f"{server.url}/problem/{problem_id}")
    curves = plot_data(page, "fig-compare-evals")
    assert sorted(c["name"].split(" · ")[1] for c in curves) == ["n=200000", "n=50000"]  # one per run
    (inputs,) = plot_data(page, "fig-inputs")
    assert sorted(x.split(" · ")[0] for x in inputs["x"]) == ["n=200000", "n=50000"]
    (devices,) = plot_data(page, "fig-devices")
    assert len(devices["x"]) == 1
    screenshot(page, "compare_inputs")


# ------------------------------------------------------------------ per-input selection of a trained CodeVariant
def sort_quick(x):
    return np.sort(x, kind="quicksort")


def sort_stable(x):
    return np.sort(x, kind="stable")


def sort_python(x):
    return np.array(sorted(x.tolist()))


def size(x):
    return float(np.log2(len(x)))


def presorted(x):
    return float(np.mean(x[1:] >= x[:-1]))


@pytest.fixture(scope="module")
def trained_variant(tmp_path_factory):
    folder = tmp_path_factory.mktemp("variant")
    db = folder / "labels.db"
    rng = np.random.default_rng(0)
    inputs = {}
    for n in (16, 256, 4096, 32768):
        inputs[f"random_{n}"] = (rng.random(n),)
        inputs[f"sorted_{n}"] = (np.arange(n, dtype=float),)
    cv = CodeVariant("sorting")
    cv.variant(sort_quick, default=True)
    cv.variant(sort_stable)
    cv.variant(sort_python)
    cv.feature(size)
    cv.feature(presorted)
    cv.train(inputs, model="tree", db=db, repeats=3, progress=False)
    model = cv.save(folder / "sorting.json")
    return db, model, cv, inputs


def test_per_input_page_shows_oracle_and_the_models_choice(trained_variant, serve, page):
    db, model, cv, inputs = trained_variant
    server = serve(db, "--model", str(model))
    with Store(db) as store:
        (problem,) = store.problems()
    page.goto(f"{server.url}/inputs/{problem.id}")
    (chosen, fixed) = plot_data(page, "fig-oracle")
    assert sorted(chosen["x"]) == sorted(inputs) and all(0 <= f <= 1 for f in chosen["y"] + fixed["y"])
    grid_text(page, "inputs-grid", "sorted_32768")
    for name, args in inputs.items():  # the model's choice per input, as the variant itself picks it
        chosen_cell = page.locator(f"#inputs-grid .ag-row[row-id='{name}'] [col-id='chosen']")
        assert chosen_cell.inner_text() == str(cv.select(*args))
    assert "family random (4)" in page.locator("#inputs-summary").inner_text().lower()
    matrix = page.evaluate("document.querySelector('#fig-choices .js-plotly-plot').data[0].z")
    right = sum(page.locator(f"#inputs-grid .ag-row[row-id='{n}'] [col-id='chosen']").inner_text()
                == page.locator(f"#inputs-grid .ag-row[row-id='{n}'] [col-id='oracle']").inner_text() for n in inputs)
    assert sum(map(sum, matrix)) == len(inputs) and sum(matrix[k][k] for k in range(len(matrix))) == right
    screenshot(page, "inputs")
    assert not page.errors


def test_energy_pareto_front_of_a_run_that_recorded_energy(tmp_path, serve, page):
    """The committed H100 energy run (NVML counter per measurement), imported as a user would."""
    db = tmp_path / "energy.db"
    t4 = ROOT / "benchmarks" / "energy" / "results" / "energy_h100_t4.json.gz"
    subprocess.run([sys.executable, "-m", "adaptune", "import", str(t4), "--db", str(db)], check=True, cwd=ROOT,
                   capture_output=True)
    (run,) = runs_of(db)
    with Store(db) as store:
        results = [s.result for s in store.page(run.run, limit=1000, status="ok").rows]
    front = pareto(results)
    server = serve(db)
    page.goto(f"{server.url}/run/{run.run.problem_id}/{run.run.device_id}/{run.run.input_id}")
    everything, drawn_front = plot_data(page, "fig-energy")
    assert len(everything["x"]) == len(results) == run.counts["ok"]
    assert drawn_front["x"] == pytest.approx([r.time_ms for r in front])
    assert drawn_front["y"] == pytest.approx([metrics(r)["energy_per_call_j"] for r in front])
    grid_text(page, "config-grid", "ok")
    screenshot(page, "energy")


def test_one_problem_across_devices(tmp_path, serve, page):
    """Kernel Tuner caches of one convolution recorded on two GPUs, imported under one problem name."""
    db = tmp_path / "gpus.db"
    for gpu in ("A100", "W7800"):
        cache = ROOT / "data" / "benchmark_hub" / "convolution_milo" / f"{gpu}.json.gz"
        subprocess.run([sys.executable, "-m", "adaptune", "import", str(cache), "--db", str(db), "--name",
                        "convolution"], check=True, cwd=ROOT, capture_output=True)
    with Store(db) as store:
        (problem,) = store.problems()
        best = {g.name: g.best_time_ms for g in store.device_summaries(problem.id)}
    server = serve(db)
    page.goto(f"{server.url}/problem/{problem.id}")
    (devices,) = plot_data(page, "fig-devices")
    assert dict(zip(devices["x"], devices["y"], strict=True)) == pytest.approx(best)
    assert len(best) == 2 and len(plot_data(page, "fig-compare-evals")) == 2
    screenshot(page, "compare")


def test_a_postgresql_store_is_served_live(tmp_path, pg_url, serve, page):
    """The team store: a tuning run writing to PostgreSQL while the page is open appears on it."""
    server = serve(pg_url)
    page.goto(server.url + "/")
    page.wait_for_selector("#runs-grid")
    tune(write_spec(tmp_path, "pg", name="on_postgres", n=30_000), pg_url)
    # the page refreshes on its own: wait for the finished run's failures, not just its first rows (a poll
    # that lands while the run is still writing shows the run with none failed yet)
    text = grid_text(page, "runs-grid", "compile_error", timeout=60_000)
    assert "on_postgres" in text and not page.errors
