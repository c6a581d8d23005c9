"""Bit bounds (``mmvref.bounds``) against what the golden model actually produces.

For every algorithm, on adversarial inputs (all values at +max or at -max of
int8/int16/int32, alternating +max/-max, random; one huge segment with no flags, all
flags, random flags), the largest magnitude any instruction produces, measured by
``mmv.counting()``, stays within the bound's ``magnitude``. Runs use
``overflow="wrap"`` so that results which overflow the result dtype still complete:
the measurement is of the int64 machine words, which hold these inputs exactly (every
bound checked here is below 2**63 unless stated).

Also: each bound is at least as tight as the paper's, ``bits`` is
``magnitude.bit_length() + 1``, and the bound is reached on the all-+max single
segment for scan/seg_scan/scd/sscr (so it is not vacuous).
"""
from __future__ import annotations

import zlib
from functools import partial

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mmvref import bounds, golden, mmv

pytestmark = pytest.mark.native_only  # the golden model / stand-in: no kernel chosen by the compile target

I64_MAX = 2**63 - 1
BOUND_DTYPES = ["int8", "int16", "int32"]
VALUE_PATTERNS = ["plus", "minus", "alternating", "random"]
FLAG_PATTERNS = ["none", "all", "random"]
SIZES = [(2, 33), (3, 28), (4, 65), (16, 257), (128, 300)]  # (s, n): n > s, n not a multiple of s


def values(pattern, n, dtype, rng):
    M = int(np.iinfo(dtype).max)
    if pattern == "plus":
        v = np.full(n, M)
    elif pattern == "minus":
        v = np.full(n, -M)
    elif pattern == "alternating":
        v = np.where(np.arange(n) % 2 == 0, M, -M)
    else:
        v = rng.integers(-M, M, n, endpoint=True)
    return v.astype(dtype)


def flags(pattern, n, rng):
    if pattern == "none":  # a single huge segment
        return np.zeros(n, np.uint8)
    if pattern == "all":
        return np.ones(n, np.uint8)
    return (rng.random(n) < 0.1).astype(np.uint8)


def measured(fn):
    with mmv.counting() as c:
        fn()
    return max(c.max_abs.values(), default=0)


def max_abs(a):
    a = np.asarray(a)
    return max((abs(int(v)) for v in a.reshape(-1).tolist()), default=0)


def _indptr_from_flags(f):
    n = len(f)
    starts = [i for i in range(n) if i == 0 or f[i]]
    return np.array(starts + [n] if n else [0], dtype=np.int64)


# Each entry: (bound(n, s, inputs...), run(inputs...)), inputs built from value/flag patterns.
def _cases(vp, fp, dtype, s, n, rng):
    x = values(vp, n, dtype, rng)
    f = flags(fp, n, rng)
    M = max_abs(x)
    yield "scan", bounds.scan(n, s, M), lambda: golden.scan(x, s, overflow="wrap")
    yield "seg_scan", bounds.seg_scan(n, s, M), lambda: golden.seg_scan(x, f, s, overflow="wrap")
    yield "scd", bounds.scd(n, s, M), lambda: golden.scd(x, f, s, overflow="wrap")
    yield "sscr", bounds.sscr(n, s, M), lambda: golden.sscr(x, f, s, overflow="wrap")
    yield "compress", bounds.compress(n, s, M), lambda: golden.compress(x, f, s)
    # Second operands of products: the same pattern, but int16 when x is int32, so that
    # every bound stays below 2**63 and the int64 words measure it exactly.
    dtype2 = "int16" if dtype == "int32" else dtype
    # mult: at most 64 elements (n * bits school-method rows)
    xm, ym = x[:64], values(vp, min(n, 64), dtype2, rng)
    yield "mult", bounds.mult(len(xm), s, max_abs(xm), max_abs(ym)), \
        lambda: golden.mult(xm, ym, s, overflow="wrap")
    # matrix_product: 3 x p times p x 2 from the pattern
    p = 4
    A = values(vp, 3 * p, dtype, rng).reshape(3, p)
    B = values(vp, p * 2, dtype2, rng).reshape(p, 2)
    yield "matrix_product", bounds.matrix_product(3, p, 2, s, max_abs(A), max_abs(B)), \
        lambda: golden.matrix_product(A, B, s, overflow="wrap")
    # spmv: rows from the flag pattern (one huge row / one entry per row / random)
    indptr = _indptr_from_flags(f)
    n_cols = 7
    indices = rng.integers(0, n_cols, n)
    xv = values(vp, n_cols, dtype2, rng)
    yield "spmv", bounds.spmv(n, s, M, max_abs(xv)), \
        lambda: golden.spmv(indptr, indices, x, xv, s, overflow="wrap")


ALGS = ["scan", "seg_scan", "scd", "sscr", "compress", "mult", "matrix_product", "spmv"]


@pytest.mark.parametrize("vp", VALUE_PATTERNS)
@pytest.mark.parametrize("alg", ALGS)
def test_measured_magnitude_within_bound(alg, vp):
    rng = np.random.default_rng(zlib.crc32(f"{alg}-{vp}".encode()))
    for dtype in BOUND_DTYPES:
        for fp in FLAG_PATTERNS:
            for s, n in SIZES:
                for name, b, run in _cases(vp, fp, dtype, s, n, rng):
                    if name != alg:
                        continue
                    assert b.magnitude <= I64_MAX
                    got = measured(run)
                    assert got <= b.magnitude, (alg, vp, fp, dtype, s, n, got, b.magnitude)


@given(st.sampled_from([2, 3, 4, 5, 8, 16, 128]), st.integers(0, 400), st.sampled_from(BOUND_DTYPES),
       st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0, 1)), st.integers(0, 2**32 - 1))
def test_random_inputs_within_bound(s, n, dtype, density, seed):
    rng = np.random.default_rng(seed)
    M = int(rng.integers(0, np.iinfo(dtype).max, endpoint=True))
    x = rng.integers(-M, M, n, endpoint=True).astype(dtype)
    f = (rng.random(n) < density).astype(np.uint8)
    Mx = max_abs(x)
    for bfn, run in ((bounds.scan, lambda: golden.scan(x, s, overflow="wrap")),
                     (bounds.seg_scan, lambda: golden.seg_scan(x, f, s, overflow="wrap")),
                     (bounds.scd, lambda: golden.scd(x, f, s, overflow="wrap")),
                     (bounds.sscr, lambda: golden.sscr(x, f, s, overflow="wrap")),
                     (bounds.compress, lambda: golden.compress(x, f, s))):
        assert measured(run) <= bfn(n, s, Mx).magnitude, bfn.__name__
    xm = x[:40]
    ym = rng.integers(-M, M, len(xm), endpoint=True).astype(dtype)
    assert measured(lambda: golden.mult(xm, ym, s, overflow="wrap")) <= \
        bounds.mult(len(xm), s, max_abs(xm), max_abs(ym)).magnitude


@pytest.mark.parametrize("a, b", [(127, 127), (-127, 127), (127, -128), (-32767, 32767), (32767, -32768),
                                  (2**31 - 1, 2**31 - 1), (-(2**31), 2**31 - 1), (0, 2**31 - 1),
                                  (2**31 - 1, 0), (1, 1), (0, 0), (12345, 2**20 + 1)])
@pytest.mark.parametrize("s", [2, 3, 16, 128])
def test_int_mult_within_bound(a, b, s):
    bd = bounds.int_mult(abs(a), abs(b), s)
    got = measured(lambda: golden.int_mult(a, b, s))
    assert got <= bd.magnitude


@pytest.mark.parametrize("s", [2, 3, 4, 16, 128])
@pytest.mark.parametrize("dtype", BOUND_DTYPES)
def test_bound_reached_on_single_all_max_segment(s, dtype):
    """All +max, no flags: the final scan value is n*M, which is the bound itself."""
    M = int(np.iinfo(dtype).max)
    for n in (1, s, s + 1, s * s + 1, 1000):
        x = np.full(n, M, dtype=dtype)
        f = np.zeros(n, np.uint8)
        for bfn, run in ((bounds.scan, partial(golden.scan, x, s, overflow="wrap")),
                         (bounds.seg_scan, partial(golden.seg_scan, x, f, s, overflow="wrap")),
                         (bounds.scd, partial(golden.scd, x, f, s, overflow="wrap")),
                         (bounds.sscr, partial(golden.sscr, x, f, s, overflow="wrap"))):
            assert bfn(n, s, M).magnitude == n * M
            assert measured(run) == n * M, (bfn.__name__, n)


def test_mult_bound_reached_when_max_y_is_all_ones():
    """|y| = 2^m - 1 (all m bits set) and x = y = M everywhere, n*m <= s: one speculative
    block scan covers every school-method row, so the bound n M (2^m - 1) is produced."""
    for M, s in ((127, 128), (7, 16), (3, 4)):
        n = s // max(M.bit_length(), 1)
        x = np.full(n, M, dtype=np.int8)
        assert measured(partial(golden.mult, x, x, s)) == bounds.mult(n, s, M, M).magnitude


@given(st.integers(0, 10**6), st.sampled_from([2, 3, 4, 5, 8, 16, 128]),
       st.one_of(st.integers(0, 2**40), st.sampled_from([0, 1, 127, 2**31 - 1, 2**63 - 1])),
       st.one_of(st.integers(0, 2**40), st.sampled_from([0, 1, 127, 2**31 - 1, 2**63 - 1])))
def test_bounds_at_least_as_tight_as_the_papers_and_bits(n, s, M, M2):
    p, q = 1 + n % 7, 1 + (n // 7) % 5
    for b in (bounds.scan(n, s, M), bounds.seg_scan(n, s, M), bounds.scd(n, s, M), bounds.sscr(n, s, M),
              bounds.compress(n, s, M), bounds.mult(n, s, M, M2), bounds.spmv(n, s, M, M2),
              bounds.int_mult(M, M2, s), bounds.matrix_product(n % 50, p, q, s, M, M2)):
        assert isinstance(b, bounds.Bound)
        assert 0 <= b.magnitude <= b.paper_magnitude
        assert b.bits == b.magnitude.bit_length() + 1
        assert b.paper_bits == b.paper_magnitude.bit_length() + 1
        assert b.bits <= b.paper_bits
    # the stated closed forms
    assert bounds.scan(n, s, M).magnitude == n * M
    assert bounds.seg_scan(n, s, M).magnitude == max(n * M, n)
    assert bounds.compress(n, s, M).magnitude == max(M, n)
    levels = 0
    while s**levels < n:
        levels += 1
    assert bounds.scan(n, s, M).paper_magnitude == s ** (2 * levels) * M  # Thm 4.1: s^(2 ceil(log_s n)) M


def test_bits_for():
    assert [bounds.bits_for(m) for m in (0, 1, 2, 127, 128, 2**31 - 1, 2**63 - 1)] == [1, 2, 3, 8, 9, 32, 64]


def test_bounds_validate_arguments():
    with pytest.raises(ValueError, match="n and max_abs"):
        bounds.scan(-1, 2, 1)
    with pytest.raises(ValueError, match="n and max_abs"):
        bounds.seg_scan(3, 2, -1)
    with pytest.raises(ValueError, match="s must be >= 2"):
        bounds.scan(3, 1, 1)
