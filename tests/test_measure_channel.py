"""The setup's arrays reach the worker intact: through a shared-memory file on Linux, through the socket
elsewhere; and a closed worker is reaped, or killed after its grace period, without a thread waiting for it."""

from __future__ import annotations

import os
import socket
import sys
import threading
from multiprocessing.connection import Connection

import numpy as np
import pytest

from adaptune.measure import channel, process


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(1001).astype(np.float32), np.arange(3, dtype=np.int8), np.zeros(0, np.float64),
            rng.integers(0, 1 << 40, 77_777)]


def _through_a_socket(arrays: list[np.ndarray]) -> tuple[tuple, list]:
    ours, theirs = socket.socketpair()
    parent, child = Connection(ours.detach()), Connection(theirs.detach())
    received: dict[str, object] = {}

    def receive() -> None:
        message = child.recv()
        received["message"], received["buffers"] = message, channel.receive_buffers(child, message)

    reader = threading.Thread(target=receive)
    reader.start()
    channel.send_setup(parent, b"payload", [memoryview(a) for a in arrays])
    reader.join(30)
    parent.close()
    child.close()
    return received["message"], received["buffers"]  # type: ignore[return-value]


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="shared-memory files are Linux's")
def test_arrays_arrive_in_one_shared_mapping_writable_and_aligned():
    arrays = _arrays()
    message, buffers = _through_a_socket(arrays)
    assert message[:2] == ("setup", b"payload") and message[3] is True
    for array, buffer in zip(arrays, buffers, strict=True):
        got = np.frombuffer(buffer, dtype=array.dtype)
        assert np.array_equal(got, array)
        assert not memoryview(buffer).readonly
        if array.size:
            assert got.ctypes.data % channel.ALIGNMENT == 0
    np.frombuffer(buffers[0], dtype=np.float32)[:] = 5.0  # the worker's copy: the caller's array is untouched
    assert not np.any(arrays[0] == 5.0)


def test_without_shared_memory_files_the_bytes_go_through_the_socket(monkeypatch):
    monkeypatch.delattr(os, "memfd_create", raising=False)
    arrays = _arrays()
    message, buffers = _through_a_socket(arrays)
    assert message[3] is False
    assert all(np.array_equal(np.frombuffer(b, dtype=a.dtype), a) for a, b in zip(arrays, buffers, strict=True))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker is forked on Linux only")
def test_a_closed_worker_is_reaped_or_killed_after_its_grace_without_a_thread():
    threads = threading.active_count()
    worker = process.WorkerProcess()
    worker.close_later(grace_s=0.0)  # its grace is over at once: the next reap kills it if it still runs
    assert threading.active_count() == threads
    process.reap_closed()
    assert worker.proc.poll() is not None
    assert all(closed is not worker for closed, _ in process._closed)
