"""Sources NVRTC refuses for their host code are built by nvcc into a cubin (``backends.nvcc``), on any host
with nvcc: the kernel found by its plain, mangled or template name, the user's architecture replaced."""

from __future__ import annotations

import shutil

import pytest

from adaptune.backends.base import CompileError, inject_defines
from adaptune.backends.nvcc import (
    elf_section_names,
    kernel_identity,
    kernel_symbol,
    nvcc_cubin,
    refuses_host_code,
    without_arch,
)

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

# what a header such as CUB brings: a host function that launches a kernel (NVRTC refuses it, nvcc builds it)
WITH_HOST_CODE = r"""
template <typename T> __global__ void scale(T *x, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) x[i] *= (T)2;
}
template __global__ void scale<float>(float *, int);
extern "C" __global__ void plain(float *x) { x[threadIdx.x] += 1.0f; }
__global__ void mangled(float *x) { x[threadIdx.x] -= 1.0f; }
void launch(float *x, int n) { scale<float><<<(n + 255) / 256, 256>>>(x, n); }
"""


def test_nvrtcs_refusal_of_host_code_is_told_from_the_kernels_own_errors():
    assert refuses_host_code('error: A function explicitly marked as a __host__ function is not allowed in JIT mode')
    assert not refuses_host_code("error: identifier \"undefined_thing\" is undefined")


def test_the_users_architecture_gives_way_to_the_gpus():
    assert without_arch(["-arch=sm_52", "-O3", "--gpu-architecture", "sm_80", "-DX=1"]) == ["-O3", "-DX=1"]


@needs_nvcc
def test_nvcc_builds_a_source_with_host_code_and_finds_each_kernel_by_its_name():
    source = "#define block_size_x 128\n" + WITH_HOST_CODE
    image, symbol = nvcc_cubin("sm_90", source, "scale<float>", ["-arch=sm_52", "-O3"])  # CUDA 13 rejects sm_52
    assert symbol.startswith("_Z") and symbol != "scale<float>"  # the template instance's mangled name
    kernels = {name for name in elf_section_names(image) if name.startswith(".text.")}
    assert f".text.{symbol}" in kernels and ".text.plain" in kernels
    assert kernel_symbol(image, "plain") == "plain"  # extern "C": its own name
    assert kernel_symbol(image, "mangled").startswith("_Z")  # C++ linkage, found through its demangled name
    with pytest.raises(CompileError, match="'missing' is not one of the cubin's kernels"):
        kernel_symbol(image, "missing")


@needs_nvcc
def test_nvccs_own_errors_are_reported_with_its_log():
    with pytest.raises(CompileError, match="nvcc compilation failed") as caught:
        nvcc_cubin("sm_90", WITH_HOST_CODE, "scale<float>", [])  # block_size_x is never defined
    assert "block_size_x" in caught.value.log


def test_a_file_that_is_no_cubin_is_refused_clearly():
    with pytest.raises(CompileError, match="no 64-bit little-endian ELF"):
        elf_section_names(b"not an ELF file")


def test_every_configuration_of_one_kernel_is_one_kernel_to_the_refusal():
    # NVRTC's refusal of a header's host code is remembered per kernel: the defines of a configuration do not
    # change it, another source, kernel name or option set does
    one = kernel_identity(inject_defines(WITH_HOST_CODE, {"block_size_x": 64}), "plain", ("-O3",))
    assert kernel_identity(inject_defines(WITH_HOST_CODE, {"block_size_x": 256}), "plain", ("-O3",)) == one
    assert kernel_identity(inject_defines(WITH_HOST_CODE + "\n", {"block_size_x": 64}), "plain", ("-O3",)) != one
    assert kernel_identity(inject_defines(WITH_HOST_CODE, {"block_size_x": 64}), "mangled", ("-O3",)) != one
    assert kernel_identity(inject_defines(WITH_HOST_CODE, {"block_size_x": 64}), "plain", ()) != one
