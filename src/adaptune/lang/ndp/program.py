"""A computation generated for one device: its variants (schedules), their policy spaces, features, dispatch.

``@ndp.computation(values="f32", ...)`` traces a Python function over input placeholders once;
``comp.generate(device)`` lowers it (with fusion), enumerates and prunes the schedules of every stage,
builds each schedule's policy ``Space`` from the device's limits, and wraps everything in an adaptune
``CodeVariant``: one variant per schedule, carrying its Space, with features inferred from the first
nested sequence (the user writes no feature code). ``explain()`` prints all of it.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.kernels import features as features_mod
from adaptune.lang.ndp import ops
from adaptune.lang.ndp.codegen import Arg, StageCode, generate, program_text
from adaptune.lang.ndp.lower import Lowered, Stage, lower
from adaptune.lang.ndp.ops import (
    Buffer,
    Gather,
    HeadFlags,
    Input,
    Join,
    Map,
    NdpError,
    Nest,
    Node,
    Range,
    Replicate,
    Reverse,
    Split,
    Striding,
    Transpose,
)
from adaptune.lang.ndp.policy import space_for, stage_policy
from adaptune.lang.ndp.runtime import Compiler, device_dtype, np_dtype
from adaptune.lang.ndp.schedule import GPU, Enumeration, Platform, enumerate_schedules
from adaptune.lang.ndp.schedule import name as schedule_name

SAMPLE_ROWS = 256


class Computation:
    """A traced NDP computation over named, typed inputs."""

    def __init__(self, fn: Callable[..., Any], inputs: Mapping[str, str], name: str | None = None) -> None:
        if not inputs:
            raise NdpError("a computation needs typed inputs, e.g. @ndp.computation(x='f32')")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "computation")
        self.inputs = {k: Input(name=k, type=v) for k, v in inputs.items()}
        for k in self.inputs:
            if not k.isidentifier():
                raise NdpError(f"input name {k!r} is not an identifier")
        result = fn(*self.inputs.values())
        self.roots: list[Node] = list(result) if isinstance(result, tuple | list) else [result]
        self.lowered: Lowered = lower(self.roots)

    def generate(self, device: Any, *, platform: Platform = GPU, reuse_outputs: bool = False,
                 keep_features: bool = False, row_spread: bool = True) -> Program:
        """Variants for ``device``. ``keep_features``: remember an input's features by its offsets array
        (for repeated calls on one matrix); ``row_spread=False``: only O(1) features (no sampling)."""
        return Program(self, device, platform=platform, reuse_outputs=reuse_outputs, keep_features=keep_features,
                       row_spread=row_spread)

    def operator_sequences(self) -> list[str]:
        return [".".join(s.op_sequence) for s in self.lowered.stages]


def computation(name: str | None = None, **inputs: str) -> Callable[[Callable[..., Any]], Computation]:
    """Decorator: ``@computation(values="f32", offsets="i32")`` over a function of those sequences."""
    def wrap(fn: Callable[..., Any]) -> Computation:
        return Computation(fn, inputs, name)

    return wrap


@dataclass
class _Env:
    arrays: dict[str, Any]
    buffers: dict[int, Any] = field(default_factory=dict)
    lengths: dict[int, int] = field(default_factory=dict)  # logical length per stage buffer
    totals: dict[int, Any] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    scratch: dict[str, Any] = field(default_factory=dict)


class Program:
    """The variants of one computation on one device (see module docstring)."""

    def __init__(self, comp: Computation, device: Any, *, platform: Platform = GPU, reuse_outputs: bool = False,
                 keep_features: bool = False, row_spread: bool = True) -> None:
        self.row_spread = row_spread
        self.comp, self.device, self.platform = comp, device, platform
        self.compiler = Compiler.for_device(device)
        self.limits = self.compiler.limits()
        self.stages = comp.lowered.stages
        self.tunable = [s for s in self.stages if not s.fixed]
        self.enumerations: dict[int, Enumeration] = {s.index: enumerate_schedules(s.op_sequence, platform)
                                                     for s in self.stages}
        per_stage = [[(s.index, sch) for sch in (self.enumerations[s.index].kept if not s.fixed
                                                  else self.enumerations[s.index].kept[:1])]
                     for s in self.stages]
        self.variants: dict[str, dict[int, tuple[str, ...]]] = {}
        for combo in itertools.product(*per_stage):
            chosen = dict(combo)
            self.variants[self._variant_name(chosen)] = chosen
        self.spaces = {v: space_for(self.stages, sch, self.limits) for v, sch in self.variants.items()}
        self.reuse_outputs = reuse_outputs
        self.keep_features = keep_features
        self._plans: dict[tuple[str, tuple], tuple[Any, list[tuple[Stage, StageCode]]]] = {}
        self._cache: dict[tuple, Any] = {}
        self._features_kept: OrderedDict[int, tuple[Any, list[float]]] = OrderedDict()
        self._cv: Any = None
        self.feature_source, self.feature_kind = _feature_source(comp)
        self._positions = {name: i for i, name in enumerate(comp.inputs)}
        src = self.feature_source
        irregular = self.feature_kind == "irregular" and isinstance(src.offsets, Input)
        # where the sizes-only features are read (offsets and values inputs of the nest), once
        self._nest_inputs = ((self._positions[src.offsets.name], self._positions[src.seq.name])
                             if irregular and isinstance(src.seq, Input) else None)
        self.feature_position = self._positions[src.offsets.name] if irregular else 0
        self.n_host_features = 2 if self.feature_kind == "irregular" else len(self.feature_names)

    # ------------------------------------------------------------------------------ variants

    def _variant_name(self, chosen: dict[int, tuple[str, ...]]) -> str:
        parts = [(s, chosen[s.index]) for s in self.tunable]
        if len(parts) == 1:
            return schedule_name(parts[0][1])
        return "|".join(f"{s.kind}{s.index}:{schedule_name(sch)}" for s, sch in parts)

    @property
    def variant_names(self) -> list[str]:
        return list(self.variants)

    @property
    def default_variant(self) -> str:
        return next(iter(self.variants))

    def default_policy(self, variant: str) -> dict[str, Any]:
        space = self.spaces[variant]
        if space is None:
            return {}
        idx = space.default_index()
        return space.config(0 if idx is None else idx)

    def source(self, variant: str, **policy: Any) -> str:
        """The generated kernel text of one variant and policy (without the dialect header)."""
        return self._plan(variant, policy)[0]

    def _plan(self, variant: str, policy: Mapping[str, Any]) -> tuple[str, list[tuple[Stage, StageCode]]]:
        key = (variant, tuple(sorted(policy.items())))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        if variant not in self.variants:
            raise KeyError(f"{variant!r} is not a variant of {self.comp.name!r} (variants: {', '.join(self.variants)})")
        space = self.spaces[variant]
        config = dict(policy)
        if space is None:
            if config:
                raise NdpError(f"variant {variant!r} has no policy parameters, got {sorted(config)}")
        else:
            if not config:
                config = self.default_policy(variant)
            if not space.is_valid(config):
                raise NdpError(f"policy {config} is not valid for variant {variant!r} (parameters: {space.names}; "
                               f"device limits {self.limits})")
        prefixed = len(self.tunable) > 1
        tag = "k"  # each stage compiles on its own, so equal stage texts share one compile across variants
        codes = []
        for st in self.stages:
            pol = stage_policy(st, config, prefixed)
            codes.append((st, generate(st, self.variants[variant][st.index], pol, tag)))
        text = program_text([c for _, c in codes])
        plan = (text, codes)
        self._plans[key] = plan
        return plan

    # ------------------------------------------------------------------------------ running

    def run(self, variant: str, *arrays: Any, **policy: Any) -> Any:
        """Run one variant with one policy (its default policy when none is given)."""
        text, codes = self._plan(variant, policy)
        env = _Env(self._bind(arrays))
        for st, code in codes:
            self._run_stage(program_text([code]), st, code, env)
        outs = []
        for buf, _count in self.comp.lowered.outputs:
            arr = env.buffers[buf.stage]
            n = env.lengths[buf.stage]
            outs.append(arr if arr.size == n else arr[:n])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def bind(self, variant: str, *arrays: Any, **policy: Any) -> Callable[[], Any]:
        """A zero-argument call of one variant on fixed arrays, with every launch argument computed once.

        For repeated runs on the same inputs (an iterative solver's SpMV, or timing): it runs only the
        kernel launches. Outputs are reused between calls. Computations whose lengths depend on data
        (compaction, reduce_by_key) fall back to :meth:`run`.
        """
        if any(st.count_stage is not None for st in self.stages):
            return lambda: self.run(variant, *arrays, **policy)
        text, codes = self._plan(variant, policy)
        env = _Env(self._bind(arrays))
        calls: list[tuple[Callable[..., None], int, int, list[Any]]] = []
        for st, code in codes:
            self._run_stage(program_text([code]), st, code, env, record=calls, keep=True)
        outs = []
        for buf, _count in self.comp.lowered.outputs:
            arr, n = env.buffers[buf.stage], env.lengths[buf.stage]
            outs.append(arr if arr.size == n else arr[:n])
        result = outs[0] if len(outs) == 1 else tuple(outs)

        def call() -> Any:
            for fn, grid, block, args in calls:
                fn(grid, block, args)
            return result

        return call

    def __call__(self, *arrays: Any) -> Any:
        """Dispatch: the trained model's pick for these inputs (the default variant before training)."""
        return self.code_variant()(*arrays)

    def _bind(self, arrays: tuple[Any, ...]) -> dict[str, Any]:
        names = list(self.comp.inputs)
        if len(arrays) != len(names):
            raise NdpError(f"{self.comp.name} takes {len(names)} arrays ({', '.join(names)}), got {len(arrays)}")
        out = {}
        for name, arr in zip(names, arrays, strict=True):
            if isinstance(arr, np.ndarray):
                arr = self.device.asarray(arr)
            want = self.comp.inputs[name].dtype
            got = device_dtype(arr)
            if got != want:
                raise NdpError(f"{self.comp.name}: input {name!r} must be {want} ({np.dtype(np_dtype(want)).name}), "
                               f"got {got}")
            out[name] = arr
        return out

    def _alloc(self, key: tuple, n: int, dtype: str, keep: bool) -> Any:
        if keep:
            full = key + (n, dtype)
            arr = self._cache.get(full)
            if arr is None:
                arr = self._cache[full] = self.device.empty(max(1, n), np_dtype(dtype))
            return arr
        return self.device.empty(max(1, n), np_dtype(dtype))

    def _run_stage(self, text: str, st: Stage, code: StageCode, env: _Env, record: list | None = None,
                   keep: bool = False) -> None:
        def resolve(arg: Arg) -> int:
            return self._int_arg(arg, env)

        is_output = any(b.stage == st.index for b, _ in self.comp.lowered.outputs)
        keep = keep or self.reuse_outputs or not is_output
        logical, alloc = self._out_length(st, env)
        env.buffers[st.index] = self._alloc(("out", st.index), alloc, st.out.dtype, keep)
        env.lengths[st.index] = logical
        if st.kind == "scan":
            env.totals[st.index] = self._alloc(("total", st.index), 1, st.out.dtype, True)
        for name, (dtype, size) in code.scratch.items():
            env.scratch[name] = self._alloc(("scratch", name), size(resolve), dtype, True)
        grids = [launch.grid(resolve) for launch in code.launches]
        for launch, grid in zip(code.launches, grids, strict=True):
            args = [self._arg(a, env, st, grids) for a in launch.args]
            fn = self.compiler.kernel(text, launch.kernel)
            if record is None:
                fn(grid, launch.block, args)
            else:
                record.append((fn, grid, launch.block, args))
        if st.kind == "scatter" and st.mask is not None and st.count_stage is not None and st.out_length is None:
            count = self._count(st.count_stage, env)
            env.lengths[st.index] = count + 1 if st.tail else count

    def _out_length(self, st: Stage, env: _Env) -> tuple[int, int]:
        """(logical length, allocated length) of a stage's output."""
        if st.kind == "reduce":
            return 1, 1
        if st.kind in ("map", "scan"):
            n = self.length(st.length, env)
            return n, n
        if st.kind == "scatter":
            n = self.length(st.length, env)
            if st.out_length is None:
                return n, n + 1 if st.tail else n
            dest = st.out_length if isinstance(st.out_length, int) else self.length(st.out_length, env)
            return dest, dest
        if st.kind == "segreduce":
            rows = self._count(st.count_stage, env) if st.count_stage is not None else self.rows(st.nested[0], env)
            return rows, rows
        n = self._nested_elements(st.nested[0], env)
        return n, n

    def _count(self, stage_index: int, env: _Env) -> int:
        if stage_index not in env.counts:
            env.counts[stage_index] = int(self.device.to_host(env.totals[stage_index])[0])
        return env.counts[stage_index]

    def _arg(self, a: Arg, env: _Env, st: Stage, grids: list[int]) -> Any:
        kind = a.kind
        if kind == "buf":
            node = a.ref
            return env.arrays[node.name] if isinstance(node, Input) else env.buffers[node.stage]
        if kind == "out":
            return env.buffers[a.ref.stage]
        if kind == "total":
            return env.totals[a.ref.index]
        if kind == "total_in":
            return env.totals[a.ref]
        if kind == "scratch":
            return env.scratch[a.ref]
        if kind == "grid_of":
            return np.int32(grids[a.ref])
        if kind == "dest":
            return np.int32(env.buffers[st.index].size if st.out_length is None else env.lengths[st.index])
        return np.int32(self._int_arg(a, env))

    def _int_arg(self, a: Arg, env: _Env) -> int:
        if a.kind == "len":
            return self.length(a.ref, env)
        if a.kind == "rows":
            return self.rows(a.ref, env)
        if a.kind == "count":
            return self._count(a.ref, env)
        raise NdpError(f"internal: argument {a.kind} has no length")

    def length(self, node: Node, env: _Env) -> int:
        """Run-time length of a flat sequence expression (checked where operands must agree)."""
        if isinstance(node, Input):
            return int(env.arrays[node.name].size)
        if isinstance(node, Buffer):
            return env.lengths[node.stage]
        if isinstance(node, Map):
            n = self.length(node.args[0], env)
            for other in node.args[1:]:
                m = self.length(other, env)
                if m != n:
                    raise NdpError(f"map: operand lengths differ ({n} and {m})")
            return n
        if isinstance(node, Gather):
            return self.length(node.index, env)
        if isinstance(node, Range):
            stop = self.length(node.stop, env) if isinstance(node.stop, Node) else node.stop
            return max(0, -(-(stop - node.start) // node.step))
        if isinstance(node, Replicate):
            return self.length(node.length, env) if isinstance(node.length, Node) else int(node.length)
        if isinstance(node, Striding):
            return -(-self.length(node.seq, env) // node.stride)
        if isinstance(node, Reverse | HeadFlags):
            return self.length(node.seq if isinstance(node, Reverse) else node.keys, env)
        if isinstance(node, Join):
            return self._nested_elements(node.seq, env)
        raise NdpError(f"internal: no length for {node.op}")

    def _nested_elements(self, nested: Node, env: _Env) -> int:
        if isinstance(nested, Transpose):
            self.rows(nested, env)  # checks divisibility
            return self.length(nested.seq.seq, env)
        return self.length(nested.seq, env)

    def rows(self, nested: Node, env: _Env) -> int:
        if isinstance(nested, Nest):
            return self.length(nested.offsets, env) - 1
        if isinstance(nested, Split):
            return -(-self.length(nested.seq, env) // nested.tile)
        if isinstance(nested, Transpose):
            n = self.length(nested.seq.seq, env)
            if n % nested.seq.tile:
                raise NdpError(f"transpose: length {n} is not a multiple of the tile length {nested.seq.tile}")
            return nested.seq.tile
        raise NdpError(f"internal: {nested.op} has no rows")

    # ------------------------------------------------------------------------------ features

    @property
    def feature_names(self) -> list[str]:
        spread = ["row_length_cv", "log2_max_over_avg"] if self.row_spread else []
        return {"irregular": ["log2_rows", "log2_avg_row_length", *spread],
                "uniform": ["log2_length", "log2_rows", "log2_aspect_ratio"],
                "flat": ["log2_length"]}[self.feature_kind]

    def features(self, *arrays: Any) -> list[float]:
        """Features inferred from the first nested sequence (or the first input's length).

        Irregular nest over inputs: rows and average row length come from the arrays' sizes (O(1), no
        device access); the row-length spread samples <= SAMPLE_ROWS rows (one small transfer)."""
        src = self.feature_source
        nest = self._nest_inputs
        if nest is not None and len(arrays) == len(self._positions):
            offsets = arrays[nest[0]]
            if self.keep_features:
                kept = self._features_kept.get(id(offsets))
                if kept is not None and kept[0] is offsets:
                    return kept[1]
            rows = int(offsets.size) - 1
            avg = int(arrays[nest[1]].size) / max(rows, 1)
            vec = [math.log2(1 + rows), math.log2(1 + avg)]
            if self.row_spread:
                vec.extend(self._row_spread(offsets, rows, avg))
            if self.keep_features:
                self._features_kept[id(offsets)] = (offsets, vec)
                while len(self._features_kept) > 16:
                    self._features_kept.popitem(last=False)
            return vec
        if self.feature_kind == "flat" and len(arrays) == len(self._positions):  # the first input's size only
            return [math.log2(1 + int(arrays[0].size))]
        env = _Env(self._bind(arrays))
        if self.feature_kind == "irregular":
            rows = self.rows(src, env)
            avg = self._nested_elements(src, env) / max(rows, 1)
            vec = [math.log2(1 + rows), math.log2(1 + avg)]
            return vec + [0.0, 0.0] if self.row_spread else vec  # offsets computed on the device: no spread
        if self.feature_kind == "uniform":
            n = self._nested_elements(src, env)
            rows = self.rows(src, env)
            row_len = n / max(rows, 1)
            return [math.log2(1 + n), math.log2(1 + rows), math.log2(row_len / max(rows, 1))]
        first = next(iter(env.arrays.values()))
        return [math.log2(1 + int(first.size))]

    def _row_spread(self, offsets: Any, rows: int, avg: float) -> list[float]:
        """[coefficient of variation of row lengths over <= SAMPLE_ROWS strided rows, log2(longest / mean)].

        The longest row needs one pass over the offsets (a few long rows decide CSR-scalar vs a work-group
        per row, and a sample misses them); both numbers come back in one small transfer."""
        if rows <= 0:
            return [0.0, 0.0]
        if isinstance(offsets, np.ndarray) or self.device.xp is np:  # host array, or OpenCL (CI sizes)
            host = offsets if isinstance(offsets, np.ndarray) else self.device.to_host(offsets)
            return _spread_of_offsets(host, rows, avg)
        return _spread_of_sample(self.device.to_host(self._spread_sample(offsets, rows)), avg)

    def _spread_sample(self, offsets: Any, rows: int) -> Any:
        """CuPy: [longest row, strided sample of row lengths] on the device (three launches, no copy)."""
        xp = self.device.xp
        d = offsets[1: rows + 1] - offsets[0:rows]
        return xp.concatenate([d.max(keepdims=True), d[:: max(1, rows // SAMPLE_ROWS)]])

    # ------------------------------------------------------------------------------ prefetched features

    def feature_array(self, *arrays: Any) -> Any:
        """The input the features depend on beyond sizes (``arrays[feature_position]``: an irregular nest's
        offsets, else the first input): prefetched features are kept by its identity."""
        return arrays[self.feature_position]

    def host_features(self, *arrays: Any) -> list[float]:
        """The first ``n_host_features`` features (how many come from host metadata alone: sizes, no device
        work): a first call's cheap path."""
        nest = self._nest_inputs
        if nest is not None and len(arrays) == len(self._positions):
            rows = max(arrays[nest[0]].size - 1, 0)
            return [math.log2(1 + rows), math.log2(1 + arrays[nest[1]].size / max(rows, 1))]
        if self.feature_kind == "flat" and len(arrays) == len(self._positions):
            return [math.log2(1 + arrays[0].size)]
        return self.features(*arrays)[: self.n_host_features]

    def prefetch_features(self, *arrays: Any, on_ready: Callable[[list[float]], Any] | None = None,
                          high_priority: bool = False) -> features_mod.Pending:
        """Start the features of fixed inputs without waiting (Nitro's ``fix_inputs``): on CUDA the row-spread
        sample is computed on a side stream and copied to pinned memory, and the host finishes the vector on
        CUDA's host-function thread as soon as it lands; on OpenCL the offsets are copied without blocking and
        finished in the event's callback. ``Pending.value`` is then the vector, or ``on_ready(vector)`` (e.g. a
        model's pick, so the call itself does not pay for it). Sizes-only features are finished at once.
        The inputs must not change until the value is there."""
        def done(vec: list[float]) -> Any:
            return vec if on_ready is None else on_ready(vec)

        nest = self._nest_inputs
        offsets = self.feature_array(*arrays)
        if (nest is None or not self.row_spread or len(arrays) != len(self._positions)
                or isinstance(offsets, np.ndarray) or offsets.size < 2):  # nothing to wait for
            return features_mod.Pending.finished(done(self.features(*arrays)))
        head = self.host_features(*arrays)
        rows = int(offsets.size) - 1
        avg = int(arrays[nest[1]].size) / rows
        if self.device.xp is np:  # OpenCL: the offsets themselves (CI sizes), the spread on the host
            def launch() -> list[Any]:
                return [offsets]

            def finish(hosts: list[np.ndarray]) -> Any:
                return done(head + _spread_of_offsets(hosts[0], rows, avg))
        else:
            def launch() -> list[Any]:
                return [self._spread_sample(offsets, rows)]

            def finish(hosts: list[np.ndarray]) -> Any:
                return done(head + _spread_of_sample(hosts[0], avg))
        return features_mod.prefetch_buffers(self.device, launch, finish, high_priority=high_priority,
                                             finish_early=True)

    # ------------------------------------------------------------------------------ adaptive layer

    def code_variant(self, *, timer: Callable[..., float] | None = None, rtol: float = 1e-3) -> Any:
        """An adaptune CodeVariant: one variant per schedule (with its policy Space), inferred features."""
        if self._cv is not None:
            return self._cv
        from adaptune.adaptive import CodeVariant

        dev = self.device
        cv = CodeVariant(self.comp.name, timer=timer, sync=dev.synchronize,
                         verify=lambda ref, out: _close(dev, ref, out, rtol))
        for i, vname in enumerate(self.variants):
            def run(*arrays: Any, _v: str = vname, **policy: Any) -> Any:
                return self.run(_v, *arrays, **policy)

            cv.variant(run, name=vname, default=(i == 0), space=self.spaces[vname])
        shared: dict[str, list[float]] = {}
        for j, fname in enumerate(self.feature_names):
            def feature(*arrays: Any, _j: int = j) -> float:
                if _j == 0:
                    shared["v"] = self.features(*arrays)
                return shared["v"][_j]

            cv.feature(feature, name=fname)
        self._cv = cv
        return cv

    def tune(self, inputs: Any, **train_options: Any) -> Any:
        """Label the inputs (each variant's policy searched per input), fit the model and install it."""
        return self.code_variant().train(inputs, **train_options)

    # ------------------------------------------------------------------------------ explain

    def explain(self, *arrays: Any) -> str:
        """Operator sequence, fusion, schedules (kept and pruned), policy spaces, features and the model's pick."""
        lines = [f"computation {self.comp.name!r} on {self.device.name} ({self.platform.name}: "
                 f"{self.platform.parallel_levels} parallel levels, logical warp "
                 f"{'yes' if self.platform.logical_warp else 'no'}; limits {self.limits})"]
        lines.append(f"expression sequence: {' ; '.join(self.comp.operator_sequences())}")
        for st in self.stages:
            en = self.enumerations[st.index]
            what = st.label or st.kind
            fused = f"; fused into it: {', '.join(dict.fromkeys(st.fused))}" if st.fused else ""
            lines.append(f"stage {st.index} [{'.'.join(st.op_sequence)}] {what}{fused}")
            if st.fixed:
                lines.append(f"  internal stage, fixed schedule {schedule_name(en.kept[0])}")
                continue
            lines.append(f"  strongest {schedule_name(en.strongest)}; lattice {len(en.kept) + len(en.pruned)} "
                         f"schedules: kept {', '.join(schedule_name(s) for s in en.kept)}")
            for s, why in en.pruned:
                lines.append(f"  pruned {schedule_name(s)}: {why}")
        lines.append(f"variants ({len(self.variants)}):")
        total = 0
        for v in self.variants:
            space = self.spaces[v]
            size = len(space) if space is not None else 1
            total += size
            desc = (f"{size} valid policies of {space.cartesian_size} ({', '.join(space.names)})"
                    if space is not None else "no policy parameters")
            lines.append(f"  {v}: {desc}")
        lines.append(f"policy space in all: {total} (variant, policy) pairs")
        src = self.feature_source
        lines.append(f"features ({self.feature_kind}, inferred from {src.op if src is not None else 'first input'}):"
                     f" {', '.join(self.feature_names)}")
        if arrays:
            vec = self.features(*arrays)
            lines.append("  for this input: " + ", ".join(f"{n}={x:.3g}" for n, x in
                                                        zip(self.feature_names, vec, strict=True)))
            cv = self.code_variant()
            if cv.model_kind is None:
                lines.append(f"model: untrained; runs the default {self.default_variant} "
                             f"{self.default_policy(self.default_variant)}")
            else:
                lines.append(f"model ({cv.model_kind}) picks: {cv.select(*arrays)}")
        return "\n".join(lines)


def _spread_of_offsets(offsets: np.ndarray, rows: int, avg: float) -> list[float]:
    """The row spread from the whole offsets on the host (every row's length for the longest)."""
    lengths = np.diff(offsets[: rows + 1])
    return _spread(float(lengths.max()), lengths[:: max(1, rows // SAMPLE_ROWS)], avg)


def _spread_of_sample(sample: np.ndarray, avg: float) -> list[float]:
    """The row spread from the device's [longest, *sampled row lengths]."""
    return _spread(float(sample[0]), sample[1:], avg)


def _spread(longest: float, sample: np.ndarray, avg: float) -> list[float]:
    """[cv of the sampled row lengths, log2((1 + longest) / (1 + mean))]. Why not ``sample.std()``: NumPy's
    ``std`` costs ~30 us of Python around two sums, and this runs on the thread that finishes prefetched features
    (the call after it pays for that thread's time in cold caches); the same sums in the same order give the same
    bits (float64 mean, deviations squared in place, pairwise sum, divided by n)."""
    lengths = sample.astype(np.float64)
    n = len(lengths)
    mean = float(np.add.reduce(lengths)) / n if n else 0.0
    if mean <= 0:
        return [0.0, math.log2((1.0 + longest) / (1.0 + avg))]
    lengths -= mean
    lengths *= lengths
    return [math.sqrt(float(np.add.reduce(lengths)) / n) / mean, math.log2((1.0 + longest) / (1.0 + avg))]


def _feature_source(comp: Computation) -> tuple[Node | None, str]:
    for root in comp.roots:
        for n in ops.walk(root):
            if isinstance(n, Nest):
                return n, "irregular"
            if isinstance(n, Split | Transpose):
                return n, "uniform"
    return None, "flat"


def _close(dev: Any, ref: Any, out: Any, rtol: float) -> bool:
    if isinstance(ref, tuple):
        return isinstance(out, tuple) and len(ref) == len(out) and all(
            _close(dev, r, o, rtol) for r, o in zip(ref, out, strict=True))
    r, o = dev.to_host(ref), dev.to_host(out)
    if r.shape != o.shape:
        return False
    if r.dtype.kind == "f":
        scale = float(np.abs(r).max()) if r.size else 1.0
        return bool(np.allclose(o, r, rtol=rtol, atol=rtol * max(scale, 1.0)))
    return bool(np.array_equal(r, o))

