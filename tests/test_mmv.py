"""The MMV-RAM machine (``mmvref.mmv``): every VCU instruction and MATMUL against its
Table A.2 / docstring definition written as a plain loop here, the constant matrices
entry by entry, and the accounting of ``mmv.counting()``.

Integer words are int64 with two's-complement arithmetic, so the loops below compute
with Python ints and wrap to 64 bits where an instruction's docstring says the word
wraps (ADD, SUB, MUL, BITSHL).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mmvref import mmv

pytestmark = pytest.mark.native_only  # the golden model / stand-in: no kernel chosen by the compile target

S_VALUES = [2, 3, 4, 5, 8, 16, 128]
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def wrap64(v):
    return (int(v) + 2**63) % 2**64 - 2**63


def ceil_div(a, b):
    return -(-a // b)


# --------------------------------------------------------------------------- strategies

@st.composite
def s_and_n(draw, max_n=300):
    s = draw(st.sampled_from(S_VALUES))
    special = [0, 1, s - 1, s, s + 1, 2 * s - 1, 2 * s + 1]
    n = draw(st.one_of(st.sampled_from([v for v in special if v <= max_n]), st.integers(0, max_n)))
    return s, n


def words(n, lo=-(2**40), hi=2**40):
    """int64 words, drawn element by element (n is small here, so shrinking stays useful)."""
    return st.lists(st.integers(lo, hi), min_size=n, max_size=n).map(lambda v: np.array(v, dtype=np.int64))


def bits(n):
    return st.lists(st.integers(0, 1), min_size=n, max_size=n).map(lambda v: np.array(v, dtype=np.int64))


# --------------------------------------------------------------------------- constants

def _entry_upper_ones(i, j):
    return 1 if i <= j else 0


def _entry_b(i, j):
    return 1 if (i == 0 or i == j) else 0


def _entry_diff(i, j):  # Eq. (3): 1 on the diagonal, -1 on the superdiagonal
    return 1 if i == j else (-1 if j == i + 1 else 0)


def _entry_lower_strict(i, j):
    return 1 if i > j else 0


def _entry_ones(i, j):
    return 1


CONSTANTS = [
    pytest.param(mmv.upper_ones, _entry_upper_ones, id="upper_ones"),
    pytest.param(mmv.b_matrix, _entry_b, id="b_matrix"),
    pytest.param(mmv.diff_matrix, _entry_diff, id="diff_matrix"),
    pytest.param(mmv.lower_strict, _entry_lower_strict, id="lower_strict"),
    pytest.param(mmv.ones, _entry_ones, id="ones"),
]


@pytest.mark.parametrize("make, entry", CONSTANTS)
@pytest.mark.parametrize("s", S_VALUES)
def test_constant_matrix_entries(make, entry, s):
    for dtype in (None, np.int64, np.int32, np.float16, np.float32, np.float64):
        a = make(s) if dtype is None else make(s, dtype)
        assert a.shape == (s, s)
        assert a.dtype == (np.dtype(np.int64) if dtype is None else np.dtype(dtype))
        for i in range(s):
            for j in range(s):
                assert a[i, j] == entry(i, j), (make.__name__, s, i, j)


@pytest.mark.parametrize("make, entry", CONSTANTS)
def test_constant_matrices_are_read_only(make, entry):
    a = make(4)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 7
    with pytest.raises(ValueError):
        a += 1
    # a failed write leaves the cached constant intact
    assert all(a[i, j] == entry(i, j) for i in range(4) for j in range(4))
    assert all(make(4)[i, j] == entry(i, j) for i in range(4) for j in range(4))


@pytest.mark.parametrize("make", [c.values[0] for c in CONSTANTS])
def test_constant_matrices_validate_s(make):
    with pytest.raises(ValueError, match="s must be >= 2"):
        make(1)
    with pytest.raises(TypeError, match="s must be an integer"):
        make(2.5)


@given(s_and_n())
def test_first_of_block(sn):
    s, n = sn
    z = mmv.first_of_block(n, s)
    assert z.dtype == np.int64
    assert z.tolist() == [1 if i % s == 0 else 0 for i in range(n)]


# --------------------------------------------------------------------------- MATMUL

def _matmul_loop(x, a, s):
    """MATMUL(x, A) of §1.2: x as a ceil(n/s) x s row-major matrix, zero-padded; X A in
    row-major order; padding positions dropped. Python ints / float64."""
    n = len(x)
    xs = x.tolist() + [0] * ((-n) % s)
    out = []
    for r in range(ceil_div(n, s)):
        for j in range(s):
            if r * s + j < n:
                out.append(sum(xs[r * s + k] * a[k][j] for k in range(s)))
    return out


@given(s_and_n(), st.data(), st.sampled_from([0.0, 0.1, 0.5, 1.0]), st.integers(0, 2**32 - 1))
def test_matmul_random_integer_matrix(sn, data, density, seed):
    # A is random with a random sparsity pattern (zero rows, zero columns, gaps inside a
    # row), so the kernel's per-row column band is exercised, not only the constants.
    s, n = sn
    x = data.draw(words(n, -(2**20), 2**20))
    rng = np.random.default_rng(seed)
    a = rng.integers(-(2**10), 2**10, (s, s)) * (rng.random((s, s)) < density)
    with mmv.counting() as c:
        z = mmv.matmul(x, a)
    assert z.dtype == np.int64 and z.shape == (n,)
    assert z.tolist() == _matmul_loop(x, a.tolist(), s)
    assert (c.steps, c.mmu_calls, c.vcu_calls, c.mmu_rows) == (1, 1, 0, ceil_div(n, s))


@given(s_and_n(), st.sampled_from([np.float32, np.float64]), st.integers(0, 2**32 - 1))
def test_matmul_random_float_matrix(sn, dtype, seed):
    # Error bound: each output is a dot product of length <= s accumulated in `dtype`,
    # |err| <= s * eps * sum_k |x_k a_kj| (the standard gamma_s bound, with slack).
    s, n = sn
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(dtype)
    a = rng.standard_normal((s, s)).astype(dtype)
    z = mmv.matmul(x, a)
    assert z.dtype == dtype and z.shape == (n,)
    x64, a64 = x.astype(np.float64), a.astype(np.float64)
    want = np.array(_matmul_loop(x64, a64.tolist(), s))
    absx = np.abs(x64)
    mag = np.array(_matmul_loop(absx, np.abs(a64).tolist(), s))
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(z.astype(np.float64) - want) <= s * eps * mag)


@given(s_and_n(), st.data())
def test_matmul_with_the_constant_matrices(sn, data):
    s, n = sn
    x = data.draw(words(n))
    xl = x.tolist()
    first = [xl[(i // s) * s] for i in range(n)]
    # x^T U_s: inclusive scan of each s-block
    want = []
    for i in range(n):
        acc = 0
        for k in range((i // s) * s, i + 1):
            acc += xl[k]
        want.append(acc)
    assert mmv.matmul(x, mmv.upper_ones(s)).tolist() == want
    # B_s adds the block's first entry to every other entry of the block
    assert mmv.matmul(x, mmv.b_matrix(s)).tolist() == [
        xl[i] + (first[i] if i % s else 0) for i in range(n)]
    # D_s: differences inside each block, the block's first entry kept
    assert mmv.matmul(x, mmv.diff_matrix(s)).tolist() == [
        xl[i] - (xl[i - 1] if i % s else 0) for i in range(n)]
    # L_s^-: exclusive scan of each block; 1_s: block total everywhere
    assert mmv.matmul(x, mmv.lower_strict(s)).tolist() == [
        sum(xl[k] for k in range(i + 1, min(n, (i // s + 1) * s))) for i in range(n)]
    assert mmv.matmul(x, mmv.ones(s)).tolist() == [
        sum(xl[(i // s) * s: min(n, (i // s + 1) * s)]) for i in range(n)]


def test_matmul_padding_is_dropped_and_inputs_untouched():
    x = np.arange(1, 8, dtype=np.int64)  # n = 7, s = 3: last row holds one real entry
    x0 = x.copy()
    z = mmv.matmul(x, mmv.ones(3))
    assert z.tolist() == [6, 6, 6, 15, 15, 15, 7]
    assert x.tolist() == x0.tolist()


def test_matmul_rejects_bad_shapes():
    with pytest.raises(ValueError, match="A must be a square"):
        mmv.matmul(np.zeros(4, np.int64), np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="x must be 1-D"):
        mmv.matmul(np.zeros((2, 2), np.int64), mmv.ones(2))
    with pytest.raises(ValueError, match="s must be >= 2"):
        mmv.matmul(np.zeros(4, np.int64), np.ones((1, 1), np.int64))


# --------------------------------------------------------------------------- bitwise VCU

@given(st.integers(0, 200).flatmap(lambda n: st.tuples(bits(n), bits(n))))
def test_and_or_not(xy):
    x, y = xy
    for fn, want in (
        (mmv.and_, [1 if (a == 1 and b == 1) else 0 for a, b in zip(x.tolist(), y.tolist())]),
        (mmv.or_, [1 if (a == 1 or b == 1) else 0 for a, b in zip(x.tolist(), y.tolist())]),
    ):
        z = fn(x, y)
        assert z.dtype == np.int64 and z.tolist() == want
    z = mmv.not_(x)
    assert z.dtype == np.int64 and z.tolist() == [1 - a for a in x.tolist()]


@given(st.integers(0, 200).flatmap(lambda n: st.tuples(words(n, I64_MIN, I64_MAX),
                                                        words(n, I64_MIN, I64_MAX))))
def test_xor(xy):
    x, y = xy
    assert mmv.xor(x, y).tolist() == [a ^ b for a, b in zip(x.tolist(), y.tolist())]


@given(st.integers(0, 200).flatmap(lambda n: st.tuples(words(n), words(n, -2, 2))))
def test_mask(xy):
    x, y = xy
    z = mmv.mask(x, y)
    assert z.dtype == np.int64
    assert z.tolist() == [a if b != 0 else 0 for a, b in zip(x.tolist(), y.tolist())]
    xf = x.astype(np.float32)
    zf = mmv.mask(xf, y)
    assert zf.dtype == np.float32
    assert zf.tolist() == [a if b != 0 else 0.0 for a, b in zip(xf.tolist(), y.tolist())]


@given(st.integers(0, 200).flatmap(lambda n: words(n, -3, 3)))
def test_iszero(x):
    z = mmv.iszero(x)
    assert z.dtype == np.int64 and z.tolist() == [1 if a == 0 else 0 for a in x.tolist()]


@given(st.integers(0, 200).flatmap(lambda n: st.tuples(words(n, -5, 5), words(n, -5, 5))),
       st.integers(-5, 5))
def test_leq(xy, scalar):
    x, y = xy
    assert mmv.leq(x, y).tolist() == [1 if a <= b else 0 for a, b in zip(x.tolist(), y.tolist())]
    assert mmv.leq(x, scalar).tolist() == [1 if a <= scalar else 0 for a in x.tolist()]


# --------------------------------------------------------------------------- arithmetic VCU

@given(st.integers(0, 200).flatmap(lambda n: st.tuples(words(n, I64_MIN, I64_MAX),
                                                        words(n, I64_MIN, I64_MAX))),
       st.integers(I64_MIN, I64_MAX))
def test_add_sub_mul_wrap_in_two_complement(xy, scalar):
    x, y = xy
    xl, yl = x.tolist(), y.tolist()
    for fn, op in ((mmv.add, lambda a, b: a + b), (mmv.sub, lambda a, b: a - b),
                   (mmv.mul, lambda a, b: a * b)):
        z = fn(x, y)
        assert z.dtype == np.int64
        assert z.tolist() == [wrap64(op(a, b)) for a, b in zip(xl, yl)], fn.__name__
        zs = fn(x, np.int64(scalar))
        assert zs.tolist() == [wrap64(op(a, scalar)) for a in xl], fn.__name__


@given(st.integers(0, 100), st.integers(0, 2**32 - 1))
def test_add_sub_mul_floats_keep_the_word_dtype(n, seed):
    rng = np.random.default_rng(seed)
    for dt in (np.float32, np.float64):
        x = rng.standard_normal(n).astype(dt)
        y = rng.standard_normal(n).astype(dt)
        for fn, op in ((mmv.add, np.add), (mmv.sub, np.subtract), (mmv.mul, np.multiply)):
            z = fn(x, y)
            assert z.dtype == dt
            # one IEEE operation in dt per element: correctly rounded, so bit-exact
            assert z.tolist() == [op(a, b) for a, b in zip(x, y)]


# --------------------------------------------------------------------------- s-parametrised VCU

@given(s_and_n(), st.data())
def test_fills(sn, data):
    s, n = sn
    x = data.draw(words(n))
    xl = x.tolist()
    z = mmv.fills(x, s)
    assert z.tolist() == [xl[(i // s) * s] for i in range(n)]  # z(is:is+s) = x(is)


@given(s_and_n(), st.data())
def test_gathers(sn, data):
    s, n = sn
    x = data.draw(words(n))
    xl = x.tolist()
    z = mmv.gathers(x, s)
    # z(i-1) = x(si-1), i = 1..ceil(n/s); a padded (partial) last block contributes 0
    want = [xl[s * i - 1] if s * i - 1 < n else 0 for i in range(1, ceil_div(n, s) + 1)]
    assert z.dtype == np.int64 and z.tolist() == want


@given(s_and_n(), st.data())
def test_scatters(sn, data):
    s, n = sn
    into = data.draw(words(n))
    m = ceil_div(n, s)
    x = data.draw(words(m))
    into0 = into.copy()
    z = mmv.scatters(x, s, into)
    want = into.tolist()
    for i in range(1, m + 1):  # z(si-1) = x(i-1); positions >= n are padding
        if s * i - 1 < n:
            want[s * i - 1] = x.tolist()[i - 1]
    assert z.tolist() == want
    assert into.tolist() == into0.tolist()  # writes into a copy


def _shift_loop(xl, b, s, left):
    n = len(xl)
    out = []
    for i in range(n):
        j = i + b if left else i - b
        ok = 0 <= j < n and (s is None or j // s == i // s)
        out.append(xl[j] if ok else 0)
    return out


@given(s_and_n(), st.data())
def test_shiftl_shiftr_global_and_block_local(sn, data):
    s, n = sn
    x = data.draw(words(n))
    b = data.draw(st.integers(0, n + s + 1))
    xl = x.tolist()
    assert mmv.shiftl(x, b).tolist() == _shift_loop(xl, b, None, True)
    assert mmv.shiftr(x, b).tolist() == _shift_loop(xl, b, None, False)
    assert mmv.shiftl(x, b, s).tolist() == _shift_loop(xl, b, s, True)
    assert mmv.shiftr(x, b, s).tolist() == _shift_loop(xl, b, s, False)
    assert mmv.shiftl(x).tolist() == _shift_loop(xl, 1, None, True)  # default b = 1
    assert mmv.shiftr(x).tolist() == _shift_loop(xl, 1, None, False)


# --------------------------------------------------------------------------- REVSPEC

def _block_seg_scan_loop(xl, fl, s):
    """Segmented scan of every s-block on its own (position 0 of a block starts a segment)."""
    out, acc = [], 0
    for i, (v, f) in enumerate(zip(xl, fl)):
        acc = v if (i % s == 0 or f) else acc + v
        out.append(acc)
    return out


def _revspec_q_loop(xbar, fbar, s):
    """Lemma A.1 literally: z(j) = xbar(j) - sum_{i<j, same block} xbar(i) Q(i, j),
    Q(i, j) = (fbar(i) != fbar(i+1)) and (fbar(j) == fbar(i+1))."""
    n = len(xbar)
    out = []
    for j in range(n):
        base = (j // s) * s
        u = 0
        for i in range(base, j):
            if fbar[i] != fbar[i + 1] and fbar[j] == fbar[i + 1]:
                u += xbar[i]
        out.append(xbar[j] - u)
    return out


@given(s_and_n(), st.data())
def test_revspec_reverts_speculative_block_scans(sn, data):
    s, n = sn
    x = data.draw(words(n))
    f = data.draw(bits(n))
    xbar = mmv.matmul(x, mmv.upper_ones(s))
    fbar = mmv.matmul(f, mmv.upper_ones(s))
    with mmv.counting() as c:
        z = mmv.revspec(xbar, fbar, s)
    assert (c.vcu_calls, c.mmu_calls) == (1, 0)
    assert z.tolist() == _block_seg_scan_loop(x.tolist(), f.tolist(), s)
    assert z.tolist() == _revspec_q_loop(xbar.tolist(), fbar.tolist(), s)


def test_revspec_rejects_length_mismatch():
    with pytest.raises(ValueError, match="fbar"):
        mmv.revspec(np.zeros(4, np.int64), np.zeros(3, np.int64), 2)


# --------------------------------------------------------------------------- irregular access

@given(st.integers(0, 100), st.data())
def test_gather(n, data):
    x = data.draw(words(n))
    k = data.draw(st.integers(0, 100))
    idx = np.array(data.draw(st.lists(st.integers(-3, n + 3), min_size=k, max_size=k)), dtype=np.int64)
    z = mmv.gather(x, idx)
    xl = x.tolist()
    assert z.dtype == x.dtype
    assert z.tolist() == [xl[i] if 0 <= i < n else 0 for i in idx.tolist()]


@given(st.integers(0, 100), st.data())
def test_scatter(m, data):
    # Targets are distinct (the all-to-all write of Thm 4.2 writes each position at most
    # once); entries whose target is outside [0, m) write nothing.
    targets = data.draw(st.lists(st.integers(0, max(m - 1, 0)), unique=True, max_size=m)) if m else []
    extra = data.draw(st.lists(st.sampled_from([-1, -7, m, m + 5]), max_size=5))
    order = data.draw(st.permutations(targets + extra))
    idx = np.array(order, dtype=np.int64)
    x = data.draw(words(len(idx)))
    z = mmv.scatter(x, idx, m)
    want = [0] * m
    for v, i in zip(x.tolist(), idx.tolist()):
        if 0 <= i < m:
            want[i] = v
    assert z.dtype == x.dtype and z.tolist() == want


@given(st.integers(0, 100).flatmap(lambda n: st.tuples(words(n, I64_MIN, I64_MAX),
                                                        st.lists(st.integers(0, 63), min_size=n,
                                                                 max_size=n))))
def test_bit(xk):
    x, k = xk
    z = mmv.bit(x, np.array(k, dtype=np.int64))
    # bit k of the two's-complement word; Python's >> on negative ints is the same
    assert z.tolist() == [(v >> b) & 1 for v, b in zip(x.tolist(), k)]
    if len(x):
        assert mmv.bit(x, 3).tolist() == [(v >> 3) & 1 for v in x.tolist()]


@given(st.integers(0, 100).flatmap(lambda n: st.tuples(words(n, I64_MIN, I64_MAX),
                                                        st.lists(st.integers(0, 63), min_size=n,
                                                                 max_size=n))))
def test_bitshl(xk):
    x, k = xk
    z = mmv.bitshl(x, np.array(k, dtype=np.int64))
    assert z.dtype == np.int64
    assert z.tolist() == [wrap64(v * 2**b) for v, b in zip(x.tolist(), k)]


# --------------------------------------------------------------------------- accounting

def test_counting_accounts_every_instruction():
    x = np.array([3, -7, 2, 5, 1], dtype=np.int64)
    with mmv.counting() as outer:
        z = mmv.matmul(x, mmv.upper_ones(2))        # MMU, 3 rows
        with mmv.counting() as inner:
            g = mmv.gathers(z, 2)                   # VCU, 3 elements
            w = mmv.add(x, 100)                     # VCU, 5 elements
    assert (inner.steps, inner.mmu_calls, inner.vcu_calls, inner.mmu_rows, inner.vcu_elements) == (2, 0, 2, 0, 8)
    assert (outer.steps, outer.mmu_calls, outer.vcu_calls, outer.mmu_rows, outer.vcu_elements) == (3, 1, 2, 3, 8)
    assert outer.calls == {"matmul": 1, "gathers": 1, "add": 1}
    assert outer.max_abs == {"matmul": max(abs(v) for v in z.tolist()),
                             "gathers": max(abs(v) for v in g.tolist()),
                             "add": max(abs(v) for v in w.tolist())}
    assert outer.overall_max_abs() == 105
    assert mmv.Counter().overall_max_abs() == 0
    # outside a counting block nothing is recorded
    mmv.add(x, 1)
    assert outer.steps == 3


def test_counting_max_abs_of_int64_min_does_not_wrap():
    with mmv.counting() as c:
        mmv.add(np.array([I64_MIN], dtype=np.int64), 0)
    assert c.max_abs["add"] == 2**63
