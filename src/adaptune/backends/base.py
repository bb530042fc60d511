"""The backend protocol: what the measurement worker needs from a device API.

A backend compiles kernel source with parameter values injected as ``#define`` lines (and, for
CUDA, optionally as C++ template arguments), holds argument buffers on the device, launches and
times single launches with device events, and describes its device. Everything above this layer
(the worker, the tuner) is written once against :class:`Backend`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from adaptune.records import DeviceInfo

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class BackendError(RuntimeError):
    """The backend cannot be used here (library missing, no such device)."""


class CompileError(Exception):
    """The compiler rejected the source; ``log`` holds the compiler's output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log or message


@dataclass(frozen=True)
class DeviceLimits:
    """Launch limits checked before a launch, so an impossible block costs no launch."""

    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_shared_mem: int | None = None  # dynamic shared memory per block (CUDA), bytes


@dataclass
class DeviceArray:
    """One array argument resident on the device; ``handle`` is the API's buffer object."""

    handle: Any
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


Grid = tuple[int, int, int]


def format_define(value: Any) -> str:
    """Text of one ``#define`` value: bools as 0/1, numbers in full precision, strings verbatim."""
    if isinstance(value, bool | np.bool_):
        return "1" if value else "0"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return repr(float(value))
    return str(value)


def format_template_arg(value: Any) -> str:
    """Text of one C++ template argument: bools as true/false, the rest as in a ``#define``."""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    return format_define(value)


def define_lines(defines: Mapping[str, Any]) -> str:
    """``#define name value`` lines; names must be C identifiers (a typo here is a spec error)."""
    lines = []
    for name, value in defines.items():
        if not _IDENTIFIER.match(name):
            raise ValueError(f"cannot #define {name!r}: not a C identifier")
        lines.append(f"#define {name} {format_define(value)}\n")
    return "".join(lines)


def inject_defines(source: str, defines: Mapping[str, Any]) -> str:
    """Prepend the defines; ``#line 1`` keeps compiler messages pointing at the user's own lines."""
    if not defines:
        return source
    return define_lines(defines) + "#line 1\n" + source


def name_expression(name: str, template_args: Sequence[Any] | None) -> str:
    """``name<v1,v2>`` for a templated kernel, else ``name``."""
    if not template_args:
        return name
    return f"{name}<{','.join(format_template_arg(v) for v in template_args)}>"


class Backend(ABC):
    """One device, one context, one queue/stream. Not thread-safe except :meth:`compile`.

    ``compile`` may run in worker threads while the main thread launches (the tuner compiles
    ahead); all other methods are called from one thread.
    """

    name: ClassVar[str]
    lang: ClassVar[str]
    #: True when a failed launch may leave the context unusable (CUDA sticky errors): the worker
    #: is then restarted after reporting the failure.
    restart_after_launch_error: ClassVar[bool] = False
    #: True when the last ``time_launch`` was held up on the host between its start and end (a timer that runs
    #: while the host enqueues, as CUDA events do, then counts the wait); the runner runs that sample again
    last_launch_held_up: bool = False
    #: Whether ``time_launch`` keeps the device busy just before a short kernel's timed window, so that the
    #: window holds the kernel alone (CUDA: :data:`~adaptune.backends.cuda.HOLD_NS`); the runner sets it from
    #: :attr:`~adaptune.measure.MeasureSettings.hold_short_launches`
    hold_before_short_launches: bool = False
    cache_size: ClassVar[int] = 512
    #: A trivial kernel (named ``adaptune_warm_up``) that :meth:`warm_up` builds; "" for none.
    warm_up_source: ClassVar[str] = ""

    def __init__(self) -> None:
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.compiles = 0  # real compiler invocations (cache misses)
        self.warm_up_kernel: Any = None  # built by warm_up
        self._warm_up_tried = False
        self._warm_up_lock = threading.Lock()

    # --- compilation -------------------------------------------------------------------------
    def compile(self, source: str, name: str, defines: Mapping[str, Any] | None = None,
                options: Sequence[str] = (), template_args: Sequence[Any] | None = None) -> Any:
        """Compiled kernel for ``source`` with ``defines`` prepended; cached in memory.

        Raises :class:`CompileError` with the compiler log when the compiler rejects it.
        """
        return self.compile_timed(source, name, defines, options, template_args)[0]

    def compile_timed(self, source: str, name: str, defines: Mapping[str, Any] | None = None,
                      options: Sequence[str] = (), template_args: Sequence[Any] | None = None
                      ) -> tuple[Any, float, bool]:
        """(kernel, compile ms, came from cache)."""
        full = inject_defines(source, defines or {})
        expr = name_expression(name, template_args)
        key = self.cache_key(full, expr, options)
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key], 0.0, True
        t0 = time.perf_counter()
        kernel = self._build(full, expr, tuple(options))
        ms = (time.perf_counter() - t0) * 1e3
        with self._cache_lock:
            self.compiles += 1
            self._cache[key] = kernel
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return kernel, ms, False

    def cache_key(self, full_source: str, expr: str, options: Sequence[str]) -> str:
        """Binary identity: source with defines, kernel name expression, options and device."""
        h = hashlib.sha256()
        for part in (full_source, expr, "\0".join(options), self.device_key()):
            h.update(part.encode())
            h.update(b"\0\1")
        return h.hexdigest()

    def device_key(self) -> str:
        info = self.device_info()
        return f"{info.platform}|{info.name}|{info.driver}"

    @abstractmethod
    def _build(self, source: str, expr: str, options: tuple[str, ...]) -> Any:
        """Compile ``source`` (defines already in) and return the kernel ``expr``."""

    def binary_target(self) -> str | None:
        """What a binary compiled elsewhere must be built for (``backends.binary``); None: no binaries."""
        return None

    def load_binary(self, key: str, binary: Any) -> bool:
        """Put a kernel compiled elsewhere into the compile cache under ``key`` (so ``compile`` finds it).

        False when it was not loaded: another target, a load failure (the source is compiled then), or the
        kernel is in the cache already.
        """
        if binary.target != self.binary_target():
            return False
        with self._cache_lock:
            if key in self._cache:
                return False
        try:
            kernel = self._load_binary(binary)
        except Exception:  # noqa: BLE001 - a bad binary only costs the compile it was meant to save
            return False
        with self._cache_lock:
            self._cache[key] = kernel
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return True

    def _load_binary(self, binary: Any) -> Any:
        raise NotImplementedError

    def set_constants(self, kernel: Any, constants: Mapping[str, np.ndarray]) -> None:
        """Fill constant-memory symbols of a compiled kernel (only the CUDA backend has them)."""
        raise BackendError(f"constant memory arguments need the cuda backend, not {self.name}")

    def kernel_max_threads(self, kernel: Any) -> int | None:
        """Threads per block this compiled kernel allows (registers may lower it); None = unknown."""
        return None

    # --- device description ------------------------------------------------------------------
    @abstractmethod
    def device_info(self) -> DeviceInfo: ...

    @abstractmethod
    def limits(self) -> DeviceLimits: ...

    # --- data --------------------------------------------------------------------------------
    def allocate(self, arguments: Sequence[Any]) -> list[Any]:
        """Device arguments: a :class:`DeviceArray` per NumPy array, NumPy scalars as they are."""
        out: list[Any] = []
        for i, arg in enumerate(arguments):
            if isinstance(arg, np.ndarray):  # an empty array is allowed: Kernel Tuner passes them on
                out.append(self._allocate_array(np.ascontiguousarray(arg)))
            elif isinstance(arg, np.generic):
                out.append(arg)
            else:
                raise TypeError(f"argument {i} is a {type(arg).__name__}; pass NumPy arrays and NumPy "
                                "scalars (e.g. np.int32(n)) so the kernel gets the right types")
        return out

    def empty_like(self, arr: DeviceArray) -> DeviceArray:
        """A second device buffer of the same shape (used for pristine copies)."""
        return self._allocate_array(np.zeros(arr.shape, arr.dtype))

    @abstractmethod
    def _allocate_array(self, host: np.ndarray) -> DeviceArray: ...

    @abstractmethod
    def copy_in(self, dst: DeviceArray, host: np.ndarray) -> None: ...

    @abstractmethod
    def copy_out(self, src: DeviceArray) -> np.ndarray: ...

    @abstractmethod
    def copy_device(self, dst: DeviceArray, src: DeviceArray) -> None:
        """Device-to-device copy, enqueued in launch order (no host round trip)."""

    @abstractmethod
    def fill(self, dst: DeviceArray, value: np.ndarray) -> None:
        """Fill every element with ``value`` (a one-element array of the buffer's dtype)."""

    # --- execution ---------------------------------------------------------------------------
    @abstractmethod
    def launch(self, kernel: Any, grid: Grid, block: Grid, args: Sequence[Any], shared_mem: int = 0) -> None:
        """Enqueue one launch of ``grid`` blocks of ``block`` threads (returns at once)."""

    @abstractmethod
    def time_launch(self, kernel: Any, grid: Grid, block: Grid, args: Sequence[Any], shared_mem: int = 0) -> float:
        """Run one launch and return its device-side duration in ms (device events)."""

    @abstractmethod
    def synchronize(self) -> None: ...

    def warm_up(self) -> None:
        """Build :attr:`warm_up_source` once, so loading the compiler is paid before the first real compile
        (a worker does it in a thread from the moment its device is open); a failure is left to that compile.
        The kernel stays in :attr:`warm_up_kernel` (CUDA's is the hold before short timed launches). Tried
        once: a caller that asks while it is being built waits for it, one that asks again after a failure
        (CUDA's timed launches) does not build it again each time."""
        with self._warm_up_lock:
            if self.warm_up_source and not self._warm_up_tried:
                self._warm_up_tried = True
                with contextlib.suppress(Exception):
                    self.warm_up_kernel = self._build(self.warm_up_source, "adaptune_warm_up", ())

    def close(self) -> None:  # noqa: B027 - optional hook, most backends need nothing
        """Release the context (optional)."""
