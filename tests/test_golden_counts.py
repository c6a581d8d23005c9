"""Step counts of the golden model against the paper's listings.

The expected numbers are derived here from n and s alone, by a tiny recursion over the
lengths the listings produce (and, independently, by closed forms in the recursion
depth d(n)), never by running the code under test:

Alg. 1 (Scan, §4), on a vector of length L:
    line 2  MATMUL(x, U_s)                         1 MMU, ceil(L/s) rows
    L <= s: done
    line 5  GATHERS                                1 VCU
    line 6  Scan(x_s) on ceil(L/s) elements        recursion
    line 7  SCATTERS                               1 VCU
    line 8  MATMUL(z(s-1:), B_s)                   1 MMU, ceil((L-s+1)/s) rows
  => steps = 1 + 4 d, MMU = 1 + 2 d, VCU = 2 d.

App. Alg. 1 (block-recursive SegScan): SegScan = BlockSegScan(n) + Recurse(n);
    BlockSegScan(L) = 2 MATMUL (x_bar, f_bar; ceil(L/s) rows each) + REVSPEC
    Recurse(L), L > s = MATMUL (f_bar) + GATHERS + ISZERO + NOT + GATHERS
                        + BlockSegScan(ceil(L/s)) + Recurse(ceil(L/s)) + SCATTERS
                        + UpdateFirstSegment(L - s + 1)
    UpdateFirstSegment(L) = MATMUL + FILLS + SUB + ISZERO + NOT + AND
                        + NOT + AND (the erratum fix of line 24) + FILLS + MASK + ADD
  => steps = 3 + 20 d, MMU = 2 + 4 d, VCU = 1 + 16 d.

d(n) = number of times the length must shrink by ceil(L/s) until L <= s
     = ceil(log_s n) - 1 for n > 1 (0 for n <= 1).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest

from mmvref import golden, mmv

pytestmark = pytest.mark.native_only  # the golden model / stand-in: no kernel chosen by the compile target

S_VALUES = [2, 3, 4, 5, 8, 16, 128]


def ceil_div(a, b):
    return -(-a // b)


def depth(n, s):
    d = 0
    while n > s:
        n = ceil_div(n, s)
        d += 1
    return d


def ceil_log(n, s):
    """ceil(log_s n) for n >= 1, in integers."""
    k, p = 0, 1
    while p < n:
        p *= s
        k += 1
    return k


@dataclass
class Expect:
    mmu: int = 0
    vcu: int = 0
    rows: int = 0
    calls: Counter = None

    def __post_init__(self):
        self.calls = Counter() if self.calls is None else self.calls

    @property
    def steps(self):
        return self.mmu + self.vcu

    def mm(self, length, s, k=1):
        self.mmu += k
        self.rows += k * ceil_div(length, s)
        self.calls["matmul"] += k

    def v(self, *names):
        for name in names:
            self.vcu += 1
            self.calls[name] += 1


def expect_scan(n, s, e=None):
    e = Expect() if e is None else e
    e.mm(n, s)                          # line 2
    if n <= s:
        return e
    e.v("gathers")                      # line 5
    expect_scan(ceil_div(n, s), s, e)   # line 6
    e.v("scatters")                     # line 7
    e.mm(n - (s - 1), s)                # line 8, on z(s-1:n)
    return e


def expect_block_seg_scan(n, s, e):
    e.mm(n, s, 2)                       # lines 17-18
    e.v("revspec")                      # line 19


def expect_update_first_segment(n, s, e):
    e.mm(n, s)                          # line 21
    e.v("fills", "sub", "iszero", "not", "and", "not", "and", "fills", "mask", "add")


def expect_recurse(n, s, e):
    if n <= s:                          # lines 5-6
        return
    m = ceil_div(n, s)
    e.mm(n, s)                          # line 7
    e.v("gathers", "iszero", "not", "gathers")  # lines 8-10
    expect_block_seg_scan(m, s, e)      # line 11
    expect_recurse(m, s, e)             # line 12
    e.v("scatters")                     # line 13
    expect_update_first_segment(n - (s - 1), s, e)  # line 14


def expect_seg_scan(n, s):
    e = Expect()
    expect_block_seg_scan(n, s, e)
    expect_recurse(n, s, e)
    return e


def sizes(s):
    ns = {0, 1, 2, s - 1, s, s + 1, 2 * s + 1, s * s - 1, s * s, s * s + 1, 7 * s * s + 3}
    k = 3
    while s**k <= 20000:
        ns |= {s**k - 1, s**k, s**k + 1}
        k += 1
    return sorted(n for n in ns if 0 <= n <= 20000)


CASES = [(s, n) for s in S_VALUES for n in sizes(s)]
IDS = [f"s{s}-n{n}" for s, n in CASES]


def _counted(fn):
    with mmv.counting() as c:
        fn()
    return c


def _assert_counts(c, e):
    assert (c.steps, c.mmu_calls, c.vcu_calls, c.mmu_rows) == (e.steps, e.mmu, e.vcu, e.rows)
    assert c.calls == e.calls


@pytest.mark.parametrize("s, n", CASES, ids=IDS)
def test_depth_is_ceil_log_minus_one(s, n):
    assert depth(n, s) == (ceil_log(n, s) - 1 if n > 1 else 0)


@pytest.mark.parametrize("s, n", CASES, ids=IDS)
def test_scan_counts(s, n):
    e = expect_scan(n, s)
    d = depth(n, s)
    assert (e.steps, e.mmu, e.vcu) == (1 + 4 * d, 1 + 2 * d, 2 * d)  # the recursion and the closed form agree
    x = np.zeros(n, dtype=np.int32)
    _assert_counts(_counted(lambda: golden.scan(x, s)), e)
    _assert_counts(_counted(lambda: golden.scan_words(x.astype(np.int64), s)), e)


@pytest.mark.parametrize("s, n", CASES, ids=IDS)
def test_seg_scan_counts(s, n):
    e = expect_seg_scan(n, s)
    d = depth(n, s)
    assert (e.steps, e.mmu, e.vcu) == (3 + 20 * d, 2 + 4 * d, 1 + 16 * d)
    rng = np.random.default_rng(n)
    x = rng.integers(-5, 5, n).astype(np.int16)
    f = (rng.random(n) < 0.2).astype(np.uint8)  # counts do not depend on the data
    _assert_counts(_counted(lambda: golden.seg_scan(x, f, s)), e)
    _assert_counts(_counted(lambda: golden.seg_scan_words(x.astype(np.int64), f.astype(np.int64), s)), e)


@pytest.mark.parametrize("s", S_VALUES)
def test_counts_grow_as_ceil_log_s_n(s):
    """Steps are affine in ceil(log_s n): the same increment for every extra level, and
    no change while ceil(log_s n) stays the same."""
    per_level = {"scan": 4, "seg_scan": 20}
    kmax = max(k for k in range(1, 8) if s**k + 1 <= 20000)
    for name, run in (("scan", lambda n: golden.scan(np.ones(n, np.int32), s)),
                      ("seg_scan", lambda n: golden.seg_scan(np.ones(n, np.int32), np.zeros(n, np.uint8), s))):
        base = 1 if name == "scan" else 3
        for k in range(1, kmax + 1):
            lo, hi = _counted(partial(run, s**k)), _counted(partial(run, s**k + 1))
            assert lo.steps == base + per_level[name] * (ceil_log(s**k, s) - 1)
            assert hi.steps - lo.steps == per_level[name]  # s^k + 1 needs one more level
            if k >= 2:
                mid = _counted(partial(run, s ** (k - 1) + 1 + (s**k - s ** (k - 1)) // 2))
                assert mid.steps == lo.steps  # same ceil(log_s n): same steps
