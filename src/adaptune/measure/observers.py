"""Observers read device state around the timed runs. Strictly read-only: they never set clocks,
power limits, persistence or compute mode.

``nvml`` (NVIDIA, via ``pynvml`` from nvidia-ml-py) reports:
``energy_j`` (total-energy counter delta over the timed runs), ``power_w`` (that energy over the
wall time of the timed runs; the instantaneous reading when the counter did not advance),
``power_instant_w``, ``sm_clock_mhz``, ``temperature_c``. The energy counter has a coarse update
period, so energy of very short runs is only meaningful with many repeats.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any


class ObserverError(RuntimeError):
    """An observer cannot run here (library or device missing)."""


class NVMLObserver:
    name = "nvml"

    def __init__(self, index: int = 0, pci_bus_id: str | None = None) -> None:
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

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._energy0 = self._energy_mj()

    def stop(self) -> dict[str, float]:
        elapsed = time.perf_counter() - self._t0
        energy1 = self._energy_mj()
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
        return out

    def close(self) -> None:
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
