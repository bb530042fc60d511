"""Reading and writing the text of interop files: gzip by magic number, atomic replacement on write."""

from __future__ import annotations

import gzip
import os
import uuid
import zlib
from pathlib import Path

from adaptune.store.errors import FormatError

GZIP_MAGIC = b"\x1f\x8b"


def read_text(path: str | Path) -> str:
    """The text of ``path`` (.json or gzip-compressed); one FormatError naming the file otherwise."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise FormatError(f"{path}: truncated or corrupt gzip file ({exc})") from exc
    elif path.suffix == ".gz":
        raise FormatError(f"{path}: named .gz but is not a gzip file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start})") from exc


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (gzip when the name ends in .gz): a crash leaves the old file."""
    path = Path(path)
    data = text.encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:  # "x": never clobber; permissions follow the umask like any new file
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
