"""Plain records shared by every layer: the outcome of one measurement and the device it ran on.

They sit at the bottom of the package so that measurement, storage, search and adaptive selection
all speak the same language without importing each other.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """How a measurement ended. Only ``OK`` carries a valid time."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    LAUNCH_ERROR = "launch_error"
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"
    CONSTRAINT = "constraint"


@dataclass
class Result:
    """One configuration measured (or refused) once on one device for one input.

    ``time_ms`` is the robust statistic (median) of ``samples``; failures have ``time_ms = inf``
    so that every strategy can treat them as the worst possible value.
    """

    config: dict[str, Any]
    status: Status = Status.OK
    time_ms: float = math.inf
    samples: list[float] = field(default_factory=list)
    compile_ms: float = 0.0
    verify_ms: float = 0.0
    benchmark_ms: float = 0.0
    observers: dict[str, float] = field(default_factory=dict)
    error: str = ""
    timestamp: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @classmethod
    def from_samples(cls, config: dict[str, Any], samples: list[float], **kw: Any) -> Result:
        return cls(config=config, status=Status.OK, time_ms=statistics.median(samples),
                   samples=list(samples), **kw)

    @classmethod
    def failure(cls, config: dict[str, Any], status: Status, error: str = "", **kw: Any) -> Result:
        return cls(config=config, status=Status(status), time_ms=math.inf, error=error, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        d = dict(d)
        d["status"] = Status(d.get("status", "ok"))
        if d.get("time_ms") is None:
            d["time_ms"] = math.inf
        return cls(**d)


@dataclass(frozen=True)
class DeviceInfo:
    """What a backend says about the device it runs on; the store keys devices by (name, platform, driver)."""

    name: str
    platform: str  # "opencl:<platform name>", "cuda", "cpu"
    driver: str = ""
    properties: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def driver_version(self) -> str:
        """The driver's own version: ``driver`` may add to it what tells devices apart (a CPU's compute units)."""
        return self.properties.get("driver_version", self.driver)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
