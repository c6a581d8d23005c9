"""The golden model (``mmvref.golden``), op by op and stage by stage, against plain-loop
oracles written in this file (exact Python ints; floats through exact rationals,
rounded once at the end), never against the code under test.

Integers: bit-exact, result dtype by the project rule (int8/16/32 -> int32,
int64 -> int64); when an exact result does not fit the result dtype the default
``overflow="raise"`` must raise OverflowError, and ``overflow="wrap"`` must give the
exact value wrapped to the result width (two's complement).

Floats (fp16 -> fp32, fp32, fp64): every output is a sum of x over a set of
positions, computed by additions and by subtractions of partial sums that contain
each other (REVSPEC, REVERT, DIFF, SpMV's row differences). Every intermediate is
bounded by S = sum|x| (sum|data * x[col]| for SpMV); an output's own path has fewer
than n roundings of unit roundoff u = eps/2, and so does the partial sum it may
subtract, so to first order
    |computed - exact| <= 2 n u S (+ the same again, as slack) = 2 n eps(result) S,
the bound asserted here (n >= 1; S = 0 forces an exact 0). The exact value comes from
the floats as exact rationals (integers over a common power of two), rounded once.
fp16 inputs are exact in the fp32 words, so eps is the result dtype's.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mmvref import golden, mmv

pytestmark = pytest.mark.native_only  # the golden model / stand-in: no kernel chosen by the compile target

DTYPES = ["int8", "int16", "int32", "int64", "float16", "float32", "float64"]
INT_DTYPES = ["int8", "int16", "int32", "int64"]
RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}
S_VALUES = [2, 3, 4, 5, 8, 16, 128]
FLAG_DTYPES = [np.bool_, np.int8, np.uint8]


# --------------------------------------------------------------------------- oracles

def wrap(v, bits):
    return (int(v) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def exact_ints(values):
    """Floats (or ints) as exact integers over one common power-of-two denominator."""
    ratios = [float(v).as_integer_ratio() if isinstance(v, float) else (int(v), 1) for v in values]
    den = max((d for _, d in ratios), default=1)
    return [nm * (den // d) for nm, d in ratios], den


def o_scan(xl):
    out, acc = [], 0
    for v in xl:
        acc += v
        out.append(acc)
    return out


def o_seg_scan(xl, fl):
    out, acc = [], 0
    for i, (v, f) in enumerate(zip(xl, fl)):
        acc = v if (i == 0 or f) else acc + v
        out.append(acc)
    return out


def o_block_seg_scan(xl, fl, s):
    out, acc = [], 0
    for i, (v, f) in enumerate(zip(xl, fl)):
        acc = v if (i % s == 0 or f) else acc + v
        out.append(acc)
    return out


def o_seg_sum(xl, fl):
    out, acc = [], 0
    for i, (v, f) in enumerate(zip(xl, fl)):
        if i > 0 and f:
            out.append(acc)
            acc = 0
        acc += v
    if xl:
        out.append(acc)
    return out


def o_compress(xl, fl):
    return [v for v, f in zip(xl, fl) if f]


def o_spmv_terms(indptr, indices, data_l, x_l):
    return [[data_l[k] * x_l[indices[k]] for k in range(indptr[r], indptr[r + 1])]
            for r in range(len(indptr) - 1)]


# --------------------------------------------------------------------------- comparators

def check_int(call, in_dtype, exact):
    """call(overflow) -> array. Exact results, result dtype, raise on overflow, wrap."""
    rdt = np.dtype(RESULT[np.dtype(in_dtype).name])
    info = np.iinfo(rdt)
    if all(info.min <= v <= info.max for v in exact):
        z = call("raise")
        assert z.dtype == rdt
        assert z.tolist() == exact
    else:
        with pytest.raises(OverflowError):
            call("raise")
    z = call("wrap")
    assert z.dtype == rdt
    assert z.tolist() == [wrap(v, 8 * rdt.itemsize) for v in exact]


def check_float(z, in_dtype, exact_num, den, mag_num, n):
    """z against exact values exact_num/den, within 2 n eps(result) S, S = mag_num/den."""
    rdt = np.dtype(RESULT[np.dtype(in_dtype).name])
    assert z.dtype == rdt
    assert len(z) == len(exact_num)
    tol = 2 * max(n, 1) * float(np.finfo(rdt).eps) * (mag_num / den)
    for i, (got, num) in enumerate(zip(z.tolist(), exact_num)):
        assert abs(got - num / den) <= tol, (i, got, num / den, tol)


# --------------------------------------------------------------------------- strategies

def special_ns(s, cap=None):
    ns = {0, 1, s - 1, s, s + 1, s * s - 1, s * s, s * s + 1}
    if s <= 16:
        ns |= {s**3 - 1, s**3 + 1}
    return sorted(n for n in ns if cap is None or n <= cap)


@st.composite
def s_n(draw, s_values=S_VALUES, cap=None):
    s = draw(st.sampled_from(s_values))
    rnd_cap = min(2 * s * s + 2 * s, 3000) if cap is None else min(cap, 2 * s * s + 2 * s)
    n = draw(st.one_of(st.sampled_from(special_ns(s, cap)), st.integers(0, rnd_cap)))
    return s, n


def draw_values(draw, rng, n, dtype):
    """Values of ``dtype``. Integers: magnitude tiny (many ties/zeros), safe (no result
    overflows) or full (the dtype's range: results may overflow), in a random, all +max,
    all -max or alternating pattern. Floats: normal * scale, or small integers."""
    dt = np.dtype(dtype)
    pattern = draw(st.sampled_from(["random", "plus", "minus", "alternating"]))
    if dt.kind == "i":
        info, rinfo = np.iinfo(dt), np.iinfo(RESULT[dt.name])
        mag = draw(st.sampled_from(["tiny", "safe", "safe", "full"]))
        lim = {"tiny": min(3, info.max), "safe": max(1, min(info.max, rinfo.max // max(n, 1))),
               "full": info.max}[mag]
        if pattern == "random":
            v = rng.integers(-lim, lim, n, endpoint=True)
        elif pattern == "plus":
            v = np.full(n, lim)
        elif pattern == "minus":  # at full magnitude: the dtype's minimum, -2**(B-1)
            v = np.full(n, info.min if mag == "full" else -lim)
        else:
            v = np.where(np.arange(n) % 2 == 0, lim, -lim)
        return v.astype(dt)
    scale = draw(st.sampled_from([1.0, 1e3]))
    if pattern == "random":
        v = rng.standard_normal(n) * scale
    elif pattern == "plus":
        v = np.full(n, scale * 0.7)
    elif pattern == "minus":
        v = rng.integers(-8, 9, n).astype(np.float64)  # exact small integers
    else:
        v = np.where(np.arange(n) % 2 == 0, scale, -scale) * (1 + rng.random(n))
    return v.astype(dt)


def draw_flags(draw, rng, n):
    """Segment-start flags: density 0, 1, or drawn in between; then a flag dtype."""
    density = draw(st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)))
    fdt = draw(st.sampled_from(FLAG_DTYPES))
    return (rng.random(n) < density).astype(fdt)


@st.composite
def seg_cases(draw, dtypes=DTYPES, s_values=S_VALUES, cap=None):
    s, n = draw(s_n(s_values, cap))
    dtype = draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = draw_values(draw, rng, n, dtype)
    f = draw_flags(draw, rng, n)
    return s, x, f


def _run(alg, x, f, s):
    return (lambda ov: alg(x, f, s, overflow=ov))


# --------------------------------------------------------------------------- the example of §2

X = [2, 2, 3, 3, 1, 3, 1, 2]
F = [1, 0, 1, 0, 0, 1, 0, 0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s", [2, 3, 4, 8, 128])
def test_paper_example(dtype, s):
    x = np.array(X, dtype=dtype)
    for fdt in FLAG_DTYPES:
        f = np.array(F, dtype=fdt)
        for alg in (golden.seg_scan, golden.sscr):
            z = alg(x, f, s)
            assert z.dtype == np.dtype(RESULT[dtype]) and z.tolist() == [2, 4, 3, 6, 7, 3, 4, 6]
        for alg in (golden.scd, golden.segmented_sum):
            z = alg(x, f, s)
            assert z.dtype == np.dtype(RESULT[dtype]) and z.tolist() == [4, 7, 6]
        z = golden.compress(x, f, s)
        assert z.dtype == np.dtype(dtype) and z.tolist() == [2, 3, 3]
        v, i = golden.compress_ind(x, f, s)
        assert v.dtype == np.dtype(dtype) and v.tolist() == [2, 3, 3]
        assert i.dtype == np.int64 and i.tolist() == [0, 2, 5]
    z = golden.scan(x, s)
    assert z.dtype == np.dtype(RESULT[dtype]) and z.tolist() == [2, 4, 7, 10, 11, 14, 15, 17]


# --------------------------------------------------------------------------- ops vs oracle

@given(seg_cases())
def test_scan(case):
    s, x, _ = case
    n = len(x)
    if x.dtype.kind == "i":
        check_int(lambda ov: golden.scan(x, s, overflow=ov), x.dtype, o_scan(x.tolist()))
    else:
        xi, den = exact_ints(x.tolist())
        check_float(golden.scan(x, s), x.dtype, o_scan(xi), den, sum(map(abs, xi)), n)


@pytest.mark.parametrize("alg", [golden.seg_scan, golden.sscr], ids=["seg_scan", "sscr"])
@given(case=seg_cases())
def test_segmented_scan(alg, case):
    s, x, f = case
    fl = f.tolist()
    if x.dtype.kind == "i":
        check_int(_run(alg, x, f, s), x.dtype, o_seg_scan(x.tolist(), fl))
    else:
        xi, den = exact_ints(x.tolist())
        check_float(alg(x, f, s), x.dtype, o_seg_scan(xi, fl), den, sum(map(abs, xi)), len(x))


@given(seg_cases(dtypes=["int16", "int64", "float32"]))
def test_inputs_untouched_and_layouts_agree(case):
    """Ops never write their inputs; strided and read-only views give the same results."""
    s, x, f = case
    x0, f0 = x.copy(), f.copy()
    xs, fs = np.repeat(x, 2)[::2], np.repeat(f, 2)[::2]  # non-contiguous views
    xs.setflags(write=False)
    fs.setflags(write=False)
    for alg in (golden.seg_scan, golden.sscr, golden.scd, golden.compress):
        a = alg(x, f, s, overflow="wrap") if alg is not golden.compress else alg(x, f, s)
        b = alg(xs, fs, s, overflow="wrap") if alg is not golden.compress else alg(xs, fs, s)
        assert a.tobytes() == b.tobytes() and a.dtype == b.dtype
    assert golden.scan(x, s, overflow="wrap").tobytes() == golden.scan(xs, s, overflow="wrap").tobytes()
    assert x.tobytes() == x0.tobytes() and f.tobytes() == f0.tobytes()


@given(seg_cases())
def test_scd_segmented_sum(case):
    s, x, f = case
    fl = f.tolist()
    assert golden.segmented_sum is golden.scd
    if x.dtype.kind == "i":
        check_int(_run(golden.scd, x, f, s), x.dtype, o_seg_sum(x.tolist(), fl))
    else:
        xi, den = exact_ints(x.tolist())
        check_float(golden.scd(x, f, s), x.dtype, o_seg_sum(xi, fl), den, sum(map(abs, xi)), len(x))


def test_compress_float16():
    x = np.array(X, dtype=np.float16)
    z = golden.compress(x, np.array(F, dtype=np.uint8), 4)
    assert z.dtype == np.float16 and z.tolist() == [2, 3, 3]


@given(seg_cases(dtypes=DTYPES))
def test_compress(case):
    s, x, f = case
    z = golden.compress(x, f, s)
    assert z.dtype == x.dtype  # values are copied, dtype kept
    want = np.array(o_compress(x.tolist(), f.tolist()), dtype=x.dtype)
    assert z.tobytes() == want.tobytes()


@given(seg_cases(dtypes=DTYPES))
def test_compress_ind(case):
    """Against numpy (x[mask], np.flatnonzero(mask)); values moved bit for bit."""
    s, x, f = case
    if x.dtype.kind == "f" and len(x):
        x = x.copy()
        x[::5] = -0.0
        x[1::7] = np.nan
    v, i = golden.compress_ind(x, f, s)
    mb = f.astype(bool)
    assert v.dtype == x.dtype and i.dtype == np.int64
    assert v.tobytes() == x[mb].tobytes() and i.tolist() == np.flatnonzero(mb).tolist()


def test_compress_ind_runs_compress_on_values_and_positions():
    """The same instructions as COMPRESS (one flag SCAN, MASK, SUB), plus one SCATTER of the
    index vector; empty input and an all-zero mask give empty results."""
    x = np.arange(100, dtype=np.int16) * 3
    f = (np.arange(100) % 7 == 3).astype(np.uint8)
    with mmv.counting() as one:
        golden.compress(x, f, 4)
    with mmv.counting() as two:
        v, i = golden.compress_ind(x, f, 4)
    assert two.calls - one.calls == {"scatter": 1} and one.calls["scatter"] == 1
    assert v.tolist() == x[f == 1].tolist() and i.tolist() == np.flatnonzero(f).tolist()
    pos, m = golden.compress_positions(f, 4)
    assert m == f.sum() and pos.tolist() == np.where(f == 1, np.cumsum(f.astype(np.int64)) - 1, -1).tolist()
    for xx, ff in ((x, np.zeros(100, np.int8)), (x[:0], np.zeros(0, np.bool_))):
        v, i = golden.compress_ind(xx, ff, 4)
        assert v.shape == i.shape == (0,) and v.dtype == x.dtype and i.dtype == np.int64


def test_compress_ind_bad_input_names_the_argument():
    x = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match=r"mask must hold only 0 and 1.*mask\[1\] = 3"):
        golden.compress_ind(x, np.array([0, 3, 0, 0], np.uint8), 4)
    with pytest.raises(ValueError, match=r"mask\[2\] = -1"):
        golden.compress_ind(x, np.array([0, 0, -1, 0], np.int8), 4)
    with pytest.raises(ValueError, match="mask has length"):
        golden.compress_ind(x, np.zeros(3, np.uint8), 4)
    with pytest.raises(TypeError, match="mask"):
        golden.compress_ind(x, np.zeros(4, np.float32), 4)
    with pytest.raises(ValueError, match="x must be 1-D"):
        golden.compress_ind(x.reshape(2, 2), np.zeros(4, np.uint8), 4)
    with pytest.raises(TypeError, match="x has unsupported dtype"):
        golden.compress_ind(x.astype(np.uint16), np.zeros(4, np.uint8), 4)
    with pytest.raises((TypeError, ValueError), match="s"):
        golden.compress_ind(x, np.zeros(4, np.uint8), 1)


@st.composite
def mult_cases(draw):
    s, n = draw(s_n(cap=300))
    dx = draw(st.sampled_from(INT_DTYPES))
    dy = draw(st.one_of(st.just(dx), st.sampled_from(INT_DTYPES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = draw_values(draw, rng, n, dx)
    y = draw_values(draw, rng, n, dy)
    return s, x, y


@given(mult_cases())
def test_mult(case):
    s, x, y = case
    exact = [a * b for a, b in zip(x.tolist(), y.tolist())]
    check_int(lambda ov: golden.mult(x, y, s, overflow=ov), np.result_type(x, y), exact)


@given(st.sampled_from(S_VALUES),
       st.one_of(st.integers(-(2**31), 2**31), st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)])),
       st.one_of(st.integers(-(2**31), 2**31), st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)])))
def test_int_mult(s, a, b):
    # |a| (2^m - 1) < 2^63 for |a|, |b| <= 2^31 + 1: the lemma's partial sums fit the word.
    r = golden.int_mult(a, b, s)
    assert type(r) is int and r == a * b
    r = golden.int_mult(np.int32(a % 2**31), np.int64(b), s)  # numpy integers accepted
    assert r == (a % 2**31) * b


@pytest.mark.parametrize("a, b", [(2**62, 2), (-(2**62), 4), (2**40, 2**30 + 1), (2**63 - 1, 2**63 - 1)])
def test_int_mult_raises_when_the_product_does_not_fit_the_word(a, b):
    with pytest.raises(OverflowError):
        golden.int_mult(a, b, 4)


def test_int_mult_no_spurious_overflow():
    # b = 2^61 has one set bit: the only non-zero row is 3 * 2^61 < 2^63 - 1.
    assert golden.int_mult(3, 2**61, 2) == 3 * 2**61


@st.composite
def matrix_cases(draw):
    s = draw(st.sampled_from(S_VALUES))
    n, p, q = (draw(st.integers(0, 6)) for _ in range(3))
    da = draw(st.sampled_from(INT_DTYPES))
    db = draw(st.one_of(st.just(da), st.sampled_from(INT_DTYPES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    A = draw_values(draw, rng, n * p, da).reshape(n, p)
    B = draw_values(draw, rng, p * q, db).reshape(p, q)
    return s, A, B


@given(matrix_cases())
def test_matrix_product(case):
    s, A, B = case
    n, p = A.shape
    q = B.shape[1]
    Al, Bl = A.tolist(), B.tolist()
    exact = [sum(Al[i][k] * Bl[k][j] for k in range(p)) for i in range(n) for j in range(q)]

    def call(ov):
        C = golden.matrix_product(A, B, s, overflow=ov)
        assert C.shape == (n, q)
        return C.reshape(-1)

    check_int(call, np.result_type(A, B), exact)


@st.composite
def csr_cases(draw, dtypes=DTYPES, cap=3000):
    """CSR with empty rows anywhere (leading, interior runs, trailing, all; nnz = 0).
    Two ways: row lengths drawn directly, zeros included; or nnz from the size list of
    the algorithms, cut into rows at points drawn from a small pool (so interior runs of
    empty rows are common), with leading and trailing empty rows added."""
    s, nnz = draw(s_n(cap=cap))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        lens = draw(st.lists(st.one_of(st.just(0), st.integers(0, 2 * s + 2)), max_size=40))
        indptr = np.concatenate([[0], np.cumsum(lens, dtype=np.int64)]).tolist()
        nnz = indptr[-1]
    else:
        lead, trail = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        mid = draw(st.integers(0 if nnz == 0 else 1, 40))
        pool = rng.integers(0, nnz + 1, max(1, draw(st.integers(1, 8))))
        cuts = sorted(rng.choice(pool, mid - 1).tolist()) if mid > 1 else []
        indptr = [0] * lead + ([0] + cuts + [nnz] if mid else [0]) + [nnz] * trail
    n_cols = draw(st.integers(0 if nnz == 0 else 1, 30))
    indices = rng.integers(0, max(n_cols, 1), nnz)
    dd = draw(st.sampled_from(dtypes))
    dx = draw(st.one_of(st.just(dd), st.sampled_from(dtypes)))
    data = draw_values(draw, rng, nnz, dd)
    x = draw_values(draw, rng, n_cols, dx)
    ind_dtype = draw(st.sampled_from([np.int32, np.int64, np.uint32]))
    ptr_dtype = draw(st.sampled_from([np.int32, np.int64]))
    return s, np.array(indptr, dtype=ptr_dtype), indices.astype(ind_dtype), data, x


@given(csr_cases())
def test_spmv(case):
    s, indptr, indices, data, x = case
    dt = np.result_type(data, x)
    ptr, ind = indptr.tolist(), indices.tolist()
    if dt.kind == "i":
        exact = [sum(t) for t in o_spmv_terms(ptr, ind, data.tolist(), x.tolist())]
        check_int(lambda ov: golden.spmv(indptr, indices, data, x, s, overflow=ov), dt, exact)
    else:
        di, dden = exact_ints(data.astype(np.float64).tolist())
        xi, xden = exact_ints(x.astype(np.float64).tolist())
        terms = o_spmv_terms(ptr, ind, di, xi)
        mag = sum(abs(t) for row in terms for t in row)
        check_float(golden.spmv(indptr, indices, data, x, s), dt, [sum(t) for t in terms],
                    dden * xden, mag, len(data))


@given(csr_cases(dtypes=DTYPES))
def test_segment_sum_csr(case):
    s, indptr, _, data, _ = case
    ptr = indptr.tolist()
    if data.dtype.kind == "i":
        dl = data.tolist()
        exact = [sum(dl[ptr[r]:ptr[r + 1]]) for r in range(len(ptr) - 1)]
        check_int(lambda ov: golden.segment_sum_csr(data, indptr, s, overflow=ov), data.dtype, exact)
    else:
        di, den = exact_ints(data.tolist())
        exact = [sum(di[ptr[r]:ptr[r + 1]]) for r in range(len(ptr) - 1)]
        check_float(golden.segment_sum_csr(data, indptr, s), data.dtype, exact, den,
                    sum(map(abs, di)), len(data))


@pytest.mark.parametrize("indptr", [[0], [0, 0], [0, 0, 0, 0], [0, 0, 2, 2, 2, 5], [0, 2, 2, 5, 5, 5],
                                    [0, 0, 0, 5], [0, 5, 5, 5]],
                         ids=["no_rows", "one_empty", "all_empty", "lead_interior", "interior_trail",
                              "leading_run", "trailing_run"])
@pytest.mark.parametrize("s", [2, 3, 128])
def test_spmv_empty_rows(indptr, s):
    nnz = indptr[-1]
    data = np.arange(1, nnz + 1, dtype=np.int32)
    indices = np.arange(nnz, dtype=np.int64) % 3
    x = np.array([10, 100, 1000], dtype=np.int32)
    want = [sum(int(data[k]) * int(x[indices[k]]) for k in range(indptr[r], indptr[r + 1]))
            for r in range(len(indptr) - 1)]
    y = golden.spmv(np.array(indptr), indices, data, x, s)
    assert y.dtype == np.int32 and y.tolist() == want


GRID = [(s, n) for s in S_VALUES for n in special_ns(s)]


@pytest.mark.parametrize("s, n", GRID, ids=[f"s{s}-n{n}" for s, n in GRID])
def test_edge_sizes_grid(s, n):
    """Every (s, n) of the size list, whatever Hypothesis draws: int16 values (int32
    results, exact) and full-range int64 with overflow="wrap" (numpy's int64 cumsum wraps
    the same way), at flag densities 0, 1 and 0.3."""
    rng = np.random.default_rng(s * 100003 + n)
    for density in (0.0, 1.0, 0.3):
        f = (rng.random(n) < density).astype(np.uint8)
        starts = (f != 0) | (np.arange(n) == 0)
        for x, ov in ((rng.integers(-(2**15), 2**15, n).astype(np.int16), "raise"),
                      (rng.integers(-(2**63), 2**63 - 1, n, endpoint=True).astype(np.int64), "wrap")):
            want = _np_seg_scan_oracle(x, f)
            with np.errstate(over="ignore"):
                cs = np.cumsum(x.astype(np.int64))
            rdt = np.dtype(RESULT[x.dtype.name])
            for got in (golden.seg_scan(x, f, s, overflow=ov), golden.sscr(x, f, s, overflow=ov)):
                assert got.dtype == rdt
                np.testing.assert_array_equal(got, want.astype(rdt))
            np.testing.assert_array_equal(golden.scan(x, s, overflow=ov), cs.astype(rdt))
            ends = np.flatnonzero(np.append(starts[1:], True)) if n else np.zeros(0, np.int64)
            np.testing.assert_array_equal(golden.scd(x, f, s, overflow=ov), want[ends].astype(rdt))
            np.testing.assert_array_equal(golden.compress(x, f, s), x[f != 0])


# --------------------------------------------------------------------------- stages (machine words)

@st.composite
def word_cases(draw, s_values=S_VALUES, cap=3000, lo=-(2**40), hi=2**40, floats=True):
    """(s, x words, f words): int64 words over a wide range, or float32/float64 words."""
    s, n = draw(s_n(s_values, cap))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["int64", "float32", "float64"] if floats else ["int64"]))
    if kind == "int64":
        x = rng.integers(lo, hi, n, endpoint=True).astype(np.int64)
    else:
        x = (rng.standard_normal(n) * draw(st.sampled_from([1.0, 1e3]))).astype(kind)
    density = draw(st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)))
    f = (rng.random(n) < density).astype(np.int64)
    return s, x, f


def _words_check(z, x, exact_fn, *, exact_mag=None):
    """Compare stage output z (words of x's dtype) with exact_fn(values) on exact ints."""
    assert z.dtype == x.dtype
    if x.dtype.kind == "i":
        assert z.tolist() == [wrap(v, 64) for v in exact_fn(x.tolist())]
    else:
        xi, den = exact_ints(x.tolist())
        mag = sum(map(abs, xi)) if exact_mag is None else exact_mag
        tol = 2 * max(len(x), 1) * float(np.finfo(x.dtype).eps) * mag / den
        for got, num in zip(z.tolist(), exact_fn(xi)):
            assert abs(got - num / den) <= tol


@given(word_cases(lo=-(2**62), hi=2**62, floats=False))
def test_scan_words_and_seg_scan_words_are_exact_mod_2_64(case):
    # Ring computation: even when intermediates wrap, results are exact modulo 2**64.
    s, x, f = case
    assert golden.scan_words(x, s).tolist() == [wrap(v, 64) for v in o_scan(x.tolist())]
    assert golden.seg_scan_words(x, f, s).tolist() == [wrap(v, 64) for v in o_seg_scan(x.tolist(), f.tolist())]


@given(word_cases())
def test_block_seg_scan(case):
    s, x, f = case
    with mmv.counting() as c:
        z = golden.block_seg_scan(x, f, s)
    assert (c.mmu_calls, c.vcu_calls, c.calls["revspec"]) == (2, 1, 1)
    _words_check(z, x, lambda v: o_block_seg_scan(v, f.tolist(), s))


@given(word_cases())
def test_recurse_completes_block_scans(case):
    # Input: exact per-block segmented scans (from the oracle, not from block_seg_scan).
    s, x, f = case
    fl = f.tolist()
    if x.dtype.kind == "i":
        z0 = np.array(o_block_seg_scan(x.tolist(), fl, s), dtype=np.int64)
    else:
        z0 = np.array(o_block_seg_scan(x.astype(np.float64).tolist(), fl, s)).astype(x.dtype)
    z = golden.recurse(z0, f, s)
    # the block scans are rounded once when stored as words: the bound's S covers it
    _words_check(z, x, lambda v: o_seg_scan(v, fl))


def o_update_first_segment(zl, fl, s):
    """Add z(block start) to every later element of the block's first segment: those j in
    the block with no flag in f(start+1 .. j)."""
    out = list(zl)
    for base in range(0, len(zl), s):
        for j in range(base + 1, min(base + s, len(zl))):
            if fl[j]:
                break
            out[j] = zl[j] + zl[base]
    return out


@given(word_cases())
def test_update_first_segment(case):
    s, z, f = case
    with mmv.counting() as c:
        w = golden.update_first_segment(z, f, s)
    assert (c.mmu_calls, c.vcu_calls) == (1, 10)
    if z.dtype.kind == "i":
        assert w.tolist() == [wrap(v, 64) for v in o_update_first_segment(z.tolist(), f.tolist(), s)]
    else:  # one addition per element: correctly rounded in the word dtype
        dt = z.dtype.type
        want = o_update_first_segment([dt(v) for v in z], f.tolist(), s)
        assert w.tolist() == [float(v) for v in want]


def test_update_first_segment_erratum_of_line_24():
    """App. Alg. 1 line 24 as printed, m = AND(ISZERO(f_bar - f_bar_start), NOT f), keeps
    m = 1 at a block's first position when its flag is 0 and doubles that value; the golden
    stage also ANDs with NOT(first position of the block)."""
    z = np.array([5, 1], dtype=np.int64)
    f = np.array([0, 0], dtype=np.int64)
    s = 2
    fbar = mmv.matmul(f, mmv.upper_ones(s))
    m = mmv.iszero(mmv.sub(fbar, mmv.fills(fbar, s)))
    m = mmv.and_(m, mmv.not_(f))
    printed = mmv.add(z, mmv.mask(mmv.fills(z, s), m))
    assert printed.tolist() == [10, 6]  # wrong: z(0) = 5 is finished and must stay 5
    assert golden.update_first_segment(z, f, s).tolist() == [5, 6]


@given(word_cases())
def test_revert_spec_simple_and_vector_agree_with_revspec(case):
    s, x, f = case
    xbar = mmv.matmul(x, mmv.upper_ones(s, x.dtype))
    fbar = mmv.matmul(f, mmv.upper_ones(s))
    ref = mmv.revspec(xbar, fbar, s)
    xbar0 = xbar.copy()
    simple = golden.revert_spec_simple(xbar, x, f, s)
    vector = golden.revert_spec_vector(xbar, f, s)
    assert xbar.tobytes() == xbar0.tobytes()  # returns new arrays
    assert simple.dtype == vector.dtype == x.dtype
    _words_check(ref, x, lambda v: o_block_seg_scan(v, f.tolist(), s))
    if x.dtype.kind == "i":
        assert simple.tolist() == ref.tolist()
        assert vector.tolist() == ref.tolist()
    else:
        # Alg. 3 copies the speculative sum to subtract and subtracts once: same rounding
        # as REVSPEC. Alg. 2 returns x itself for an all-starts block (REVSPEC rounds
        # xbar(j) - xbar(j-1)): agreement within the float bound.
        assert vector.tobytes() == ref.tobytes()
        _words_check(simple, x, lambda v: o_block_seg_scan(v, f.tolist(), s))


@given(word_cases(lo=-(2**63), hi=2**63 - 1))
def test_diff_and_diff_mmu(case):
    s, z, _ = case
    d1, d2 = golden.diff(z), golden.diff_mmu(z, s)
    assert d1.dtype == d2.dtype == z.dtype
    if z.dtype.kind == "i":
        zl = z.tolist()
        want = [wrap(zl[i] - (zl[i - 1] if i else 0), 64) for i in range(len(zl))]
    else:  # one subtraction each: correctly rounded in the word dtype
        dt = z.dtype.type
        want = [float(dt(z[i]) - (dt(z[i - 1]) if i else dt(0))) for i in range(len(z))]
    assert d1.tolist() == want
    assert d2.tolist() == want


@given(st.integers(0, 300), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_revert(n, k, seed):
    rng = np.random.default_rng(seed)
    xhat = rng.integers(-(2**40), 2**40, n).astype(np.int64)
    fhat = np.sort(rng.integers(0, k + 2, n)).astype(np.int64)  # may exceed len(w): reads nothing
    w = rng.integers(-(2**40), 2**40, k).astype(np.int64)
    z = golden.revert(xhat, fhat, w)
    want = xhat.tolist()
    for idx in range(len(w)):  # parfor idx: z = xhat - (fhat == idx + 1) * w(idx)
        want = [a - (w[idx].item() if fh == idx + 1 else 0) for a, fh in zip(want, fhat.tolist())]
    assert z.tolist() == want


@given(st.lists(st.integers(0, 1), max_size=300))
def test_end_flags(fl):
    f = np.array(fl, dtype=np.int64)
    assert golden.end_flags(f).tolist() == (fl[1:] + [1] if fl else [])


@given(word_cases())
def test_compress_words(case):
    s, x, f = case
    z = golden.compress_words(x, f, s)
    assert z.dtype == x.dtype
    assert z.tobytes() == np.array(o_compress(x.tolist(), f.tolist()), dtype=x.dtype).tobytes()


@given(csr_cases(dtypes=["int64", "float32", "float64"]))
def test_csr_gather(case):
    _, _, indices, data, x = case
    dt = np.result_type(data, x)
    d, xv = data.astype(dt), x.astype(dt)
    ind = indices.tolist()
    z = golden.csr_gather(d, indices.astype(np.int64), xv)
    assert z.dtype == dt
    if dt.kind == "i":  # int64 words: the product wraps mod 2**64
        xl = xv.tolist()
        want = [wrap(a * xl[c], 64) for a, c in zip(d.tolist(), ind)]
    else:  # one product each in dt: correctly rounded, so bit-exact
        want = [float(d[k] * xv[c]) for k, c in enumerate(ind)]
    assert z.tolist() == want


@given(csr_cases(dtypes=["int64"]))
def test_gather_spmv_and_handle_leading_zeros(case):
    _, indptr, _, data, _ = case
    ptr = indptr.tolist()
    yhat = data.astype(np.int64)
    yl = yhat.tolist()
    lead = 0
    while lead < len(ptr) - 1 and ptr[lead + 1] == 0:
        lead += 1
    z, k = golden.handle_leading_zeros(yhat, indptr)
    assert k == lead and z.tolist() == [0] * lead and z.dtype == yhat.dtype
    w = golden.gather_spmv(yhat, indptr)
    # the scanned value at the end of every row; rows ending at offset 0 give 0
    assert w.tolist() == [yl[ptr[r + 1] - 1] if ptr[r + 1] > 0 else 0 for r in range(len(ptr) - 1)]


@given(st.sampled_from(S_VALUES), st.integers(0, 60), st.integers(0, 2**32 - 1),
       st.sampled_from([1, 2**7, 2**31, 2**63 - 1]))
def test_mult_words(s, n, seed, lim):
    rng = np.random.default_rng(seed)
    x = rng.integers(-lim, lim, n, endpoint=True).astype(np.int64)
    y = rng.integers(-lim, lim, n, endpoint=True).astype(np.int64)
    if n:
        y[rng.integers(0, n)] = 0
    z = golden.mult_words(x, y, s)
    assert z.dtype == np.int64
    assert z.tolist() == [wrap(a * b, 64) for a, b in zip(x.tolist(), y.tolist())]


# --------------------------------------------------------------------------- overflow contract

INT32_MAX = 2**31 - 1


def _overflow_calls(dtype, big):
    """(name, call(overflow), exact results) whose results overflow ``dtype``."""
    x = np.array([big, big, 1, -3], dtype=dtype)
    f = np.array([1, 0, 0, 1], dtype=np.uint8)
    ptr, ind = np.array([0, 3, 4]), np.array([0, 1, 2, 0])
    A = np.array([[big, big], [1, 2]], dtype=dtype)
    return [
        ("scan", lambda ov, s: golden.scan(x, s, overflow=ov), o_scan(x.tolist())),
        ("seg_scan", lambda ov, s: golden.seg_scan(x, f, s, overflow=ov), o_seg_scan(x.tolist(), [1, 0, 0, 1])),
        ("sscr", lambda ov, s: golden.sscr(x, f, s, overflow=ov), o_seg_scan(x.tolist(), [1, 0, 0, 1])),
        ("scd", lambda ov, s: golden.scd(x, f, s, overflow=ov), o_seg_sum(x.tolist(), [1, 0, 0, 1])),
        ("spmv", lambda ov, s: golden.spmv(ptr, ind, x, x[:3], s, overflow=ov),
         [big * big + big * big + 1, -3 * big]),
        ("mult", lambda ov, s: golden.mult(x, x, s, overflow=ov), [v * v for v in x.tolist()]),
        ("matrix_product", lambda ov, s: golden.matrix_product(A, A, s, overflow=ov).reshape(-1),
         [big * big + big, big * big + 2 * big, big + 2, big + 4]),
    ]


@pytest.mark.parametrize("s", [2, 3, 128])
@pytest.mark.parametrize("dtype, big, bits", [("int32", INT32_MAX, 32), ("int64", 2**62 + 12345, 64)])
def test_overflow_raises_by_default_and_wraps_on_request(s, dtype, big, bits):
    for name, call, exact in _overflow_calls(dtype, big):
        with pytest.raises(OverflowError, match="overflows"):
            call("raise", s)
        z = call("wrap", s)
        assert z.dtype == np.dtype(dtype), name
        assert z.tolist() == [wrap(v, bits) for v in exact], name


@pytest.mark.parametrize("s", [2, 3, 128])
def test_int64_results_exact_when_only_intermediates_wrap(s):
    big = 2**62 + 7
    x = np.array([big, big, -big, big], dtype=np.int64)
    f = np.array([1, 1, 1, 1], dtype=np.uint8)
    # speculative block scans and global prefix sums pass 2**63; every result fits
    for alg in (golden.seg_scan, golden.sscr):
        assert alg(x, f, s).tolist() == x.tolist()
    assert golden.scd(x, f, s).tolist() == x.tolist()
    assert golden.spmv(np.array([0, 1, 2, 3, 4]), np.zeros(4, np.int64), x, np.array([1], np.int64), s).tolist() \
        == x.tolist()
    y = np.array([big, -big, big], dtype=np.int64)
    assert golden.scan(y, s).tolist() == [big, 0, big]


def test_int64_extremes_wrap_mod_2_64():
    x = np.array([-(2**63), -1, 2**63 - 1, 2**63 - 1], dtype=np.int64)
    f = np.array([0, 0, 1, 0], dtype=np.uint8)
    for s in (2, 5):
        assert golden.scan(x, s, overflow="wrap").tolist() == [wrap(v, 64) for v in o_scan(x.tolist())]
        assert golden.seg_scan(x, f, s, overflow="wrap").tolist() == \
            [wrap(v, 64) for v in o_seg_scan(x.tolist(), f.tolist())]
        with pytest.raises(OverflowError):
            golden.scan(x, s)
        with pytest.raises(OverflowError):
            golden.sscr(x, f, s)


def test_invalid_overflow_mode():
    with pytest.raises(ValueError, match="overflow"):
        golden.scan(np.arange(3, dtype=np.int32), 2, overflow="clip")


# --------------------------------------------------------------------------- large n

def _np_seg_scan_oracle(x, f):
    """numpy oracle in int64: global prefix sums minus the prefix before each segment start."""
    n = len(x)
    with np.errstate(over="ignore"):  # int64 wraps mod 2**64, as overflow="wrap" does
        cs = np.cumsum(x.astype(np.int64))
    start = np.where((f != 0) | (np.arange(n) == 0), np.arange(n), 0)
    start = np.maximum.accumulate(start)
    before = np.where(start > 0, cs[start - 1], 0)
    return cs - before


def test_seg_scan_one_million_int32():
    n, s = 10**6, 128
    rng = np.random.default_rng(2024)
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    f = (rng.random(n) < 0.001).astype(np.uint8)
    f[rng.integers(0, n, 50)] = 1
    z = golden.seg_scan(x, f, s)
    assert z.dtype == np.int32
    np.testing.assert_array_equal(z, _np_seg_scan_oracle(x, f))


@pytest.mark.slow
@pytest.mark.parametrize("density", [0.0, 0.01, 1.0])
def test_three_level_recursion_at_s_128(density):
    n, s = 3 * 128**2 + 1, 128
    rng = np.random.default_rng(7)
    x = rng.integers(-(2**16), 2**16, n).astype(np.int32)
    f = (rng.random(n) < density).astype(np.uint8)
    want = _np_seg_scan_oracle(x, f)
    for alg in (golden.seg_scan, golden.sscr):
        np.testing.assert_array_equal(alg(x, f, s), want)
    np.testing.assert_array_equal(golden.scan(x, s), np.cumsum(x.astype(np.int64)))
    ends = np.flatnonzero(np.append(f[1:], 1))
    np.testing.assert_array_equal(golden.scd(x, f, s), want[ends])
