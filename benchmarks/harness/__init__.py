"""The one benchmark harness every study uses: time, record the environment, write results.

A study declares what varies and what is compared; the harness times it (:func:`time_host`, or
:func:`time_device` with CUDA events where CuPy is present), records where it ran
(:func:`run_metadata`) and writes ``name.json`` + ``name.md`` (:func:`write_results`), plus an
optional chart (:func:`plot_bars`, :func:`plot_lines`). :func:`study_parser` gives every study the
same ``--out`` / ``--profile`` options, so no study writes over committed results.
"""

from benchmarks.harness.cli import PROFILES, device_tag, output_stem, parse_study_args, profile, study_parser
from benchmarks.harness.files import example_module, load_file_module
from benchmarks.harness.metadata import git_commit, run_metadata, study_meta
from benchmarks.harness.plot import plot_bars, plot_lines
from benchmarks.harness.report import finish_study, markdown_table, write_results
from benchmarks.harness.timing import fastest_us, paired_summary, summarize, time_device, time_host

__all__ = [
    "PROFILES", "device_tag", "example_module", "fastest_us", "finish_study", "git_commit", "load_file_module",
    "markdown_table", "output_stem", "paired_summary", "parse_study_args", "plot_bars", "plot_lines", "profile", "run_metadata",
    "study_meta", "study_parser", "summarize", "time_device", "time_host", "write_results",
]
