"""A deeper multi-versioned program with a loop: a small MLP forward pass and a row-sum head.

For each layer (a loop, so the comparison values change per iteration): a matmul chosen by the four
``layer.*`` thresholds, then bias + ReLU chosen by ``act.suff_outer_par_0 <= n`` (a thread per row) or a thread
per element. After the loop the row sums of the output, a matmul with a ones vector, chosen by the four
``head.*`` thresholds. Nine thresholds in a forest of three trees under the synthetic root.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptune.kernels.device import Device
from adaptune.thresholds import matmul
from adaptune.thresholds.kernels import kernel
from adaptune.thresholds.program import Run, ThresholdProgram

ACT = "act.suff_outer_par_0"


@dataclass
class MlpData:
    n: int
    widths: tuple[int, ...]
    device: Device | None = None
    layers: list[matmul.MatmulData] = field(default_factory=list)
    biases: list[Any] = field(default_factory=list)
    head: matmul.MatmulData | None = None


def make_data(device: Device | None, n: int, widths: Sequence[int], seed: int = 0) -> MlpData:
    widths = tuple(int(w) for w in widths)
    if len(widths) < 2 or n < 1 or min(widths) < 1:
        raise ValueError(f"need n >= 1 and at least two positive widths, got n={n}, widths={widths}")
    data = MlpData(n, widths, device)
    rng = np.random.default_rng(seed)
    x = None
    if device is not None:
        x = device.asarray(rng.standard_normal(n * widths[0], dtype=np.float32))
    for w_in, w_out in zip(widths[:-1], widths[1:], strict=True):
        if device is None:
            data.layers.append(matmul.MatmulData(n, w_in, w_out))
            continue
        w = (rng.standard_normal((w_in, w_out)) / np.sqrt(w_in)).astype(np.float32).ravel()
        out = device.empty(n * w_out, np.float32)
        data.layers.append(matmul.MatmulData(n, w_in, w_out, device, x, device.asarray(w), out))
        data.biases.append(device.asarray(rng.standard_normal(w_out, dtype=np.float32) * 0.1))
        x = out
    if device is None:
        data.head = matmul.MatmulData(n, widths[-1], 1)
    else:
        ones = device.asarray(np.ones(widths[-1], dtype=np.float32))
        data.head = matmul.MatmulData(n, widths[-1], 1, device, x, ones, device.empty(n, np.float32))
    return data


def body(run: Run, d: MlpData) -> None:
    layer_names = tuple(t.replace("main.", "layer.") for t in (matmul.T0, matmul.T1, matmul.T2, matmul.T3))
    head_names = tuple(t.replace("main.", "head.") for t in (matmul.T0, matmul.T1, matmul.T2, matmul.T3))
    for i in run.loop(range(len(d.layers))):
        layer = d.layers[i]
        matmul.dispatch(run, layer, layer_names)
        rows = run.compare(ACT, d.n)
        run.version("act_rows" if rows else "act_elems")
        if not run.dry:
            name = "act_rows" if rows else "act_elems"
            grid = -(-d.n // 64) if rows else -(-d.n * layer.p // 256)
            kernel(d.device, "matmul_kernels.c", name, {})(grid, 64 if rows else 256,
                                                           (layer.c, d.biases[i], np.int32(d.n), np.int32(layer.p)))
    matmul.dispatch(run, d.head, head_names)


def program() -> ThresholdProgram:
    prog = ThresholdProgram("mlp", body=body)
    matmul.declare(prog, "layer")
    prog.threshold(ACT)
    matmul.declare(prog, "head")
    return prog


def reference(d: MlpData) -> np.ndarray:
    """The forward pass in NumPy (float64) from the device inputs."""
    dev = d.device
    x = dev.to_host(d.layers[0].a).astype(np.float64).reshape(d.n, d.widths[0])
    for layer, bias in zip(d.layers, d.biases, strict=True):
        w = dev.to_host(layer.b).astype(np.float64).reshape(layer.m, layer.p)
        x = np.maximum(x @ w + dev.to_host(bias), 0)
    return x.sum(axis=1)
