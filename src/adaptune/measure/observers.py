"""Observers read device state around the timed runs. Strictly read-only: they never set clocks,
power limits, persistence or compute mode.

``nvml`` (NVIDIA, via ``pynvml`` from nvidia-ml-py) reports:
``energy_j`` (total-energy counter delta over the timed runs), ``power_w`` (that energy over the
wall time of the timed runs; the instantaneous reading when the counter did not advance),
``power_instant_w``, ``sm_clock_mhz``, ``temperature_c``. The energy counter has a coarse update
period, so energy of very short runs is only meaningful with many repeats.

A sampling thread reads the power every ``sample_interval_s`` (default 5 ms) while the timed runs go:
``power_peak_w`` (highest sample), ``power_mean_sampled_w`` and ``energy_sampled_j`` (the samples
integrated over the window, trapezoid rule): an independent check of the counter (power x time),
and ``power_samples``, how many readings there were. NVML's power reading is itself an average over
a short window that depends on the GPU, so the peak is the peak of that average.

``ClockControl`` is the one writer here, and it refuses: it changes nothing unless its caller passes
``allow_clock_changes=True`` *and* the process may change clocks (root); adaptune never does either.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any


class ObserverError(RuntimeError):
    """An observer cannot run here (library or device missing)."""


class NVMLObserver:
    name = "nvml"

    def __init__(self, index: int = 0, pci_bus_id: str | None = None, sample_interval_s: float | None = 0.005) -> None:
        try:
            import pynvml
        except ImportError as exc:
            raise ObserverError("the nvml observer needs nvidia-ml-py: install adaptune[cuda]") from exc
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
            self._handle = None
            if pci_bus_id:  # CUDA and NVML may number devices differently; the bus id is unambiguous
                try:
                    self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
                except pynvml.NVMLError:
                    self._handle = None
            if self._handle is None:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(int(index))
        except pynvml.NVMLError as exc:
            raise ObserverError(f"NVML cannot open the device ({exc}); is this an NVIDIA GPU with a driver?") from None
        self._energy0: float | None = None
        self._t0 = 0.0
        self._interval = sample_interval_s
        self._samples: list[tuple[float, float]] = []
        self._stop_sampling = threading.Event()
        self._thread: threading.Thread | None = None

    def _energy_mj(self) -> float | None:
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except self._nvml.NVMLError:  # not supported before Volta
            return None

    def _read(self, fn: str, *args: Any) -> float | None:
        try:
            return float(getattr(self._nvml, fn)(self._handle, *args))
        except self._nvml.NVMLError:
            return None

    def _sample(self) -> None:
        while not self._stop_sampling.is_set():
            mw = self._read("nvmlDeviceGetPowerUsage")
            if mw is not None:
                self._samples.append((time.perf_counter(), mw / 1e3))
            self._stop_sampling.wait(self._interval)

    def start(self) -> None:
        self._samples = []
        if self._interval:
            self._stop_sampling.clear()
            self._thread = threading.Thread(target=self._sample, name="nvml-power", daemon=True)
            self._thread.start()
        self._t0 = time.perf_counter()
        self._energy0 = self._energy_mj()

    def _stop_thread(self) -> dict[str, float]:
        if self._thread is None:
            return {}
        self._stop_sampling.set()
        self._thread.join()
        self._thread = None
        s = self._samples
        if not s:
            return {}
        watts = [w for _, w in s]
        out = {"power_peak_w": max(watts), "power_mean_sampled_w": sum(watts) / len(watts),
               "power_samples": float(len(s))}
        if len(s) >= 2:
            pairs = zip(s, s[1:], strict=False)
            out["energy_sampled_j"] = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in pairs)
        return out

    def stop(self) -> dict[str, float]:
        elapsed = time.perf_counter() - self._t0
        energy1 = self._energy_mj()
        sampled = self._stop_thread()
        nv = self._nvml
        out: dict[str, float] = {}
        power_mw = self._read("nvmlDeviceGetPowerUsage")
        if power_mw is not None:
            out["power_instant_w"] = power_mw / 1e3
        if self._energy0 is not None and energy1 is not None:
            out["energy_j"] = (energy1 - self._energy0) / 1e3
            if energy1 > self._energy0 and elapsed > 0:
                out["power_w"] = out["energy_j"] / elapsed
        if "power_w" not in out and power_mw is not None:
            out["power_w"] = power_mw / 1e3
        clock = self._read("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_SM)
        if clock is not None:
            out["sm_clock_mhz"] = clock
        temp = self._read("nvmlDeviceGetTemperature", nv.NVML_TEMPERATURE_GPU)
        if temp is not None:
            out["temperature_c"] = temp
        out["observed_s"] = elapsed
        out.update(sampled)
        return out

    def close(self) -> None:
        self._stop_thread()
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()


def make_observers(names: tuple[str, ...] | list[str], backend_name: str, device_properties: dict[str, Any],
                   device: Any) -> list[NVMLObserver]:
    """Observers for one device; the NVML handle is found by PCI bus id when the backend knows it."""
    observers = []
    for name in names:
        if name != "nvml":
            raise ObserverError(f"unknown observer {name!r}; available: nvml")
        if backend_name == "opencl" and "nvidia" not in str(device_properties.get("vendor", "")).lower():
            raise ObserverError("the nvml observer needs an NVIDIA device; this OpenCL device is "
                                f"{device_properties.get('vendor', 'not NVIDIA')}")
        index = device if isinstance(device, int) else 0
        observers.append(NVMLObserver(index=index, pci_bus_id=device_properties.get("pci_bus_id")))
    return observers


class ClockPermissionError(PermissionError):
    """Changing clocks was not explicitly allowed, or this process may not change them."""


class ClockControl:
    """Locks the GPU's SM clock for clock-as-a-parameter tuning: opt-in, and refused by default.

    Nothing in adaptune creates one with ``allow_clock_changes=True``; a user who does must also run as
    root (NVML's clock calls need it), and must call ``reset()`` (or use the context manager) afterwards.
    Tuning a clock parameter without this (the recommended path) means reading recorded measurements
    that carry a clock column; see ``adaptune.adaptive.clocks``.
    """

    def __init__(self, index: int = 0, *, allow_clock_changes: bool = False) -> None:
        if allow_clock_changes is not True:
            raise ClockPermissionError("clock changes are off: pass allow_clock_changes=True to lock GPU clocks "
                                       "(adaptune never changes clocks by itself)")
        if hasattr(os, "geteuid") and os.geteuid() != 0:
            raise ClockPermissionError("changing GPU clocks needs root (NVML refuses otherwise); "
                                       "nothing was changed")
        try:
            import pynvml
        except ImportError as exc:
            raise ObserverError("clock control needs nvidia-ml-py: install adaptune[cuda]") from exc
        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(int(index))
        self._locked = False

    def supported_clocks(self) -> list[int]:
        """SM clocks (MHz) the device supports at its highest memory clock."""
        nv = self._nvml
        mem = max(nv.nvmlDeviceGetSupportedMemoryClocks(self._handle))
        return sorted(int(c) for c in nv.nvmlDeviceGetSupportedGraphicsClocks(self._handle, mem))

    def lock(self, mhz: int) -> None:
        self._nvml.nvmlDeviceSetGpuLockedClocks(self._handle, int(mhz), int(mhz))
        self._locked = True

    def reset(self) -> None:
        if self._locked:
            self._nvml.nvmlDeviceResetGpuLockedClocks(self._handle)
            self._locked = False

    def __enter__(self) -> ClockControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.reset()
