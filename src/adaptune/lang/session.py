"""The process-wide session: the device runtime, the pending arrays, the plan cache and per-flush statistics.

A flush collects every live array whose value is still an expression (arrays that died are never
computed, so temporaries are contracted away), looks the structure up in the plan cache (building and
compiling on a miss), launches the kernels and swaps each array's expression for the resulting buffer.
The structure is the key recording wrote on the tape (``ir.Tape``): a repeated step binds its plan's
inputs by tape position without walking the trace; a step seen for the first time is linearised as before.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from operator import attrgetter
from typing import Any

from adaptune.lang import fuse
from adaptune.lang.eager import evaluate_eagerly
from adaptune.lang.graphs import GraphReplay, binding, graphable
from adaptune.lang.ir import TAPE, Buffer, Node
from adaptune.lang.rules import default_choice
from adaptune.lang.runtime import KernelCompileError, Runtime

TAPED_ENTRIES = 4096  # tape keys remembered (several recordings may find one plan)
AUTO_FLUSH_NODES = 400  # a loop that never flushes is flushed once this many operations are pending (code
# generation recurses along the expression, so a longer chain would hit Python's recursion limit)


@dataclass(slots=True)
class FlushStats:
    """What one flush did (``anp.last_flush()``): kernels launched, bytes moved, compile and host time."""

    kernels: int = 0
    bytes: int = 0
    nodes: int = 0
    cache_hit: bool = False
    compiled: int = 0
    host_us: float = 0.0
    fallback: str = ""
    inplace: int = 0  # kernels that wrote into an existing buffer (no allocation, no copy of the rest)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_ARG = attrgetter("arg")  # a leaf's kernel argument (``Buffer.arg``, ``Scalar.arg``)


def tape_key(items: list[Any], roots: list[Node], epoch: int) -> tuple:
    """The plan-cache key a recording wrote on the tape: its items and the roots' tape positions (-1: a root
    that is not on this tape, which is never remembered)."""
    if len(roots) == 1:
        r = roots[0]
        return (tuple(items), r._tp if r._te == epoch else -1)
    return (tuple(items), *[r._tp if r._te == epoch else -1 for r in roots])


class Taped:
    """A plan found from the tape (``Session.taped``): where its leaves and scalars sit on the tape, the
    trace's node count, and its CUDA graphs (None off CUDA)."""

    __slots__ = ("plan", "inputs", "n_leaves", "nodes", "graph")

    def __init__(self, plan: fuse.Plan, leaves: list[int], scalars: list[int], nodes: int,
                 graph: GraphReplay | None) -> None:
        self.plan, self.nodes, self.graph = plan, nodes, graph
        self.inputs = fuse.items_getter([*leaves, *scalars])  # the plan's input nodes from the tape, in order
        self.n_leaves = len(leaves)

    def bind(self, nodes: list[Node]) -> list[Any]:
        """The plan's values from this flush's tape: [leaf buffers..., scalar arguments...] (C calls only)."""
        return list(map(_ARG, self.inputs(nodes)))


class Base:
    """The storage behind one or more array views: its current version is ``node``."""

    __slots__ = ("node", "__weakref__")

    def __init__(self, node: Node) -> None:
        self.node = node


class Session:
    def __init__(self, runtime: Runtime | None = None) -> None:
        self._runtime = runtime
        self.pending: dict[int, weakref.ref[Base]] = {}  # id(base) -> base, in first-recorded order
        self.plans: dict[tuple, fuse.Plan] = {}
        self.last = FlushStats()
        self.history_kernels = 0
        self.flushes = 0
        self.ops_since_flush = 0
        self._chooser: Callable[..., tuple[str, dict[str, int]]] | None = None
        self.last_plan: fuse.Plan | None = None
        self.last_order: list[Node] | None = []  # None after a flush bound from the tape (see last_bound)
        self.last_bound: list[Any] = []  # that flush's [leaf buffers..., scalars...]
        self.taped: dict[tuple, Taped] = {}  # ``tape_key`` -> the plan and where its inputs sit on the tape: a
        # hit binds without a walk
        self._taken: tuple[list[Node], list[Any], bool, int] = ([], [], False, -1)
        self.tuner: Any = None  # a lang.tune.WorkGroupTuner: new element-wise kernels get a tuned block
        self._coalesce = True
        self.generation = 0  # bumped whenever cached plans are dropped (replayed traces hold plans too)
        self.cuda_graphs = True  # a replayed trace (``anp.jit``) that allocates nothing and binds the same
        # buffers as before runs as one CUDA graph launch instead of one launch per kernel
        self.reads = 0  # values read to the host or handed to the array module (a traced step that reads
        # one computed something from data, so its trace cannot be replayed)

    @property
    def chooser(self) -> Callable[..., tuple[str, dict[str, int]]] | None:
        """Picks (variant, parameters) per reduction shape; None = the untuned rule. Setting it drops cached
        plans, which were built with the previous choice."""
        return self._chooser

    @chooser.setter
    def chooser(self, value: Callable[..., tuple[str, dict[str, int]]] | None) -> None:
        self._chooser = value
        self.drop_plans()

    @property
    def coalesce(self) -> bool:
        """Element-wise kernels over a transposed operand use the tiled variant (False: the direct, strided
        kernel; benchmarks compare the two). Setting it drops cached plans."""
        return self._coalesce

    @coalesce.setter
    def coalesce(self, value: bool) -> None:
        self._coalesce = bool(value)
        self.drop_plans()

    def drop_plans(self) -> None:
        self.plans.clear()
        self.taped.clear()
        self.generation += 1

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = Runtime()
        return self._runtime

    def track(self, base: Base) -> None:
        """Register a base whose node is an expression (flushed later); keyed by the base, so a base updated
        many times between flushes is listed once."""
        self.pending[id(base)] = weakref.ref(base)
        self.ops_since_flush += 1
        if self.ops_since_flush > AUTO_FLUSH_NODES:
            self.flush()

    def flush(self) -> FlushStats:
        t0 = time.perf_counter()
        pending = self.pending
        bases, roots, root_of = self.collect()
        try:
            nodes, items, ok, epoch = self._taken
            if not (ok and roots):
                return self.flush_collected(bases, roots, root_of, t0)
            key = tape_key(items, roots, epoch)
            hit = self.taped.get(key)
            if hit is not None:
                return self._flush_taped(hit, nodes, bases, roots, root_of, t0)
            stats = self.flush_collected(bases, roots, root_of, t0)
            if not stats.fallback and -1 not in key:
                self._remember(key, epoch)
            return stats
        except BaseException:
            self.pending = {**pending, **self.pending}  # nothing is lost: a later flush can still run them
            raise

    def _flush_taped(self, hit: Taped, nodes: list[Node], bases: list[Base], roots: list[Node],
                     root_of: dict[int, int], t0: float) -> FlushStats:
        """A cache hit found from the tape: bind the leaves and scalars by their tape positions and launch."""
        plan = hit.plan
        vals = hit.bind(nodes)
        self.last_bound, self.last_order, self.last_plan = vals, None, plan  # (``fuse.launch`` leaves it as is)
        graph, rt = hit.graph, self._runtime  # (set: the plan was built on it)
        if graph is not None and graph.usable and self.cuda_graphs:  # the graph bakes in addresses and scalars
            results = graph.launch(plan, vals, rt, binding(vals, hit.n_leaves))
        else:
            results = fuse.launch(plan, vals, rt)
        if len(bases) == 1:  # the common step: one array updated (``assign``'s first case, inlined)
            r = roots[0]
            bases[0].node = Buffer(results[0], r.shape, r.dtype, True)
        else:
            self.assign(bases, roots, root_of, results)
        self.flushes += 1
        self.history_kernels += plan.kernels
        host_us = (time.perf_counter() - t0) * 1e6
        self.last = stats = FlushStats(plan.kernels, plan.bytes, hit.nodes, True, 0, host_us, "", plan.inplace)
        return stats

    def _remember(self, key: tuple, epoch: int) -> None:
        """After a walked flush: note where the plan's leaves and scalars sit on the tape, so the next flush
        with this tape binds them directly (only when every one of them is on this flush's tape)."""
        plan, order = self.last_plan, self.last_order
        if plan is None or order is None:
            return
        leaves = [order[i] for i in plan.leaf_slots]
        scalars = [order[i] for i in plan.scalar_slots]
        if all(n._te == epoch for n in leaves) and all(n._te == epoch for n in scalars):
            if len(self.taped) >= TAPED_ENTRIES:
                self.taped.clear()  # a program that never repeats a step: start over (the plans stay cached)
            self.taped[key] = Taped(plan, [n._tp for n in leaves], [n._tp for n in scalars], len(order),
                                    GraphReplay() if graphable(plan, self.runtime) else None)

    def replay_last(self) -> list[Any]:
        """Launch the last flushed plan again on the same inputs (benchmarks time the kernels alone)."""
        assert self.last_plan is not None
        if self.last_order is None:
            return fuse.launch(self.last_plan, list(self.last_bound), self.runtime)
        return fuse.run(self.last_plan, self.last_order, self.runtime)

    def collect(self) -> tuple[list[Base], list[Node], dict[int, int]]:
        """Take the pending arrays: the live bases whose node is an expression, the distinct roots, and
        each root's index by id (a node two bases hold is computed once)."""
        pending = self.pending
        self.pending = {}
        self.ops_since_flush = 0
        self._taken = TAPE.take()
        bases: list[Base] = []
        roots: list[Node] = []
        root_of: dict[int, int] = {}
        for ref in pending.values():
            b = ref()
            if b is None:
                continue
            node = b.node
            if not node.children:  # a buffer or a scalar: nothing to compute
                continue
            k = id(node)
            if k not in root_of:
                root_of[k] = len(roots)
                roots.append(node)
            bases.append(b)
        return bases, roots, root_of

    def flush_collected(self, bases: list[Base], roots: list[Node], root_of: dict[int, int],
                        t0: float) -> FlushStats:
        """Flush what ``collect`` took (``jit`` traces through this to learn which base got which root)."""
        if not roots:
            self.last = FlushStats()
            return self.last
        order, pos, key = fuse.linearise(roots)
        plan = self.plans.get(key)
        runtime = self.runtime
        if plan is not None:  # the steady state: no planning, prepared launches
            results = fuse.run(plan, order, runtime)
            self.assign(bases, roots, root_of, results)
            self.last_plan, self.last_order = plan, order  # kept for replay (benchmarks time the kernels alone)
            self.flushes += 1
            self.history_kernels += plan.kernels
            self.last = stats = FlushStats(plan.kernels, plan.bytes, len(order), True, 0,
                                           (time.perf_counter() - t0) * 1e6, "", plan.inplace)
            return stats
        stats = FlushStats(nodes=len(order))
        compiled = runtime.compile_count
        try:
            plan = fuse.build(order, pos, roots, runtime, self._choose, self._coalesce)
        except KernelCompileError as exc:
            stats.fallback = str(exc).splitlines()[0]
            results = evaluate_eagerly(roots, runtime, str(exc))
            self.assign(bases, roots, root_of, results, owned=False)
            stats.host_us = (time.perf_counter() - t0) * 1e6
            self.last = stats
            return stats
        stats.compiled = runtime.compile_count - compiled
        self.plans[key] = plan
        record: list | None = [] if self.tuner is not None else None
        results = fuse.run(plan, order, runtime, record)
        self.last_plan, self.last_order = plan, order
        if record:
            self.tuner.tune(record, runtime)
            fuse.prepare(plan)  # the tuner may have changed work-group sizes
        self.assign(bases, roots, root_of, results)
        stats.kernels, stats.bytes, stats.inplace = plan.kernels, plan.bytes, plan.inplace
        stats.host_us = (time.perf_counter() - t0) * 1e6
        self.last = stats
        self.flushes += 1
        self.history_kernels += plan.kernels
        return stats

    @staticmethod
    def assign(bases: list[Base], roots: list[Node], root_of: dict[int, int], results: list[Any],
                owned: bool = True) -> None:
        """Each base's expression becomes its buffer; a buffer that two bases receive is shared (copies
        made before the flush), so neither may later overwrite it in place."""
        if len(bases) == 1:  # the common step: one array updated
            r = roots[0]
            bases[0].node = Buffer(results[0], r.shape, r.dtype, owned)
            return
        done = [Buffer(data, r.shape, r.dtype, owned) for r, data in zip(roots, results, strict=True)]
        given: set[int] = set()
        for b in bases:
            i = root_of[id(b.node)]
            if i in given:
                done[i].share()
            given.add(i)
            b.node = done[i]

    def _choose(self, rs: Any, node: Any, runtime: Runtime) -> tuple[str, dict[str, int]]:
        if self._chooser is not None:
            return self._chooser(rs, node, runtime)
        return default_choice(rs, runtime)


_SESSION: Session | None = None


def session() -> Session:
    global _SESSION
    if _SESSION is None:
        _SESSION = Session()
    return _SESSION


def use_runtime(runtime: Runtime | None) -> Session:
    """Start a fresh session on ``runtime`` (tests pick PoCL; None = choose on first use)."""
    global _SESSION
    if _SESSION is not None:
        _SESSION.flush()
    _SESSION = Session(runtime)
    return _SESSION
