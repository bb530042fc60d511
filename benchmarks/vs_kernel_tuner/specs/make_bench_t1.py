"""Write the T1 files of the side-by-side benchmark (vs Kernel Tuner): the matmul example on smaller spaces.

    python benchmarks/vs_kernel_tuner/specs/make_bench_t1.py

Brute force must finish for both tools inside one run, so the spaces are a few hundred configurations:
`matmul_pocl_t1.json` (256^3 on a CPU through PoCL) and `matmul_h100_t1.json` (4096^3 on a GPU).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"

PARAMS_POCL = {"block_size_x": [16, 32], "block_size_y": [2, 4, 8], "tile_size_x": [1, 2, 4],
               "tile_size_y": [1, 4], "vector_width": [1, 4], "loop_unroll_factor_k": [1, 4],
               "use_shared_mem": [0, 1], "tile_size_k": [16]}
PARAMS_H100 = {"block_size_x": [16, 32, 64], "block_size_y": [4, 8, 16], "tile_size_x": [1, 2, 4],
               "tile_size_y": [1, 2, 4, 8], "vector_width": [1, 4], "loop_unroll_factor_k": [1, 4],
               "use_shared_mem": [0, 1], "tile_size_k": [16]}


def _make_t1_module():
    spec = importlib.util.spec_from_file_location("adaptune_examples_make_t1", EXAMPLES / "make_t1.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def documents() -> dict[str, dict]:
    m = _make_t1_module()
    mm = m.load_example("matmul")
    out = {}
    for file, lang, params, size, limits, extra in (
        ("matmul_pocl_t1.json", "opencl", PARAMS_POCL, 256, {"MAX_THREADS": 256, "MIN_THREADS": 16}, []),
        ("matmul_h100_t1.json", "cuda", PARAMS_H100, 4096, {"MAX_THREADS": 1024, "MIN_THREADS": 32},
         mm.CUDA_EXTRA_CONSTRAINTS),
    ):
        constants = {"M": size, "N": size, "K": size, "LOCAL_MEM": 48 * 1024, **limits}
        n2 = size * size
        args = [m.vector("C", n2, "WriteOnly", "Constant", 0.0, output=True),
                m.vector("A", n2, "ReadOnly", "Random"), m.vector("B", n2, "ReadOnly", "Random"),
                m.scalar("M", size), m.scalar("N", size), m.scalar("K", size)]
        doc = m.t1_document("matmul", lang, mm.KERNEL_NAME, params, mm.DEFAULTS, [*mm.CONSTRAINTS, *extra],
                            constants, [size, size],
                            (["block_size_x", "tile_size_x"], ["block_size_y", "tile_size_y"]), args, [])
        kernel = "kernel.cl" if lang == "opencl" else "kernel.cu"
        doc["KernelSpecification"]["KernelFile"] = f"../../../examples/matmul/{kernel}"
        out[file] = doc
    return out


def main() -> None:
    for file, doc in documents().items():
        (HERE / file).write_text(json.dumps(doc, indent=4) + "\n")
        print(f"wrote {file}")


if __name__ == "__main__":
    main()
