"""Fast CPU SpMM and SpGEMM (Numba-parallel).

``spmm(A, D)``: O = A D, rows in parallel (balanced by nonzeros), each row a
k-wide accumulator (integers in int64, floats in the result dtype, in index
order: |err_ij| <= gamma_{len_i} sum_q |a_iq D_qj|, as spmv).

``spgemm(A, B, workspace="auto")``: C = A B, row-wise Gustavson in two passes
(count, prefix-sum the counts into indptr, fill), rows in parallel. Workspace
rule: "dense" (values and a last-row marker of n_cols entries per thread; the
touched columns of a row sorted at the end) when n_cols <= DENSE_MAX_COLS,
else "sparse" (the row's (col, value) products gathered, sorted by column,
equal columns summed: Insert-Sort-Merge with one coordinate run); the keyword
overrides. Result: sorted column indices, duplicates summed, entries that
cancel to exactly zero dropped (as scipy and the golden SpGEMMs). Returns a
scipy.sparse.csr_matrix (or csr_array when given one).
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .._dtypes import result_dtype
from .._validate import as_csr_matrix, check_overflow
from ._io import like_input, to_numpy

__all__ = ["spmm", "spgemm", "DENSE_MAX_COLS"]

#: the dense workspace is used up to this many columns (8 B values + 8 B marker each, per thread)
DENSE_MAX_COLS = 1 << 22


def _csr_parts(A, name):
    """as_csr_matrix, with torch CPU tensors in a tuple accepted."""
    if isinstance(A, tuple) and len(A) == 4:
        A = tuple(to_numpy(a, nm) for a, nm in zip(A[:3], ("indptr", "indices", "data"))) + (A[3],)
    return as_csr_matrix(A, name)


def _row_tasks(indptr, parts):
    m = len(indptr) - 1
    nnz = int(indptr[-1])
    cuts = np.searchsorted(indptr, np.linspace(0, nnz, parts + 1)[1:-1].astype(np.int64), side="right") - 1
    return np.unique(np.concatenate([[0], np.clip(cuts, 0, m), [m]])).astype(np.int64)


# ----------------------------------------------------------------------------- SpMM

@njit(cache=True, parallel=True)
def _spmm_rows(indptr, indices, data, D, out, tasks, zero):
    k = D.shape[1]
    for t in prange(tasks.size - 1):
        acc = np.empty(k, out.dtype)  # a private accumulator: no aliasing with D, stays in cache
        for r in range(tasks[t], tasks[t + 1]):
            for j in range(k):
                acc[j] = zero
            for q in range(indptr[r], indptr[r + 1]):
                v = data[q]
                c = indices[q]
                for j in range(k):  # 2-D indexing, no array view per nonzero
                    acc[j] += v * D[c, j]
            for j in range(k):
                out[r, j] = acc[j]


def spmm(A, D, *, overflow="raise"):
    """O = A D for CSR A (scipy CSR or (indptr, indices, data, shape)) and dense
    D (n x k, numpy or torch CPU). Result dtype: the project rule on
    np.result_type(A.data, D); integer overflow raises unless overflow="wrap"."""
    src = D
    check_overflow(overflow)
    indptr, indices, data, (m, n) = _csr_parts(A, "A")
    D = to_numpy(D, "D")
    D = np.asarray(D)
    if D.ndim != 2 or D.shape[0] != n:
        raise ValueError(f"D must be 2-D with {n} rows (A has {n} columns), got shape {D.shape}")
    dt = np.result_type(data, D)
    rdt = result_dtype(dt)
    k = D.shape[1]
    if dt.kind == "f":
        wd = rdt
    else:
        wd = np.dtype(np.int64)
    out = np.zeros((m, k), wd)
    if m and k and len(data):
        Dw = np.ascontiguousarray(D, dtype=wd)
        tasks = _row_tasks(indptr, numba.get_num_threads() * 4)
        _spmm_rows(indptr, indices, np.ascontiguousarray(data, dtype=wd), Dw, out, tasks, wd.type(0))
    if dt.kind != "f":
        ma = max(abs(int(data.min())), abs(int(data.max()))) if len(data) else 0
        mx = max(abs(int(D.min())), abs(int(D.max()))) if D.size else 0
        lens = np.diff(indptr)
        if len(lens) and int(lens.max()) * ma * mx >= 2**63:  # int64 words may have wrapped: exact
            exact = (np.zeros((m, k), dtype=object) if m else np.zeros((0, k), object))
            for r in range(m):
                for q in range(indptr[r], indptr[r + 1]):
                    exact[r] += int(data[q]) * D[indices[q]].astype(object)
            vals = exact
        else:
            vals = out
        info = np.iinfo(rdt)
        if overflow == "raise" and vals.size and (vals.min() < info.min or vals.max() > info.max):
            raise OverflowError(f"spmm: a result overflows {rdt}; pass overflow='wrap'")
        out = (np.asarray(vals, dtype=object) % (1 << 64)).astype(np.uint64).view(np.int64).astype(rdt) \
            if vals is not out else out.astype(rdt)
    return like_input(out, src)


# ----------------------------------------------------------------------------- SpGEMM

@njit(cache=True, parallel=True)
def _gustavson_count(ap, ai, bp, bi, n, tasks, counts, dense):
    """Pass 1: the number of distinct columns of every row of A B."""
    for t in prange(tasks.size - 1):
        if dense:
            mark = np.full(n, -1, np.int64)
            for r in range(tasks[t], tasks[t + 1]):
                c = 0
                for q in range(ap[r], ap[r + 1]):
                    kk = ai[q]
                    for p in range(bp[kk], bp[kk + 1]):
                        j = bi[p]
                        if mark[j] != r:
                            mark[j] = r
                            c += 1
                counts[r] = c
        else:
            for r in range(tasks[t], tasks[t + 1]):
                tot = 0
                for q in range(ap[r], ap[r + 1]):
                    kk = ai[q]
                    tot += bp[kk + 1] - bp[kk]
                cols = np.empty(tot, np.int64)
                w = 0
                for q in range(ap[r], ap[r + 1]):
                    kk = ai[q]
                    for p in range(bp[kk], bp[kk + 1]):
                        cols[w] = bi[p]
                        w += 1
                cols.sort()
                c = 0
                for i in range(tot):
                    if i == 0 or cols[i] != cols[i - 1]:
                        c += 1
                counts[r] = c


@njit(cache=True)
def _sort_small(a):
    """In-place ascending sort: insertion sort for short rows (the common case,
    no call into a general sort per row), np.sort's algorithm beyond 32."""
    n = a.size
    if n > 32:
        a.sort()
        return
    for i in range(1, n):
        v = a[i]
        j = i - 1
        while j >= 0 and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@njit(cache=True, parallel=True)
def _gustavson_fill(ap, ai, ad, bp, bi, bd, n, tasks, cp, ci, cd, dense, zero):
    """Pass 2: every row's sorted distinct columns and their sums (zeros kept
    here; the caller drops them)."""
    for t in prange(tasks.size - 1):
        if dense:
            mark = np.full(n, -1, np.int64)
            vals = np.zeros(n, cd.dtype)
            for r in range(tasks[t], tasks[t + 1]):
                base = cp[r]
                c = 0
                for q in range(ap[r], ap[r + 1]):
                    kk = ai[q]
                    a = ad[q]
                    for p in range(bp[kk], bp[kk + 1]):
                        j = bi[p]
                        if mark[j] != r:
                            mark[j] = r
                            vals[j] = zero
                            ci[base + c] = j
                            c += 1
                        vals[j] += a * bd[p]
                row_cols = ci[base:base + c]
                _sort_small(row_cols)
                for i in range(c):
                    cd[base + i] = vals[row_cols[i]]
        else:
            for r in range(tasks[t], tasks[t + 1]):
                tot = 0
                for q in range(ap[r], ap[r + 1]):
                    kk = ai[q]
                    tot += bp[kk + 1] - bp[kk]
                cols = np.empty(tot, np.int64)
                pv = np.empty(tot, cd.dtype)
                w = 0
                for q in range(ap[r], ap[r + 1]):
                    kk = ai[q]
                    a = ad[q]
                    for p in range(bp[kk], bp[kk + 1]):
                        cols[w] = bi[p]
                        pv[w] = a * bd[p]
                        w += 1
                order = np.argsort(cols, kind="mergesort")  # stable: sums in product order
                base = cp[r]
                c = -1
                for i in range(tot):
                    j = cols[order[i]]
                    if c < 0 or ci[base + c] != j:
                        c += 1
                        ci[base + c] = j
                        cd[base + c] = zero
                    cd[base + c] += pv[order[i]]


def spgemm(A, B, *, workspace="auto"):
    """C = A B for CSR A (m x n) and B (n x p), scipy in, scipy out (see the
    module docstring for the workspace rule, sorting, duplicates and zeros).
    Integers: int64 words, results in the project's dtype without an overflow
    check beyond int64 (int8/16/32 products of such sizes fit)."""
    import scipy.sparse as sps

    if workspace not in ("auto", "dense", "sparse"):
        raise ValueError(f"workspace must be 'auto', 'dense' or 'sparse', got {workspace!r}")
    ap, ai, ad, (m, n) = _csr_parts(A, "A")
    bp, bi, bd, (n2, p) = _csr_parts(B, "B")
    if n != n2:
        raise ValueError(f"shapes {(m, n)} and {(n2, p)} do not multiply")
    dt = np.result_type(ad.dtype, bd.dtype)
    rdt = result_dtype(dt)
    wd = rdt if dt.kind == "f" else np.dtype(np.int64)
    dense = workspace == "dense" or (workspace == "auto" and p <= DENSE_MAX_COLS)
    tasks = _row_tasks(ap, numba.get_num_threads() * 8) if m else np.zeros(1, np.int64)
    counts = np.zeros(m, np.int64)
    if m:
        _gustavson_count(ap, ai, bp, bi, p, tasks, counts, dense)
    cp = np.zeros(m + 1, np.int64)
    np.cumsum(counts, out=cp[1:])
    ci = np.empty(int(cp[-1]), np.int64)
    cd = np.empty(int(cp[-1]), wd)
    if m and cp[-1]:
        _gustavson_fill(ap, ai, np.ascontiguousarray(ad, dtype=wd), bp, bi, np.ascontiguousarray(bd, dtype=wd),
                        p, tasks, cp, ci, cd, dense, wd.type(0))
    cls = sps.csr_array if isinstance(A, getattr(sps, "csr_array", ())) else sps.csr_matrix
    idx_t = np.int32 if max(p, int(cp[-1])) < 2**31 else np.int64
    # built from parts already valid (sorted, in range): skip scipy's O(nnz) format check
    C = cls((m, p), dtype=rdt)
    C.data, C.indices, C.indptr = cd.astype(rdt, copy=False), ci.astype(idx_t), cp.astype(idx_t)
    if C.nnz and (cd == 0).any():
        C.eliminate_zeros()
    C.has_sorted_indices = True
    return C
