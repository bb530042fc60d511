"""Run the fenced blocks of README.md, docs/*.md and examples/README.md as a reader would.

A ``python`` block runs as a script in a fresh interpreter, a ``bash``/``sh`` block as a shell command,
each with a time limit, in a scratch copy of the repository (one per document, shared by its blocks in
order, so a ``adaptune show`` after an ``adaptune tune`` sees its database). Blocks fenced ``text`` (or
another data language) are not run: sketches and output go there. A fence with no language, or one this
module does not know, fails: the writer has to say whether a reader would run it.

A block that needs an NVIDIA GPU, a cluster or the Makefile's ``.venv`` carries Sybil's skip directive,
an HTML comment the rendered page does not show, with a condition from :func:`conditions` and a reason::

    <!-- skip: next if(not cuda, reason="needs an NVIDIA GPU") -->

``absent("path", ...)`` is true when a block's input (the output of a GPU run, a checkout) is not in the
scratch folder.

Why Sybil: it is a maintained documentation-testing tool that lexes Markdown fences (also inside lists and
quotes) with their line numbers, gives pytest one item per block with a document's blocks run in order,
and has a skip directive with a condition and a reason. Its evaluators are pluggable, which is what is
needed here: tuning starts worker processes and a hung block must be killed, so every block runs in its
own process with a time limit. (pytest-markdown-docs runs Python only, in-process; pytest-codeblocks runs
Python in-process and has no time limit.)
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", "docs/*.md", "examples/README.md")
#: Seconds one block may run: the docs show things a reader can run quickly (ADAPTUNE_DOCS_TIMEOUT_S raises it
#: on a machine shared with other work).
TIMEOUT_S = float(os.environ.get("ADAPTUNE_DOCS_TIMEOUT_S", 180))
#: Fence languages that are shown, never run.
INERT = frozenset({"text", "json", "toml", "csv", "markdown", "diff", "ini", "yaml", "mermaid"})
#: Blocks evaluated in this session ("path:line"); skipped ones never reach the evaluator.
RAN: list[str] = []
#: Copied into the scratch folder (blocks may write there); everything else is linked, read-only by use.
COPIED = ("examples", "benchmarks", "Makefile", "pyproject.toml")
LINKED = ("src", "data", "docs", "tests", "scripts", "README.md", ".venv")


def _cuda_present() -> bool:
    """Whether CuPy sees an NVIDIA GPU; asked in a child process, so pytest's own never holds a CUDA context
    (no CuPy, no driver and no device all mean no)."""
    probe = "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120).returncode == 0


def _venv_ready() -> bool:
    """Whether ``make demo`` would run at once (the Makefile's .venv is built and up to date)."""
    if shutil.which("make") is None:
        return False
    return subprocess.run(["make", "-q", "-C", str(ROOT), "venv"], capture_output=True).returncode == 0


@functools.cache
def conditions() -> dict[str, bool]:
    """Names the skip directives' conditions may use."""
    cluster = bool(os.environ.get("RAY_ADDRESS") and os.environ.get("ADAPTUNE_DB"))
    return {"cuda": _cuda_present(), "cluster": cluster, "venv_ready": _venv_ready()}


def _scratch_copy() -> Path:
    work = Path(tempfile.mkdtemp(prefix="adaptune-docs-"))
    ignore = shutil.ignore_patterns("__pycache__", "out", "*.db")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=ignore, symlinks=True)
        elif src.exists():
            shutil.copy2(src, work / name)  # keeps the mtime: make sees the .venv as up to date
    for name in LINKED:
        if (ROOT / name).exists():
            (work / name).symlink_to(ROOT / name)
    return work


def _environment() -> dict[str, str]:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *(p for p in sys.path if p)])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _command(language: str, source: str, work: Path, line: int) -> list[str]:
    if language == "python":
        script = work / f"block_line_{line}.py"
        script.write_text(source)
        return [sys.executable, str(script)]
    return ["bash", "-e", "-o", "pipefail", "-c", source]


def evaluate_block(example: Example) -> str | None:
    """Run one block; a returned string is Sybil's failure message."""
    language, source = example.parsed
    path = Path(example.path)
    where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{example.line}"
    RAN.append(where)
    if language not in ("python", "bash", "sh"):
        return (f"{where}: a fence marked {language or 'with no language'!r}: mark a block a reader runs "
                "`python` or `bash`, and sketches or output `text`")
    work = example.namespace["workdir"]
    # its own session, so a block that runs out of time is killed with every process it started
    proc = subprocess.Popen(_command(language, source, work, example.line), cwd=work, env=_environment(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"{where}: still running after {TIMEOUT_S} s (docs should show what runs quickly)"
    if proc.returncode != 0:
        return f"{where}: exit code {proc.returncode}\n{out[-1500:]}\n{err[-3000:]}"
    return None


class FenceParser:
    """Every fenced block of a document: runnable ones evaluated, inert ones skipped, the rest refused."""

    def __init__(self) -> None:
        self.lexer = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.M),
                                             mapping={"info": "info", "source": "source"})

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexer(document):
            language = region.lexemes["info"].strip()
            if language in INERT:
                continue
            region.parsed = (language, str(region.lexemes["source"]))
            region.evaluator = evaluate_block
            yield region


def _setup(namespace: dict) -> None:
    work = _scratch_copy()
    namespace.update(conditions())
    namespace["workdir"] = work
    namespace["absent"] = lambda *paths: not all((work / p).exists() for p in paths)  # inputs a block needs


def _teardown(namespace: dict) -> None:
    shutil.rmtree(namespace.pop("workdir"), ignore_errors=True)


def sybil() -> Sybil:
    return Sybil(parsers=[SkipParser(), FenceParser()], path=str(ROOT), patterns=list(DOCUMENTS),
                 setup=_setup, teardown=_teardown)


def is_doc_item(nodeid: str) -> bool:
    path = nodeid.split("::", 1)[0]
    return path in ("README.md", "examples/README.md") or (path.startswith("docs/") and path.endswith(".md"))


def summary_lines(stats: dict[str, list]) -> list[str]:
    """'N run, M skipped' for the documentation blocks, with each skip reason and its count."""
    ran = [where for where in RAN if is_doc_item(where.rsplit(":", 1)[0])]
    failed = [r for r in stats.get("failed", []) if is_doc_item(r.nodeid)]
    skipped = [r for r in stats.get("skipped", []) if is_doc_item(r.nodeid)]
    if not (ran or skipped):
        return []
    reasons: dict[str, int] = {}
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    lines = [f"documentation blocks: {len(ran)} run ({len(ran) - len(failed)} passed, {len(failed)} failed), "
             f"{len(skipped)} skipped"]
    lines += [f"  skipped {n}: {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    return lines
