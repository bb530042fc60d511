"""LS-CAT corpus rules: signatures, sizing by name, NVRTC-ready source, launch geometry, features."""

import pytest

from adaptune.predict import corpus, features

EUCLID = """#include "includes.h"
#define NUM_THREADS 16
__global__ void euclidean_kernel(const float * vg_a, size_t pitch_a, size_t n_a, const float * vg_b,
    size_t pitch_b, size_t n_b, size_t k, float * d, size_t pitch_d, float p)
{
size_t x = blockIdx.x;
size_t y = blockIdx.y;
if(x < n_a && y < n_b) {
__shared__ float temp[NUM_THREADS];
temp[threadIdx.x] = 0.0;
for(size_t offset = threadIdx.x; offset < k; offset += blockDim.x) {
float t = vg_a[x * pitch_a + offset] - vg_b[y * pitch_b + offset];
temp[threadIdx.x] += (t * t);
}
__syncthreads();
if(threadIdx.x == 0) { d[y * pitch_d + x] = sqrt(temp[0]); }
}
}
"""
EUCLID_PARAMS = ("[('const float *', 'vg_a'), ('size_t', 'pitch_a'), ('size_t', 'n_a'), ('const float *', 'vg_b'), "
                 "('size_t', 'pitch_b'), ('size_t', 'n_b'), ('size_t', 'k'), ('float *', 'd'), "
                 "('size_t', 'pitch_d'), ('float', 'p')]")


def test_parse_params_from_the_kernel_list_literal():
    params = corpus.parse_params(EUCLID_PARAMS)
    assert [p.name for p in params][:3] == ["vg_a", "pitch_a", "n_a"]
    assert params[0].pointer and params[0].dtype == "float32"
    assert not params[1].pointer and params[1].dtype == "uint64"
    assert corpus.parse_param("float4 *", "v") == corpus.Param("float4 *", "v", "float32", 4, True)
    with pytest.raises(corpus.CorpusError, match="pointer-to-pointer"):
        corpus.parse_param("float **", "m")
    with pytest.raises(corpus.CorpusError, match="unsupported"):
        corpus.parse_param("curandState *", "s")
    with pytest.raises((ValueError, SyntaxError)):
        corpus.parse_params("__import__('os')")  # literal_eval, never eval


def test_sizing_rule_matches_ls_cats_find_value():
    # values LS-CAT's generated main.cu for 1/0 (euclidean_kernel) assigns: pitch 2, n_a XSIZE, n_b YSIZE, k 1
    x, y = 240, 496
    got = {name: corpus.scalar_value(name, x, y) for name in ("pitch_a", "n_a", "n_b", "k", "p", "width", "n",
                                                               "size", "rows", "cols", "alpha", "m", "stride")}
    assert got == {"pitch_a": 2, "n_a": x, "n_b": y, "k": 1, "p": 1, "width": x, "n": x * y, "size": x * y,
                   "rows": x, "cols": y, "alpha": 2, "m": 2, "stride": 2}
    plan = corpus.build_args(corpus.parse_params(EUCLID_PARAMS), x, y)
    assert plan[0].elements == 2 * x * y and plan[2].value == x


def test_prepare_source_gives_c_linkage_and_drops_system_headers():
    src = corpus.prepare_source(EUCLID, "#include <stdio.h>\n#include <math.h>\n", "euclidean_kernel")
    assert 'extern "C" __global__ void euclidean_kernel(' in src
    assert "#include" not in src
    with pytest.raises(corpus.CorpusError, match="local header"):
        corpus.prepare_source('#include "utils.h"\n' + EUCLID, "", "euclidean_kernel")
    with pytest.raises(corpus.CorpusError, match="unsupported feature"):
        corpus.prepare_source(EUCLID + "\ntemplate <int N> __device__ int f() { return N; }", "", "euclidean_kernel")
    with pytest.raises(corpus.CorpusError, match="one definition"):
        corpus.prepare_source(EUCLID, "", "other_kernel")


def test_launch_geometry_covers_the_same_work_for_every_shape():
    assert corpus.is_2d(EUCLID)
    assert corpus.launch_geometry((16, 16), 240, 240, True) == ((15, 15, 1), (16, 16, 1))
    assert corpus.launch_geometry((1024, 1), 240, 240, True) == ((1, 240, 1), (1024, 1, 1))
    for shape in corpus.SHAPES:  # 1-D kernels: a 1-D launch of the shape's thread count over x*y threads
        grid, block = corpus.launch_geometry(shape, 1016, 1016, False)
        assert block == (shape[0] * shape[1], 1, 1) and grid[0] * block[0] >= 1016 * 1016 > (grid[0] - 1) * block[0]
    assert corpus.dynamic_shared_bytes("extern __shared__ float s[];", (32, 32)) == 8192
    assert corpus.dynamic_shared_bytes(EUCLID, (32, 32)) == 0


def test_source_and_ptx_features():
    src = corpus.prepare_source(EUCLID, "", "euclidean_kernel")
    f = features.source_features(src, corpus.parse_params(EUCLID_PARAMS))
    assert f["src_sync"] > 0 and f["src_shared"] > 0 and f["src_two_d"] == 1.0
    assert f["par_pointers"] == 3 and f["par_role_X"] == 1 and f["par_role_2"] == 3
    ptx = "\t.reg .f32 %f<4>;\n\tld.global.f32 %f1, [%rd1];\n\tfma.rn.f32 %f3, %f1, %f2, %f1;\n\tbar.sync 0;\n"
    p = features.ptx_features(ptx)
    assert p["ptx_ld_global"] > 0 and p["ptx_fma"] > 0 and p["ptx_bar"] > 0 and p["ptx_st_global"] == 0


def test_buffer_rules_and_unknown_rule():
    assert corpus.buffer_elements(240, 240) == 2 * 240 * 240
    assert corpus.buffer_elements(240, 240, "4xy+64k") == 4 * 240 * 240 + 65536
    plan = corpus.build_args(corpus.parse_params(EUCLID_PARAMS), 16, 16, "4xy+64k")
    assert {a.elements for a in plan if a.param.pointer} == {4 * 256 + 65536}
    with pytest.raises(corpus.CorpusError, match="unknown buffer rule"):
        corpus.buffer_elements(8, 8, "huge")


def test_size_rows_two_sweeps_and_crash():
    from adaptune.predict import harness

    a, b, c = corpus.SHAPES[:3]
    rows = harness._size_rows(240, {a: [1.0, 1.1], b: [2.0]}, {a: "ok", b: "crash", c: "launch_error"})
    assert rows == [(240, *a, 1.0, "ok", 1.1), (240, *b, None, "crash", None), (240, *c, None, "launch_error", None)]


def test_signatures_are_read_by_backends_signature():
    # one scanner for both: a CUDA parameter spelt like an OpenCL qualifier keeps its name
    src = "__global__ void scale(const float *a, float constant, float4 *v, int n) { }"
    params = corpus.params_from_source(src, "scale")
    assert [(p.name, p.dtype, p.lanes, p.pointer) for p in params] == [
        ("a", "float32", 1, True), ("constant", "float32", 1, False), ("v", "float32", 4, True),
        ("n", "int32", 1, False)]
    assert corpus.parse_param("const ptrdiff_t", "size").dtype == "int64"
    with pytest.raises(corpus.CorpusError, match="unsupported"):
        corpus.parse_param("float4", "by_value")
    with pytest.raises(corpus.CorpusError, match="unsupported"):
        corpus.parse_param("const float &", "ref")
