"""Golden scans and scan-based operators of the Ascend scan paper
(``mmvref.golden``: scan_u, scan_ul1, mc_scan, split, split_ind, radix_sort,
argsort, topk, weighted_sample, top_p_sample) against plain oracles written
here (Python loops, np.sort(kind="stable"), torch.topk), never against the code
under test. Semantics: DEVELOPERS.md, "Scan-based operators".
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mmvref import golden, mmv

pytestmark = pytest.mark.native_only  # the golden model / stand-in: no kernel chosen by the compile target

INT_DTYPES = ["int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}
SCANS = [golden.scan_u, golden.scan_ul1, golden.mc_scan]
CORES = [1, 2, 3, 20]


# ----------------------------------------------------------------------------- oracles

def oracle_scan_rows(x, exclusive):
    """Row-wise scan with Python ints (exact)."""
    rows = np.atleast_2d(x)
    out = []
    for row in rows:
        acc, r = 0, []
        for v in row.tolist():
            if exclusive:
                r.append(acc)
            acc += int(v)
            if not exclusive:
                r.append(acc)
        out.append(r)
    return out if np.ndim(x) == 2 else out[0]


def stable_order(keys, descending=False):
    """Indices of a stable sort by a list of comparable Python keys (insertion
    sort, obviously correct: equal keys never pass each other)."""
    idx = []
    for i in range(len(keys)):
        j = len(idx)
        while j > 0 and (keys[idx[j - 1]] < keys[i] if descending else keys[idx[j - 1]] > keys[i]):
            j -= 1
        idx.insert(j, i)
    return idx


def py_key(v):
    """DEVELOPERS.md order: by value, -0.0 == +0.0, NaN above +inf."""
    v = float(v) if isinstance(v, (float, np.floating)) else int(v)
    if isinstance(v, float) and math.isnan(v):
        return (1, 0)
    return (0, v)


def oracle_weighted_sample(w, u):
    """Exact inverse transform: cumulative sums as exact rationals, the float64
    threshold t = u * total (total rounded to float64 as the ops do), first i with
    c_i > t (exact comparison)."""
    c, acc = [], Fraction(0)
    for v in w.tolist():
        acc += Fraction(v)
        c.append(acc)
    t = Fraction(u * float(c[-1]))
    for i, ci in enumerate(c):
        if ci > t:
            return i
    return int(np.flatnonzero(w > 0)[-1])


def oracle_top_p(row, p, u):
    """Llama 3 sample_top_p with a given u, exact arithmetic (inputs chosen so the
    float64 sums are exact: see ``dyadic``)."""
    order = stable_order([py_key(v) for v in row.tolist()], descending=True)
    q = [Fraction(float(row[j])) for j in order]
    kept, e = [], Fraction(0)
    for v in q:
        kept.append(v if e <= Fraction(p) else Fraction(0))
        e += v
    return order[oracle_weighted_sample(np.array([float(v) for v in kept]), u)]


# ----------------------------------------------------------------------------- strategies

@st.composite
def int_rows(draw, max_rows=3):
    s = draw(st.sampled_from([2, 3, 4, 5, 8]))
    n = draw(st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1, s * s - 1, s * s, s * s + 1, 2 * s * s + 1]),
                       st.integers(0, 3 * s * s)))
    dt = np.dtype(draw(st.sampled_from(INT_DTYPES)))
    info = np.iinfo(dt)
    lim = draw(st.sampled_from([3, int(info.max)]))
    elems = st.integers(max(info.min, -lim), lim)
    batched = draw(st.booleans())
    rows = draw(st.integers(0, max_rows)) if batched else 1
    data = draw(st.lists(st.lists(elems, min_size=n, max_size=n), min_size=rows, max_size=rows))
    x = np.array(data, dtype=dt).reshape(rows, n)
    return s, (x if batched else x[0])


def fits(vals, dtype):
    info = np.iinfo(dtype)
    flat = np.ravel(np.array(vals, dtype=object))
    return all(info.min <= v <= info.max for v in flat)


# ----------------------------------------------------------------------------- scans

@pytest.mark.parametrize("fn", SCANS, ids=lambda f: f.__name__)
@given(case=int_rows(), exclusive=st.booleans(), cores=st.sampled_from(CORES))
def test_scans_equal_oracle_on_integers(fn, case, exclusive, cores):
    s, x = case
    expected = oracle_scan_rows(x, exclusive)
    rdt = np.dtype(RESULT[str(x.dtype)])
    args = (x, s, cores) if fn is golden.mc_scan else (x, s)
    if fits(expected, rdt):
        z = fn(*args, exclusive=exclusive)
        assert z.dtype == rdt and z.shape == x.shape
        assert np.array_equal(z.astype(object), np.array(expected, dtype=object).reshape(x.shape))
    else:
        with pytest.raises(OverflowError):
            fn(*args, exclusive=exclusive)
        z = fn(*args, exclusive=exclusive, overflow="wrap")
        bits = 8 * rdt.itemsize
        wrapped = [(v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
                   for v in np.ravel(np.array(expected, dtype=object))]
        assert z.ravel().tolist() == wrapped


@given(case=int_rows(), exclusive=st.booleans(), cores=st.sampled_from(CORES))
def test_scan_variants_agree_bit_for_bit(case, exclusive, cores):
    """ScanU, ScanUL1, MCScan and Alg. 1 of the MMV-RAM paper agree on integers (wrapped)."""
    s, x = case
    a = golden.scan_u(x, s, exclusive=exclusive, overflow="wrap")
    b = golden.scan_ul1(x, s, exclusive=exclusive, overflow="wrap")
    c = golden.mc_scan(x, s, cores, exclusive=exclusive, overflow="wrap")
    assert a.dtype == b.dtype == c.dtype
    assert np.array_equal(a, b) and np.array_equal(a, c)
    if x.ndim == 1 and not exclusive:
        assert np.array_equal(a, golden.scan(x, s, overflow="wrap"))


def test_int8_accumulates_in_int32():
    x = np.full(1000, 127, dtype=np.int8)
    for z in (golden.scan_u(x, 8), golden.scan_ul1(x, 8), golden.mc_scan(x, 8, 3)):
        assert z.dtype == np.int32 and int(z[-1]) == 127000


@pytest.mark.parametrize("fn", SCANS, ids=lambda f: f.__name__)
@given(s=st.sampled_from([2, 3, 4, 8]), n=st.integers(0, 80), dt=st.sampled_from(FLOAT_DTYPES),
       seed=st.integers(0, 2**32 - 1))
def test_scans_on_floats_within_bound(fn, s, n, dt, seed):
    """Floats: each output is a sum of one prefix computed by fewer than n + s
    roundings, so |err_i| <= (n + s) eps sum_{j<=i}|x_j| (eps of the result dtype)."""
    x = (np.random.default_rng(seed).standard_normal(n) * 100).astype(dt)
    z = fn(x, s, 3) if fn is golden.mc_scan else fn(x, s)
    assert z.dtype == np.dtype(RESULT[dt])
    exact = np.cumsum(x.astype(np.float64))
    tol = (n + s) * np.finfo(z.dtype).eps * np.cumsum(np.abs(x.astype(np.float64)))
    assert np.all(np.abs(z.astype(np.float64) - exact) <= tol)


def test_scan_ul1_stages_match_eq1():
    """Eq. 1 on one tile: C1 = A 1_s, C2 = A U_s + L_s^- C1, read off directly."""
    s = 4
    t = np.arange(1, 17, dtype=np.int64)
    A = t.reshape(s, s)
    expected = (A @ np.triu(np.ones((s, s), np.int64)) + np.tril(np.ones((s, s), np.int64), -1)
                @ (A @ np.ones((s, s), np.int64))).ravel()
    assert np.array_equal(golden.tile_scan_ul1(t, s), expected)
    assert np.array_equal(expected, np.cumsum(t))


def test_mc_scan_counts_two_phases():
    """MCScan: phase I does one row_scan MATMUL per non-empty block plus the
    reduction MATMULs; phase II only vector adds (one per s-tile)."""
    s, n, cores = 4, 64, 4  # 16 tiles, 4 per block
    with mmv.counting() as c:
        golden.mc_scan_words(np.ones(n, np.int64), s, cores)
    assert c.calls["add"] == n // s
    # per block of 16 elements: row_scan (1) + reduce: 16 -> 4 -> 1 (2 MATMULs)
    assert c.calls["matmul"] == cores * 3


def test_scan_errors():
    with pytest.raises(ValueError, match="1-D, or 2-D"):
        golden.scan_u(np.zeros((2, 2, 2), np.int32))
    with pytest.raises(ValueError, match="cores"):
        golden.mc_scan(np.zeros(3, np.int32), 4, 0)
    with pytest.raises(TypeError):
        golden.scan_ul1(np.zeros(3, np.uint16))


# ----------------------------------------------------------------------------- split and sort

SPECIAL = {
    "float16": [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 6e-8, -6e-8, 65504.0, 2.0, 0.5],
    "float32": [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-40, 3.4e38, 2.0],
    "float64": [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324, 1e-310, 1e308, 2.0],
}


@st.composite
def sort_input(draw, max_n=40):
    dt = draw(st.sampled_from(INT_DTYPES + FLOAT_DTYPES))
    n = draw(st.integers(0, max_n))
    if dt in FLOAT_DTYPES:
        vals = draw(st.lists(st.one_of(st.sampled_from(SPECIAL[dt]), st.floats(-4, 4, width=16)),
                             min_size=n, max_size=n))
        x = np.array(vals, dtype=np.float64).astype(dt)
    else:
        info = np.iinfo(dt)
        lim = draw(st.sampled_from([2, int(info.max)]))
        x = np.array(draw(st.lists(st.integers(max(info.min, -lim), lim), min_size=n, max_size=n)), dtype=dt)
    s = draw(st.sampled_from([2, 3, 4, 128]))
    cores = draw(st.sampled_from(CORES))
    return x, s, cores


@given(case=sort_input(), seed=st.integers(0, 2**32 - 1))
def test_split_and_split_ind(case, seed):
    x, s, cores = case
    m = (np.random.default_rng(seed).random(len(x)) < 0.5).astype(np.uint8)
    v, i = golden.split_ind(x, m, s, cores)
    ref_i = np.concatenate([np.flatnonzero(m == 1), np.flatnonzero(m == 0)]).astype(np.int64)
    assert i.dtype == np.int64 and np.array_equal(i, ref_i)
    assert v.dtype == x.dtype and np.array_equal(v.view(np.uint8), x[ref_i].view(np.uint8))
    assert np.array_equal(golden.split(x, m, s, cores).view(np.uint8), v.view(np.uint8))


@given(case=sort_input())
def test_radix_sort_equals_numpy_stable_sort(case):
    x, s, cores = case
    v, i = golden.radix_sort(x, s, cores)
    ref_i = np.argsort(x, kind="stable")
    assert i.dtype == np.int64 and np.array_equal(i, ref_i)
    assert v.dtype == x.dtype and np.array_equal(v.view(np.uint8), np.sort(x, kind="stable").view(np.uint8))
    assert np.array_equal(golden.argsort(x, s, cores), ref_i)


@given(case=sort_input())
def test_radix_sort_descending_is_stable(case):
    x, s, cores = case
    v, i = golden.radix_sort(x, s, cores, descending=True)
    ref = stable_order([py_key(e) for e in x.tolist()], descending=True)
    assert i.tolist() == ref
    assert np.array_equal(v.view(np.uint8), x[ref].view(np.uint8))


def test_radix_sort_rows_and_documented_float_order():
    x = np.array([[np.nan, 1.0, -0.0, 0.0, -np.inf], [3.0, -np.nan, 2.0, 2.0, -1.0]], np.float32)
    v, i = golden.radix_sort(x, 4, 2)
    assert i.tolist() == [[4, 2, 3, 1, 0], [4, 2, 3, 0, 1]]  # -0.0 before 0.0 (input order); NaN last
    assert np.signbit(v[0, 1]) and not np.signbit(v[0, 2])
    vd, idd = golden.radix_sort(x, 4, 2, descending=True)
    assert idd.tolist() == [[0, 1, 2, 3, 4], [1, 0, 2, 3, 4]]  # NaN first when descending


@given(case=sort_input(max_n=30), largest=st.booleans(), data=st.data())
def test_topk_values_equal_torch(case, largest, data):
    torch = pytest.importorskip("torch")
    x, s, cores = case
    k = data.draw(st.integers(0, len(x)))
    v, i = golden.topk(x, k, s, cores, largest=largest)
    assert v.dtype == x.dtype and i.dtype == np.int64 and v.shape == (k,)
    tx = torch.from_numpy(x.astype(np.float32) if x.dtype == np.float16 else x)
    tv = torch.topk(tx, k, largest=largest).values.numpy()
    assert np.array_equal(v.astype(np.float64), tv.astype(np.float64), equal_nan=True)
    # documented ties: the k first of the stable order (lower index first)
    ref = stable_order([py_key(e) for e in x.tolist()], descending=largest)[:k]
    assert i.tolist() == ref


def test_topk_rows_and_errors():
    x = np.array([[1, 5, 5, 2], [0, 0, 0, 0]], np.int16)
    v, i = golden.topk(x, 2, 2, 3)
    assert v.tolist() == [[5, 5], [0, 0]] and i.tolist() == [[1, 2], [0, 1]]
    with pytest.raises(ValueError, match="k must be"):
        golden.topk(x, 5)


# ----------------------------------------------------------------------------- sampling

def dyadic(draw, n, lo=0, hi=64):
    """Multiples of 1/64 in [0, 1]: every float64 sum of them is exact,
    so any summation order gives the same numbers."""
    return np.array(draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)), dtype=np.float64) / 64


@given(data=st.data(), s=st.sampled_from([2, 3, 128]), cores=st.sampled_from(CORES))
def test_weighted_sample_equals_reference(data, s, cores):
    n = data.draw(st.integers(1, 60))
    kind = data.draw(st.sampled_from(["int", "dyadic"]))
    if kind == "int":
        w = np.array(data.draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)), dtype=np.int64)
    else:
        w = dyadic(data.draw, n)
    assume(w.sum() > 0)
    u = data.draw(st.one_of(st.sampled_from([0.0, 0.5, 1 - 2**-53]), st.floats(0, 1, exclude_max=True)))
    got = golden.weighted_sample(w, u, s, cores)
    assert isinstance(got, np.int64) and got == oracle_weighted_sample(w, u)
    assert w[got] > 0


@given(data=st.data())
def test_weighted_sample_general_floats_outside_rounding_zone(data):
    """General float weights: the golden scan's rounding differs from exact sums,
    so the sample may differ only when t is within 2 n eps sum|w| of some c_i."""
    n = data.draw(st.integers(1, 40))
    w = np.array(data.draw(st.lists(st.floats(0, 1e3), min_size=n, max_size=n)))
    assume(w.sum() > 0)
    u = data.draw(st.floats(0, 1, exclude_max=True))
    got = golden.weighted_sample(w, u, 4, 3)
    exact_c = np.cumsum([Fraction(v) for v in w.tolist()])
    t = Fraction(u * float(w.sum()))
    zone = Fraction(2 * n * np.finfo(np.float64).eps * float(w.sum()))
    if all(abs(c - t) > zone for c in exact_c):
        assert got == oracle_weighted_sample(w, u)


def test_weighted_sample_vector_u_and_errors():
    w = np.array([0, 2, 0, 2], np.int32)
    assert golden.weighted_sample(w, np.array([0.0, 0.49, 0.5, 0.99])).tolist() == [1, 1, 3, 3]
    with pytest.raises(ValueError, match="non-negative"):
        golden.weighted_sample(np.array([1, -1]), 0.5)
    with pytest.raises(ValueError, match="positive total"):
        golden.weighted_sample(np.zeros(3), 0.5)
    with pytest.raises(ValueError, match="u must"):
        golden.weighted_sample(np.ones(3), 1.0)
    with pytest.raises(ValueError, match="finite"):
        golden.weighted_sample(np.array([1.0, np.inf]), 0.5)


def test_weighted_sample_beyond_2_pow_24():
    """Support sizes torch.multinomial refuses: the sample lands where the oracle says."""
    n = (1 << 24) + 5
    w = np.zeros(n, np.int8)
    w[-3:] = 1
    assert golden.weighted_sample(w, 0.5, 128, 20) == n - 2


@given(data=st.data(), s=st.sampled_from([2, 4, 128]), cores=st.sampled_from([1, 3]))
def test_top_p_sample_equals_reference(data, s, cores):
    rows = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(1, 24))
    probs = np.stack([dyadic(data.draw, n) for _ in range(rows)])
    assume(np.all(probs.sum(axis=1) > 0))
    p = data.draw(st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0]))
    u = np.array([data.draw(st.floats(0, 1, exclude_max=True)) for _ in range(rows)])
    dt = data.draw(st.sampled_from(FLOAT_DTYPES))
    probs = probs.astype(dt)  # multiples of 1/64 in [0, 1] are exact in fp16 too
    got = golden.top_p_sample(probs, p, u, s, cores)
    assert got.dtype == np.int64 and got.shape == (rows,)
    assert got.tolist() == [oracle_top_p(probs[r], p, u[r]) for r in range(rows)]
    one = golden.top_p_sample(probs[0], p, u[0], s, cores)
    assert isinstance(one, np.int64) and one == got[0]


def test_top_p_sample_keeps_the_nucleus():
    probs = np.array([0.1, 0.5, 0.15, 0.25])
    # sorted: 0.5 (1), 0.25 (3), 0.15 (2), 0.1 (0); exclusive sums 0, .5, .75, .9; p = 0.6 keeps two
    assert [golden.top_p_sample(probs, 0.6, u) for u in (0.0, 0.6, 0.7, 0.99)] == [1, 1, 3, 3]
    assert golden.top_p_sample(probs, 0.0, 0.99) == 1  # the most probable token is always kept
    with pytest.raises(TypeError, match="float"):
        golden.top_p_sample(np.array([1, 2]), 0.5, 0.5)
    with pytest.raises(ValueError, match="p must"):
        golden.top_p_sample(probs, 1.5, 0.5)
    with pytest.raises(ValueError, match="shape"):
        golden.top_p_sample(np.stack([probs, probs]), 0.5, 0.5)
