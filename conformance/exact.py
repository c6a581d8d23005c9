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
The N-d reductions (``ND_SUMMING_OPS``: segment_csr, segment_coo, scatter with
reduce "sum" or "mean") have one too: per (segment, feature) the segment's
values; a mean is the exact sum divided by the count, A_i / count its magnitude
and one term more (the division's rounding) in the error model; the reference's
own quotient, rounded once in float64, adds 2^-53 |value| to its error.

``plain(op, args, kwargs, overflow)``: a plain numpy result for the ops of
``PLAIN_OPS``, independent of mmvref (golden and fast alike), used where the
golden model is too slow at kernel scale (the release-gate strata,
``conformance.strata``; scatter's golden radix sort took 6 s for 2^17
positions). Dtypes and shapes follow the project rule (the registry); integer
results are exact (int64 where no partial sum can leave int64, else Python
integers), an actual overflow of the result dtype raises OverflowError
(``overflow="wrap"``: the two's-complement wrap-around of the exact value;
an integer mean of int64 values always fits, as in the golden model); float
results are float64 sums rounded to the result dtype, which the comparator
never judges by (it compares float sums with ``reference``); values that are
only moved (compress, split, gather_csr, sorts) are moved bit for bit.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["SUMMING_OPS", "ND_SUMMING_OPS", "Reference", "reference", "REF_ERR_ULPS", "PLAIN_OPS", "plain"]

#: ops whose float outputs are sums of input values or products (compared with the exact value)
SUMMING_OPS = ("scan", "batched_scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "spmv", "spmm",
               "spgemm")
#: the reference's own error, per term, in units of 2**-104 (see the module docstring)
REF_ERR_ULPS = 2.0 ** -104


class Reference:
    """Per-output exact value (float64), magnitude A_i and term count k_i, flattened."""

    __slots__ = ("value", "mag", "terms", "extra")

    def __init__(self, value, mag, terms, extra=None):
        self.value = np.asarray(value, np.float64).ravel()
        self.mag = np.asarray(mag, np.float64).ravel()
        self.terms = np.asarray(terms, np.float64).ravel()
        #: a further error of the reference itself per output (a mean's division, rounded once in float64)
        self.extra = np.zeros_like(self.value) if extra is None else np.asarray(extra, np.float64).ravel()

    def error(self):
        """The reference's own error bound per output (module docstring)."""
        return (self.terms + 2) * REF_ERR_ULPS * self.mag + self.extra + 5e-324


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


def _reference_1d(op, args, kwargs, rdt):
    """``reference`` for SUMMING_OPS."""
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


# ----------------------------------------------------------------------------- N-d segment sums

#: N-d ops whose float outputs are sums (reduce "sum") or means (reduce "mean") of src's values
ND_SUMMING_OPS = ("segment_csr", "segment_coo", "scatter")


@njit(cache=True)
def _nd_rows(x, ptr, perm, use_perm):
    """Per segment n and column c: the double-double sum of x[r, c] over the segment's rows r
    (positions ptr[n]..ptr[n+1]-1, read through ``perm`` when ``use_perm``), its magnitude and
    term count."""
    N = ptr.size - 1
    C = x.shape[1]
    val = np.zeros((N, C))
    mag = np.zeros((N, C))
    cnt = np.zeros((N, C))
    hi = np.zeros(C)
    lo = np.zeros(C)
    pl = np.zeros(C)
    mg = np.zeros(C)
    for n in range(N):
        hi[:] = 0.0
        lo[:] = 0.0
        pl[:] = 0.0
        mg[:] = 0.0
        for e in range(ptr[n], ptr[n + 1]):
            r = perm[e] if use_perm else e
            for c in range(C):
                v = x[r, c]
                a, b = _dd_add(hi[c], lo[c], v, 0.0)
                hi[c] = a
                lo[c] = b
                pl[c] += v
                mg[c] += abs(v)
        k = ptr[n + 1] - ptr[n]
        for c in range(C):
            v = hi[c] + lo[c]
            val[n, c] = v if np.isfinite(v) and np.isfinite(pl[c]) else pl[c]
            mag[n, c] = mg[c]
            cnt[n, c] = k
    return val, mag, cnt


def _nd_segments(op, args, kwargs, E):
    """(ptr, perm or None, N) of an N-d op's segments: CSR offsets, or a (sorted / any order) id
    per position counted into offsets (perm: the positions in stable id order)."""
    if op == "segment_csr":
        ptr = np.asarray(args[1], np.int64)
        return ptr, None, ptr.size - 1
    ids = np.asarray(args[1]).astype(np.int64, copy=False)
    dim = kwargs.get("dim_size")
    n = int(dim) if dim is not None else (int(ids.max()) + 1 if ids.size else 0)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(ids, minlength=n))]).astype(np.int64)
    perm = np.argsort(ids, kind="stable") if op == "scatter" else None
    return ptr, perm, n


def _nd_reference(op, args, kwargs, rdt):
    x = np.asarray(args[0])
    reduce = kwargs.get("reduce", "sum")
    if reduce not in ("sum", "add", "mean") or x.ndim == 0:
        return None
    axis = int(kwargs.get("axis", kwargs.get("dim", 0))) % x.ndim
    moved = np.moveaxis(x, axis, 0)
    E = moved.shape[0]
    x2 = np.ascontiguousarray(_f64(moved, rdt).reshape(E, int(np.prod(moved.shape[1:], dtype=np.int64))))
    ptr, perm, N = _nd_segments(op, args, kwargs, E)
    val, mag, cnt = _nd_rows(x2, ptr, perm if perm is not None else np.zeros(0, np.int64), perm is not None)
    extra = np.zeros_like(val)
    if reduce == "mean":  # the sum divided by the count: one more rounding (a term more in the model);
        c = np.maximum(cnt, 1.0)  # the reference's own quotient is rounded once in float64
        val, mag, cnt = val / c, mag / c, cnt + (cnt > 0)
        extra = np.abs(val) * 2.0**-53
    rest = moved.shape[1:]

    def back(a):  # the golden result's layout: the reduced axis back in its place
        return np.moveaxis(a.reshape((N,) + rest), 0, axis)

    return Reference(back(val), back(mag), back(cnt), back(extra))


def reference(op, args, kwargs, rdt):
    """The exact reference of ``op`` (see the module docstring; for ``ND_SUMMING_OPS`` with reduce
    "sum" or "mean": per (segment, feature) the double-double sum of the segment's values, for a
    mean divided by the count with one more term in the error model), or None when the op has no
    float sum or ``rdt`` is not a float dtype."""
    if op in ND_SUMMING_OPS:
        return _nd_reference(op, args, kwargs, rdt) if np.dtype(rdt).kind == "f" else None
    return _reference_1d(op, args, kwargs, rdt)


# ----------------------------------------------------------------------------- plain references

_I64_MAX = int(np.iinfo(np.int64).max)


def _rdt(op, dtype):
    from mmvref.registry import REGISTRY

    return REGISTRY[op].result_dtype(np.dtype(dtype))


def _max_abs(a):
    a = np.asarray(a)
    return 0 if a.size == 0 else max(abs(int(a.min())), abs(int(a.max())))


def _words(a, exact_needed):
    """Integer values as int64 words, or as Python integers (object) when ``exact_needed``."""
    return np.asarray(a).astype(object) if exact_needed else np.asarray(a).astype(np.int64)


def _int_out(v, rdt, overflow, op):
    """Exact integer results ``v`` (int64 or object) as ``rdt``: OverflowError when one leaves
    rdt (``overflow="raise"``), else the two's-complement wrap-around."""
    rdt = np.dtype(rdt)
    info = np.iinfo(rdt)
    v = np.asarray(v)
    if overflow == "raise" and v.size:
        lo, hi = int(v.min()), int(v.max())
        if lo < info.min or hi > info.max:
            raise OverflowError(f"plain {op}: a result ({hi if hi > info.max else lo}) overflows {rdt}")
    if v.dtype == object:
        m = 1 << info.bits
        v = np.array([((int(t) - info.min) % m) + info.min for t in v.ravel()], dtype=rdt).reshape(v.shape)
    return v.astype(rdt)


def _prefix(x, exclusive):
    """Inclusive (exclusive) prefix sums of the words x along axis -1 (any dtype numpy sums)."""
    c = np.cumsum(x, axis=-1)
    return c - x if exclusive else c


def _sums(words, ptr):
    """Sums of words[ptr[n]:ptr[n+1]] along axis 0, each segment added up on its own (exact for
    int64 words whose every partial sum fits, and for Python integers); empty segments 0."""
    ptr = np.asarray(ptr, np.int64)
    out = np.zeros((ptr.size - 1,) + words.shape[1:], words.dtype)
    full = np.diff(ptr) > 0
    if full.any():  # reduceat over the non-empty segments: each runs to the next one's start
        out[full] = np.add.reduceat(words[: int(ptr[-1])], ptr[:-1][full], axis=0)
    return out


def _exact_words(x, terms, overflow):
    """x as words whose partial sums of up to ``terms`` values are exact (int64, or Python
    integers when they could leave int64), or int64 words that wrap (``overflow="wrap"``)."""
    return _words(x, overflow == "raise" and _max_abs(x) * max(int(terms), 1) > _I64_MAX)


def _summed(op, x, overflow, segment_sums, float_sums):
    """A sum's result: integers exact (``segment_sums(words)``), floats float64 (``float_sums``)."""
    rdt = _rdt(op, x.dtype)
    if x.dtype.kind == "f":
        return float_sums(x.astype(np.float64)).astype(rdt)
    return _int_out(segment_sums(_exact_words(x, x.size, overflow)), rdt, overflow, op)


def _starts(f, n):
    st = np.asarray(f).astype(bool).copy()
    if n:
        st[0] = True
    return st


def _p_scan(args, kw, overflow, op="scan"):
    x = np.asarray(args[0])
    excl = bool(kw.get("exclusive", False))
    return _summed(op, x, overflow, lambda w: _prefix(w, excl), lambda w: _prefix(w, excl))


def _p_segmented_scan(args, kw, overflow):
    x, n = np.asarray(args[0]), len(args[0])
    st = _starts(args[1], n)
    excl = bool(kw.get("exclusive", False))
    seg = np.cumsum(st) - 1  # each position's segment

    def seg_scan(w):
        c = _prefix(w, False)
        before = (c - w)[st]  # the prefix before each segment's start
        z = c - before[seg] if n else c
        return z - w if excl else z

    return _summed("segmented_scan", x, overflow, seg_scan, seg_scan)


def _p_segmented_sum(args, kw, overflow):
    x, n = np.asarray(args[0]), len(args[0])
    ptr = np.append(np.flatnonzero(_starts(args[1], n)), n).astype(np.int64) if n else np.zeros(1, np.int64)
    return _summed("segmented_sum", x, overflow, lambda w: _sums(w, ptr), lambda w: _sums(w, ptr))


def _p_segment_sum_csr(args, kw, overflow):
    x, ptr = np.asarray(args[0]), np.asarray(args[1], np.int64)
    return _summed("segment_sum_csr", x, overflow, lambda w: _sums(w, ptr), lambda w: _sums(w, ptr))


def _p_products(op, A, X, overflow):
    """spmv (X 1-D) / spmm (X 2-D): the products of the stored entries and their row sums."""
    ptr, ind, data, (m, _) = _csr_parts(A)
    X = np.asarray(X)
    dt = np.result_type(data, X)
    rdt = _rdt(op, dt)
    X2 = X[:, None] if X.ndim == 1 else X
    if dt.kind == "f":
        d, Xw = data.astype(np.float64), X2.astype(np.float64)
    else:
        top = _max_abs(data) * _max_abs(X2)  # the largest |product|
        exact_words = top > _I64_MAX or (overflow == "raise" and top * max(len(data), 1) > _I64_MAX)
        d, Xw = _words(data, exact_words), _words(X2, exact_words)
    # column by column (1-D products: a broadcast [nnz, k] product is several times slower)
    out = np.stack([_sums(d * Xw[:, j][ind], ptr) for j in range(Xw.shape[1])], axis=1) if Xw.shape[1] else \
        np.zeros((m, 0), d.dtype)
    out = out.astype(rdt) if dt.kind == "f" else _int_out(out, rdt, overflow, op)
    return out[:, 0] if X.ndim == 1 else out


def _p_nd(op):
    def f(args, kw, overflow):
        x = np.asarray(args[0])
        reduce = kw.get("reduce", "sum")
        if reduce not in ("sum", "add", "mean"):
            raise NotImplementedError(f"plain {op}: reduce={reduce!r} (sum and mean only)")
        axis = int(kw.get("axis", kw.get("dim", 0))) % x.ndim
        moved = np.moveaxis(x, axis, 0)
        E = moved.shape[0]
        x2 = moved.reshape(E, int(np.prod(moved.shape[1:], dtype=np.int64)))
        ptr, perm, N = _nd_segments(op, args, kw, E)
        if perm is not None:
            x2 = x2[perm]
        cnt = np.maximum(np.diff(ptr), 1).reshape(N, 1)
        rdt = _rdt(op, x.dtype)
        if x.dtype.kind == "f":
            y = _sums(x2.astype(np.float64), ptr)
            y = (y / cnt if reduce == "mean" else y).astype(rdt)
        elif reduce == "mean":  # between the values: it fits; "wrap": floor(wrapped sum / count)
            y = _sums(_exact_words(x2, E, overflow), ptr)
            y = y // (cnt.astype(object) if y.dtype == object else cnt)
            y = _int_out(y, rdt, overflow, op)
        else:
            y = _int_out(_sums(_exact_words(x2, E, overflow), ptr), rdt, overflow, op)
        return np.moveaxis(y.reshape((N,) + moved.shape[1:]), 0, axis)
    return f


def _p_gather_csr(args, kw, overflow):
    x, ptr = np.asarray(args[0]), np.asarray(args[1], np.int64)
    axis = int(kw.get("axis", kw.get("dim", 0))) % x.ndim
    return np.repeat(x, np.diff(ptr), axis=axis)


def _p_compress(args, kw, overflow):
    x, m = np.asarray(args[0]), np.asarray(args[1]).astype(bool)
    return x[m]


def _p_compress_ind(args, kw, overflow):
    m = np.asarray(args[1]).astype(bool)
    return np.asarray(args[0])[m], np.flatnonzero(m).astype(np.int64)


def _p_split_ind(args, kw, overflow):
    x, m = np.asarray(args[0]), np.asarray(args[1]).astype(bool)
    idx = np.concatenate([np.flatnonzero(m), np.flatnonzero(~m)]).astype(np.int64)
    return x[idx], idx


def _sort_order(x, descending):
    """The stable order of DEVELOPERS.md ("Order"): -0.0 == +0.0, NaNs above +inf (ascending:
    last; descending: first), equal keys in input order."""
    x = np.asarray(x)
    key = x.astype(np.float64) + 0.0 if x.dtype.kind == "f" else x  # -0.0 -> +0.0
    if not descending:
        return np.argsort(key, kind="stable").astype(np.int64)
    n = key.size  # descending, ties in input order: the ascending stable order of the reversed keys, reversed
    return (n - 1 - np.argsort(key[::-1], kind="stable")[::-1]).astype(np.int64)


def _p_radix_sort(args, kw, overflow):
    x = np.asarray(args[0])
    order = _sort_order(x, bool(kw.get("descending", False)))
    return x[order], order


def _p_argsort(args, kw, overflow):
    return _sort_order(args[0], bool(kw.get("descending", False)))


def _p_topk(args, kw, overflow):
    x, k = np.asarray(args[0]), int(args[1])
    order = _sort_order(x, bool(kw.get("largest", True)))[:k]
    return x[order], order


def _p_weighted_sample(args, kw, overflow):
    w, u = np.asarray(args[0]), args[1]
    if w.dtype.kind == "f":
        c = np.cumsum(w.astype(np.float64))
    else:
        c = np.cumsum(w.astype(object if _max_abs(w) * max(w.size, 1) > _I64_MAX else np.int64))
        if c.size and int(c[-1]) > _I64_MAX:
            raise OverflowError("plain weighted_sample: the total of the weights overflows int64")
        c = c.astype(np.int64)
    if w.size == 0 or not c[-1] > 0:
        raise ValueError("w must have a positive total")

    def one(v):
        t = float(v) * float(c[-1])
        thr = math.floor(t) if c.dtype.kind == "i" else t
        i = int(np.searchsorted(c, thr, side="right"))  # the first c[i] > thr (c is non-decreasing)
        return np.int64(i if i < c.size else np.flatnonzero(w > 0)[-1])

    ua = np.asarray(u, np.float64)
    if ua.ndim == 0:
        return one(ua)
    return np.array([one(v) for v in ua.ravel()], np.int64).reshape(ua.shape)


_PLAIN = {
    "scan": _p_scan,
    "batched_scan": lambda a, k, o: _p_scan(a, k, o, "batched_scan"),
    "segmented_scan": _p_segmented_scan,
    "segmented_sum": _p_segmented_sum,
    "segment_sum_csr": _p_segment_sum_csr,
    "segment_csr": _p_nd("segment_csr"),
    "segment_coo": _p_nd("segment_coo"),
    "scatter": _p_nd("scatter"),
    "gather_csr": _p_gather_csr,
    "compress": _p_compress,
    "compress_ind": _p_compress_ind,
    "split": lambda a, k, o: _p_split_ind(a, k, o)[0],
    "split_ind": _p_split_ind,
    "radix_sort": _p_radix_sort,
    "argsort": _p_argsort,
    "topk": _p_topk,
    "spmv": lambda a, k, o: _p_products("spmv", a[0], a[1], o),
    "spmm": lambda a, k, o: _p_products("spmm", a[0], a[1], o),
    "weighted_sample": _p_weighted_sample,
}
#: ops with a plain reference (``plain``)
PLAIN_OPS = tuple(_PLAIN)


def plain(op, args, kwargs, overflow="raise"):
    """The plain numpy result of ``op`` on ``(args, kwargs)`` (module docstring), for the ops of
    ``PLAIN_OPS``."""
    try:
        f = _PLAIN[op]
    except KeyError:
        raise KeyError(f"no plain reference for op {op!r}; there is one for: {', '.join(PLAIN_OPS)}") from None
    if overflow not in ("raise", "wrap"):
        raise ValueError(f"overflow must be 'raise' or 'wrap', got {overflow!r}")
    return f(args, kwargs, overflow)
