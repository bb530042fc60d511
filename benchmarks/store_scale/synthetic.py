"""Synthetic Kernel Tuner caches of any size, written one entry a line as Kernel Tuner writes them.

Ten parameters of six values each (6^10 = 60 million configurations), configuration ``i`` is the number ``i``
in base 6; every 13th entry is a compile failure; times are a fixed hash of ``i``. Generation is outside
every timed part.
"""

from __future__ import annotations

import json
from pathlib import Path

PARAMS = [f"p{j}" for j in range(10)]
VALUES = [16, 32, 64, 128, 256, 512]
KERNEL = "synthetic"


def config(i: int) -> dict[str, int]:
    """Configuration number ``i`` of the synthetic space."""
    return {name: VALUES[(i // 6 ** j) % 6] for j, name in enumerate(PARAMS)}


def write_cache(path: Path, rows: int) -> Path:
    """A closed cache of ``rows`` entries (several GB at 10^7: written in blocks, never held in memory)."""
    header = {"device_name": "Synthetic GPU", "kernel_name": KERNEL, "problem_size": [4096, 4096],
              "tune_params_keys": PARAMS, "tune_params": {n: VALUES for n in PARAMS}, "objective": "time",
              "cache": {}}
    with path.open("w") as f:
        f.write(json.dumps(header, indent="")[:-3])
        block = []
        for i in range(rows):
            c = config(i)
            t = 0.5 + (i * 2654435761 % 4294967296) / 4294967296 * 99.5
            entry = {**c, "time": "CompilationFailedConfig" if i % 13 == 7 else round(t, 6),
                     "times": [round(t, 6)] * 3, "compile_time": 120.5, "verification_time": 0,
                     "benchmark_time": round(3 * t, 4), "strategy_time": 0, "framework_time": 0.8,
                     "timestamp": "2024-05-06 07:08:09.101112+00:00"}
            key = ",".join(str(v) for v in c.values())
            block.append(("\n" if i == 0 else ",\n") + json.dumps(key) + ": " + json.dumps(entry))
            if len(block) == 10_000:
                f.write("".join(block))
                block = []
        f.write("".join(block) + "}\n}")
    return path
