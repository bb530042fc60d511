"""Write the Kernel Tuner T1 files of the matmul and convolution examples from their problem definitions.

    python examples/make_t1.py          # rewrites examples/{matmul,convolution}/t1.json and t1_cuda.json

One source of truth: the parameter lists and constraints live in each ``problem.py``; this script
renders them in T1 form (constants substituted into the condition text), so a T1 file and its
Python twin always describe the same space. ``tests/test_examples_kernels.py`` checks they agree.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>/problem.py`` under a private module name."""
    path = HERE / name / "problem.py"
    spec = importlib.util.spec_from_file_location(f"adaptune_example_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def substitute(text: str, constants: dict[str, Any]) -> str:
    """Put constant values into a condition, whole words only (``N`` must not touch ``num_blocks``)."""
    for name, value in constants.items():
        text = re.sub(rf"\b{re.escape(name)}\b", str(value), text)
    return text


def tuning_parameters(params: dict[str, list[int]], defaults: dict[str, int]) -> list[dict[str, Any]]:
    out = []
    for name, values in params.items():
        entry: dict[str, Any] = {"Name": name, "Type": "int", "Values": json.dumps(list(values))}
        if defaults.get(name) in values:
            entry["Default"] = defaults[name]
        out.append(entry)
    return out


def conditions(constraints: list[str], params: dict[str, list[int]], constants: dict[str, Any]) -> list[dict]:
    out = []
    for text in constraints:
        used = [p for p in params if re.search(rf"\b{p}\b", text)]
        out.append({"Expression": substitute(text, constants), "Parameters": used})
    return out


def vector(name: str, size: int, access: str, fill: str, value: float | None = None,
           output: bool = False) -> dict[str, Any]:
    arg: dict[str, Any] = {"Name": name, "Type": "float", "MemoryType": "Vector", "AccessType": access,
                           "FillType": fill, "Size": size}
    if value is not None:
        arg["FillValue"] = value
    if output:
        arg["Output"] = 1
    return arg


def scalar(name: str, value: int) -> dict[str, Any]:
    return {"Name": name, "Type": "int32", "MemoryType": "Scalar", "AccessType": "ReadOnly",
            "FillType": "Constant", "FillValue": value}


def t1_document(benchmark: str, lang: str, kernel_name: str, params: dict[str, list[int]],
                defaults: dict[str, int], constraints: list[str], constants: dict[str, Any],
                problem_size: list[int], grid_div: tuple[list[str], list[str]],
                arguments: list[dict[str, Any]], compiler_options: list[str]) -> dict[str, Any]:
    space = {"TuningParameters": tuning_parameters(params, defaults),
             "Conditions": conditions(constraints, params, constants)}
    blocks_x = f"{problem_size[0]} // ({' * '.join(grid_div[0])})"
    blocks_y = f"{problem_size[1]} // ({' * '.join(grid_div[1])})"
    return {
        "General": {"BenchmarkName": benchmark, "FormatVersion": 1, "OutputFormat": "JSON"},
        "ConfigurationSpace": space,
        "Search": {"Name": "brute_force"},
        "KernelSpecification": {
            "Language": "OpenCL" if lang == "opencl" else "CUDA",
            "CompilerOptions": compiler_options,
            "BenchmarkName": benchmark,
            "KernelName": kernel_name,
            "KernelFile": "kernel.cl" if lang == "opencl" else "kernel.cu",
            "GlobalSizeType": "CUDA",
            "LocalSize": {"X": "block_size_x", "Y": "block_size_y", "Z": "1"},
            "GlobalSize": {"X": blocks_x, "Y": blocks_y, "Z": "1"},
            "GridDivX": list(grid_div[0]),
            "GridDivY": list(grid_div[1]),
            "ProblemSize": list(problem_size),
            "SharedMemory": 0,
            "Arguments": arguments,
        },
    }


def matmul_documents() -> dict[str, dict[str, Any]]:
    mm = load_example("matmul")
    out = {}
    for file, lang, params, size, limits, extra in (
        ("t1.json", "opencl", mm.PARAMS_OPENCL, 256, {"MAX_THREADS": 256, "MIN_THREADS": 16}, []),
        ("t1_cuda.json", "cuda", mm.PARAMS_CUDA, mm.CUDA_SIZE, {"MAX_THREADS": 1024, "MIN_THREADS": 32},
         mm.CUDA_EXTRA_CONSTRAINTS),
    ):
        constants = {"M": size, "N": size, "K": size, "LOCAL_MEM": 48 * 1024, **limits}
        n2 = size * size
        args = [vector("C", n2, "WriteOnly", "Constant", 0.0, output=True),
                vector("A", n2, "ReadOnly", "Random"), vector("B", n2, "ReadOnly", "Random"),
                scalar("M", size), scalar("N", size), scalar("K", size)]
        out[file] = t1_document("matmul", lang, mm.KERNEL_NAME, params, mm.DEFAULTS, [*mm.CONSTRAINTS, *extra],
                                constants, [size, size],
                                (["block_size_x", "tile_size_x"], ["block_size_y", "tile_size_y"]), args, [])
    return out


def convolution_documents() -> dict[str, dict[str, Any]]:
    conv = load_example("convolution")
    out = {}
    for file, lang, params, size, fsize, limits in (
        ("t1.json", "opencl", conv.PARAMS_OPENCL, 512, 7, {"MAX_THREADS": 256, "MIN_THREADS": 16}),
        ("t1_cuda.json", "cuda", conv.PARAMS_CUDA, 4096, 15, {"MAX_THREADS": 1024, "MIN_THREADS": 32}),
    ):
        constants = {"W": size, "H": size, "FW": fsize, "FH": fsize, "LOCAL_MEM": 48 * 1024, **limits}
        # the filter size is fixed per problem; T1 has no other way than one-valued parameters to
        # hand a #define to the kernel
        all_params = {**params, "filter_width": [fsize], "filter_height": [fsize]}
        defaults = {**conv.DEFAULTS, "filter_width": fsize, "filter_height": fsize}
        padded = (size + fsize - 1) * (size + fsize - 1)
        args = [vector("output_image", size * size, "WriteOnly", "Constant", 0.0, output=True),
                vector("input_image", padded, "ReadOnly", "Random"),
                vector("filter", fsize * fsize, "ReadOnly", "Random"),
                scalar("image_width", size), scalar("image_height", size)]
        out[file] = t1_document("convolution", lang, conv.KERNEL_NAME, all_params, defaults, conv.CONSTRAINTS,
                                constants, [size, size],
                                (["block_size_x", "tile_size_x"], ["block_size_y", "tile_size_y"]), args, [])
    return out


def documents() -> dict[Path, dict[str, Any]]:
    """Every T1 file this script owns, by path."""
    out: dict[Path, dict[str, Any]] = {}
    for example, docs in (("matmul", matmul_documents()), ("convolution", convolution_documents())):
        for file, doc in docs.items():
            out[HERE / example / file] = doc
    return out


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=4) + "\n"


def main() -> None:
    for path, doc in documents().items():
        path.write_text(render(doc))
        print(f"wrote {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
