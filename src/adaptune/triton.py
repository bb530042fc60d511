"""Public name of the Triton drop-in: ``from adaptune import triton as at; @at.autotune(...)``."""

from adaptune.integrations.triton import *  # noqa: F403
from adaptune.integrations.triton import __all__  # noqa: F401
