"""The documentation runner itself (tests/doc_blocks.py): what it runs, skips, refuses and reports."""

from __future__ import annotations

import textwrap
from unittest import SkipTest

import pytest
from sybil import Document
from sybil.example import SybilFailure
from sybil.parsers.markdown import SkipParser

from tests.doc_blocks import FenceParser, _setup, _teardown

PAGE = textwrap.dedent('''\
    # A page

    ```bash
    echo made > made.txt
    ```

    ```python
    from pathlib import Path
    assert Path("made.txt").read_text() == "made\\n"   # the blocks of a page share one folder, in order
    ```

    ```text
    this is never run: a sketch
    ```

    <!-- skip: next if(not cuda_here, reason="needs an NVIDIA GPU") -->
    ```bash
    exit 3
    ```

    ```python
    raise SystemExit("a broken example")
    ```

    ```
    adaptune tune spec.py
    ```
''')


def _outcomes(tmp_path) -> list[str]:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    document = Document.parse(str(page), SkipParser(), FenceParser())
    _setup(document.namespace)
    document.namespace["cuda_here"] = False
    outcomes = []
    try:
        for example in document.examples():
            try:
                example.evaluate()
                outcomes.append("ok")
            except SkipTest as exc:
                outcomes.append(f"skipped: {exc}")
            except SybilFailure as exc:
                outcomes.append(f"failed: {exc.result}")
    finally:
        _teardown(document.namespace)
    return outcomes


def test_blocks_run_in_order_skip_with_reason_and_fail_clearly(tmp_path):
    outcomes = _outcomes(tmp_path)
    # bash, python, (text not collected), skip directive, skipped bash, failing python, bare fence
    assert outcomes[:4] == ["ok", "ok", "ok", "skipped: needs an NVIDIA GPU"]
    assert outcomes[4].startswith("failed:") and "a broken example" in outcomes[4]
    assert outcomes[5].startswith("failed:") and "with no language" in outcomes[5]
    assert len(outcomes) == 6


def test_a_block_that_runs_too_long_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.doc_blocks.TIMEOUT_S", 2)
    page = tmp_path / "slow.md"
    page.write_text("```bash\nsleep 60 &\nsleep 60\n```\n")
    document = Document.parse(str(page), FenceParser())
    _setup(document.namespace)
    try:
        (example,) = document.examples()
        with pytest.raises(SybilFailure, match="still running after 2 s"):
            example.evaluate()
    finally:
        _teardown(document.namespace)
