"""``anp.jit``: run a function's cached plan again without recording it again (what ``jax.jit`` is to JAX).

A plain loop re-records every operation on every call (a few us each in Python) and walks the trace at the
flush to find its plan. A jitted function is traced once per argument signature (shapes, strides, dtypes,
which arguments share storage, whether each may be written in place, and the values of Python scalars):
the first call records and flushes as usual and notes where each kernel argument came from (an argument's
buffer, a captured constant, a scalar) and where each result goes (an argument updated in place, a new
array returned). Later calls bind the new arguments' buffers to the plan's slots and launch it: no
recording, no graph walk, no plan look-up.

Semantics are ``jax.jit``'s: arrays the function reads without taking them as arguments, and Python
values it computes, are captured at trace time. A function that reads a value while tracing (``float(x)``,
``print``, ``.get()``, an eager fallback such as ``anp.cumsum``), keeps an array it created anywhere but its
return value, or takes keyword or non-array arguments is simply run as it is, every call.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from adaptune.lang import fuse
from adaptune.lang.array import LazyArray
from adaptune.lang.graphs import GraphReplay, binding, graphable
from adaptune.lang.ir import Buffer
from adaptune.lang.session import Base, FlushStats, Session, session

_ARG, _NEW, _CONST, _VALUE = 0, 1, 2, 3
_SCALARS = (bool, int, float)


def jit(fn: Callable[..., Any]) -> Jitted:
    """Decorate ``fn`` (positional lazy-array and Python-scalar arguments; returns arrays, or tuples or lists
    of them) so that repeated calls replay its plan. See the module docstring for what is captured."""
    return Jitted(fn)


class Jitted:
    """A function and its replayable traces, one per argument signature."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.traces: dict[tuple, _Trace] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        sess = session()
        if sess.pending:
            sess.flush()  # the trace must hold this call's work only
        key = None if kwargs else _signature(args)
        if key is None:
            return self.fn(*args, **kwargs)
        trace = self.traces.get(key)
        if trace is not None and trace.session is sess and trace.generation == sess.generation:
            return trace.replay(args, sess)
        out, trace = _record(self.fn, args, sess)
        if trace is not None:
            self.traces[key] = trace
        return out


def _signature(args: tuple) -> tuple | None:
    """What a plan depends on, per argument; None when an argument cannot be bound to a plan slot."""
    sig: list[tuple] = []
    bases: list[Base] = []
    for a in args:
        if isinstance(a, LazyArray):
            node = a.base.node
            if type(node) is not Buffer:
                return None
            alias = next((j for j, b in enumerate(bases) if b is a.base), -1)
            bases.append(a.base)
            sig.append((a.shape, a.strides, a.offset, node.dtype.char, node.shape, node.owned, alias))
        elif isinstance(a, _SCALARS):
            bases.append(None)  # type: ignore[arg-type]
            sig.append((type(a).__name__, a))
        else:
            return None
    return tuple(sig)


def _record(fn: Callable[..., Any], args: tuple, sess: Session) -> tuple[Any, _Trace | None]:
    """Run ``fn`` recording as usual, flush, and note how to bind a later call to the plan (None: not
    replayable)."""
    flushes, reads = sess.flushes, sess.reads
    before = [a.base.node if isinstance(a, LazyArray) else None for a in args]
    out = fn(*args)
    if sess.flushes != flushes or sess.reads != reads:
        return out, None  # fn read a value while tracing (or ran something eagerly): its work depends on data
    t0 = time.perf_counter()
    bases, roots, root_of = sess.collect()
    receives = [(b, root_of[id(b.node)]) for b in bases]  # before the flush replaces the expressions
    stats = sess.flush_collected(bases, roots, root_of, t0)
    if stats.fallback or not roots:
        return out, None
    try:
        return out, _Trace(sess, args, before, out, receives, roots)
    except _NotReplayable:
        return out, None


class _NotReplayable(Exception):
    pass


class _Trace:
    """Where a replay takes each kernel argument from and puts each result."""

    __slots__ = ("session", "generation", "plan", "leaves", "scalars", "results", "n_new", "template",
                 "nodes", "graph")

    def __init__(self, sess: Session, args: tuple, before: list[Any], out: Any,
                 receives: list[tuple[Base, int]], roots: list[Any]) -> None:
        plan, order = sess.last_plan, sess.last_order
        assert plan is not None
        self.session, self.generation, self.plan, self.nodes = sess, sess.generation, plan, len(order)
        self.leaves: list[tuple[int, Any]] = []
        for p in plan.leaf_slots:
            node = order[p]
            i = next((i for i, b in enumerate(before) if b is node), None)
            self.leaves.append((_ARG, i) if i is not None else (_CONST, node))
        self.scalars = [order[p].arg for p in plan.scalar_slots]
        arg_of = {id(a.base): i for i, a in enumerate(args) if isinstance(a, LazyArray)}
        new_of: dict[int, int] = {}
        targets: list[list[tuple[int, int]]] = [[] for _ in roots]
        for base, k in receives:
            if id(base) in arg_of:
                targets[k].append((_ARG, arg_of[id(base)]))
            else:
                j = new_of.setdefault(id(base), len(new_of))
                targets[k].append((_NEW, j))
        self.results = [(r.shape, r.dtype, tuple(t), len(t) == 1) for r, t in zip(roots, targets, strict=True)]
        self.n_new = len(new_of)
        self.template = _template(out, arg_of, new_of)
        returned = {j for kind, j in _flat_kinds(self.template) if kind == _NEW}
        if returned != set(range(self.n_new)):
            raise _NotReplayable  # arrays computed but not returned: a replay could not hand them back
        # a graph bakes in the buffers' addresses: replayed while the bound and allocated buffers repeat
        self.graph = GraphReplay() if graphable(plan, sess.runtime) else None

    def replay(self, args: tuple, sess: Session) -> Any:
        t0 = time.perf_counter()
        vals = [args[src].base.node.data if kind == _ARG else src.data for kind, src in self.leaves]
        if self.scalars:
            vals += self.scalars
        plan = self.plan
        graph = self.graph
        if graph is not None and graph.usable and sess.cuda_graphs:
            key = binding(vals, len(self.leaves), scalars=False)  # the scalars are the trace's constants
            data = graph.launch(plan, vals, sess.runtime, key)
        else:
            data = fuse.launch(plan, vals, sess.runtime)
        new: list[Base | None] = [None] * self.n_new
        for d, (shape, dtype, targets, owned) in zip(data, self.results, strict=True):
            buf = Buffer(d, shape, dtype, owned)
            for kind, i in targets:
                if kind == _ARG:
                    args[i].base.node = buf
                else:
                    new[i] = Base(buf)
        out = _build(self.template, args, new)
        sess.flushes += 1
        sess.history_kernels += plan.kernels
        sess.last_plan = plan
        sess.last = FlushStats(plan.kernels, plan.bytes, self.nodes, True, 0, (time.perf_counter() - t0) * 1e6,
                               "", plan.inplace)
        return out


def _template(out: Any, arg_of: dict[int, int], new_of: dict[int, int]) -> Any:
    """The returned structure with each array as (kind, index or base, view) and other values kept."""
    if type(out) is tuple or type(out) is list:
        return (type(out), [_template(o, arg_of, new_of) for o in out])
    if isinstance(out, LazyArray):
        view = (out.shape, out.strides, out.offset, out.region, out.vdims, out.whole)
        if id(out.base) in arg_of:
            return (_ARG, arg_of[id(out.base)], view)
        if id(out.base) in new_of:
            return (_NEW, new_of[id(out.base)], view)
        return (_CONST, out.base, view)  # an array that existed before the call, returned as it is
    if out is None or isinstance(out, _SCALARS):
        return (_VALUE, out, None)
    raise _NotReplayable


def _flat_kinds(t: Any) -> list[tuple[int, Any]]:
    if isinstance(t[0], type):
        return [k for sub in t[1] for k in _flat_kinds(sub)]
    return [(t[0], t[1])]


def _build(t: Any, args: tuple, new: list[Base | None]) -> Any:
    if isinstance(t[0], type):
        return t[0](_build(sub, args, new) for sub in t[1])
    kind, ref, view = t
    if kind == _VALUE:
        return ref
    base = args[ref].base if kind == _ARG else new[ref] if kind == _NEW else ref
    return LazyArray(base, *view)
