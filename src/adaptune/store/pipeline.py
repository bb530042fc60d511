"""Parsing and encoding in a second process while this one writes to the database.

A bulk import is Python work (decoding, validating and encoding entries) then database work (the driver's
executemany or COPY). Threads cannot overlap the two: the writer releases the GIL once per row and waits to
get it back from the parser. A forked child that does the Python work and hands over finished chunks does
overlap them, on two cores; the pipe between the two holds about one chunk, so memory stays a few chunks in
each process. Where ``fork`` is not available the generator runs here, one chunk after the other.

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
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Forked(Generic[T]):
    """The items of ``make()`` (a generator), produced in a forked child: iterating yields them in order;
    :attr:`result` is the generator's return value (after the iteration ends). An exception in the child is
    raised here at that point; a consumer that stops early ends the child."""

    def __init__(self, make: Callable[[], Generator[T, None, Any]]) -> None:
        self.make = make
        self.result: Any = None

    def __iter__(self) -> Generator[T, None, None]:
        if "fork" not in multiprocessing.get_all_start_methods():  # Windows: here, one chunk at a time
            self.result = yield from self.make()
            return
        context = multiprocessing.get_context("fork")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=_run, args=(self.make, sender, receiver), daemon=True)
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


def _run(make: Callable[[], Generator[Any, None, Any]], sender: Any, receiver: Any) -> None:
    receiver.close()  # the parent's end: with it closed here, a parent that dies breaks the pipe and ends us
    try:
        with chunked_collection() as collect:
            items = make()
            while True:
                try:
                    item = next(items)
                except StopIteration as end:
                    sender.send(("done", end.value))
                    break
                sender.send_bytes(_unshared_pickle(("item", item)))
                del item
                collect()
    except BrokenPipeError:  # the consumer stopped: nothing to tell it
        pass
    except BaseException as exc:  # handed to the consumer, raised there
        try:
            sender.send(("error", exc))
        except Exception:
            sender.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        sender.close()
        os._exit(0)  # no exit handlers: the parent's database connections are not the child's to close


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
