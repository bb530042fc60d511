"""pytest finds the documentation's runnable blocks through Sybil (tests/doc_blocks.py says how and why)."""

from __future__ import annotations

from tests.doc_blocks import summary_lines, sybil

pytest_collect_file = sybil().pytest()


def pytest_terminal_summary(terminalreporter) -> None:
    for line in summary_lines(terminalreporter.stats):
        terminalreporter.write_line(line)
