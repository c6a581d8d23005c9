"""The N-d segment reductions of issue 17 against the plain-loop oracle (tests/oracle_segreduce.py).

Ops: segment_csr, segment_coo, scatter, gather_csr, segment_sum_csr, segmented_sum (with
reduce), segmented_scan and scan (with axis). Every reduction (sum, mean, min, max, prod;
return_arg with min/max) x value dtype (int8..int64, float16..float64) x rank 1-3 x axis
(first, middle, last, negative), empty segments, E = 0, N = 0, feature widths up to 300,
segments longer than a task's share, unsorted scatter indices with duplicates, memory
layouts, torch in / torch out, and bad input.

Integers are bit-exact against Python-int results under the dtype rule (int8/16/32 ->
int32, int64 -> int64), wrapped to the result width under overflow="wrap"; under
overflow="raise" an exact result outside the result dtype must raise OverflowError.

Float tolerance (u = eps / 2 the unit roundoff of the RESULT dtype, eps = np.finfo(rdt).eps,
k = the number of terms of an output, S = sum of their |values|):
  sum, scans   |y - exact| <= k * eps * S          any summation order of k terms errs by at
               most (k - 1) u S (Higham, 2002, eq. 4.4) and the final rounding by u S, so
               k * eps * S = 2 k u S covers both with room for the oracle's own float64
               rounding (the running sum of the scan oracle errs by at most (k - 1) u S when
               the result is float64; fsum, used for the reductions, is correctly rounded);
  mean         |y - exact| <= eps * S + eps * |exact| + d  (the sum bound / k, then one division,
               whose rounding below the normal range errs by up to d / 2, d = the smallest
               subnormal: np.finfo(rdt).smallest_subnormal);
  prod         |y - exact| <= (k + 1) * eps * |exact| + k * tiny  (k roundings of relative u,
               the oracle's float64 product as many; tiny = smallest normal for gradual
               underflow), and an exact value within that bound of the largest finite
               number may come back as the infinity of its sign;
  min, max     exact (the result is one of the inputs, converted exactly).
Non-finite expected values (NaN, +-inf, from NaN/inf inputs) must match exactly.

CI's haswell stage (``-m "not native_only"``) runs the tests of the vector kernels, whose code
differs per target: test_segment_csr (ties and NaN included), test_feature_widths,
test_one_column_* and the empty-segment conventions. The rest (semantics: overflow, dtypes,
out=, bad input, torch; and the portable loops of scatter, gather and the N-d scans) is
marked native_only.
"""
from __future__ import annotations

import contextlib
import math

import hypothesis.extra.numpy as hnp
import numpy as np
import oracle_segreduce as O  # noqa: N812  (tests/ is on sys.path, as for tests/oracle.py)
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mmvref

# the N-d reductions: one portable path of plain loops and generic vector IR (no kernel chosen by the compile target)
pytestmark = pytest.mark.native_only

DTYPES = ["int8", "int16", "int32", "int64", "float16", "float32", "float64"]
RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}
REDUCES = ["sum", "mean", "min", "max", "prod"]
LAYOUTS = ["C", "fortran", "reversed", "strided"]
MAX_CELLS = 3000  # B * E * F per generated example (the oracle loops in Python)


# ----------------------------------------------------------------------------- expected results

def _fits(v, rdt):
    info = np.iinfo(rdt)
    return info.min <= v <= info.max


def _wrap(v, rdt):
    bits = 8 * np.dtype(rdt).itemsize
    return (int(v) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def overflows(vals, rdt):
    """Does any exact integer result leave the result dtype?"""
    rdt = np.dtype(rdt)
    return rdt.kind == "i" and not all(_fits(v, rdt) for v in np.asarray(vals, dtype=object).reshape(-1))


def _float_tol(reduce, vals, length, mag, rdt):
    eps = float(np.finfo(rdt).eps)
    k = length.astype(np.float64)
    if reduce in ("sum", "scan"):
        return k * eps * mag
    if reduce == "mean":  # + one subnormal step: a quotient below the normal range rounds absolutely
        return eps * mag + eps * np.abs(vals) + float(np.finfo(rdt).smallest_subnormal)
    if reduce == "prod":
        return (k + 1) * eps * np.abs(vals) + k * float(np.finfo(rdt).tiny)
    return np.zeros_like(mag)  # min / max


def assert_matches(actual, vals, length, mag, rdt, reduce, overflow="raise"):
    """actual (numpy) against the oracle's exact values, under the rules of the module docstring."""
    rdt = np.dtype(rdt)
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.dtype == rdt, (actual.dtype, rdt)
    assert actual.shape == vals.shape, (actual.shape, vals.shape)
    if rdt.kind == "i":
        want = [_wrap(v, rdt) for v in vals.reshape(-1)]
        got = actual.reshape(-1).tolist()
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, f"{len(bad)} wrong, first at flat {bad[0]}: got {got[bad[0]]}, want {want[bad[0]]}"
        return
    e = vals.astype(np.float64)
    a = actual.astype(np.float64)
    nan_e, nan_a = np.isnan(e), np.isnan(a)
    assert np.array_equal(nan_e, nan_a), f"NaN at {np.argwhere(nan_e != nan_a)[:5].tolist()}: {a[nan_e != nan_a][:5]}"
    tol = _float_tol(reduce, np.where(nan_e, 0, e), length, mag, rdt)
    fin = ~nan_e & np.isfinite(e)
    inf_e = ~nan_e & ~fin
    assert np.array_equal(a[inf_e], e[inf_e]), "infinite results differ"
    err = np.abs(a[fin] - e[fin])
    ok = err <= tol[fin]
    if reduce == "prod":  # exact values at the edge of the range may round to the infinity of their sign
        big = np.abs(e[fin]) * (1 + tol[fin] / np.maximum(np.abs(e[fin]), 1e-300)) >= float(np.finfo(rdt).max)
        ok |= big & np.isinf(a[fin]) & (np.sign(a[fin]) == np.sign(e[fin]))
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise AssertionError(f"{int((~ok).sum())} float results off, first: got {a[fin][i]!r} want "
                             f"{e[fin][i]!r} (err {err[i]:.3g} > tol {tol[fin][i]:.3g})")


def check(fn, x, second, members, **kw):
    """Call ``fn(x, second, **kw)`` and compare it with the oracle's reduction of x over ``members``
    (kw: the op's keywords: axis, reduce, return_arg, overflow, dtype, dim_size)."""
    axis, reduce = kw.get("axis", 0), kw.get("reduce", "sum")
    return_arg, overflow, dtype = kw.get("return_arg", False), kw.get("overflow", "raise"), kw.get("dtype")
    vals, arg, length, mag = O.reduce_segments(x, members, reduce, axis=axis)
    rdt = np.dtype(dtype) if dtype is not None else np.dtype(RESULT[x.dtype.name])
    if overflow == "raise" and reduce in ("sum", "prod") and overflows(vals, rdt):
        with pytest.raises(OverflowError):
            fn(x, second, **kw)
        return
    got = fn(x, second, **kw)
    if return_arg:
        assert isinstance(got, tuple) and len(got) == 2, type(got)
        got, got_arg = got
        assert isinstance(got_arg, np.ndarray) and got_arg.dtype == np.int64, getattr(got_arg, "dtype", None)
        assert got_arg.shape == arg.shape
        bad = np.argwhere(got_arg != arg)
        assert bad.size == 0, (f"arg differs at {bad[:3].tolist()}: got {got_arg[tuple(bad[0])]}, "
                               f"want {arg[tuple(bad[0])]}")
    assert_matches(got, vals, length, mag, rdt, reduce, overflow)


@contextlib.contextmanager
def long_segments_split(data):
    """Draw whether to lower segreduce's long-segment threshold (when it has one), so that small inputs
    take the path that reduces a segment longer than a thread's share in parts and recombines them."""
    try:
        from mmvref._fast.segment import _nd as segreduce
    except ImportError:  # pragma: no cover
        segreduce = None
    old = getattr(segreduce, "_LONG_MIN", None)
    # at least 4 x threads: a split segment is cut into 4 x threads parts, none of them empty
    low = data.draw(st.sampled_from([None, 4, 12]), "long-segment threshold (x threads)")
    if old is None or low is None:
        yield
        return
    import numba

    segreduce._LONG_MIN = low * numba.get_num_threads()
    try:
        yield
    finally:
        segreduce._LONG_MIN = old


# ----------------------------------------------------------------------------- strategies

def _elements(dt, reduce):
    """Element strategy of value dtype ``dt`` suited to ``reduce`` (ties, edges, overflow)."""
    if dt.startswith("int"):
        info = np.iinfo(dt)
        lo, hi = int(info.min), int(info.max)
        edges = st.sampled_from([lo, hi, lo + 1, hi - 1, 0, 1, -1])
        if reduce == "prod":
            return st.one_of(st.integers(-3, 3), st.integers(-3, 3), edges)
        if reduce == "mean" and dt in ("int32", "int64"):  # exact sums stay in the result dtype
            lim = 2**20 if dt == "int32" else 2**50
            return st.one_of(st.integers(-lim, lim), st.integers(-3, 3))
        return st.one_of(st.integers(lo, hi), st.integers(-3, 3), edges)
    width = {"float16": 16, "float32": 32, "float64": 64}[dt]
    if reduce == "prod":
        return st.one_of(st.floats(0.5, 2, width=width), st.floats(-2, -0.5, width=width),
                         st.sampled_from([0.0, -0.0, 1.0, -1.0]))
    return st.one_of(st.floats(-1000, 1000, width=width), st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5]))


def relayout(x, how):
    """The same values in another memory layout."""
    if how == "fortran":
        return np.asfortranarray(x)
    if how == "reversed" and x.ndim and x.shape[0]:
        return x[::-1].copy()[::-1]
    if how == "strided" and x.ndim:
        z = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype)
        z[..., ::2] = x
        return z[..., ::2]
    return x


@st.composite
def layouts(draw):
    """(shape with None at the axis, axis as passed (maybe negative), cells of the other dims)."""
    rank = draw(st.integers(1, 3))
    ax = draw(st.integers(0, rank - 1))
    dims = []
    for d in range(rank):
        if d == ax:
            dims.append(None)
        elif d == rank - 1 and rank == 2 and ax == 0:  # one feature dimension: widths 1..300
            dims.append(draw(st.one_of(st.integers(1, 8), st.sampled_from([1, 7, 16, 33, 64, 300, 0]))))
        else:
            dims.append(draw(st.one_of(st.integers(1, 4), st.just(0))) if draw(st.booleans())
                        else draw(st.integers(1, 3)))
    axis = ax - rank if draw(st.booleans()) else ax
    other = int(np.prod([d for d in dims if d is not None], dtype=np.int64))
    return dims, axis, other


@st.composite
def values(draw, dims, E, dt, reduce):
    shape = tuple(E if d is None else d for d in dims)
    x = draw(hnp.arrays(np.dtype(dt), shape, elements=_elements(dt, reduce)))
    if dt.startswith("float") and x.size and draw(st.booleans()):
        # sparse NaN / +-inf (fill 0: most positions untouched)
        sp = draw(hnp.arrays(np.int8, shape, elements=st.sampled_from([1, 1, 2, 3]), fill=st.just(0)))
        x = x.copy()
        x[sp == 1] = np.nan
        if reduce != "prod":
            x[sp == 2] = np.inf
            x[sp == 3] = -np.inf
    return relayout(x, draw(st.sampled_from(LAYOUTS)))


@st.composite
def lengths(draw, cap):
    """Segment lengths (empty segments frequent), their total at most ``cap``."""
    ls = draw(st.lists(st.one_of(st.just(0), st.integers(1, 4), st.integers(5, 60)), max_size=14))
    out, tot = [], 0
    for n in ls:
        n = min(n, cap - tot)
        out.append(n)
        tot += n
    return out


def _indptr(ls, dt):
    return np.concatenate([[0], np.cumsum(ls, dtype=np.int64)]).astype(dt)


# ----------------------------------------------------------------------------- segment_csr, segment_sum_csr

@pytest.mark.parametrize("reduce", REDUCES)
@given(data=st.data())
def test_segment_csr(reduce, data):
    dt = data.draw(st.sampled_from(DTYPES), "dtype")
    dims, axis, other = data.draw(layouts(), "layout")
    ls = data.draw(lengths(max(1, MAX_CELLS // max(other, 1))), "lengths")
    x = data.draw(values(dims, sum(ls), dt, reduce), "x")
    indptr = _indptr(ls, data.draw(st.sampled_from(["int64", "int32"]), "indptr dtype"))
    ret = reduce in ("min", "max") and data.draw(st.booleans(), "return_arg")
    overflow = data.draw(st.sampled_from(["raise", "wrap"]), "overflow")
    with long_segments_split(data):
        check(mmvref.segment_csr, x, indptr, O.csr_members(indptr), axis=axis, reduce=reduce, return_arg=ret,
              overflow=overflow)


@pytest.mark.native_only  # the same kernels as segment_csr's, checked per target there
@given(data=st.data())
def test_segment_sum_csr_with_axis(data):
    dt = data.draw(st.sampled_from(DTYPES), "dtype")
    dims, axis, other = data.draw(layouts(), "layout")
    ls = data.draw(lengths(max(1, MAX_CELLS // max(other, 1))), "lengths")
    x = data.draw(values(dims, sum(ls), dt, "sum"), "x")
    indptr = _indptr(ls, "int64")
    overflow = data.draw(st.sampled_from(["raise", "wrap"]), "overflow")
    with long_segments_split(data):
        check(mmvref.segment_sum_csr, x, indptr, O.csr_members(indptr), axis=axis, overflow=overflow)


# ----------------------------------------------------------------------------- segment_coo

@pytest.mark.native_only  # the same kernels as segment_csr's, checked per target there
@pytest.mark.parametrize("reduce", REDUCES)
@given(data=st.data())
def test_segment_coo(reduce, data):
    dt = data.draw(st.sampled_from(DTYPES), "dtype")
    dims, axis, other = data.draw(layouts(), "layout")
    ls = data.draw(lengths(max(1, MAX_CELLS // max(other, 1))), "lengths")
    E = sum(ls)
    x = data.draw(values(dims, E, dt, reduce), "x")
    index = np.repeat(np.arange(len(ls)), ls).astype(data.draw(st.sampled_from(["int64", "int32"]), "index dtype"))
    extra = data.draw(st.one_of(st.none(), st.integers(0, 3)), "dim_size extra")
    if extra is None:
        dim_size, N = None, (int(index.max()) + 1 if E else 0)
    else:
        dim_size = N = len(ls) + extra
    ret = reduce in ("min", "max") and data.draw(st.booleans(), "return_arg")
    overflow = data.draw(st.sampled_from(["raise", "wrap"]), "overflow")
    with long_segments_split(data):
        check(mmvref.segment_coo, x, index, O.coo_members(index, N), axis=axis, dim_size=dim_size, reduce=reduce,
              return_arg=ret, overflow=overflow)


# ----------------------------------------------------------------------------- scatter

@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@pytest.mark.parametrize("reduce", REDUCES)
@given(data=st.data())
def test_scatter_unsorted_with_duplicates(reduce, data):
    dt = data.draw(st.sampled_from(DTYPES), "dtype")
    dims, axis, other = data.draw(layouts(), "layout")
    E = data.draw(st.one_of(st.integers(0, 3), st.integers(0, 120)), "E")
    E = min(E, max(1, MAX_CELLS // max(other, 1)))
    x = data.draw(values(dims, E, dt, reduce), "x")
    n_idx = data.draw(st.integers(1, 12), "index range")
    index = data.draw(hnp.arrays(data.draw(st.sampled_from([np.int64, np.int32]), "index dtype"), E,
                                 elements=st.integers(0, n_idx - 1)), "index")
    extra = data.draw(st.one_of(st.none(), st.integers(0, 3)), "dim_size extra")
    if extra is None:
        dim_size, N = None, (int(index.max()) + 1 if E else 0)
    else:
        dim_size = N = n_idx + extra
    ret = reduce in ("min", "max") and data.draw(st.booleans(), "return_arg")
    overflow = data.draw(st.sampled_from(["raise", "wrap"]), "overflow")
    with long_segments_split(data):
        check(mmvref.scatter, x, index, O.scatter_members(index, N), axis=axis, dim_size=dim_size, reduce=reduce,
              return_arg=ret, overflow=overflow)


# ----------------------------------------------------------------------------- segmented_sum (flags), with reduce

@pytest.mark.native_only  # the same kernels as segment_csr's, checked per target there
@pytest.mark.parametrize("reduce", REDUCES)
@given(data=st.data())
def test_segmented_sum_reduce(reduce, data):
    dt = data.draw(st.sampled_from(DTYPES), "dtype")
    dims, axis, other = data.draw(layouts(), "layout")
    E = min(data.draw(st.integers(0, 150), "E"), max(1, MAX_CELLS // max(other, 1)))
    x = data.draw(values(dims, E, dt, reduce), "x")
    fdt = np.dtype(data.draw(st.sampled_from(["bool", "int8", "uint8"]), "flag dtype"))
    flags = data.draw(hnp.arrays(fdt, E, elements=st.sampled_from([0, 0, 0, 1]).map(fdt.type)), "flags")
    ret = reduce in ("min", "max") and data.draw(st.booleans(), "return_arg")
    overflow = data.draw(st.sampled_from(["raise", "wrap"]), "overflow")
    with long_segments_split(data):
        check(mmvref.segmented_sum, x, flags, O.flag_members(flags), axis=axis, reduce=reduce, return_arg=ret,
              overflow=overflow)


# ----------------------------------------------------------------------------- gather_csr

@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@given(data=st.data())
def test_gather_csr(data):
    dt = data.draw(st.sampled_from(DTYPES), "dtype")
    dims, axis, other = data.draw(layouts(), "layout")
    ls = data.draw(lengths(max(1, MAX_CELLS // max(other, 1))), "lengths")
    src = data.draw(values(dims, len(ls), dt, "min"), "src")
    indptr = _indptr(ls, data.draw(st.sampled_from(["int64", "int32"]), "indptr dtype"))
    got = mmvref.gather_csr(src, indptr, axis=axis)
    want = O.gather_csr(src, indptr, axis=axis)
    assert got.dtype == src.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    assert np.array_equal(got, want, equal_nan=src.dtype.kind == "f")


# ----------------------------------------------------------------------------- scans with axis

def _check_scan(call, x, vals, length, mag, overflow):
    rdt = np.dtype(RESULT[x.dtype.name])
    if overflow == "raise" and overflows(vals, rdt):
        with pytest.raises(OverflowError):
            call()
        return
    assert_matches(call(), vals, length, mag, rdt, "scan", overflow)


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@given(data=st.data())
def test_segmented_scan_axis(data):
    dt = data.draw(st.sampled_from(DTYPES), "dtype")
    dims, axis, other = data.draw(layouts(), "layout")
    E = min(data.draw(st.integers(0, 150), "E"), max(1, MAX_CELLS // max(other, 1)))
    x = data.draw(values(dims, E, dt, "sum"), "x")
    flags = data.draw(hnp.arrays(np.uint8, E, elements=st.sampled_from([0, 0, 0, 1])), "flags")
    exclusive = data.draw(st.booleans(), "exclusive")
    overflow = data.draw(st.sampled_from(["raise", "wrap"]), "overflow")
    vals, length, mag = O.segmented_scan(x, flags, axis=axis, exclusive=exclusive)
    _check_scan(lambda: mmvref.segmented_scan(x, flags, axis=axis, exclusive=exclusive, overflow=overflow),
                x, vals, length, mag, overflow)


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@given(data=st.data())
def test_scan_axis(data):
    dt = data.draw(st.sampled_from(DTYPES), "dtype")
    dims, axis, other = data.draw(layouts(), "layout")
    E = min(data.draw(st.integers(0, 150), "E"), max(1, MAX_CELLS // max(other, 1)))
    x = data.draw(values(dims, E, dt, "sum"), "x")
    axis = data.draw(st.sampled_from([None, axis]), "axis")
    exclusive = data.draw(st.booleans(), "exclusive")
    overflow = data.draw(st.sampled_from(["raise", "wrap"]), "overflow")
    vals, length, mag = O.scan(x, axis=axis, exclusive=exclusive)
    _check_scan(lambda: mmvref.scan(x, axis=axis, exclusive=exclusive, overflow=overflow), x, vals, length, mag,
                overflow)


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@pytest.mark.parametrize("op", ["scan", "segmented_scan"])
def test_exclusive_int64_scan_is_decided_on_its_outputs(op):
    """An exclusive scan's outputs are the prefixes before each position: here 0, MIN, MIN, all in int64;
    the total MIN + (-1), which leaves int64, is not an output and must not raise."""
    x = np.array([[-(2**63), 0], [0, 0], [-1, 0]], np.int64)
    if op == "scan":
        got = mmvref.scan(x, axis=0, exclusive=True)
    else:
        got = mmvref.segmented_scan(x, np.array([1, 0, 0], np.uint8), exclusive=True)
    assert got.tolist() == [[0, 0], [-(2**63), 0], [-(2**63), 0]]


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_scan_axis_none_is_cumsum_of_the_flattening():
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    got = mmvref.scan(x)
    assert got.shape == (24,) and got.dtype == np.int32
    assert got.tolist() == np.cumsum(x).tolist()
    for ax in (0, 1, 2, -1):
        assert mmvref.scan(x, axis=ax).tolist() == np.cumsum(x, axis=ax).tolist()


# ----------------------------------------------------------------------------- every reduce x dtype x axis, fixed

AXES = [(1, 0), (3, 0), (3, 1), (3, 2), (3, -1), (2, -2)]  # (rank, axis)


def _fixed_values(shape, dt, reduce, seed):
    rng = np.random.default_rng(seed)
    if dt.startswith("int"):
        hi = 3 if reduce == "prod" else 100
        return rng.integers(-hi, hi + 1, shape).astype(dt)
    if reduce == "prod":
        x = rng.uniform(0.5, 2, shape) * rng.choice([-1, 1], shape)
    else:
        x = rng.uniform(-100, 100, shape)
    x = x.astype(dt)
    if x.size > 4:
        x.reshape(-1)[[1, x.size // 2]] = np.nan
    return x


@pytest.mark.native_only  # the same kernels as segment_csr's, checked per target there
@pytest.mark.parametrize("rank,axis", AXES, ids=[f"r{r}a{a}" for r, a in AXES])
@pytest.mark.parametrize("dt", DTYPES)
def test_every_reduction_every_dtype_every_axis(dt, rank, axis):
    """The full product (the property tests draw from it): segment_csr, segment_coo and scatter,
    with empty segments, NaNs in the float cases and return_arg for min/max."""
    E, ls = 13, [3, 0, 5, 1, 0, 4, 0]
    shape = [2, 3, 5][:rank]
    shape[axis] = E
    indptr = _indptr(ls, "int64")
    index = np.repeat(np.arange(len(ls)), ls)
    perm = np.random.default_rng(1).permutation(E)
    for reduce in REDUCES:
        x = _fixed_values(tuple(shape), dt, reduce, 3)
        kw = dict(axis=axis, reduce=reduce, return_arg=reduce in ("min", "max"))
        check(mmvref.segment_csr, x, indptr, O.csr_members(indptr), **kw)
        check(mmvref.segment_coo, x, index, O.coo_members(index, len(ls) + 1), dim_size=len(ls) + 1, **kw)
        check(mmvref.scatter, x, index[perm], O.scatter_members(index[perm], int(index.max()) + 1), **kw)


# ----------------------------------------------------------------------------- fixed feature widths, long segments

def _power_law_lengths(n_seg, total, seed):
    rng = np.random.default_rng(seed)
    w = rng.pareto(1.2, n_seg) * (rng.random(n_seg) < 0.8)
    ls = np.floor(w / max(w.sum(), 1e-300) * total).astype(np.int64)
    ls[0] += total - ls.sum()
    return ls


@pytest.mark.native_only  # the per-target vector blocks at F = 64 / 256 are in test_feature_widths
@pytest.mark.parametrize("F", [64, 96, 256])
@pytest.mark.parametrize("dt", ["int64", "float32"])
def test_long_segments_of_wide_rows(dt, F):
    """Segments of hundreds of rows at F >= 64 (several 32-feature passes over each segment): the
    oracle's results for every reduction, with and without args, rows read in order and through
    scatter's permutation."""
    ls = [0, 1, 700, 65, 3, 1500, 0, 64, 129]
    E = sum(ls)
    indptr = _indptr(ls, "int64")
    index = np.repeat(np.arange(len(ls)), ls)
    perm = np.random.default_rng(F).permutation(E)
    for reduce in REDUCES:
        x = _fixed_values((E, F), dt, reduce, F)
        check(mmvref.segment_csr, x, indptr, O.csr_members(indptr), reduce=reduce)
        if reduce in ("min", "max"):
            check(mmvref.segment_csr, x, indptr, O.csr_members(indptr), reduce=reduce, return_arg=True)
        check(mmvref.scatter, x[perm], index[perm], O.coo_members(index[perm], len(ls)), reduce=reduce,
              dim_size=len(ls))


@pytest.mark.parametrize("F", [1, 7, 16, 64, 256])
@pytest.mark.parametrize("dt", ["int32", "float32"])
def test_feature_widths(dt, F):
    """(E, F) inputs, E * F about 20k, power-law segment lengths with empty ones: every reduction."""
    E = max(20, 20_000 // F)
    ls = _power_law_lengths(max(4, E // 20), E, F)
    indptr = _indptr(ls, "int64")
    index = np.repeat(np.arange(len(ls)), ls)
    perm = np.random.default_rng(F).permutation(E)
    for reduce in REDUCES:
        x = _fixed_values((E, F), dt, reduce, F)
        kw = dict(reduce=reduce, return_arg=reduce in ("min", "max"))
        check(mmvref.segment_csr, x, indptr, O.csr_members(indptr), **kw)
        if reduce in ("sum", "max"):
            check(mmvref.segment_coo, x, index, O.coo_members(index, len(ls)), dim_size=len(ls), **kw)
            check(mmvref.scatter, x, index[perm], O.scatter_members(index[perm], len(ls)), dim_size=len(ls), **kw)


@pytest.mark.native_only  # the same kernels as segment_csr's, checked per target there
@pytest.mark.parametrize("dt", ["int8", "int32", "int64", "float16", "float64"])
def test_segments_longer_than_a_threads_share(dt):
    """One segment of 60,000 positions beside short and empty ones: it is split across tasks and
    the parts recombined (integer mean: one floor division of the whole sum; min/max: the lowest
    position of ties across parts; NaN: the first one across parts)."""
    ls = [60_000, 0, 3, 20_000, 0, 1]
    E = sum(ls)
    indptr = _indptr(ls, "int64")
    for reduce in REDUCES:
        rng = np.random.default_rng(5)
        if dt.startswith("int"):
            if reduce == "prod":
                x = rng.choice(np.array([1, 1, 1, 1, -1], dt), (E, 2))
                x[50_000, 0] = 2
            else:
                x = rng.integers(-2, 3, (E, 2)).astype(dt)
        else:
            x = (rng.uniform(-1, 1, (E, 2)) if reduce != "prod" else
                 rng.choice([1.0, -1.0, 0.999, 1.001], (E, 2))).astype(dt)
            x[45_000, 1] = x[59_000, 1] = np.nan  # the first NaN sits in a later part
        if reduce != "prod":
            x[40_000, 0] = x[41_000, 0] = 7  # a tie for max across parts
            x[30_000, 0] = x[55_000, 0] = -7  # and one for min
        check(mmvref.segment_csr, x, indptr, O.csr_members(indptr), reduce=reduce,
              return_arg=reduce in ("min", "max"))
    # integer mean of a long segment: floor of the whole (negative) sum, not of its parts
    x = np.full(60_001, -1, dtype=np.int32)
    x[0] = 7  # sum -59,993: floor -> -1 (truncation would give 0)
    assert mmvref.segment_csr(x, [0, 60_001], reduce="mean").tolist() == [-1]


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_scatter_long_duplicate_runs():
    """One scatter target receiving about 50,000 unsorted positions among other targets."""
    rng = np.random.default_rng(9)
    index = np.where(rng.random(80_000) < 0.6, 3, rng.integers(0, 40, 80_000))
    x = rng.integers(-50, 51, (80_000, 3)).astype(np.int32)
    for reduce in ("sum", "max", "mean"):
        check(mmvref.scatter, x, index, O.scatter_members(index, 40), reduce=reduce, return_arg=reduce == "max")


@pytest.mark.native_only  # one portable kernel (see the module docstring)
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("F", [1, 5])
def test_scatter_private_copies_combine_in_position_order(dt, F):
    """Unsorted float scatter large enough for per-thread private copies (E >= 4096 x threads):
    every reduction, ties and NaNs placed in different threads' pieces (the first NaN and the
    lowest tied position win across pieces), empty ids, and out= (written in place)."""
    import numba

    E = 8192 * max(2, numba.get_num_threads())
    n = 1000
    rng = np.random.default_rng(F)
    index = rng.integers(0, n - 3, E)          # ids n-3..n-1 stay empty
    x = rng.uniform(-1, 1, (E, F)).astype(dt)
    x = x.reshape(-1) if F == 1 else x
    xv = x.reshape(E, -1)
    late, early = E - 7, 11                    # the last and the first thread's pieces
    index[late] = index[early] = 5
    xv[late, 0] = xv[early, 0] = 9.0           # a max tie: the early position's arg wins
    index[late - 1] = index[early + 1] = 6
    xv[late - 1, 0] = xv[early + 1, 0] = -9.0  # a min tie
    index[E - 3] = index[E // 2 + 5] = 7
    xv[E - 3, -1] = xv[E // 2 + 5, -1] = np.nan  # NaNs in later pieces: the first one is kept
    for reduce in REDUCES:
        kw = dict(reduce=reduce, return_arg=reduce in ("min", "max"), dim_size=n)
        check(mmvref.scatter, x, index, O.scatter_members(index, n), **kw)
    buf = np.full((n,) + x.shape[1:], 3.0, dt)
    got = mmvref.scatter(x, index, dim_size=n, reduce="max", out=buf)
    assert got is buf
    ref = mmvref.scatter(x, index, dim_size=n, reduce="max")
    np.testing.assert_array_equal(buf, ref)
    assert (buf[n - 3:] == 0).all()


@pytest.mark.native_only  # one portable kernel (see the module docstring)
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("path", ["private", "direct"])
def test_scatter_min_max_keep_the_first_of_tied_zeros_and_nans(dt, path):
    """Unsorted float scatter min/max, with and without positions, on its private-copy path (ties
    across threads' pieces) and its owned-ids path: zeros of either sign, worse values and a few
    NaNs at random, rows of 1 and 31 features (every vector block width); a zero result
    has the first tied zero's sign, NaN where a NaN came (positions: the first NaN's), as the
    plain loop gives."""
    import numba

    from mmvref._fast.segment import _nd

    T = numba.get_num_threads()
    E = 4096 * max(2, T) + 37
    rng = np.random.default_rng(7)
    index = rng.integers(0, 40, E)     # 40 targets: many ties per target and piece
    ran = []
    # 31 features = vector blocks of 16, 8, 4, 2 and 1; one feature: the scalar loop
    for F in ((1, 31) if path == "private" else (31,)):
        # the owned-ids path: more ids than the threads' private copies may hold
        n = 40 if path == "private" else _nd._PRIVATE_BYTES // (T * F * np.dtype(dt).itemsize) + 1
        for reduce in ("min", "max"):
            # zeros of both signs are the result in most (id, feature) cells, NaN in about one in six
            worse = 1.0 if reduce == "min" else -1.0
            x = rng.choice([0.0, -0.0, worse, worse * np.inf, np.nan], (E, F), p=[.45, .45, .05, .049, .001])
            x = x.astype(dt)
            want_v = np.zeros((n, F))
            want_a = np.full((n, F), E, np.int64)
            nan_any = np.zeros((n, F), bool)
            for v in range(40):
                m = np.nonzero(index == v)[0].tolist()
                for k in range(F):
                    want_v[v, k], want_a[v, k] = O._reduce_one([float(x[e, k]) for e in m], m, reduce, False, E)
                    nan_any[v, k] = any(math.isnan(x[e, k]) for e in m)
            with _spy(_nd.R, f"scatter_{path}_float", ran):
                plain = mmvref.scatter(x, index, dim_size=n, reduce=reduce)
                got, arg = mmvref.scatter(x, index, dim_size=n, reduce=reduce, return_arg=True)
            for g in (plain, got):
                g = g.astype(np.float64)
                assert (np.isnan(g) == nan_any).all(), (F, reduce)
                ok = ~nan_any
                assert (g[ok] == want_v[ok]).all() and (np.signbit(g[ok]) == np.signbit(want_v[ok])).all(), (F, reduce)
            assert (arg == want_a).all(), (F, reduce)
    assert len(ran) == (8 if path == "private" else 4), (path, len(ran))  # every call took that path


@contextlib.contextmanager
def _spy(module, name, calls):
    """Record each use of ``module.name`` (a kernel getter) in ``calls`` while the block runs."""
    real = getattr(module, name)

    def getter(*a, **k):
        calls.append(a)
        return real(*a, **k)

    setattr(module, name, getter)
    try:
        yield
    finally:
        setattr(module, name, real)


# ----------------------------------------------------------------------------- empty input, N = 0, conventions

@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@pytest.mark.parametrize("dt", ["int8", "int64", "float16", "float32"])
def test_empty_input_and_no_segments(dt):
    x = np.zeros((0, 3), dtype=dt)
    rdt = RESULT[dt]
    for reduce in REDUCES:
        r = mmvref.segment_csr(x, np.array([0, 0, 0]), reduce=reduce)   # E = 0, N = 2 (both empty)
        assert r.shape == (2, 3) and r.dtype == rdt
        assert r.tolist() == [[1 if reduce == "prod" else 0] * 3] * 2
        r = mmvref.segment_csr(x, np.array([0]), reduce=reduce)         # E = 0, N = 0
        assert r.shape == (0, 3) and r.dtype == rdt
        r = mmvref.segment_coo(x, np.zeros(0, np.int64), reduce=reduce)  # dim_size defaults to 0
        assert r.shape == (0, 3) and r.dtype == rdt
        r = mmvref.scatter(x, np.zeros(0, np.int64), reduce=reduce)
        assert r.shape == (0, 3) and r.dtype == rdt
        r = mmvref.scatter(x, np.zeros(0, np.int64), dim_size=4, reduce=reduce)
        assert r.shape == (4, 3) and r.tolist() == [[1 if reduce == "prod" else 0] * 3] * 4
        r = mmvref.segmented_sum(x, np.zeros(0, np.uint8), reduce=reduce)
        assert r.shape == (0, 3) and r.dtype == rdt
    for ret in ("min", "max"):
        v, a = mmvref.segment_csr(x, np.array([0, 0]), reduce=ret, return_arg=True)
        assert v.tolist() == [[0, 0, 0]] and a.dtype == np.int64 and a.tolist() == [[0, 0, 0]]  # arg = E = 0
    assert mmvref.segmented_scan(x, np.zeros(0, np.uint8)).shape == (0, 3)
    assert mmvref.scan(x, axis=0).shape == (0, 3)
    assert mmvref.gather_csr(np.zeros((0, 3), dt), np.array([0])).shape == (0, 3)


def test_empty_segment_conventions():
    x = np.array([[5.0], [-1.0]], np.float32)
    ip = np.array([0, 0, 2, 2])
    assert mmvref.segment_csr(x, ip, reduce="sum").tolist() == [[0], [4], [0]]
    assert mmvref.segment_csr(x, ip, reduce="mean").tolist() == [[0], [2], [0]]
    assert mmvref.segment_csr(x, ip, reduce="prod").tolist() == [[1], [-5], [1]]
    v, a = mmvref.segment_csr(x, ip, reduce="min", return_arg=True)
    assert v.tolist() == [[0], [-1], [0]] and a.tolist() == [[2], [1], [2]]
    v, a = mmvref.segment_csr(x, ip, reduce="max", return_arg=True)
    assert v.tolist() == [[0], [5], [0]] and a.tolist() == [[2], [0], [2]]


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_ties_nan_and_integer_mean():
    x = np.array([3, 1, 1, 3, 1], np.int8)
    v, a = mmvref.segment_csr(x, [0, 5], reduce="min", return_arg=True)
    assert v.dtype == np.int32 and v.tolist() == [1] and a.tolist() == [1]
    v, a = mmvref.segment_csr(x, [0, 5], reduce="max", return_arg=True)
    assert v.tolist() == [3] and a.tolist() == [0]
    f = np.array([1.0, np.nan, -5.0, np.nan, 9.0], np.float16)
    for r in ("min", "max"):
        v, a = mmvref.segment_csr(f, [0, 5], reduce=r, return_arg=True)
        assert v.dtype == np.float32 and np.isnan(v[0]) and a.tolist() == [1]
    assert mmvref.segment_csr(np.array([-7, 0, 0], np.int32), [0, 3], reduce="mean").tolist() == [-3]  # floor
    assert mmvref.segment_csr(np.array([7, 0], np.int64), [0, 2], reduce="mean").tolist() == [3]
    # scatter's arg is the original position in src, ties -> the lowest original position
    v, a = mmvref.scatter(np.array([2, 9, 9, 2, 9], np.int32), np.array([1, 0, 1, 1, 0]), reduce="max",
                          return_arg=True)
    assert v.tolist() == [9, 9] and a.tolist() == [1, 2]


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("batches", [0, 1, 3])
def test_one_column_vector_steps(reduce, dt, batches):
    """One float column (the kernel that reads ROW_W positions a step, masked past a segment's end):
    segments of every length around the step width, the last segments of x (scalar steps), NaN,
    +-inf and -0.0, batched along a leading axis too."""
    rng = np.random.default_rng(7)
    ls = [0, 1, 7, 8, 9, 15, 16, 17, 0, 3, 40, 2, 0, 1, 1, 5, 6, 0]
    E = sum(ls)
    x = rng.standard_normal((max(batches, 1), E)).astype(dt)
    if reduce != "prod":
        x[0, [3, 20, 60]] = [np.nan, np.inf, -np.inf]
    x[-1, [0, 1, E - 1]] = [-0.0, -0.0, np.nan]
    ip = _indptr(ls, "int64")
    if batches == 0:
        check(mmvref.segment_csr, x[0], ip, O.csr_members(ip), reduce=reduce)
    else:
        check(mmvref.segment_csr, x, ip, O.csr_members(ip), axis=1, reduce=reduce)
    if reduce == "sum":  # a lone -0.0 keeps its sign (the masked lanes add -0.0)
        assert np.signbit(mmvref.segment_csr(x[-1], _indptr([1, E - 1], "int64"))[0])


@pytest.mark.parametrize("reduce", ["min", "max"])
@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
def test_min_max_keep_the_first_of_tied_zeros_with_or_without_positions(reduce, dt):
    """+0.0 and -0.0 compare equal: a min/max whose result is zero gives the first zero's bits (the
    in-order rule of the plain-loop oracle), the same bits with return_arg and without, whichever
    kernel runs (the one-column vector steps read many positions at once), and the same from
    torch_scatter's segment_csr as from its segment_min/max_csr."""
    torch = pytest.importorskip("torch")
    from mmvref import torch_scatter as ts

    named = ts.segment_max_csr if reduce == "max" else ts.segment_min_csr
    rng = np.random.default_rng(3)
    ls = [1, 2, 3, 8, 9, 17, 40, 100, 0, 5]
    E = sum(ls)
    ip = _indptr(ls, "int64")
    members = O.csr_members(ip)
    for trial in range(40):
        x = rng.choice(np.array([0.0, -0.0, -1.0, 1.0, -np.inf, np.inf]), E, p=[.35, .35, .1, .1, .05, .05])
        x = x.astype(dt)
        for cols in (x, np.stack([x, x[::-1]], axis=1)):  # one column, and two
            plain = mmvref.segment_csr(cols, ip, reduce=reduce)
            with_arg = mmvref.segment_csr(cols, ip, reduce=reduce, return_arg=True)[0]
            for j in range(cols.shape[1] if cols.ndim == 2 else 1):
                col = cols[:, j] if cols.ndim == 2 else cols
                want = [O._reduce_one([float(col[e]) for e in m], m, reduce, False, E)[0] for m in members]
                for got in (plain, with_arg):
                    g = got[:, j] if got.ndim == 2 else got
                    assert [math.copysign(1.0, v) for v in g.astype(np.float64)] == \
                        [math.copysign(1.0, v) for v in want], (trial, j, g, want)
                    assert g.astype(np.float64).tolist() == want
            t, tp = torch.from_numpy(np.ascontiguousarray(cols)), torch.from_numpy(ip)
            assert ts.segment_csr(t, tp, reduce=reduce).numpy().tobytes() == named(t, tp)[0].numpy().tobytes()


@pytest.mark.parametrize("shape,axis", [((40,), 0), ((40, 1), 0), ((3, 40), 1)])
def test_one_column_kernel_checks_the_offsets(shape, axis):
    """The one-column float kernel checks the offsets in its own pass: offsets out of order or
    beyond the axis are refused (naming indptr), never read."""
    x = np.ones(shape, np.float32)
    for ip in ([0, 30, 5, 40], [0, 10**9, 40], [0, -8, 40], [0, 20, 20, 19, 40]):
        for reduce in ("sum", "max"):
            with pytest.raises(ValueError, match="indptr"):
                mmvref.segment_csr(x, np.array(ip), axis=axis, reduce=reduce)
    with pytest.raises(ValueError, match="indptr"):
        mmvref.segment_sum_csr(x, np.array([0, 30, 5, 40]), axis=axis)


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_reduce_aliases():
    x = np.array([1, 2, 3, 4], np.int32)
    assert mmvref.segment_csr(x, [0, 2, 4], reduce="add").tolist() == [3, 7]
    assert mmvref.segment_csr(x, [0, 2, 4], reduce="mul").tolist() == [2, 12]


# ----------------------------------------------------------------------------- overflow, dtype=

I32 = np.iinfo(np.int32)


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@pytest.mark.parametrize("op", ["segment_csr", "segment_coo", "scatter", "segmented_sum", "segment_sum_csr"])
def test_int32_sum_overflow_raises_or_wraps(op):
    """Segments [MAX, 1], [5], [MIN, -1]: int32 sums that leave int32."""
    x = np.array([I32.max, 1, 5, I32.min, -1], np.int32)

    def call(**kw):
        if op == "segment_csr":
            return mmvref.segment_csr(x, [0, 2, 3, 5], **kw)
        if op == "segment_sum_csr":
            return mmvref.segment_sum_csr(x, [0, 2, 3, 5], **kw)
        if op == "segment_coo":
            return mmvref.segment_coo(x, np.array([0, 0, 1, 2, 2]), **kw)
        if op == "scatter":  # the same segments, unsorted
            return mmvref.scatter(x[[0, 3, 2, 1, 4]], np.array([0, 2, 1, 0, 2]), **kw)
        return mmvref.segmented_sum(x, np.array([1, 0, 1, 1, 0], np.uint8), **kw)

    with pytest.raises(OverflowError):
        call()
    got = call(overflow="wrap")
    assert got.dtype == np.int32 and got.tolist() == [I32.min, 5, I32.max]


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_int_prod_and_int64_overflow():
    x = np.array([2**20, 2**12], np.int32)
    with pytest.raises(OverflowError):
        mmvref.segment_csr(x, [0, 2], reduce="prod")
    assert mmvref.segment_csr(x, [0, 2], reduce="prod", overflow="wrap").tolist() == [_wrap(2**32, np.int32)]
    y = np.array([2**62, 2**62], np.int64)
    with pytest.raises(OverflowError):
        mmvref.segment_csr(y, [0, 2])
    assert mmvref.segment_csr(y, [0, 2], overflow="wrap").tolist() == [_wrap(2**63, np.int64)]
    with pytest.raises(OverflowError):
        mmvref.scatter(y, np.array([0, 0]), reduce="prod")


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@pytest.mark.parametrize("op", ["segment_csr", "segment_coo", "scatter", "segmented_sum"])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_int64_overflow_is_decided_on_the_exact_result(op, reduce):
    """[2**62, 2**62, -2**62]: a partial sum leaves int64, the exact sum 2**62 (and mean) does not."""
    x = np.array([2**62, 2**62, -(2**62)], np.int64).reshape(3, 1)
    zero = np.zeros(3, np.int64)
    call = {"segment_csr": lambda: mmvref.segment_csr(x, [0, 3], reduce=reduce),
            "segment_coo": lambda: mmvref.segment_coo(x, zero, reduce=reduce),
            "scatter": lambda: mmvref.scatter(x, zero, reduce=reduce),
            "segmented_sum": lambda: mmvref.segmented_sum(x, np.array([1, 0, 0], np.uint8), reduce=reduce)}[op]
    assert call().tolist() == [[2**62 if reduce == "sum" else 2**62 // 3]]


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
@given(data=st.data())
def test_integer_mean_is_never_silently_wrong(data):
    """Where the exact sum leaves the result dtype, mean still gives floor(exact / count): a mean of
    integers lies between them, so it always fits (int64 sums that wrap are redone exactly)."""
    dt = data.draw(st.sampled_from(["int32", "int64"]))
    info = np.iinfo(dt)
    x = data.draw(hnp.arrays(np.dtype(dt), data.draw(st.integers(1, 12)),
                             elements=st.sampled_from([int(info.max), int(info.min), int(info.max) - 1, 1, -1])))
    want = sum(int(v) for v in x) // x.size
    op = data.draw(st.sampled_from(["segment_csr", "segment_coo", "scatter"]))
    cols = data.draw(st.sampled_from([0, 1, 3]))
    xx = x if cols == 0 else np.repeat(x[:, None], cols, axis=1)
    second = [0, x.size] if op == "segment_csr" else np.zeros(x.size, np.int64)
    got = getattr(mmvref, op)(xx, second, reduce="mean")
    assert got.tolist() == ([want] if cols == 0 else [[want] * cols])


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_dtype_argument_narrows_and_widens():
    x = np.array([100, 27, 1], np.int32)
    r = mmvref.segment_csr(x, [0, 2, 3, 3], dtype=np.int8)
    assert r.dtype == np.int8 and r.tolist() == [127, 1, 0]
    with pytest.raises(OverflowError):
        mmvref.segment_csr(x, [0, 3], dtype=np.int8)
    assert mmvref.segment_csr(x, [0, 3], dtype=np.int8, overflow="wrap").tolist() == [-128]
    r = mmvref.segment_csr(np.array([1.5, 2.25], np.float32), [0, 2], dtype=np.float64)
    assert r.dtype == np.float64 and r.tolist() == [3.75]
    r = mmvref.scatter(x, np.array([1, 1, 0]), dtype=np.int64)
    assert r.dtype == np.int64 and r.tolist() == [1, 127]


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_float16_result_dtype_rounds_from_float32():
    """dtype=float16: the float32 result rounded (beyond float16's range: inf), without a numpy warning
    (RuntimeWarnings raised inside mmvref are errors in this suite, pyproject.toml)."""
    x = np.array([60000, 60000, 1.5, 2.25], np.float16)
    r = mmvref.segment_csr(x, [0, 2, 4], dtype=np.float16)
    assert r.dtype == np.float16 and r[0] == np.inf and r[1] == 3.75


# ----------------------------------------------------------------------------- out=

@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_out_argument():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = np.empty((2, 3), np.float32)
    r = mmvref.segment_csr(x, [0, 1, 4], out=out)
    assert r is out and out.tolist() == [[0, 1, 2], [18, 21, 24]]
    out = np.empty((3, 3), np.float32)
    assert mmvref.scatter(x, np.array([2, 0, 2, 0]), out=out) is out
    assert out.tolist() == [[12, 14, 16], [0, 0, 0], [6, 8, 10]]
    g = np.empty((4, 3), np.float32)
    assert mmvref.gather_csr(x[:2], [0, 3, 4], out=g) is g and g.tolist() == [[0, 1, 2]] * 3 + [[3, 4, 5]]
    with pytest.raises(ValueError, match="out"):
        mmvref.segment_csr(x, [0, 1, 4], out=np.empty((3, 3), np.float32))
    with pytest.raises((TypeError, ValueError), match="out"):
        mmvref.segment_csr(x, [0, 1, 4], out=np.empty((2, 3), np.float64))
    with pytest.raises((TypeError, ValueError), match="out"):
        mmvref.scan(x, axis=0, out=np.empty((4, 3), np.int32))


# ----------------------------------------------------------------------------- bad input

@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_bad_input_names_the_argument():
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(ValueError, match="index"):
        mmvref.segment_coo(x, np.array([0, 2, 1, 1, 3, 3]))           # not sorted
    with pytest.raises(ValueError, match="index"):
        mmvref.segment_coo(x, np.array([0, 0, 1, 1, 3, 3]), dim_size=3)  # out of range
    with pytest.raises(ValueError, match="index"):
        mmvref.scatter(x, np.array([0, 2, -1, 1, 3, 3]))              # negative: refused, not wrapped
    with pytest.raises(ValueError, match="index"):
        mmvref.scatter(x, np.array([0, 2, 1, 1, 3, 3]), dim_size=3)   # out of range
    with pytest.raises(ValueError, match="index"):
        mmvref.scatter(x, np.array([0, 2, 1]))                        # wrong length
    for ip in ([1, 6], [0, 4, 3, 6], [0, 5], [0, 7], [0, 3, 6, 7]):
        with pytest.raises(ValueError, match="indptr"):
            mmvref.segment_csr(x, np.array(ip))
    with pytest.raises(ValueError, match="indptr"):
        mmvref.gather_csr(x, np.array([0, 1, 2]))  # len(indptr) - 1 != src.shape[axis]
    for bad_axis in (1, -2):
        with pytest.raises(ValueError, match="axis"):
            mmvref.segment_csr(x, [0, 6], axis=bad_axis)
        with pytest.raises(ValueError, match="axis"):
            mmvref.scan(x, axis=bad_axis)
    with pytest.raises(ValueError, match="reduce"):
        mmvref.segment_csr(x, [0, 6], reduce="median")
    with pytest.raises(ValueError, match="reduce"):
        mmvref.scatter(x, np.zeros(6, np.int64), reduce="std")
    for r in ("sum", "mean", "prod"):
        with pytest.raises(ValueError, match="return_arg"):
            mmvref.segment_csr(x, [0, 6], reduce=r, return_arg=True)
    with pytest.raises(ValueError, match="flags"):
        mmvref.segmented_sum(x, np.array([1, 0, 2, 0, 0, 0], np.uint8))


# ----------------------------------------------------------------------------- torch in, torch out

@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((9, 4)).astype(np.float32)
    ip = np.array([0, 2, 2, 9])
    idx = np.array([3, 0, 3, 1, 1, 0, 3, 3, 0])
    cidx = np.repeat(np.arange(3), np.diff(ip))
    fl = np.array([1, 0, 1, 0, 0, 1, 0, 0, 0], np.uint8)
    xt, ipt, idxt, cidxt, flt = (torch.from_numpy(a) for a in (x, ip, idx, cidx, fl))
    pairs = [
        (lambda a, p: mmvref.segment_csr(a, p, reduce="mean"), (xt, ipt), (x, ip)),
        (lambda a, p: mmvref.segment_csr(a, p, reduce="max", return_arg=True), (xt, ipt), (x, ip)),
        (lambda a, i: mmvref.segment_coo(a, i, reduce="sum"), (xt, cidxt), (x, cidx)),
        (lambda a, i: mmvref.scatter(a, i, reduce="min", return_arg=True), (xt, idxt), (x, idx)),
        (lambda a, p: mmvref.gather_csr(a[:3], p), (xt, ipt), (x, ip)),
        (lambda a, p: mmvref.segment_sum_csr(a, p), (xt, ipt), (x, ip)),
        (lambda a, f: mmvref.segmented_sum(a, f, reduce="prod"), (xt, flt), (x, fl)),
        (lambda a, f: mmvref.segmented_scan(a, f, exclusive=True), (xt, flt), (x, fl)),
        (lambda a, f: mmvref.scan(a, axis=1), (xt, flt), (x, fl)),
    ]
    for fn, targs, nargs in pairs:
        got, want = fn(*targs), fn(*nargs)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            assert isinstance(g, torch.Tensor), type(g)
            assert np.array_equal(g.numpy(), w, equal_nan=True)
    xi = torch.tensor([[1, 2], [3, 4], [5, 6]], dtype=torch.int8)
    r = mmvref.segment_csr(xi, torch.tensor([0, 1, 3]), reduce="sum")
    assert r.dtype == torch.int32 and r.tolist() == [[1, 2], [8, 10]]


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_oracle_sanity():
    """The oracle itself on hand-checked values (it must be right for the rest to mean anything)."""
    x = np.array([[1, 5], [3, -2], [3, 7]], np.int8)
    v, a, ln, _ = O.reduce_segments(x, O.csr_members([0, 0, 3]), "max")
    assert v.tolist() == [[0, 0], [3, 7]] and a.tolist() == [[3, 3], [1, 2]] and ln.tolist() == [[0, 0], [3, 3]]
    v, _, _, _ = O.reduce_segments(x, O.csr_members([0, 3]), "mean")
    assert v.tolist() == [[2, 3]]
    v, _, _, _ = O.reduce_segments(np.array([-3, -4], np.int32), [[0, 1]], "mean")
    assert v.tolist() == [-4]
    v, a, _, _ = O.reduce_segments(np.array([1.0, np.nan, 0.0, np.nan]), [[0, 1, 2, 3]], "min")
    assert math.isnan(v[0]) and a.tolist() == [1]
    assert O.flag_members([0, 0, 1, 1, 0]) == [[0, 1], [2], [3, 4]]
    assert O.coo_members([2, 0, 2], 4) == [[1], [], [0, 2], []]
    s, ln, _ = O.segmented_scan(np.array([1, 2, 3, 4]), [1, 0, 1, 0], exclusive=True)
    assert s.tolist() == [0, 1, 0, 3] and ln.tolist() == [0, 1, 0, 1]
    s, _, _ = O.scan(np.arange(6).reshape(2, 3), axis=1)
    assert s.tolist() == np.cumsum(np.arange(6).reshape(2, 3), axis=1).tolist()
    assert O.gather_csr(np.array([[1, 2], [3, 4]]), [0, 2, 3], axis=0).tolist() == [[1, 2], [1, 2], [3, 4]]


@pytest.mark.native_only  # semantics, not a per-target kernel (see the module docstring)
def test_dim_is_an_alias_of_axis():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    ip = np.array([0, 1, 3])
    for fn, args in ((mmvref.segment_csr, (ip,)), (mmvref.segmented_sum, (np.array([1, 0, 1], np.uint8),)),
                     (mmvref.segmented_scan, (np.array([1, 0, 1], np.uint8),)), (mmvref.scan, ())):
        np.testing.assert_array_equal(fn(x, *args, dim=1), fn(x, *args, axis=1))
    np.testing.assert_array_equal(mmvref.scatter(x, [1, 0, 1], dim=1), mmvref.scatter(x, [1, 0, 1], axis=1))
    with pytest.raises(TypeError, match="not both"):
        mmvref.segment_csr(x, ip, axis=2, dim=1)
