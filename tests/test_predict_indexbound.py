"""Index bounds read from corpus kernel sources (adaptune.predict.indexbound) and the ``index`` buffer rule."""

from adaptune.predict import corpus, indexbound


def _bounds(src: str, x: int = 240, y: int = 240) -> dict:
    return indexbound.pointer_bounds(src, "k", corpus.params_from_source(src, "k"), x, y)


def test_guarded_thread_index_and_loop_over_a_row():
    src = """#define TILE 16
    __global__ void k(float *a, const float *b, float *c, int n, int width) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;   // n -> X*Y, width -> X (LS-CAT's names)
      if (i < n) { for (int j = 0; j < width; j++) c[i * width + j] = a[i] + b[j * TILE]; }
    }"""
    got = _bounds(src)
    assert got["a"] == 240 * 240 - 1
    assert got["b"] == 239 * 16
    assert got["c"] == (240 * 240 - 1) * 240 + 239  # a product of two size scalars: no fixed rule covers it


def test_early_return_guard_and_unguarded_index():
    guarded = "__global__ void k(float *a, int n) { int i = threadIdx.x + blockDim.x * blockIdx.x;" \
              " if (i >= n) return; a[i] = 2 * a[i]; }"
    assert _bounds(guarded)["a"] == 240 * 240 - 1
    # no guard: the 1-D launch covers X*Y threads rounded up to a whole block; an upper bound, a little loose
    bare = "__global__ void k(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; a[4 * i + 3] = 0; }"
    launches = [corpus.launch_geometry(s, 240, 240, False) for s in corpus.SHAPES]
    true_max = max(4 * (grid[0] * block[0] - 1) + 3 for grid, block in launches)
    assert true_max <= _bounds(bare)["a"] <= true_max + 4 * 1024


def test_unreadable_indices_give_no_bound():
    gather = "__global__ void k(float *a, int *idx, int n) { int i = threadIdx.x; if (i < n) a[idx[i]] = 1; }"
    got = _bounds(gather)
    assert got["a"] is None and got["idx"] == 1023
    moved = "__global__ void k(float *a, int n) { int i = threadIdx.x; a += n; a[i] = 1; }"
    assert _bounds(moved)["a"] is None
    assert indexbound.upper_bound("foo(i)", {"i": 3}) is None
    assert indexbound.upper_bound("(int)(i) % 7 + min(j, 2)", {"i": 100, "j": 9}) == 8


def test_index_rule_sizes_buffers_within_the_cap():
    x = y = 240
    base = corpus.buffer_elements(x, y, "4xy+64k")
    assert corpus.buffer_elements(x, y, "index", None) == base
    assert corpus.buffer_elements(x, y, "index", 10) == base
    assert corpus.buffer_elements(x, y, "index", base + 5) == base + 6
    assert corpus.buffer_elements(x, y, "index", corpus.INDEX_RULE_CAP) == base  # past the cap: unchanged
    params = corpus.parse_params([["float *", "a"], ["int", "n"]])
    plan = corpus.build_args(params, x, y, "index", {"a": 10**7})
    assert plan[0].elements == 10**7 + 1 and plan[1].value == x * y
