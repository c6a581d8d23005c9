"""Exact references for the float outputs of the ops that add values up.

The golden model computes in the result dtype and, following the papers,
takes differences of speculative prefix sums, so it is often the *less*
accurate side; a backend's float result is therefore compared with the exact
value of each output, not with the golden one (the golden model stays the
stage-by-stage reference and the source of dtypes, shapes and integer
results).

What "exact" means here. The inputs are first converted to the result dtype
(exactly what every backend does: fp16 values in fp32 words, integer values
with a float ``x`` in float64); then each output's terms (values, or products
``a * x`` made exact as a double-double by Dekker's two-product) are added up in
double-double arithmetic (Knuth's two-sum), and the double-double is rounded to
float64. The difference from the exact real sum is at most

    ref_err_i = (k_i + 2) * 2**-104 * A_i        (+ the smallest float64 subnormal)

for an output of k_i terms with sum of magnitudes A_i, which the comparator
adds to every tolerance: against a float32 or float64 result's own rounding
error (at least 2**-53 A_i for one rounding) it is nothing, but it is stated.
Outputs with a non-finite term or a double-double overflow take the plain
float64 sum (IEEE: inf and NaN propagate).

``reference(op, args, kwargs, rdt)`` gives, per output (flattened, in the
golden result's order): the reference value, A_i (the sum of |terms| of the
output itself) and k_i (its number of terms). None for ops without a float sum.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["SUMMING_OPS", "Reference", "reference", "REF_ERR_ULPS"]

#: ops whose float outputs are sums of input values or products (compared with the exact value)
SUMMING_OPS = ("scan", "batched_scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "spmv", "spmm",
               "spgemm")
#: the reference's own error, per term, in units of 2**-104 (see the module docstring)
REF_ERR_ULPS = 2.0 ** -104


class Reference:
    """Per-output exact value (float64), magnitude A_i and term count k_i, flattened."""

    __slots__ = ("value", "mag", "terms")

    def __init__(self, value, mag, terms):
        self.value = np.asarray(value, np.float64).ravel()
        self.mag = np.asarray(mag, np.float64).ravel()
        self.terms = np.asarray(terms, np.float64).ravel()

    def error(self):
        """The reference's own error bound per output (module docstring)."""
        return (self.terms + 2) * REF_ERR_ULPS * self.mag + 5e-324


# ----------------------------------------------------------------------------- double-double kernels

@njit(cache=True, inline="always")
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(cache=True, inline="always")
def _split(a):
    c = 134217729.0 * a  # 2**27 + 1
    hi = c - (c - a)
    return hi, a - hi


@njit(cache=True, inline="always")
def _two_prod(a, b):
    """(p, e) with p + e = a * b exactly, unless a product part overflows (then e = 0)."""
    p = a * b
    if not (abs(a) < 1e150 and abs(b) < 1e150 and abs(p) < 1e300):
        return p, 0.0  # Dekker's split would overflow; beyond any finite-sum input of the strategies
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit(cache=True, inline="always")
def _dd_add(hi, lo, v, ve):
    """(hi, lo) + (v, ve), renormalized."""
    s, e = _two_sum(hi, v)
    e += lo + ve
    return _two_sum(s, e)


@njit(cache=True)
def _segscan(x, starts, exclusive):
    """Per position i: the (exclusive) sum of x over i's segment up to i; starts[i] opens a
    segment (starts[0] is taken as set). Returns value, magnitude, term count."""
    n = x.size
    val = np.zeros(n)
    mag = np.zeros(n)
    cnt = np.zeros(n)
    hi = 0.0
    lo = 0.0
    plain = 0.0
    m = 0.0
    k = 0.0
    for i in range(n):
        if i == 0 or starts[i]:
            hi = 0.0
            lo = 0.0
            plain = 0.0
            m = 0.0
            k = 0.0
        if exclusive:
            v = hi + lo
            val[i] = v if np.isfinite(v) and np.isfinite(plain) else plain
            mag[i] = m
            cnt[i] = k
        hi, lo = _dd_add(hi, lo, x[i], 0.0)
        plain += x[i]
        m += abs(x[i])
        k += 1.0
        if not exclusive:
            v = hi + lo
            val[i] = v if np.isfinite(v) and np.isfinite(plain) else plain
            mag[i] = m
            cnt[i] = k
    return val, mag, cnt


@njit(cache=True)
def _csr_rows(indptr, indices, data, X):
    """Per row r and column j of X: sum over the row's entries of data[k] * X[indices[k], j]."""
    m = indptr.size - 1
    q = X.shape[1]
    val = np.zeros((m, q))
    mag = np.zeros((m, q))
    cnt = np.zeros((m, q))
    for r in range(m):
        a0 = indptr[r]
        a1 = indptr[r + 1]
        for j in range(q):
            hi = 0.0
            lo = 0.0
            plain = 0.0
            mg = 0.0
            for t in range(a0, a1):
                p, e = _two_prod(data[t], X[indices[t], j])
                hi, lo = _dd_add(hi, lo, p, e)
                plain += p
                mg += abs(p)
            v = hi + lo
            val[r, j] = v if np.isfinite(v) and np.isfinite(plain) else plain
            mag[r, j] = mg
            cnt[r, j] = a1 - a0
    return val, mag, cnt


# ----------------------------------------------------------------------------- per op

def _f64(a, rdt):
    """Values converted to the result dtype (as a backend does), then to float64 (exact)."""
    return np.ascontiguousarray(np.asarray(a).astype(rdt).astype(np.float64))


def _csr_parts(a):
    from mmvref._validate import as_csr_matrix

    ptr, ind, data, shape = as_csr_matrix(a)
    return np.asarray(ptr, np.int64), np.asarray(ind, np.int64), data, shape


def reference(op, args, kwargs, rdt):
    """The exact reference of ``op`` (see the module docstring), or None when the op has no
    float sum or ``rdt`` is not a float dtype."""
    rdt = np.dtype(rdt)
    if op not in SUMMING_OPS or rdt.kind != "f":
        return None
    if op in ("scan", "batched_scan"):
        x = np.atleast_2d(_f64(args[0], rdt))
        excl = bool(kwargs.get("exclusive", False))
        parts = [_segscan(row, np.zeros(row.size, np.bool_), excl) for row in x]
        if not parts:
            return Reference(np.zeros(0), np.zeros(0), np.zeros(0))
        return Reference(*(np.concatenate([p[k] for p in parts]) for k in range(3)))
    if op in ("segmented_scan", "segmented_sum"):
        x = _f64(args[0], rdt)
        st = np.asarray(args[1]).astype(bool).copy()
        if x.size == 0:
            return Reference(np.zeros(0), np.zeros(0), np.zeros(0))
        st[0] = True
        if op == "segmented_scan":
            return Reference(*_segscan(x, st, bool(kwargs.get("exclusive", False))))
        val, mag, cnt = _segscan(x, st, False)
        ends = np.append(np.flatnonzero(st)[1:] - 1, x.size - 1)
        return Reference(val[ends], mag[ends], cnt[ends])
    if op == "segment_sum_csr":
        x = _f64(args[0], rdt)
        ptr = np.asarray(args[1], np.int64)
        val, mag, cnt = _csr_rows(ptr, np.arange(x.size, dtype=np.int64), x, np.ones((max(x.size, 1), 1)))
        return Reference(val, mag, cnt)
    if op in ("spmv", "spmm"):
        A, X = args
        ptr, ind, data, _ = _csr_parts(A)
        X = _f64(X, rdt)
        X2 = X[:, None] if X.ndim == 1 else X
        val, mag, cnt = _csr_rows(ptr, ind, _f64(data, rdt), np.ascontiguousarray(X2))
        return Reference(val, mag, cnt)
    # spgemm: dense C[i, j] = sum_k A[i, k] B[k, j] over the stored entries (duplicates summed)
    (ap, ai, ad, (m, _)), (bp, bi, bd, (_, n)) = (_csr_parts(a) for a in args)
    adf, bdf = _f64(ad, rdt), _f64(bd, rdt)
    val = np.zeros((m, n))
    mag = np.zeros((m, n))
    cnt = np.zeros((m, n))
    # every product a_ik b_kj as a term (duplicates in A or B each their own), grouped by (i, j)
    counts = bp[ai + 1] - bp[ai]
    tot = int(counts.sum())
    if tot == 0:
        return Reference(val, mag, cnt)
    rows = np.repeat(np.repeat(np.arange(m), np.diff(ap)), counts)
    bidx = np.repeat(bp[ai], counts) + (np.arange(tot) - np.repeat(np.cumsum(counts) - counts, counts))
    key = rows * max(n, 1) + bi[bidx]
    order = np.argsort(key, kind="stable")
    key = key[order]
    cuts = np.flatnonzero(np.diff(key)) + 1
    gptr = np.concatenate([[0], cuts, [tot]]).astype(np.int64)
    v, mg, c = _csr_rows(gptr, np.arange(tot, dtype=np.int64), np.repeat(adf, counts)[order],
                         np.ascontiguousarray(bdf[bidx][order][:, None]))
    at = key[gptr[:-1]]
    val.ravel()[at], mag.ravel()[at], cnt.ravel()[at] = v[:, 0], mg[:, 0], c[:, 0]
    return Reference(val, mag, cnt)
