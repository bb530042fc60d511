"""Futhark's files and commands: tuning files (``name=value`` lines), ``-L`` comparison logs, and driving a
real ``futhark`` when it is on PATH (it is not installable here; the parsing is tested on recorded text).

Futhark's own autotuner runs each dataset with ``-L`` and reads lines ``Compared <name> <= <value>``; it passes
threshold values as ``--size=<name>=<value>`` and the default as ``--default-threshold``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from adaptune.thresholds.tree import ThresholdDecl, parse_print_sizes

_COMPARED = re.compile(r"Compared ([^ ]+) <= (-?[0-9]+)")
_TUNING = re.compile(r"^([A-Za-z_][A-Za-z0-9_.']*)=(-?[0-9]+)$")


class TuningFileError(ValueError):
    """A tuning file line is not ``name=integer``; the message names the file and line."""


def format_tuning(assignment: Mapping[str, int]) -> str:
    """Futhark's tuning-file text: one ``name=value`` line per threshold, sorted by name."""
    lines = []
    for name in sorted(assignment):
        value = int(assignment[name])
        if not _TUNING.match(f"{name}={value}"):
            raise TuningFileError(f"threshold name {name!r} cannot be written to a tuning file")
        lines.append(f"{name}={value}")
    return "".join(line + "\n" for line in lines)


def write_tuning_file(path: str | Path, assignment: Mapping[str, int]) -> Path:
    """Write ``program.fut.tuning`` (any name works; ``futhark bench`` picks up ``<program>.fut.tuning``)."""
    path = Path(path)
    path.write_text(format_tuning(assignment))
    return path


def parse_tuning(text: str, source: str = "<text>") -> dict[str, int]:
    """Read tuning-file text; blank lines are skipped, anything else must be ``name=integer``."""
    out: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        match = _TUNING.match(line)
        if match is None:
            raise TuningFileError(f"{source}:{number}: expected name=integer, got {raw!r}")
        name, value = match.group(1), int(match.group(2))
        if name in out and out[name] != value:
            raise TuningFileError(f"{source}:{number}: {name} set twice ({out[name]} and {value})")
        out[name] = value
    return out


def read_tuning_file(path: str | Path) -> dict[str, int]:
    path = Path(path)
    return parse_tuning(path.read_text(), str(path))


def parse_comparisons(log: str) -> list[tuple[str, int]]:
    """Every ``Compared <name> <= <value>`` line of a ``-L`` log, in order (loops repeat names)."""
    return [(m.group(1), int(m.group(2))) for m in map(_COMPARED.search, log.splitlines()) if m]


def size_options(assignment: Mapping[str, int], default_threshold: int | None = None) -> list[str]:
    """Command-line options that set thresholds on a compiled Futhark program."""
    opts = [] if default_threshold is None else ["--default-threshold", str(int(default_threshold))]
    return opts + [f"--size={name}={int(v)}" for name, v in sorted(assignment.items())]


def futhark_available() -> bool:
    return shutil.which("futhark") is not None


def program_thresholds(executable: str | Path, timeout_s: float = 60.0) -> list[ThresholdDecl]:
    """Run a compiled Futhark program with ``--print-sizes`` and parse its thresholds."""
    exe = Path(executable)
    if not exe.exists():
        raise FileNotFoundError(f"compiled Futhark program {exe} not found (compile it with futhark opencl)")
    out = subprocess.run([str(exe), "--print-sizes"], capture_output=True, text=True, timeout=timeout_s,
                         check=True, env={"FUTHARK_INCREMENTAL_FLATTENING": "1"})
    return parse_print_sizes(out.stdout, strict=False)


def run_comparisons(executable: str | Path, dataset: str | Path, assignment: Mapping[str, int],
                    timeout_s: float = 600.0, extra: Sequence[str] = ()) -> list[tuple[str, int]]:
    """Run a compiled Futhark program on one dataset with ``-L`` and return its comparisons."""
    with open(dataset, "rb") as stdin:
        out = subprocess.run([str(executable), "-L", *size_options(assignment), *extra], stdin=stdin,
                             capture_output=True, timeout=timeout_s, check=True)
    return parse_comparisons(out.stderr.decode(errors="replace"))


def flows_from_comparisons(pairs: Sequence[tuple[str, int]]) -> list[dict[str, int]]:
    """Split one run's comparisons into passes: the k-th comparison of each threshold belongs to pass k
    (a loop compares its thresholds once per iteration)."""
    flows: list[dict[str, int]] = []
    seen: dict[str, int] = {}
    for name, value in pairs:
        k = seen.get(name, 0)
        seen[name] = k + 1
        while len(flows) <= k:
            flows.append({})
        flows[k][name] = int(value)
    return flows
