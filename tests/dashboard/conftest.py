"""A real store filled by real tuning runs (``adaptune tune`` on PoCL), the real server, a real browser.

Chromium is Debian's (``apt-get install chromium``, done by the Makefile and .ci/run) driven through
Playwright; Playwright's own browser download cannot reach the internet and is never used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_harness import CHROMIUM, CHROMIUM_FLAGS, HOSTILE, Server, tune, write_spec


@pytest.fixture(scope="session")
def tuned_store(tmp_path_factory) -> Path:
    """Three tuning runs of two problems (one with a hostile name), with compile errors among them."""
    folder = tmp_path_factory.mktemp("dashboard_store")
    db = folder / "runs.db"
    for stem, kwargs in (("small", {"name": "vector_add", "n": 50_000, "input_name": "n=50000"}),
                         ("large", {"name": "vector_add", "n": 200_000, "input_name": "n=200000"}),
                         ("hostile", {"name": HOSTILE, "n": 20_000, "params": {"block_size_x": [64],
                                                                                "tile_size_x": [1, 2]}})):
        tune(write_spec(folder, stem, **kwargs), db)
    return db


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium through Playwright; skipped (with the command to fix it) only outside CI."""
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "the playwright package (pip install 'adaptune[dashboard,dev]')"
    if missing is None and not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} (apt-get install chromium)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"the dashboard's browser tests need {missing}")
        pytest.skip(f"needs {missing}")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def serve() -> Iterator:
    """Start dashboards for a test; every one is stopped at its end."""
    started: list[Server] = []

    def start(target: str | Path, *extra: str) -> Server:
        server = Server(str(target), *extra)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def page(browser):
    """A fresh browser page that records JavaScript errors and dialogs (an ``alert`` means escaping failed)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.errors = []
    pg.dialogs = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    yield pg
    context.close()
