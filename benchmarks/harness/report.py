"""Write a study's results: ``name.json`` (data + run metadata) and ``name.md`` (a table)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.metadata import run_metadata


def _cell(value: Any, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *,
                   digits: int = 4) -> str:
    """A GitHub markdown table of ``rows`` (dicts); ``columns`` picks and orders the keys."""
    if not rows:
        return ""
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c), digits) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_results(out_dir: str | Path, name: str, data: Mapping[str, Any], *,
                  table: Sequence[Mapping[str, Any]] | str | None = None, title: str = "", notes: str = "",
                  metadata: Mapping[str, Any] | None = None) -> Path:
    """Write ``out_dir/name.json`` and ``out_dir/name.md``; return the JSON path.

    The JSON is ``data`` with a ``metadata`` record (:func:`run_metadata` unless given or already in
    ``data``). ``table`` is rows for :func:`markdown_table` or ready markdown (a study's own report:
    when it starts with a ``# `` heading and no ``title`` is given, that heading is kept).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = dict(data)
    doc.setdefault("metadata", dict(metadata) if metadata is not None else run_metadata())
    path = out / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    meta = doc["metadata"]
    provenance = (f"Commit {meta.get('commit', '?')}, {meta.get('date', '?')}, host {meta.get('host', '?')}"
                  + (f", device {meta['device']}" if meta.get("device") else "") + ".")
    body = table if isinstance(table, str) else markdown_table(table or [])
    if not title and body.startswith("# "):  # a finished report: keep its own title
        heading, _, rest = body.partition("\n")
        parts = [heading, "", provenance, rest]
    else:
        parts = [f"# {title or name}", "", provenance, "", body]
    if notes:
        parts += ["", notes.strip(), ""]
    (out / f"{name}.md").write_text("\n".join(parts).rstrip() + "\n")
    return path


def finish_study(out_dir: str | Path, name: str, data: dict[str, Any], *, markdown: Any, plot: Any = None,
                 meta: Mapping[str, Any] | None = None) -> Path:
    """The end of a study's run: ``data["meta"] = meta``, JSON + markdown (``markdown(data)``), the chart
    (``plot(data, png_path)``) and the report on stdout. Returns the JSON path."""
    if meta is not None:
        data["meta"] = dict(meta)
    path = write_results(out_dir, name, data, table=markdown(data))
    if plot is not None:
        plot(data, path.with_suffix(".png"))
    print(path.with_suffix(".md").read_text())
    return path
