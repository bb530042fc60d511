"""Parsing and encoding in a second process while this one writes to the database.

A bulk import is Python work (decoding, validating and encoding entries) then database work (the driver's
executemany or COPY). Threads cannot overlap the two: the writer releases the GIL once per row and waits to
get it back from the parser. A forked child that does the Python work and hands over finished chunks does
overlap them, on two cores; up to ``AHEAD`` finished chunks wait in the child besides the one in the pipe, so
memory stays a few chunks in each process. Where ``fork`` is not available the generator runs here, one chunk
after the other.

Both sides make and drop millions of small objects (decoded entries, row tuples) that hold no reference cycles:
Python's cyclic collector, run every 700 allocations, took about a third of the reader's time scanning them.
While the pipeline runs, each side collects the youngest generation once an item instead
(``chunked_collection``; a cycle among an item's objects is still freed, an item later).
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import pickle
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Forked(Generic[T]):
    """The items of ``make()`` (a generator), produced in a forked child: iterating yields them in order;
    :attr:`result` is the generator's return value (after the iteration ends). An exception in the child is
    raised here at that point; a consumer that stops early ends the child."""

    def __init__(self, make: Callable[[], Generator[T, None, Any]]) -> None:
        self.make = make
        self.result: Any = None
        self.blocked = 0.0
        """Seconds the child has so far waited for the consumer to take its items (read in the child, by
        ``make``'s generator: the consumer's side is the slower one by that much)."""

    def __iter__(self) -> Generator[T, None, None]:
        if "fork" not in multiprocessing.get_all_start_methods():  # Windows: here, one chunk at a time
            self.result = yield from self.make()
            return
        context = multiprocessing.get_context("fork")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=_run, args=(self, sender, receiver), daemon=True)
        child.start()
        sender.close()
        try:
            with chunked_collection() as collect:
                while True:
                    try:
                        kind, value = receiver.recv()
                    except EOFError:
                        raise RuntimeError(f"the import's reader process ended without an answer "
                                           f"(exit code {child.exitcode})") from None
                    if kind == "item":
                        yield value
                        del value
                        collect()
                    elif kind == "error":
                        raise value
                    else:
                        self.result = value
                        return
        finally:
            receiver.close()
            if child.is_alive():
                child.terminate()
            child.join()


AHEAD = 2
"""Items the child may have finished that the consumer has not taken yet (besides the one in the pipe): the
two sides' time per item varies from item to item, and with a single item between them each waited for the
other in turn (an import at 10^6: the writer 4.2 s for the reader, the reader 2.5 s for the writer)."""


def _run(forked: Forked, sender: Any, receiver: Any) -> None:
    receiver.close()  # the parent's end: with it closed here, a parent that dies breaks the pipe and ends us
    outbox = _Outbox(sender)
    try:
        with chunked_collection() as collect:
            items = forked.make()
            while True:
                try:
                    item = next(items)
                except StopIteration as end:
                    outbox.put(pickle.dumps(("done", end.value), protocol=pickle.HIGHEST_PROTOCOL))
                    break
                pickled = _unshared_pickle(("item", item))
                del item
                forked.blocked += outbox.put(pickled)
                del pickled
                collect()
    except BrokenPipeError:  # the consumer stopped: nothing to tell it
        pass
    except BaseException as exc:  # handed to the consumer, raised there
        try:
            message = pickle.dumps(("error", exc), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            message = pickle.dumps(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
        with suppress(BrokenPipeError):
            outbox.put(message)
    finally:
        outbox.close()
        sender.close()
        os._exit(0)  # no exit handlers: the parent's database connections are not the child's to close


class _Outbox:
    """The child's pickled messages, sent in order by a thread of their own (the pipe's write gives up the GIL)
    while the child makes the next ones, up to ``AHEAD`` of them waiting."""

    def __init__(self, sender: Any) -> None:
        self.waiting: queue.Queue[bytes | memoryview | None] = queue.Queue(AHEAD)
        self.failed: OSError | None = None
        self.thread = threading.Thread(target=self._send, args=(sender,), daemon=True)
        self.thread.start()

    def _send(self, sender: Any) -> None:
        try:
            while (message := self.waiting.get()) is not None:
                sender.send_bytes(message)
        except OSError as exc:  # the consumer has gone (a broken pipe)
            self.failed = exc

    def put(self, message: bytes | memoryview | None) -> float:
        """Queue ``message``; the seconds spent waiting for room (the consumer was behind). Raises
        BrokenPipeError once the consumer has gone."""
        start = time.perf_counter()
        while True:
            if self.failed is not None or not self.thread.is_alive():
                raise BrokenPipeError(f"the consumer stopped taking items ({self.failed})")
            try:
                self.waiting.put(message, timeout=0.05)
                return time.perf_counter() - start
            except queue.Full:
                continue

    def close(self) -> None:
        """Everything queued sent (or the consumer gone), the thread ended."""
        with suppress(BrokenPipeError):
            self.put(None)
        self.thread.join()


def _unshared_pickle(item: Any) -> memoryview:
    """``item`` pickled without the pickler's memo (``Pickler.fast``): a chunk of row tuples in half the time
    of ``Connection.send``'s pickling (0.6 against 1.2 µs a row), as nothing in it is recursive; an object
    met twice is written twice and read back as two equal copies. A recursive item: pickled as usual."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    try:
        pickler.dump(item)
    except (RecursionError, ValueError):
        return memoryview(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))
    return buffer.getbuffer()


def taken(items: list[T]) -> list[T]:
    """The items, moved out of ``items`` (left empty): a generator yields a chunk so that its consumer alone
    holds it, freed when that drops it; a name still holding it would keep its objects alive into the next
    collection (``chunked_collection``), which would then scan them all."""
    moved = items[:]
    items.clear()
    return moved


@contextmanager
def chunked_collection() -> Iterator[Callable[[], int]]:
    """The cyclic collector paused for work that makes and drops many small objects a chunk at a time; the
    function to call after each chunk (a collection of the youngest generation). Restored on exit."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield lambda: gc.collect(0)
    finally:
        if enabled:
            gc.enable()
