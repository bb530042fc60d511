"""The worker's socket, beside its pickled messages: how the setup's argument arrays reach the worker.

Both ends use it: the parent (:class:`~adaptune.measure.Measurer`) hands over the setup's arrays, the worker
(:mod:`adaptune.measure.worker`) takes them; it imports nothing of either side.

On Linux the arrays are copied once into an anonymous shared-memory file (``memfd_create``) whose descriptor
travels over the socket (``SCM_RIGHTS``); the worker maps it, and its arrays are views of that mapping. The
parent's copy is one ``memcpy`` (Kernel Tuner's vector_add's 120 MB: about 30 ms); through the socket the same
bytes were copied twice by the kernel and read in a loop that needs the GIL for every chunk, which the worker's
other thread, opening the device, holds for long stretches: 0.34 s on an H100 machine. Elsewhere, or where the
shared file cannot be made, the bytes go through the socket as they are (:func:`send_raw`).
"""

from __future__ import annotations

import mmap
import os
import socket
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

#: each array starts on a multiple of this many bytes in the shared file (as a fresh allocation would)
ALIGNMENT = 64


def send_setup(conn: Connection, payload: bytes, buffers: Sequence[Any]) -> None:
    """Send the setup message ``("setup", payload, sizes, shared)`` and its arrays' bytes: a shared-memory
    file's descriptor when ``shared``, else the raw bytes of each buffer in turn."""
    views = [memoryview(b).cast("B") for b in buffers]
    sizes = [len(v) for v in views]
    fd = _shared_copy(views) if sum(sizes) else None
    try:
        conn.send(("setup", payload, sizes, fd is not None))
        if fd is not None:
            with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                socket.send_fds(sock, [b"\0"], [fd])
        else:
            for view in views:
                send_raw(conn, view)
    finally:
        if fd is not None:
            os.close(fd)


def receive_buffers(conn: Connection, message: tuple[Any, ...]) -> list[Any]:
    """The writable buffers of a setup message, in order (views of the shared mapping, or filled from the
    socket); EOFError if the connection closes first."""
    sizes: list[int] = message[2]
    if len(message) > 3 and message[3]:
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1, 1)
        if not data or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise EOFError("the connection closed before the shared arrays' descriptor arrived")
        offsets = _offsets(sizes)
        try:
            mapping = mmap.mmap(fds[0], offsets[-1])  # shared, read and write: the arrays stay writable
        finally:
            os.close(fds[0])
        view = memoryview(mapping)
        return [view[start:start + size] for start, size in zip(offsets, sizes, strict=False)]
    buffers = [bytearray(n) for n in sizes]
    for buffer in buffers:
        receive_raw(conn, buffer)
    return buffers


def _offsets(sizes: Sequence[int]) -> list[int]:
    """Where each buffer starts in the shared file, aligned, and the file's length last."""
    offsets, end = [], 0
    for size in sizes:
        offsets.append(end)
        end += -(-size // ALIGNMENT) * ALIGNMENT
    return [*offsets, max(end, 1)]


def _shared_copy(views: Sequence[memoryview]) -> int | None:
    """A shared-memory file holding the buffers at :func:`_offsets` (its descriptor), or None where none can be
    made. Written with ``pwrite``, not through a mapping: a full memory fails the write with an error instead of
    killing this process with SIGBUS."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        fd = os.memfd_create("adaptune-setup", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        offsets = _offsets([len(v) for v in views])
        os.ftruncate(fd, offsets[-1])
        for view, start in zip(views, offsets, strict=False):
            written = 0
            while written < len(view):
                written += os.pwrite(fd, view[written:], start + written)
    except OSError:
        os.close(fd)
        return None
    return fd


def send_raw(conn: Connection, buffer: Any) -> None:
    """Write a buffer's bytes to the connection's socket as they are, without a frame: the setup's argument
    arrays (their sizes travel in the setup message). Half the time of ``send_bytes``/``recv_bytes_into``, which
    copy each chunk through a new bytes object (0.1 s instead of 0.25 s for Kernel Tuner's vector_add's
    120 MB on the development VM)."""
    view = memoryview(buffer).cast("B")
    sent = 0
    while sent < len(view):
        sent += os.write(conn.fileno(), view[sent:])


def receive_raw(conn: Connection, buffer: bytearray) -> None:
    """Fill ``buffer`` from the connection's socket (what :func:`send_raw` wrote); EOFError if it closes first."""
    view = memoryview(buffer)
    got = 0
    while got < len(view):
        n = os.readv(conn.fileno(), [view[got:]])
        if n == 0:
            raise EOFError("the connection closed in the middle of a buffer")
        got += n
