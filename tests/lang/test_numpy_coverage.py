"""Every NumPy program that runs eagerly also runs lazily: lazy arrays wherever NumPy takes arrays, integer
division with NumPy's semantics, and a walk over NumPy's public functions (real kernels on PoCL)."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest

DEVICE = os.environ.get("ADAPTUNE_LANG_TEST_DEVICE", "opencl")
pytest.importorskip("pyopencl" if DEVICE == "opencl" else "cupy")

import adaptune.numpy as anp  # noqa: E402
from adaptune.lang import eager  # noqa: E402
from adaptune.lang.eager import FallbackWarning  # noqa: E402

pytestmark = [pytest.mark.usefixtures("lang_runtime", "own_warnings"),
              pytest.mark.filterwarnings("ignore::adaptune.lang.eager.FallbackWarning")]


@pytest.fixture
def own_warnings(monkeypatch):
    """These tests run many functions eagerly: their warn-once record must not silence other tests' warnings."""
    monkeypatch.setattr(eager, "_warned", set())


def _host(r: Any) -> Any:
    if isinstance(r, tuple | list):
        return [_host(x) for x in r]
    return np.asarray(r.get() if isinstance(r, anp.LazyArray) else r)


ARBITRARY = {"empty", "empty_like"}  # values are whatever memory held: only shape and dtype are compared


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, tuple | list):
        return isinstance(got, tuple | list) and len(got) == len(want) and \
            all(_same(g, w) for g, w in zip(got, want, strict=True))
    got, want = _host(got), np.asarray(want)
    if want.dtype == object or got.dtype == object:
        return True  # not an array result (a dtype, an iterator): running without an error is the check
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "fc":
        return bool(np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True))
    return bool(np.array_equal(got, want))


# ------------------------------------------------------------------------------------- arrays anywhere

def test_lists_tuples_nested_keywords_and_out():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = x[::-1] * 2
    a, b = anp.asarray(x), anp.asarray(y)
    assert _same(anp.concatenate([a, b]), np.concatenate([x, y]))
    assert _same(anp.concatenate((a, b), axis=1), np.concatenate((x, y), axis=1))
    assert _same(anp.stack([a, b, a]), np.stack([x, y, x]))
    assert _same(anp.block([[a, b], [b, a]]), np.block([[x, y], [y, x]]))  # nested lists
    assert _same(anp.clip(a, a_min=b * 0.25, a_max=5.0), np.clip(x, a_min=y * 0.25, a_max=5.0))  # keywords
    assert _same(anp.where(a > 5, a, b), np.where(x > 5, x, y))
    # a lazy out= receives the result as a recorded write and is what the call returns
    out = anp.zeros((3, 4), np.float32)
    got = anp.cumsum(a, axis=1, out=out)
    assert got is out and _same(out, np.cumsum(x, axis=1))
    outs = (anp.zeros((3, 4), np.float32), anp.zeros((3, 4), np.float32))
    q, r = np.divmod(a, 3, out=outs)  # a ufunc with two outputs, through __array_ufunc__
    assert q is outs[0] and _same(outs, np.divmod(x, 3))
    # NumPy's own functions called on lazy arrays inside lists
    assert _same(np.concatenate([a, b]), np.concatenate([x, y]))
    assert anp.ndim(a) == 2 and anp.shape(a) == (3, 4)  # Python results stay Python values


# ------------------------------------------------------------------------------------- integer division

@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.uint32, np.float32, np.float64])
def test_floor_divide_remainder_divmod_compiled_with_numpy_semantics(dtype):
    rng = np.random.default_rng(3)
    kind = np.dtype(dtype).kind
    if kind == "u":
        x, y = rng.integers(0, 250, 64).astype(dtype), rng.integers(0, 6, 64).astype(dtype)
    elif kind == "i":
        x, y = rng.integers(-99, 99, 64).astype(dtype), rng.integers(-4, 5, 64).astype(dtype)
        x[0], y[0] = np.iinfo(dtype).min, -1  # C leaves MIN / -1 undefined; NumPy wraps
    else:
        x, y = (rng.standard_normal(64) * 9).astype(dtype), rng.integers(-3, 4, 64).astype(dtype)
        x[1], y[1] = 1, 0.1  # 1 // 0.1 is 9 in NumPy (floor(1 / 0.1) would be 10)
    y[2] = 0  # division by zero: 0 for integers, inf / nan for floats
    a, b = anp.asarray(x), anp.asarray(y)
    with np.errstate(all="ignore"):
        want_q, want_r = np.floor_divide(x, y), np.remainder(x, y)
        want_s = x % dtype(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # compiled, not run eagerly
        q, r = divmod(a, b)
        q2, r2 = anp.divmod(a, b)
        s = a % 5
        anp.flush()
    assert anp.last_flush().fallback == ""
    for got, want in ((q, want_q), (r, want_r), (q2, want_q), (r2, want_r), (s, want_s)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.get(), want)


# ------------------------------------------------------------------------------------- NumPy's function list

SKIP = {  # not array computations: files, printing, global state, Python callbacks
    "load", "save", "savez", "savez_compressed", "loadtxt", "savetxt", "genfromtxt", "fromfile", "fromregex",
    "memmap", "info", "show_config", "show_runtime", "get_include", "test", "setbufsize", "getbufsize",
    "seterr", "geterr", "seterrcall", "geterrcall", "set_printoptions", "get_printoptions", "printoptions",
    "frompyfunc", "vectorize", "nditer", "nested_iters", "from_dlpack", "fromfunction", "apply_along_axis",
    "apply_over_axes", "piecewise", "frombuffer", "fromiter", "fromstring", "asmatrix", "bmat", "matrix",
    "recarray", "record", "chararray", "busday_count", "busday_offset", "is_busday", "busdaycalendar",
    "datetime_as_string", "datetime_data", "array_repr", "array_str", "array2string", "format_float_positional",
    "format_float_scientific", "base_repr", "binary_repr", "typename", "mintypecode", "isdtype",
}


def _numpy_functions() -> list[str]:
    names = []
    for name in dir(np):
        obj = getattr(np, name, None)
        if name.startswith("_") or name in SKIP or isinstance(obj, type) or not callable(obj):
            continue
        names.append(name)
    return names


def _patterns(x: Any, y: Any, i: Any) -> list[tuple[tuple, dict]]:
    """Argument shapes NumPy functions commonly take (the first one NumPy accepts is used)."""
    return [((x,), {}), ((x, y), {}), ((i,), {}), ((i, i), {}), ((x, 1), {}), (([x, y],), {}),
            ((x, y, x), {}), ((i, 2), {}), ((x, 0.5), {}), (((x, y),), {}), ((x, x > 0.5), {})]


def _lazy(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return anp.asarray(v)
    if isinstance(v, tuple | list):
        return type(v)(_lazy(e) for e in v)
    return v


@pytest.mark.slow
def test_every_numpy_function_compiles_falls_back_or_says_not_supported():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 0.9, (3, 4))
    y = rng.uniform(0.1, 0.9, (3, 4))
    i = rng.integers(1, 9, (3, 4)).astype(np.int64)
    walked, bad, unsupported = 0, [], []  # about 280 of NumPy 2's functions take one of the patterns
    for name in _numpy_functions():
        want = None
        for args, kwargs in _patterns(x, y, i):
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    want = getattr(np, name)(*args, **kwargs)
            except Exception:  # NumPy does not take these arguments: try the next shape
                continue
            break
        else:
            continue
        walked += 1
        try:
            with np.errstate(all="ignore"):
                got = getattr(anp, name)(*_lazy(args), **_lazy(kwargs))
        except Exception as exc:  # only a clear "not supported" from adaptune is acceptable
            if str(exc).startswith("adaptune.numpy:"):
                unsupported.append(name)
            else:
                bad.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if name in ARBITRARY:  # whatever memory held: shape and dtype only
            ok = _host(got).shape == np.shape(want) and _host(got).dtype == np.asarray(want).dtype
            if not ok:
                bad.append(f"{name}: differs from NumPy")
            continue
        if not _same(got, want):
            bad.append(f"{name}: differs from NumPy")
    assert walked > 250, walked
    assert not bad, "\n".join(bad)
