"""``tune_kernel`` and ``run_kernel`` with Kernel Tuner 1.x's signatures: switching is a one-line change.

    from adaptune import tune_kernel          # instead of: from kernel_tuner import tune_kernel
    import adaptune as kernel_tuner           # instead of: import kernel_tuner
    strategy=kernel_tuner.strategies.minimize # Kernel Tuner's strategy modules: adaptune.strategies

The arguments are translated into adaptune's objects (:mod:`adaptune.integrations.kt_args`), the run is an
ordinary :func:`adaptune.tune` (every configuration in the worker process, so a crashing kernel is one
``launch_error``; results in the store, so a killed run resumes; a progress bar), and the results come back
in Kernel Tuner's shapes (:mod:`adaptune.integrations.kt_results`). A parameter adaptune cannot honour is
refused with an error that names it. Differences that remain: ``time`` is the median of ``times`` (Kernel
Tuner's is their mean); results are printed after the run rather than
during it; ``defines`` adds to the tunable-parameter defines instead of replacing them; adaptune races
configurations (one whose first timed run is ``discard_factor`` times slower than the best so far gets no
more repeats, so its ``times`` is shorter); a rerun of the same kernel, argument shapes, scalar arguments and
space reuses the stored results (that is how a killed run resumes: point :data:`settings` ``.db`` or
``$ADAPTUNE_DB`` elsewhere to measure afresh). :data:`settings` holds what Kernel Tuner has no parameter for.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptune.backends import DeviceArray, device_name, list_devices, make_backend
from adaptune.integrations.kt_args import (
    device_argument,
    grid_divisors,
    kernel_spec,
    observer_names,
    portable_source,
    refuse,
    search_space,
    setup_log,
    source_backend,
    strategy_choice,
    template_instance,
    thread_limit,
    within_device_threads,
)
from adaptune.integrations.kt_results import (
    add_total_timings,
    best_row,
    cache_path,
    environment,
    read_cache,
    result_row,
    stops_kernel_tuner,
    write_cache,
)
from adaptune.measure import runners
from adaptune.measure.choice import ArgumentChoice
from adaptune.measure.process import spare_worker
from adaptune.records import DeviceInfo, Result
from adaptune.search import make_strategy
from adaptune.space import Space
from adaptune.store.recorded import problem_size_name
from adaptune.tuning import Problem, tune

#: Kernel Tuner's default objectives and whether higher is better (``util.objective_default_map``).
OBJECTIVE_DEFAULTS = {"time": False, "energy": False, "fitness": True, "cost": False, "loss": False,
                      "GFLOP/s": True, "TFLOP/s": True, "GB/s": True, "TB/s": True, "GFLOPS/W": True,
                      "TFLOPS/W": True, "GFLOP/J": True, "TFLOP/J": True}


@dataclass
class DropInSettings:
    """What adaptune needs that Kernel Tuner has no parameter for (change :data:`settings` to set them).

    ``db``: the store every result goes to (a rerun of the same script resumes from it; default
    ``$ADAPTUNE_DB`` or ``adaptune.db`` in the working directory). ``timeout_s``: one configuration's
    runs may take this long before its worker is killed and it is recorded as a timeout (Kernel Tuner
    has no limit; a hung kernel waits this long). ``discard_factor``: racing (None: every repeat).
    ``progress``: the progress bar (also off with ``quiet=True`` or when stderr is not a terminal).
    ``hold_short_launches``: on CUDA, time a short kernel's runs without the host's enqueue latency
    (:data:`adaptune.backends.cuda.HOLD_NS`; the times returned are then a few microseconds under Kernel Tuner's
    for the same kernel, and its ranking of near-equal configurations is not scrambled by the compile threads).
    """

    db: str = field(default_factory=lambda: os.environ.get("ADAPTUNE_DB", "adaptune.db"))
    timeout_s: float = 300.0
    discard_factor: float | None = 2.0
    progress: bool = True
    hold_short_launches: bool = True


settings = DropInSettings()


def tune_kernel(kernel_name: str, kernel_source: Any, problem_size: Any, arguments: Sequence[Any],
                tune_params: Mapping[str, Sequence[Any]], grid_div_x: Any = None, grid_div_y: Any = None,
                grid_div_z: Any = None, restrictions: Any = None, answer: Sequence[Any] | None = None,
                atol: float = 1e-6, verify: Callable[..., Any] | None = None, verbose: bool = False,
                lang: str | None = None, device: int = 0, platform: int = 0, smem_args: Mapping[str, Any] | None = None,
                cmem_args: Mapping[str, Any] | None = None, texmem_args: Mapping[str, Any] | None = None,
                compiler: str | None = None, compiler_options: Sequence[str] | None = None,
                defines: Mapping[str, Any] | None = None, log: Any = None, iterations: int = 7,
                block_size_names: Sequence[str] | None = None, quiet: bool = False, strategy: Any = None,
                strategy_options: Mapping[str, Any] | None = None, cache: str | Path | None = None,
                metrics: Mapping[str, Any] | None = None, simulation_mode: bool | None = None,
                parallel: Any = None, observers: Sequence[Any] | None = None, objective: str | None = None,
                objective_higher_is_better: bool | None = None, objectives: Mapping[str, bool] | None = None,
                seed: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Tune a kernel as Kernel Tuner's ``tune_kernel`` does; returns ``(results, env)`` in its shapes."""
    start = time.perf_counter()
    setup_log(kernel_name, log)
    _refuse_unsupported(texmem_args=texmem_args, objectives=objectives)
    if parallel is None:  # Kernel Tuner's switch for scripts that do not pass it
        parallel = bool(os.environ.get("KERNEL_TUNER_PARALLEL"))
    if parallel and simulation_mode:
        raise ValueError("Enabling `parallel` and `simulation_mode` together is not supported")
    objective, higher = _objective(objective, objective_higher_is_better)
    first = None if simulation_mode or parallel else source_backend(kernel_source, lang)
    with spare_worker(first or "", first and device_argument(first, kernel_source, platform, device, compiler)):
        name, template_params, hidden = template_instance(kernel_name, list(tune_params))
        adaptune_observers, observables, output_observers = observer_names(observers)
        spec, backend = kernel_spec(kernel_name, kernel_source, problem_size, arguments, lang=lang,
                                    grid_div=grid_divisors(grid_div_x, grid_div_y, grid_div_z),
                                    block_size_names=block_size_names, answer=answer, atol=atol, verify=verify,
                                    smem_args=smem_args, compiler_options=compiler_options, defines=defines,
                                    template=(name, template_params), cmem_args=cmem_args,
                                    output_observers=output_observers)
        space = search_space(tune_params, restrictions, hidden, thread_limit(backend, spec.block_size_names, tune_params))
        spec = portable_source(spec, space)
        ours, options, max_evals, max_seconds = strategy_choice(strategy, strategy_options, len(space))
        if objective != "time" and ours != "brute_force":
            raise refuse("objective", f"{objective!r} with strategy {strategy!r}: adaptune's searches minimise time; "
                         "other objectives are honoured with brute_force (the best is chosen by the objective)")
        names = list(tune_params)
        path = cache_path(cache) if cache else None
        where = device_argument(backend, kernel_source, platform, device, compiler)
        if verbose and not quiet:
            print(f"Searchspace has {len(space)} configurations after restrictions.")
        if simulation_mode:
            return _simulate(path, kernel_name, problem_size, space, names, (ours, options, max_evals, max_seconds),
                             seed, metrics, (objective, higher), quiet)

        previous = None
        if path is not None and path.is_file():
            previous = read_cache(path, device_name(backend, where), kernel_name, problem_size, names)
        known = [Result(**{**r.__dict__, "config": {**r.config, **hidden}}) for r in previous.results] if previous else []
        problem = Problem(kernel_name, spec, space, input_name=_input_name(problem_size, spec.answer is not None,
                                                                       [o.key for o in output_observers]),
                          known_results=known)
        prepared = time.perf_counter() - start
        report = tune(problem, ours, max_evals=max_evals, max_seconds=max_seconds, repeats=iterations, backend=backend,
                      device=where, db=settings.db, seed=seed, progress=_progress(quiet), timeout_s=settings.timeout_s,
                      observers=adaptune_observers, strategy_options=options, discard_factor=settings.discard_factor,
                      hold_short_launches=settings.hold_short_launches,
                      **_parallel(parallel, backend))
        results = within_device_threads(report.results, report.device, spec.block_size_names, tune_params)
        rows = _rows(results, names, metrics, observables, start)
        env = environment(report.device, iterations, compiler_options,
                          {"strategy": ours, "db": report.db, "evaluated": report.evaluated, "failed": report.failed,
                           "reused": report.reused, "phases": _phases(prepared, report.phases),
                           "worker_start": report.worker_start, "worker_stats": report.worker_stats})
        if path is not None:
            write_cache(path, previous, results, rows, device_name=report.device.name, kernel_name=kernel_name,
                        problem_size=problem_size, tune_params=tune_params, objective=objective)
        return _finish(rows, env, names, metrics, (objective, higher), quiet, start)


def run_kernel(kernel_name: str, kernel_source: Any, problem_size: Any, arguments: Sequence[Any],
               params: Mapping[str, Any], grid_div_x: Any = None, grid_div_y: Any = None, grid_div_z: Any = None,
               lang: str | None = None, device: int = 0, platform: int = 0,
               smem_args: Mapping[str, Any] | None = None, cmem_args: Mapping[str, Any] | None = None,
               texmem_args: Mapping[str, Any] | None = None, compiler: str | None = None,
               compiler_options: Sequence[str] | None = None, defines: Mapping[str, Any] | None = None,
               block_size_names: Sequence[str] | None = None, quiet: bool = False, log: Any = None) -> list[Any]:
    """Compile and run one configuration once (in this process, as Kernel Tuner does); returns every
    argument after the run: arrays copied back from the device, scalars as given."""
    setup_log(kernel_name, log)
    _refuse_unsupported(texmem_args=texmem_args)
    name, template_params, hidden = template_instance(kernel_name, list(params))
    spec, backend = kernel_spec(kernel_name, kernel_source, problem_size, arguments, lang=lang,
                                grid_div=grid_divisors(grid_div_x, grid_div_y, grid_div_z),
                                block_size_names=block_size_names, smem_args=smem_args,
                                compiler_options=compiler_options, defines=defines, template=(name, template_params),
                                cmem_args=cmem_args)
    config = {**params, **hidden}
    dev = make_backend(backend, device_argument(backend, kernel_source, platform, device, compiler))
    try:
        geo, defines_, targs, _, _ = runners.kernel_source(spec, config, backend)
        kernel = dev.compile(spec.text_for(config), spec.name, defines_, spec.compiler_options, targs)
        if spec.constant_args:
            dev.set_constants(kernel, spec.constant_args)
        args = dev.allocate([a.make(a.pick(config)) if isinstance(a, ArgumentChoice) else a for a in spec.arguments])
        dev.launch(kernel, geo.grid, geo.block, args, geo.shared_mem)
        dev.synchronize()
        return [dev.copy_out(a) if isinstance(a, DeviceArray) else a for a in args]
    finally:
        dev.close()


# ---------------------------------------------------------------------------------------------- helpers
def _refuse_unsupported(**given: Any) -> None:
    why = {"texmem_args": "texture memory arguments are not supported by adaptune's backends",
           "objectives": "several objectives (a Pareto front) are not supported; give one objective"}
    for name, value in given.items():
        if value:
            raise refuse(name, why[name])


def _parallel(parallel: Any, backend: str) -> dict[str, Any]:
    """Kernel Tuner's ``parallel`` (True: every device; n: n workers) as adaptune's local executor."""
    if not parallel:
        return {}
    if parallel is True:
        n = sum(1 for kind, _, _ in list_devices() if kind == backend) if backend == "cuda" else 1
    else:
        n = int(parallel)
    return {"executor": "local", "n_parallel": max(n, 1)}


def _objective(objective: str | None, higher: bool | None) -> tuple[str, bool]:
    objective = objective or "time"
    if higher is None:
        if objective not in OBJECTIVE_DEFAULTS:
            raise ValueError(f"Please specify objective_higher_is_better for objective {objective}")
        higher = OBJECTIVE_DEFAULTS[objective]
    return objective, bool(higher)


def _input_name(problem_size: Any, checked: bool, observed: Sequence[str] = ()) -> str:
    """The store's input: the problem size, whether outputs are checked and which output observers report (a
    checked or observed run never reuses results that lack them)."""
    name = "callable" if callable(problem_size) else problem_size_name(problem_size)
    name = f"{name} checked" if checked else name
    return f"{name} observed {','.join(observed)}" if observed else name


def _phases(prepared: float, phases: Mapping[str, float]) -> dict[str, float]:
    """Milliseconds from the call to each step: arguments translated (``prepared``), worker ready, search done."""
    return {"prepared": prepared * 1e3, **{k: (prepared + v) * 1e3 for k, v in phases.items()}}


def _progress(quiet: bool) -> bool:
    return settings.progress and not quiet and sys.stderr.isatty()


def _rows(results: list[Result], names: list[str], metrics: Any, observables: list[str], start: float
          ) -> list[dict[str, Any]]:
    """Kernel Tuner's result dicts; the time outside compiling, checking and timing is spread over them."""
    wall_ms = (time.perf_counter() - start) * 1e3
    worked = sum(r.compile_ms + r.verify_ms + r.benchmark_ms for r in results)
    overhead = max(wall_ms - worked, 0.0) / max(len(results), 1)
    return [result_row(r, names, metrics, observables, overhead) for r in results]


def _finish(rows: list[dict[str, Any]], env: dict[str, Any], names: list[str], metrics: Any,
            objective: tuple[str, bool], quiet: bool, start: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Print and return the rows as Kernel Tuner does. Configurations whose output failed the check, and failures
    Kernel Tuner raises at (a compile error of the source, a crash, a hang), are left out of the returned rows
    (still in the store, the cache and ``env``): Kernel Tuner never returns one -- its run stops at the first --
    so scripts written for it take every row's ``time`` (``reduction.py``, whose unroll factor 0 does not
    compile on PoCL). A failure it records and goes past (too much shared memory, say) stays a row."""
    every, rows, left_out = rows, [], []
    for r in every:
        (left_out if stops_kernel_tuner(r) else rows).append(r)
    wrong = [r for r in left_out if r["adaptune_status"] == "wrong_result"]
    failed = [r for r in left_out if r["adaptune_status"] != "wrong_result"]
    if wrong:
        env["wrong_results"] = [{n: r[n] for n in names} for r in wrong]
    if failed:
        env["failed_results"] = [{**{n: r[n] for n in names}, "status": r["adaptune_status"],
                                  "error": r["adaptune_error"]} for r in failed]
    best = best_row(rows, *objective)
    if best is not None:
        env["best_config"] = best
    if not quiet:
        keys = [*names, "time", *(metrics or {})]
        for row in rows:
            print(_config_string(row, keys))
        if best is not None:
            print(f"\nBEST PERFORMING CONFIGURATION FOR OBJECTIVE {objective[0]}:")
            print(_config_string(best, [*keys, objective[0]]))
        else:
            print("no results to report")
        if wrong:
            print(f"{len(wrong)} configurations failed the output check: left out of the results, listed in "
                  "env['wrong_results']")
        if failed:
            print(f"{len(failed)} configurations failed to compile or run (Kernel Tuner would have stopped at "
                  "the first): left out of the results, listed in env['failed_results']")
    add_total_timings(every, env, (time.perf_counter() - start) * 1e3)
    return rows, env


def _config_string(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    """Kernel Tuner's compact line: ``block_size_x=128, time=0.123ms``."""
    def text(k: str, v: Any) -> str:
        value = f"{v:.3f}" if isinstance(v, float) else str(v)
        return f"{k}={value}{'ms' if k == 'time' and isinstance(v, float) else ''}"

    return ", ".join(text(k, v) for k, v in row.items() if k in keys)


def _simulate(path: Path | None, kernel_name: str, problem_size: Any, space: Space, names: list[str],
              search: tuple[str, dict[str, Any], int | None, float | None], seed: int | None, metrics: Any,
              objective: tuple[str, bool], quiet: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Kernel Tuner's simulation mode: the strategy walks the space on the cache's measurements, no device.
    ``time_limit`` counts the recorded compile, check and benchmark times, as Kernel Tuner's simulated clock."""
    start = time.perf_counter()
    if path is None or not path.is_file():
        raise ValueError(f"simulation_mode needs an existing cache file (cache={str(path) if path else None!r})")
    recorded = read_cache(path, None, kernel_name, problem_size, names)
    assert recorded is not None
    ours, options, max_evals, max_seconds = search
    strategy = make_strategy(ours, space, seed=seed, **options)
    results: list[Result] = []
    simulated_s = 0.0
    while (max_evals is None or len(results) < max_evals) and (max_seconds is None or simulated_s < max_seconds):
        index = strategy.ask()
        if index is None:
            break
        config = space.config(index)
        result = recorded.lookup(config)
        if result is None:
            raise ValueError(f"simulation_mode: configuration {config} is not in the cache {path}")
        strategy.tell(index, result.time_ms)
        results.append(result)
        simulated_s += (result.compile_ms + result.verify_ms + result.benchmark_ms) / 1e3
    rows = _rows(results, names, metrics, [], start)
    info = DeviceInfo(name=recorded.device_name, platform="recorded")
    env = environment(info, 0, None, {"strategy": ours, "simulation_mode": True, "evaluated": len(results),
                                      "simulated_time": simulated_s * 1e3})
    return _finish(rows, env, names, metrics, objective, quiet, start)

