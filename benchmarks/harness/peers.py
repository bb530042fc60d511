"""Workarounds for bugs of the tools the studies compare against (never applied to adaptune's own runs)."""

from __future__ import annotations


def pad_cupy_uuid() -> None:
    """CuPy cuts a device UUID at its first zero byte, and Kernel Tuner's CuPy backend then fails in
    ``uuid.UUID(bytes=...)``: pad it back to 16 bytes. Nothing happens without CuPy."""
    try:
        import cupy
    except ImportError:
        return
    original = cupy.cuda.runtime.getDeviceProperties

    def padded(device: int) -> dict:
        props = original(device)
        props["uuid"] = bytes(props.get("uuid", b"")).ljust(16, b"\0")[:16]
        return props

    cupy.cuda.runtime.getDeviceProperties = padded
