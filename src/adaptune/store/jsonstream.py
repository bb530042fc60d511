"""Reading one large JSON document piece by piece: the top-level object's members, then the items of one
big member (a Kernel Tuner cache's ``cache`` object, a T4 file's ``results`` list) one at a time.

Hand-written over the standard library rather than ``ijson``: every item is decoded whole by a C decoder
(``orjson`` for the common one-item-a-line layout that Kernel Tuner and adaptune write, ``json``'s
``raw_decode`` otherwise), which is several times faster than assembling items from ijson's event stream,
and the same loop stops cleanly where a crashed writer cut the file off (the unterminated "open" cache).
Memory is one read block plus the item being decoded, whatever the size of the file.
"""

from __future__ import annotations

import io
import json
import re
import zlib
from pathlib import Path
from typing import IO, Any

import orjson

from adaptune.store.errors import FormatError

BLOCK = 1 << 20
"""Characters read at a time."""
MAX_VALUE = 64 << 20
"""Longest single value (one cache entry) read before the text is called corrupt: bounds memory."""
GZIP_MAGIC = b"\x1f\x8b"
_WS = " \t\r\n"
_NEXT_ENTRY = re.compile(r',\s*(?=["{])')
_COLON = re.compile(r"\s*:\s*")


class Truncated(Exception):
    """The text ends (or its compression breaks) inside a value: what a killed writer leaves behind."""


class _Gunzip(io.RawIOBase):
    """The bytes of a gzip file, inflated block by block with zlib. A file cut short (or damaged) yields every
    byte before the damage and then ends, with ``cut`` saying why (``gzip.open`` raises and loses the block
    the cut falls in)."""

    def __init__(self, path: Path) -> None:
        self._raw = path.open("rb")
        self._inflate = zlib.decompressobj(wbits=31)
        self._pending = b""
        self.cut = ""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            packed = self._raw.read(1 << 16)
            if not packed:
                if not self._inflate.eof and not self.cut:
                    self.cut = "compressed data ends before its end-of-stream marker"
                return 0
            try:
                self._pending = self._inflate.decompress(packed)
                while self._inflate.eof and self._inflate.unused_data:  # a file of several gzip members
                    rest = self._inflate.unused_data
                    self._inflate = zlib.decompressobj(wbits=31)
                    self._pending += self._inflate.decompress(rest)
            except zlib.error as exc:
                self.cut = f"compressed data is corrupt ({exc})"
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def open_text(path: str | Path) -> IO[str]:
    """``path`` as a UTF-8 text stream, decompressed when it is gzip (by magic number, not by name)."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            head = f.read(2)
        if head == GZIP_MAGIC:
            return io.TextIOWrapper(io.BufferedReader(_Gunzip(path), 1 << 16), encoding="utf-8", newline="")
        if path.suffix == ".gz":
            raise FormatError(f"{path}: named .gz but is not a gzip file")
        return path.open("r", encoding="utf-8", newline="")
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def compression_cut(stream: IO[str]) -> str:
    """Why a gzip text stream ended early ('' when it did not, or is not gzip)."""
    raw = getattr(getattr(stream, "buffer", None), "raw", None)
    return getattr(raw, "cut", "") if isinstance(raw, _Gunzip) else ""


class JsonStream:
    """A cursor over the text of one JSON document, refilled from ``stream`` a block at a time."""

    def __init__(self, stream: IO[str], source: str) -> None:
        self.stream, self.source = stream, source
        self.buf, self.pos, self.eof = "", 0, False
        self.consumed = 0  # characters before ``buf``: for progress and messages
        self._decoder = json.JSONDecoder()

    # ------------------------------------------------------------------ buffer
    def _fill(self) -> bool:
        """Read one more block; False at the end of the text."""
        if self.eof:
            return False
        try:
            block = self.stream.read(BLOCK)
        except UnicodeDecodeError as exc:
            raise FormatError(f"{self.source}: not UTF-8 text (near character {self.consumed + self.pos})") from exc
        if not block:
            self.eof = True
            return False
        if self.pos > len(self.buf) // 2:  # drop what was decoded already: memory stays one block or so
            self.consumed += self.pos
            self.buf, self.pos = self.buf[self.pos:], 0
        self.buf += block
        return True

    def _ended(self, what: str) -> str:
        cut = compression_cut(self.stream)
        return f"{what}: {cut}" if cut else what

    @property
    def offset(self) -> int:
        """Characters decoded so far."""
        return self.consumed + self.pos

    def peek(self) -> str:
        """The next non-blank character ('' at the end), without consuming it."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, char: str) -> None:
        found = self.peek()
        if found != char:
            if not found:
                raise Truncated(self._ended(f"the text ends where {char!r} was expected"))
            raise FormatError(f"{self.source}: expected {char!r} at character {self.offset}, found {found!r}")
        self.pos += 1

    def skip(self, char: str) -> bool:
        """Consume ``char`` if it is next."""
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    # ------------------------------------------------------------------ values
    def value(self) -> Any:
        """Decode the next JSON value whole."""
        if not self.peek():
            raise Truncated(self._ended("the text ends where a value was expected"))
        line_end = self.buf.find("\n", self.pos)
        if line_end > self.pos:  # fast path: the value is the rest of its line (one entry a line)
            text = self.buf[self.pos:line_end].rstrip()
            # the value and the separator after it (',' or the closing '}' of the cache), or the value alone
            for candidate in ((text[:-1], text) if text[-1:] in ",}]" else (text,)):
                try:
                    value = orjson.loads(candidate)
                except orjson.JSONDecodeError:
                    continue
                self.pos += len(candidate)
                return value
        while True:
            try:
                value, end = self._decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_VALUE:
                    raise FormatError(f"{self.source}: invalid JSON at character {self.consumed + exc.pos}: "
                                      f"{exc.msg}") from exc
                if not self._fill():  # the value may go on in the next block; at the end it is cut off
                    if self._whole_entry_after(self.pos + 1):
                        raise FormatError(f"{self.source}: invalid JSON at character {self.consumed + exc.pos}: "
                                          f"{exc.msg}") from exc
                    raise Truncated(self._ended("the text ends inside a value")) from exc
                continue
            if end == len(self.buf) and isinstance(value, int | float) and self._fill():
                continue  # a number may go on in the next block
            self.pos = end
            return value

    def line_members(self) -> list[tuple[str, Any]] | None:
        """The members of a big object written one a line (``"key": value,``, Kernel Tuner's layout): every
        whole line in the buffer decoded by one orjson call. None, with nothing consumed, where the text at the
        cursor is not laid out so (the last member, a member over several lines, an invalid one): the caller
        then reads member by member with :meth:`key` and :meth:`value`, which also tell what is wrong."""
        if self.peek() != '"':
            return None
        end = self.buf.rfind("\n", self.pos)
        if end < 0:
            if not self._fill():
                return None
            end = self.buf.rfind("\n", self.pos)
        block = self.buf[self.pos:end].rstrip() if end > 0 else ""
        if not block.endswith(","):
            return None
        try:
            members = orjson.loads("{" + block[:-1] + "}")
        except orjson.JSONDecodeError:
            return None
        if type(members) is not dict:
            return None
        self.pos += len(block)  # up to and including the ',' after the last of them
        return list(members.items())

    def _plain_string(self) -> str | None:
        """A string without escapes at the cursor, consumed; None (nothing consumed) for any other."""
        end = self.buf.find('"', self.pos + 1)
        if end < 0 or "\\" in self.buf[self.pos + 1:end]:
            return None
        text = self.buf[self.pos + 1:end]
        self.pos = end + 1
        return text

    def _whole_entry_after(self, start: int) -> bool:
        """Whether a complete object (or ``"key": {...}`` pair) follows a value that does not decode: then the
        text is corrupt inside, not cut off by a crash (which leaves nothing whole after the cut)."""
        for found in _NEXT_ENTRY.finditer(self.buf, start):
            at = found.end()
            try:
                value, end = self._decoder.raw_decode(self.buf, at)
                if isinstance(value, str):  # a key: its object follows the colon
                    colon = _COLON.match(self.buf, end)
                    if colon is None:
                        continue
                    value, end = self._decoder.raw_decode(self.buf, colon.end())
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return True
        return False

    def key(self) -> str:
        """The next object key and its colon."""
        key = self._plain_string() if self.peek() == '"' else None
        if key is None:
            key = self.value()
        if not isinstance(key, str):
            raise FormatError(f"{self.source}: expected an object key at character {self.offset}")
        self.expect(":")
        return key
