"""``pipeline.Forked``: a generator run in a forked process, its items back in order through a pipe, with its
return value, its errors, an early stop and the time it spent waiting for the consumer (what the import's
``ReaderShare`` reads)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from contextlib import closing

import pytest

from adaptune.store.pipeline import AHEAD, Forked


def _numbers(n: int):
    for i in range(n):
        yield [i] * 1000  # chunks of some size: several pipe buffers' worth in all
    return "done"


def test_items_come_back_in_order_with_the_generators_return_value():
    forked = Forked(lambda: _numbers(50))
    assert [chunk[0] for chunk in forked] == list(range(50))
    assert forked.result == "done"


def test_an_error_in_the_child_is_raised_after_the_items_before_it():
    def failing():
        yield 1
        yield 2
        raise ValueError("entry 3 is broken")

    got = []
    with pytest.raises(ValueError, match="entry 3 is broken"):
        for item in Forked(failing):
            got.append(item)
    assert got == [1, 2]


class _Unpicklable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()  # a lock does not pickle


def test_an_error_that_cannot_be_pickled_arrives_as_its_text():
    def failing():
        yield 1
        raise _Unpicklable("held a lock")

    with pytest.raises(RuntimeError, match="_Unpicklable: held a lock"):
        list(Forked(failing))


def test_a_consumer_that_stops_early_ends_the_child_though_items_wait_for_it():
    def endless():
        i = 0
        while True:
            yield [i] * 10_000
            i += 1

    with closing(iter(Forked(endless))) as items:
        for _ in range(3):
            next(items)
        time.sleep(0.2)  # the child fills the pipe and its AHEAD queue, then waits
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()


def test_the_child_counts_the_time_it_waited_for_a_slow_consumer():
    forked: Forked = Forked(lambda: _waiting(forked, 12))
    for _ in forked:
        time.sleep(0.05)  # a consumer slower than the child
    # the child made its items at once and then waited for all but the first few (the pipe and AHEAD) to be taken
    assert forked.result > 0.05 * (12 - AHEAD - 3)
    fast: Forked = Forked(lambda: _waiting(fast, 12))
    list(fast)
    assert fast.result < forked.result


def _waiting(forked: Forked, n: int):
    for i in range(n):
        yield [i] * 100_000  # larger than the pipe's buffer: a send waits for the consumer to read it
    return forked.blocked
