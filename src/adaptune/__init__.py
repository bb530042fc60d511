"""adaptune: adaptive autotuning of GPU and CPU code.

Find the best implementation and parameters of a computation for each input and each machine,
and pick them at run time in microseconds.

The public API lives here. Names are resolved on first use (PEP 562), so ``import adaptune`` stays
cheap and a program that only dispatches never imports the tuning or storage layers.
"""

from __future__ import annotations

from adaptune._lazy import lazy_getattr
from adaptune.records import DeviceInfo, Result, Status

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    # space
    "Param": "adaptune.space", "Space": "adaptune.space", "ConstraintError": "adaptune.space",
    # measurement
    "KernelSpec": "adaptune.measure", "CallableSpec": "adaptune.measure", "MeasureSettings": "adaptune.measure",
    "Measurer": "adaptune.measure", "time_callable": "adaptune.measure",
    "MeasureSetupError": "adaptune.measure", "ArgumentMismatchError": "adaptune.backends.signature",
    # store and interop
    "Store": "adaptune.store", "RecordedSpace": "adaptune.store", "load_recorded": "adaptune.store",
    "load_kt_cache": "adaptune.store", "write_kt_cache": "adaptune.store", "load_t1": "adaptune.store",
    "load_t4": "adaptune.store", "write_t4": "adaptune.store",
    # search
    "STRATEGIES": "adaptune.search", "Strategy": "adaptune.search", "Budget": "adaptune.search",
    "make_strategy": "adaptune.search", "Replay": "adaptune.search",
    # tuning
    "Problem": "adaptune.tuning", "TuneReport": "adaptune.tuning", "tune": "adaptune.tuning",
    "TuningFailedWarning": "adaptune.tuning",
    # Kernel Tuner drop-in: `from adaptune import tune_kernel` or `import adaptune as kernel_tuner`
    "tune_kernel": "adaptune.integrations.kernel_tuner", "run_kernel": "adaptune.integrations.kernel_tuner",
    "strategies": "adaptune.integrations.kt_args", "accuracy": "adaptune.accuracy",
    # adaptive selection
    "CodeVariant": "adaptune.adaptive", "evaluate": "adaptune.adaptive", "learning_curves": "adaptune.adaptive",
    "EvaluationReport": "adaptune.adaptive", "TrainReport": "adaptune.adaptive",
    # transfer to unseen devices, objectives other than time, clocks (docs/transfer.md)
    "ConfigTransfer": "adaptune.adaptive.transfer", "DeviceSpace": "adaptune.adaptive.transfer",
    "MTLSelector": "adaptune.adaptive.transfer", "cv_dfs": "adaptune.adaptive.transfer",
    "p_dfs": "adaptune.adaptive.transfer", "features_from_info": "adaptune.adaptive.device_features",
    "OBJECTIVES": "adaptune.adaptive.objectives", "objective": "adaptune.adaptive.objectives",
    "pareto": "adaptune.adaptive.objectives", "energy_vs_time": "adaptune.adaptive.objectives",
    "select_clock": "adaptune.adaptive.clocks",
    "BoostedTransfer": "adaptune.adaptive.zero_shot", "nested_select": "adaptune.adaptive.zero_shot",
    "zero_shot": "adaptune.adaptive.zero_shot", "measure_proxies": "adaptune.kernels.proxies",
    "cached_proxies": "adaptune.kernels.proxies",
    # launch-configuration prediction (LS-CAT, seed 004)
    "launch_config": "adaptune.predict",
    "launch_prior": "adaptune.predict",
    # lang: lazy NumPy arrays compiled into fused kernels (entry point: import adaptune.numpy as anp)
    "LazyArray": "adaptune.lang", "FlushStats": "adaptune.lang", "FallbackWarning": "adaptune.lang",
    # nested data-parallel operators (adaptune.lang.ndp)
    "ndp_computation": "adaptune.lang.ndp", "NdpComputation": "adaptune.lang.ndp", "NdpProgram": "adaptune.lang.ndp",
    "NdpPrefetchedSelector": "adaptune.lang.ndp",
    "KeptDispatch": "adaptune.kernels.dispatch", "DistilledDispatch": "adaptune.kernels.dispatch",
    "PrefetchedDispatch": "adaptune.kernels.prefetched", "prefetch_features": "adaptune.kernels.features",
    # threshold tuning over multi-versioned code (seed 003)
    "ThresholdProgram": "adaptune.thresholds", "ThresholdModel": "adaptune.thresholds",
    "parse_print_sizes": "adaptune.thresholds", "PathTimes": "adaptune.thresholds",
    # distributed (Ray executors, a throw-away PostgreSQL server)
    "RayExecutor": "adaptune.distributed", "LocalExecutor": "adaptune.distributed",
    "local_postgres": "adaptune.distributed",
}

__all__ = ["DeviceInfo", "Result", "Status", "__version__", *_LAZY]


__getattr__ = lazy_getattr("adaptune", _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
