"""Executors: measurement workers on several devices and machines, driven by one tuner.

A worker owns one :class:`~adaptune.measure.Measurer` (so a crashing kernel costs one record and a respawned
worker process, never the worker itself) and measures one configuration at a time. Two executors:

- ``LocalExecutor(devices=[0, 1])``: one thread per local device, each with its own Measurer (whose worker
  process does the work, so the threads only wait);
- ``RayExecutor(address=None)``: one Ray actor per GPU of a Ray cluster (``num_gpus=1``: Ray sets
  ``CUDA_VISIBLE_DEVICES``, so every actor measures on its own GPU as device 0) or, for OpenCL/CPU code,
  ``n_workers`` actors of one CPU each. Actors are restarted by Ray when their process dies.

The driver (``adaptune.tuning.parallel``) submits configurations to idle workers and collects
:class:`Completion` s; a completion without a result means the worker died in the middle, and the driver
measures that configuration again (or records it as failed after a few attempts): nothing is lost, and the
store's unique key means nothing is written twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adaptune.measure import Measurer, MeasureSettings
from adaptune.records import DeviceInfo, Result


@dataclass
class Completion:
    """One finished submission: the result, or None with the reason when the worker died mid-measurement."""

    worker: int
    config: dict[str, Any]
    result: Result | None
    error: str = ""
    kind: str = "measured"  # "measured"; "recovered": the worker is back after dying; "dead": gone for good


def device_kind(info: DeviceInfo) -> tuple[str, str, str]:
    """What makes timings comparable: the same device model, platform and driver (the store's device key)."""
    return (info.name, info.platform, info.driver or "")


class Executor:
    """Workers that measure configurations; subclasses implement the transport."""

    name = "executor"
    lookahead = 0  # configurations worth asking ahead per worker beyond the tuner's own (compile actors)

    def start(self, spec: Any, backend: str, settings: MeasureSettings) -> list[DeviceInfo]:
        """Create the workers for one kernel; returns each worker's device (index = worker id)."""
        raise NotImplementedError

    @property
    def n_workers(self) -> int:
        raise NotImplementedError

    def submit(self, worker: int, config: Mapping[str, Any], best_ms: float | None = None) -> None:
        """Measure ``config`` on ``worker`` (which must be idle); the answer comes from ``wait``."""
        raise NotImplementedError

    def prefetch(self, worker: int, configs: Sequence[Mapping[str, Any]]) -> None:
        """Let ``worker`` compile ahead the configurations it will be given next (a hint)."""

    def wait(self, timeout: float | None = None) -> list[Completion]:
        """Block until at least one submission finished (or ``timeout``); return every finished one.

        A completion without a result means the worker died: it is not idle until a later completion of
        kind ``"recovered"`` for it (or never, after one of kind ``"dead"``).
        """
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """One thread per local device, each owning a Measurer: several GPUs of one machine without Ray."""

    name = "local"

    def __init__(self, devices: Sequence[int | str] = (0,)) -> None:
        if not devices:
            raise ValueError("LocalExecutor needs at least one device")
        self.devices = list(devices)
        self._measurers: list[Measurer] = []
        self._inboxes: list[queue.Queue] = []
        self._done: queue.Queue[Completion] = queue.Queue()
        self._threads: list[threading.Thread] = []

    @property
    def n_workers(self) -> int:
        return len(self.devices)

    def start(self, spec: Any, backend: str, settings: MeasureSettings) -> list[DeviceInfo]:
        self._measurers = [Measurer(spec, backend=backend, settings=settings, device=d) for d in self.devices]
        infos = [m.device_info() for m in self._measurers]
        for w, m in enumerate(self._measurers):
            inbox: queue.Queue = queue.Queue()
            t = threading.Thread(target=self._serve, args=(w, m, inbox), daemon=True, name=f"adaptune-w{w}")
            t.start()
            self._inboxes.append(inbox)
            self._threads.append(t)
        return infos

    def _serve(self, worker: int, measurer: Measurer, inbox: queue.Queue) -> None:
        while True:
            item = inbox.get()
            if item is None:
                return
            kind, payload, best_ms = item
            if kind == "prefetch":
                measurer.prefetch(payload)
                continue
            try:
                self._done.put(Completion(worker, dict(payload), measurer.measure(payload, best_ms=best_ms)))
            except Exception as exc:  # the Measurer itself failed (setup): report, do not hang the driver
                self._done.put(Completion(worker, dict(payload), None, f"{type(exc).__name__}: {exc}"))
                self._done.put(Completion(worker, {}, None, kind="recovered"))  # the thread lives on

    def submit(self, worker: int, config: Mapping[str, Any], best_ms: float | None = None) -> None:
        self._inboxes[worker].put(("measure", dict(config), best_ms))

    def prefetch(self, worker: int, configs: Sequence[Mapping[str, Any]]) -> None:
        self._inboxes[worker].put(("prefetch", [dict(c) for c in configs], None))

    def wait(self, timeout: float | None = None) -> list[Completion]:
        try:
            out = [self._done.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        for inbox in self._inboxes:
            inbox.put(None)
        for t in self._threads:
            t.join(timeout=30)
        for m in self._measurers:
            m.close()
        self._measurers, self._inboxes, self._threads = [], [], []


class _MeasureActor:
    """The Ray actor: one Measurer (and so one measurement worker process) on the actor's device."""

    def __init__(self, spec: Any, backend: str, settings: MeasureSettings, device: int | str) -> None:
        self.measurer = Measurer(spec, backend=backend, settings=settings, device=device)

    def device_info(self) -> DeviceInfo:
        info = self.measurer.device_info()
        return info

    def pid(self) -> int:
        return os.getpid()

    def host(self) -> str:
        return os.uname().nodename

    def prefetch(self, configs: list[dict[str, Any]]) -> None:
        self.measurer.prefetch(configs)

    def preload(self, items: list[tuple[dict[str, Any], Any]]) -> None:
        self.measurer.preload(items)

    def stats(self) -> dict[str, int]:
        return self.measurer.stats()

    def measure(self, config: dict[str, Any], best_ms: float | None) -> Result:
        return self.measurer.measure(config, best_ms=best_ms)

    def close(self) -> None:
        self.measurer.close()


class _CompileActor:
    """A CPU-only Ray actor that compiles configurations to binaries for the measuring actors' devices."""

    def __init__(self, spec: Any, backend: str) -> None:
        self.spec, self.backend = spec, backend

    def compile(self, target: str, configs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Any]]:
        from adaptune.measure.runners import compile_binaries

        return compile_binaries(self.spec, self.backend, target, configs)


class RayExecutor(Executor):
    """One Ray actor per GPU (CUDA) or ``n_workers`` one-CPU actors (OpenCL/Python) of a Ray cluster.

    ``address``: a running cluster (``"auto"``, ``"ray://head:10001"``, ``"head:6379"``); None starts a
    local one with ``num_cpus`` CPUs. ``max_restarts``: how often Ray brings a dead actor back.
    ``devices``: one device selector per worker (OpenCL/Python: an index or a name, e.g. two different
    OpenCL devices of one host; a mixed set is tuned per device kind like a mixed cluster).
    ``runtime_env``: Ray's runtime environment for the actors (e.g. environment variables a driver needs).
    ``compile_workers``: CPU-only actors that compile what the tuner asks ahead (CUDA: NVRTC to a cubin for
    the GPU's architecture, no GPU needed; OpenCL: on a device of the same kind) and hand the binaries to
    the measuring actors, which then load instead of compile (``backends.binary``). 0: every measuring
    actor compiles ahead itself, in its worker's thread pool.
    """

    name = "ray"

    def __init__(self, address: str | None = None, n_workers: int | None = None, *,
                 gpus_per_worker: float | None = None, num_cpus: int | None = None, device: int | str | None = None,
                 max_restarts: int = 4, init_options: Mapping[str, Any] | None = None,
                 devices: Sequence[int | str] | None = None, runtime_env: Mapping[str, Any] | None = None,
                 compile_workers: int = 0) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ImportError("the Ray executor needs ray: pip install 'adaptune[distributed]'") from exc
        self._ray = ray
        self.address, self.requested, self.device = address, n_workers, device
        self.gpus_per_worker, self.num_cpus, self.max_restarts = gpus_per_worker, num_cpus, max_restarts
        self.init_options = dict(init_options or {})
        self.devices = list(devices) if devices is not None else None
        if self.devices is not None and n_workers is not None and n_workers != len(self.devices):
            raise ValueError(f"n_workers={n_workers} but {len(self.devices)} devices given: one worker a device")
        self.runtime_env = dict(runtime_env or {})
        self.compile_workers = compile_workers
        self.lookahead = 2 * compile_workers  # enough asked ahead that binaries come before their turn
        self._compilers: list[Any] = []
        self._targets: list[str | None] = []
        self._compiling: dict[Any, int] = {}  # compile call -> the worker its binaries are for
        self._next_compiler = 0
        self._sent_to_compile: set[str] = set()
        self._actors: list[Any] = []
        self._pending: dict[Any, tuple[int, dict[str, Any]]] = {}
        self._probes: dict[Any, tuple[int, int]] = {}  # ping of a worker that died -> (worker, attempts)
        self._started_ray = False
        self.pids: list[int] = []  # each actor's process id when it started (fault tests, logs)
        self.lost = 0  # measurements interrupted by a dead actor (each one is measured again by the tuner)
        self.final_stats: list[dict[str, int]] = []  # each worker's counters when the executor closed

    @property
    def n_workers(self) -> int:
        return len(self._actors)

    def _init_ray(self) -> None:
        ray = self._ray
        if ray.is_initialized():
            return
        opts: dict[str, Any] = {"ignore_reinit_error": True, "include_dashboard": False,
                                "log_to_driver": False, **self.init_options}
        if self.address is None:  # logical CPUs: enough for every actor even on a small machine
            opts.setdefault("num_cpus", self.num_cpus or max(os.cpu_count() or 1, self.requested or 1))
        else:
            opts["address"] = self.address
        # the driver's source folder travels with the workers of a local cluster (they import adaptune)
        ray.init(**opts)
        self._started_ray = True

    def start(self, spec: Any, backend: str, settings: MeasureSettings) -> list[DeviceInfo]:
        self._init_ray()
        ray = self._ray
        gpus = self.gpus_per_worker
        if gpus is None:
            gpus = 1.0 if backend == "cuda" else 0.0
        n = len(self.devices) if self.devices is not None else self.requested
        if n is None:
            n = int(ray.cluster_resources().get("GPU", 0) / gpus) if gpus else 1
            if n < 1:
                raise RuntimeError(f"the Ray cluster has no GPU for the {backend} backend "
                                   f"(resources: {ray.cluster_resources()})")
        have = ray.cluster_resources()
        need = {"CPU": float(n), "GPU": float(n * gpus)}
        short = {k: (have.get(k, 0.0), v) for k, v in need.items() if v and have.get(k, 0.0) < v}
        if short:  # Ray would wait forever for resources that do not exist
            raise RuntimeError(f"the Ray cluster cannot place {n} measurement workers: " + ", ".join(
                f"{k}: {h:g} in the cluster, {v:g} needed" for k, (h, v) in short.items()))
        extra = {"runtime_env": self.runtime_env} if self.runtime_env else {}
        actor = ray.remote(_MeasureActor).options(num_cpus=1, num_gpus=gpus, max_restarts=self.max_restarts,
                                                  max_task_retries=0, **extra)
        if self.devices is not None:
            devices = self.devices
        else:  # Ray narrows CUDA_VISIBLE_DEVICES to the actor's GPU: it is device 0 there
            devices = [0 if gpus else self.device] * n
        self._spec_ref = ray.put(spec)  # kept alive: Ray rebuilds a restarted actor from it
        self._actors = [actor.remote(self._spec_ref, backend, settings, d) for d in devices]
        infos = ray.get([a.device_info.remote() for a in self._actors])
        self.pids = ray.get([a.pid.remote() for a in self._actors])
        if self.compile_workers and backend in ("cuda", "opencl"):
            from adaptune.backends.binary import binary_target_of

            self._targets = [binary_target_of(info) for info in infos]
            compiler = ray.remote(_CompileActor).options(num_cpus=1, num_gpus=0, max_restarts=self.max_restarts,
                                                         **extra)
            self._compilers = [compiler.remote(self._spec_ref, backend) for _ in range(self.compile_workers)]
        return infos

    def submit(self, worker: int, config: Mapping[str, Any], best_ms: float | None = None) -> None:
        config = dict(config)
        ref = self._actors[worker].measure.remote(config, best_ms)
        self._pending[ref] = (worker, config)

    def prefetch(self, worker: int, configs: Sequence[Mapping[str, Any]]) -> None:
        if self._compilers and self._targets[worker]:  # a compile actor makes them; wait() forwards them
            fresh = []
            for c in configs:  # the tuner repeats its queue with every hint: compile each config once
                key = f"{self._targets[worker]}|{json.dumps(c, sort_keys=True, default=str)}"
                if key not in self._sent_to_compile:
                    self._sent_to_compile.add(key)
                    fresh.append(dict(c))
            for c in fresh:  # one config a call: the compile actors share the work and each result comes early
                compiler = self._compilers[self._next_compiler % len(self._compilers)]
                self._next_compiler += 1
                self._compiling[compiler.compile.remote(self._targets[worker], [c])] = worker
        else:
            self._actors[worker].prefetch.remote([dict(c) for c in configs])

    def _forward_binaries(self, refs: Sequence[Any]) -> None:
        """Binaries that are ready go to their measuring actor (a failed compile call only costs the time
        the measuring worker then spends compiling)."""
        for ref in refs:
            worker = self._compiling.pop(ref)
            try:
                items = self._ray.get(ref)
            except Exception:  # noqa: BLE001 - see above
                continue
            if items:
                self._actors[worker].preload.remote(items)

    def worker_stats(self) -> list[dict[str, int]]:
        """Each measuring worker's counters (compiles, binaries loaded, ...)."""
        return self._ray.get([a.stats.remote() for a in self._actors])

    def wait(self, timeout: float | None = None) -> list[Completion]:
        ray = self._ray
        if not self._pending and not self._probes and not self._compiling:
            if timeout:
                time.sleep(timeout)
            return []
        refs = list(self._pending) + list(self._probes) + list(self._compiling)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:  # collect everything else that is finished too
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        compiled = [ref for ref in ready if ref in self._compiling]
        ready = [ref for ref in ready if ref not in self._compiling]
        self._forward_binaries(compiled)
        out = []
        failures = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
                    ray.exceptions.WorkerCrashedError)
        for ref in ready:
            if ref in self._probes:  # a dead worker was pinged: back (restarted by Ray), or gone for good
                worker, tries = self._probes.pop(ref)
                try:
                    self.pids[worker] = ray.get(ref)
                    out.append(Completion(worker, {}, None, kind="recovered"))
                except failures as exc:
                    if tries >= self.max_restarts + 2:
                        out.append(Completion(worker, {}, None, f"{type(exc).__name__}", kind="dead"))
                    else:
                        time.sleep(0.5)
                        self._probes[self._actors[worker].pid.remote()] = (worker, tries + 1)
                continue
            worker, config = self._pending.pop(ref)
            try:
                out.append(Completion(worker, config, ray.get(ref)))
            except failures as exc:  # the actor died mid-measurement: report it, ping until it is back
                self.lost += 1
                out.append(Completion(worker, config, None, f"{type(exc).__name__}: {str(exc)[:300]}"))
                self._probes[self._actors[worker].pid.remote()] = (worker, 0)
        return out

    def worker_pids(self) -> list[int]:
        """The process id of every actor (for fault tests and for finding a worker's log)."""
        return self._ray.get([a.pid.remote() for a in self._actors])

    def worker_hosts(self) -> list[str]:
        return self._ray.get([a.host.remote() for a in self._actors])

    def close(self) -> None:
        ray = self._ray
        with contextlib.suppress(Exception):  # kept for reports and tests; a dead actor has none
            self.final_stats = self.worker_stats()
        for a in self._actors:
            with contextlib.suppress(Exception):  # a dead actor has nothing left to close
                ray.get(a.close.remote(), timeout=30)
            ray.kill(a, no_restart=True)
        for c in self._compilers:
            ray.kill(c, no_restart=True)
        self._actors, self._pending, self._probes, self._compilers, self._compiling = [], {}, {}, [], {}


def make_executor(executor: str | Executor, *, address: str | None = None, n_workers: int | None = None,
                  devices: Iterable[int | str] | None = None) -> Executor:
    """An executor from its name: ``"ray"`` (address, n_workers) or ``"local"`` (devices), or the object itself."""
    if isinstance(executor, Executor):
        return executor
    if executor == "ray":
        return RayExecutor(address=address, n_workers=n_workers)
    if executor == "local":
        devs = list(devices) if devices is not None else list(range(n_workers or 1))
        return LocalExecutor(devs)
    raise ValueError(f"unknown executor {executor!r}; known: 'local', 'ray' or an Executor object")
