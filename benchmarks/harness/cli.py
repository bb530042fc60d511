"""Options every study shares: where to write (``--out``) and how big to run (``--profile``).

Profiles follow scikit-learn's asv suite: ``smoke`` (seconds, what CI runs), ``regular`` (the
default) and ``large`` (the published runs); ``ADAPTUNE_BENCH_PROFILE`` sets the default.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

PROFILES = ("smoke", "regular", "large")


def profile(default: str = "regular") -> str:
    """The profile from ``ADAPTUNE_BENCH_PROFILE`` (or ``default``)."""
    chosen = os.environ.get("ADAPTUNE_BENCH_PROFILE", default)
    if chosen not in PROFILES:
        raise SystemExit(f"ADAPTUNE_BENCH_PROFILE={chosen!r}: choose one of {', '.join(PROFILES)}")
    return chosen


def study_parser(study: str, description: str | None = None) -> argparse.ArgumentParser:
    """A parser with ``--out`` (default ``out/<study>/``, git-ignored) and ``--profile``."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{study}.run", description=description)
    parser.add_argument("--out", default=f"out/{study}",
                        help=f"folder for results (default out/{study}/; committed results are never written)")
    parser.add_argument("--profile", choices=PROFILES, default=profile(),
                        help="run size: smoke (seconds), regular, large (default: $ADAPTUNE_BENCH_PROFILE "
                             "or regular)")
    return parser


def output_stem(study: str, device: str) -> str:
    """A file stem naming the device a result was measured on, e.g. ``gpu_suite_h100``."""
    slug = re.sub(r"[^a-z0-9]+", "_", device.lower()).strip("_") or "unknown"
    return f"{study}_{slug}"


def parse_study_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None, *,
                     smoke: Mapping[str, Any] | None = None) -> argparse.Namespace:
    """Parse, then give every option the user left at its default its ``smoke`` value under ``--profile smoke``."""
    args = parser.parse_args(argv)
    if getattr(args, "profile", None) == "smoke":
        for key, value in (smoke or {}).items():
            if getattr(args, key) == parser.get_default(key):
                setattr(args, key, value)
    return args


_KNOWN_DEVICES = re.compile(r"(h100|h200|a100|a4000|a6000|t4|l4|l40s?|v100|mi250x|mi300x|w6600|w7800)")


def device_tag(device: str) -> str:
    """A short name for file names: ``NVIDIA H100 80GB HBM3`` -> ``h100``; PoCL / a CPU -> ``pocl``."""
    name = device.lower()
    if "pocl" in name or "pthread" in name or name in ("opencl", "cpu") or name.startswith("cpu"):
        return "pocl"
    found = _KNOWN_DEVICES.search(name.replace(" ", ""))
    return found.group(1) if found else (re.sub(r"[^a-z0-9]+", "_", name).strip("_") or "unknown")
