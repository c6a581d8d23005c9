"""CSR SpMV in the implemented variant of App. A.3.3 (Algs. 4-6): CsrGather,
Scan, GatherSpMV with HandleLeadingZeros, Diff (Alg. 4 of §4.3.3 with the
empty-row handling of the implementation)."""
from __future__ import annotations

import numpy as np

from .. import bounds, mmv
from .._dtypes import result_dtype, word_dtype
from .._validate import as_csr, as_indptr, as_values, check_s
from ._words import DEFAULT_S, finish, max_abs_int
from .scan import scan_words
from .segmented import diff

__all__ = ["spmv", "segment_sum_csr", "csr_gather", "gather_spmv", "handle_leading_zeros"]


def csr_gather(val, col, x):
    """CsrGather(val, col, x), App. Alg. 5: z(i) = val(i) * x(col(i)).

    Line 4: w = GATHER(x, col); line 5: z = MUL(val, w) (element-wise). The
    per-s-tile loop of the listing is a scheduling detail; one instruction each."""
    w = mmv.gather(x, col)
    return mmv.mul(val, w)


def handle_leading_zeros(y, row):
    """HandleLeadingZeros(y, row), App. Alg. 6 lines 6-11 (scalar loop).

    Counts the leading empty rows (rows whose end offset row(i+1) is 0) and
    returns (zeros for them, their count). The listing zeroes y(i) while
    row(i) == 0 with ``row`` the row offsets; we read it as offsets of row ends."""
    i = 0
    ends = row[1:]
    while i < len(ends) and ends[i] == 0:
        i += 1
    return np.zeros(i, dtype=y.dtype), i


def gather_spmv(yhat, row):
    """GatherSpMV(y, row), App. Alg. 6 lines 1-5: the scanned value at the end
    of every row; leading empty rows get 0 (HandleLeadingZeros), and any other
    empty row repeats the previous row's end, so DIFF gives it 0.
    Line 4: GATHER(y, row(lead+1:) - 1)."""
    z, lead = handle_leading_zeros(yhat, row)
    rest = mmv.gather(yhat, mmv.sub(np.asarray(row[lead + 1:], dtype=np.int64), 1))
    return np.concatenate([z, rest])


def spmv(indptr, indices, data, x, s=DEFAULT_S, *, overflow="raise"):
    """y = A x for CSR A (``indptr``, ``indices``, ``data``) by App. Alg. 4.

    Line 2: z = CsrGather(val, col, x); line 3: z_hat = Scan(z) (Alg. 1);
    line 4: w = GatherSpMV(z_hat, row); line 5: Diff(w).
    Result dtype: the project rule applied to np.result_type(data, x). Float
    note: rows come out as differences of global prefix sums, so a row's error
    scales with the prefix sums, not with the row (that is the algorithm).
    """
    x = as_values(x, "x")
    s = check_s(s)
    indptr, indices, data = as_csr(indptr, indices, data, n_cols=len(x))
    dt = np.result_type(data, x)
    result_dtype(dt)
    wd = word_dtype(dt)
    xw = np.ascontiguousarray(x, dtype=wd)
    dw = np.ascontiguousarray(data, dtype=wd)
    z = csr_gather(dw, indices, xw)
    zhat = scan_words(z, s) if len(z) else z
    w = gather_spmv(zhat, indptr)
    y = diff(w)
    if dt.kind != "f":
        b = bounds.spmv(len(data), s, max_abs_int(data), max_abs_int(x))

        def exact():
            xs, ds = x.astype(object), data.astype(object)
            return [sum(ds[k] * xs[indices[k]] for k in range(indptr[r], indptr[r + 1]))
                    for r in range(len(indptr) - 1)]

        return finish(y, dt, overflow, bound_magnitude=b.magnitude, exact=exact, op="golden.spmv")
    return finish(y, dt, overflow)


def segment_sum_csr(x, indptr, s=DEFAULT_S, *, overflow="raise"):
    """Sums of x over the segments x[indptr[r]:indptr[r+1]] (empty ones give 0),
    by App. Alg. 4 lines 3-5 without the gather: Diff(GatherSpMV(Scan(x), indptr)).

    The offsets form of a segmented sum: unlike start flags they can express
    empty segments, which GatherSpMV turns into zeros.
    """
    x = as_values(x, "x")
    s = check_s(s)
    indptr = as_indptr(indptr, "indptr", nnz=len(x))
    xw = np.ascontiguousarray(x, dtype=word_dtype(x.dtype))
    xhat = scan_words(xw, s) if len(xw) else xw
    y = diff(gather_spmv(xhat, indptr))
    if x.dtype.kind != "f":
        b = bounds.scd(len(x), s, max_abs_int(x))

        def exact():
            xs = x.astype(object)
            return [sum(xs[indptr[r]:indptr[r + 1]].tolist()) for r in range(len(indptr) - 1)]

        return finish(y, x.dtype, overflow, bound_magnitude=b.magnitude, exact=exact,
                      op="golden.segment_sum_csr")
    return finish(y, x.dtype, overflow)
