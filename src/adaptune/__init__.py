"""adaptune: adaptive autotuning of GPU and CPU code.

Find the best implementation and parameters of a computation for each input and each machine,
and pick them at run time in microseconds.
"""

from adaptune.records import DeviceInfo, Result, Status

__version__ = "0.1.0"

__all__ = ["DeviceInfo", "Result", "Status", "__version__"]
