"""T1 input files: the real Kernel Tuner test file, hostile Values/Size/Conditions, and argument arrays."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from adaptune.store import FormatError, load_t1, t1_arrays
from adaptune.store.t1 import resolve_size

T1_FILE = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner_tests" / "test_T1_input.json"


def t1_doc() -> dict:
    return json.loads(T1_FILE.read_text())


def write(tmp_path: Path, doc: dict, name: str = "problem.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_real_t1_file_is_read_completely():
    spec = load_t1(T1_FILE)
    assert spec.benchmark_name == "convolution" and spec.kernel_name == "convolution_kernel"
    assert spec.params["filter_width"] == list(range(3, 35, 2))
    assert spec.params["block_size_x"] == [16 * i for i in range(1, 9)]
    assert spec.params["block_size_y"] == [2**i for i in range(6)]
    assert spec.defaults["filter_width"] == 17 and spec.defaults["use_padding"] == 1
    assert spec.constraints == ["use_padding==0 or (block_size_x % 32 != 0)"]
    assert spec.kernel_file == T1_FILE.parent / "convolution.cu"  # relative to the T1 file, not the cwd
    assert spec.language == "CUDA" and spec.compiler_options == ["-std=c++11"]
    assert spec.global_size_type == "CUDA" and spec.local_size == {"X": "block_size_x", "Y": "block_size_y", "Z": "1"}
    assert spec.global_size["X"] == "(262144 // block_size_x) // tile_size_x"
    assert spec.grid_div == (["block_size_x", "tile_size_x"], ["block_size_y", "tile_size_y"], None)
    assert spec.problem_size == [4096, 4096]
    out, image, filt = spec.arguments
    assert (out.name, out.size, out.output, out.fill_type, out.access) == ("output_image", 4096 * 4096, True,
                                                                           "Constant", "WriteOnly")
    assert image.size == (4096 + 33 - 1) * (4096 + 33 - 1) and not image.output
    assert filt.size == 33 * 33 and filt.constant_memory and filt.fill_type == "Random"
    assert spec.output_indices == [0]


def test_t1_space_applies_the_conditions():
    space = load_t1(T1_FILE).space()
    assert space.cartesian_size == 16 * 16 * 8 * 6 * 8 * 8 * 2 * 2
    padding, bsx = space.column("use_padding"), space.column("block_size_x")
    assert ((padding == 0) | (bsx % 32 != 0)).all()
    # use_padding=1 is allowed only for the 4 of 8 block_size_x values that are not multiples of 32
    assert len(space) == space.cartesian_size // 2 + space.cartesian_size // 2 * 4 // 8


def test_code_in_values_is_rejected_without_side_effect(tmp_path):
    marker = tmp_path / "pwned"
    doc = t1_doc()
    doc["ConfigurationSpace"]["TuningParameters"][0]["Values"] = f"__import__('os').system('touch {marker}')"
    with pytest.raises(FormatError, match=r"problem\.json: TuningParameters\[0\] \(filter_width\): 'Values' rejected"):
        load_t1(write(tmp_path, doc))
    assert not marker.exists()


@pytest.mark.parametrize("where", ["size", "condition", "comprehension"])
def test_code_elsewhere_is_rejected_without_side_effect(tmp_path, where):
    marker = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {marker}')"
    doc = t1_doc()
    if where == "size":
        doc["KernelSpecification"]["Arguments"][1]["Size"] = f"ProblemSize[0] + {payload}"
        expected = r"Arguments\[1\] \(input_image\): 'Size'"
    elif where == "condition":
        doc["ConfigurationSpace"]["Conditions"][0]["Expression"] = payload
        expected = r"Conditions\[0\]: 'Expression' rejected"
    else:
        doc["ConfigurationSpace"]["TuningParameters"][2]["Values"] = f"[i for i in {payload}]"
        expected = r"TuningParameters\[2\] \(block_size_x\): 'Values' rejected"
    with pytest.raises(FormatError, match=expected):
        load_t1(write(tmp_path, doc))
    assert not marker.exists()


def test_size_expressions():
    params = {"filter_width": [3, 5, 17], "filter_height": [1, 9], "mode": ["a", "b"]}
    assert resolve_size("(ProblemSize[0]+max(filter_width)-1) * (ProblemSize[1]+max(filter_height)-1)",
                        params, [100, 200]) == 116 * 208
    assert resolve_size("min(filter_width) * 2**4 // 3", params, []) == 3 * 16 // 3
    for bad, why in [("ProblemSize[2]", "out of range"), ("max(nope)", "names no tunable parameter"),
                     ("max(mode)", "numeric values"), ("open('x')", "only ProblemSize"),
                     ("ProblemSize[0] - 200", "non-negative"), ("9**99", "exceeds")]:
        with pytest.raises(ValueError, match=why):
            resolve_size(bad, params, [100, 200])


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.pop("KernelSpecification"), "missing 'KernelSpecification'"),
    (lambda d: d["ConfigurationSpace"]["TuningParameters"][0].update(Type="complex"), "'Type' 'complex'"),
    (lambda d: d["ConfigurationSpace"]["TuningParameters"][0].update(Default=4), "'Default' 4 is not among"),
    (lambda d: d["ConfigurationSpace"]["TuningParameters"][0].update(Values="['a', 'b']"), "'a' is not of Type 'int'"),
    (lambda d: d["ConfigurationSpace"]["TuningParameters"][1].update(Name="filter_width"), "declared twice"),
    (lambda d: d["ConfigurationSpace"]["Conditions"][0].update(Expression="block_size_z > 1"), "rejected"),
    (lambda d: d["KernelSpecification"].update(ProblemSize="big"), "'ProblemSize' must be"),
    (lambda d: d["KernelSpecification"]["Arguments"][0].update(Type="float3"), "'Type' 'float3'"),
    (lambda d: d["KernelSpecification"]["Arguments"][0].update(Size=[1]), "'Size' must be int/str"),
])
def test_malformed_t1_is_named(tmp_path, mutate, message):
    doc = copy.deepcopy(t1_doc())
    mutate(doc)
    with pytest.raises(FormatError, match=message) as err:
        load_t1(write(tmp_path, doc, "bad_t1.json"))
    assert "bad_t1.json" in str(err.value)


def test_not_json_is_named(tmp_path):
    (tmp_path / "x.json").write_text("{ not json")
    with pytest.raises(FormatError, match=r"x\.json: not a T1 file"):
        load_t1(tmp_path / "x.json")


def small_spec(tmp_path: Path):
    doc = t1_doc()
    doc["KernelSpecification"]["ProblemSize"] = [8, 4]
    doc["KernelSpecification"]["Arguments"][0]["Size"] = "ProblemSize[0] * ProblemSize[1]"
    doc["KernelSpecification"]["Arguments"] += [
        {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillValue": 42},
        {"Name": "counts", "Type": "uint32", "MemoryType": "Vector", "FillType": "Random", "Size": 64,
         "FillValue": 9, "RandomSeed": 7},
        {"Name": "zeros", "Type": "float4", "MemoryType": "Vector", "FillType": "Zero", "Size": "ProblemSize[1]"},
        {"Name": "raw", "Type": "double", "MemoryType": "Vector", "FillType": "BinaryRaw", "Size": 3,
         "DataSource": "raw.bin"},
    ]
    np.arange(3, dtype=np.float64).tofile(tmp_path / "raw.bin")
    return load_t1(write(tmp_path, doc))


def test_t1_arrays_are_seeded_typed_and_sized(tmp_path):
    spec = small_spec(tmp_path)
    out, image, filt, n, counts, zeros, raw = t1_arrays(spec, seed=3)
    assert out.dtype == np.float32 and out.shape == (32,) and not out.any()
    assert image.shape == ((8 + 32) * (4 + 32),) and image.min() >= 0.0 and image.max() < 1.0
    assert filt.shape == (33 * 33,) and filt.std() > 0
    assert n == np.int32(42) and isinstance(n, np.int32)
    assert counts.dtype == np.uint32 and counts.max() <= 9 and len(set(counts.tolist())) > 3
    assert zeros.shape == (4 * 4,) and not zeros.any()
    assert raw.tolist() == [0.0, 1.0, 2.0]
    again = t1_arrays(spec, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(t1_arrays(spec, seed=3), again, strict=True))
    other = t1_arrays(spec, seed=4)
    assert not np.array_equal(other[1], image) and np.array_equal(other[4], counts)  # RandomSeed pins counts


def test_code_running_fill_types_are_refused(tmp_path):
    doc = t1_doc()
    doc["KernelSpecification"]["ProblemSize"] = [8, 4]
    doc["KernelSpecification"]["Arguments"][0].update(FillType="Script", Size=4)
    spec = load_t1(write(tmp_path, doc))
    with pytest.raises(FormatError, match="FillType 'Script' is not supported"):
        t1_arrays(spec)
