"""Numba kernels of the fast SpGEMM (``mmvref._fast.sparse.ops.spgemm``):
row-wise Gustavson, rows in parallel (tasks of about equal products).

- ``row_products``: every row's number of products, the upper bound of its
  length by which rows are staged.
- ``fill_dense``: the dense workspace (a value per column of B and a bitmap
  of the touched ones); the row's distinct columns read off the bitmap in
  order, or sorted in place when they are very spread out. With ``coord_small``
  (the "auto" rule) rows of at most RANK_MAX products take the sparse path.
- ``fill_sparse``: Insert-Sort-Merge with the Coord policy: the row's products
  appended to a private coordinate list, stably sorted by column (by rank up
  to RANK_MAX products: in L1, no mispredicted branch; measured 26 vs 46 ms
  for an insertion sort on 2.6M entries), runs summed.
- ``count_dense`` / ``count_sparse``: the counting pass of the fallback when
  staging would be too large.
- ``compact``: staged rows moved to their final offsets.

Both fills add a column's products in product order (A's entries in order,
then B's), so they agree bit for bit; with ``drop`` they skip exact zeros.
``check_structure`` validates an operand in one parallel pass.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

__all__ = ["check_structure", "row_products", "count_dense", "count_sparse", "fill_dense", "fill_sparse",
           "compact", "RANK_MAX", "SCAN_WORDS"]

#: rows of at most this many products are sorted by stable rank in a private coordinate list
RANK_MAX = 128
#: a long row's columns are read off the bitmap when it spans at most this many words per column
SCAN_WORDS = 16

_U = np.uint64
_KEY_PAD = np.iinfo(np.int64).max


@njit(cache=True, parallel=True)
def check_structure(indptr, indices, ncols, chunks, bad):
    """bad[t] when rows chunks[t]..chunks[t+1]-1 have indptr out of order or a
    column index outside [0, ncols) (one vectorisable max over the indices)."""
    nnz = indices.size
    for t in prange(chunks.size - 1):
        r0 = chunks[t]
        r1 = chunks[t + 1]
        ok = True
        for r in range(r0, r1):
            ok &= indptr[r] <= indptr[r + 1]
        if not ok or indptr[r0] < 0 or indptr[r1] > nnz:
            bad[t] = True
            continue
        umax = _U(0)
        for q in range(indptr[r0], indptr[r1]):
            umax = max(umax, _U(indices[q]))
        if r1 > r0 and indptr[r1] > indptr[r0] and umax >= _U(ncols):
            bad[t] = True


@njit(cache=True, parallel=True)
def row_products(ap, ai, bp, prods):
    """prods[r] = the number of products of row r of A B (sum of the lengths of
    the rows of B that row r of A selects): an upper bound of its length."""
    for r in prange(ap.size - 1):
        s = 0
        for q in range(ap[r], ap[r + 1]):
            kk = ai[q]
            s += bp[kk + 1] - bp[kk]
        prods[r] = s


@njit(cache=True, parallel=True)
def count_dense(ap, ai, bp, bi, p, tasks, counts, mark_proto):
    """Distinct columns of every row of A B (the counting pass of the fallback)."""
    for t in prange(tasks.size - 1):
        mark = np.full(p, -1, mark_proto.dtype)
        for r in range(tasks[t], tasks[t + 1]):
            c = 0
            for q in range(ap[r], ap[r + 1]):
                kk = ai[q]
                for pp in range(bp[kk], bp[kk + 1]):
                    j = bi[pp]
                    if mark[j] != r:
                        mark[j] = r
                        c += 1
            counts[r] = c


@njit(cache=True, parallel=True)
def count_sparse(ap, ai, bp, bi, prods, tasks, counts):
    for t in prange(tasks.size - 1):
        longest = 0
        for r in range(tasks[t], tasks[t + 1]):
            longest = max(longest, prods[r])
        cols = np.empty(longest, bi.dtype)
        for r in range(tasks[t], tasks[t + 1]):
            w = 0
            for q in range(ap[r], ap[r + 1]):
                kk = ai[q]
                for pp in range(bp[kk], bp[kk + 1]):
                    cols[w] = bi[pp]
                    w += 1
            row = cols[:w]
            row.sort()
            c = 0
            for i in range(w):
                c += i == 0 or row[i] != row[i - 1]
            counts[r] = c


# ----------------------------------------------------------------------------- SpGEMM: numeric

@njit(cache=True)
def _emit(j, v, base, w, ci, cd, drop):
    """Write (j, v) at base + w; the next slot when kept (branch-free)."""
    ci[base + w] = j
    cd[base + w] = v
    return w + 1 if (not drop or v != 0) else w


@njit(cache=True, inline="always")
def _coord_row(ap, ai, ad, bp, bi, bd, r, keys, pv, scol, sval, base, ci, cd, drop):
    """A row of at most RANK_MAX products by the sparse workspace held in L1:
    products appended as (key, value) with key = column * RANK_MAX + position
    (distinct keys, ordered by column then product order), each placed at its
    rank (the number of smaller keys: one vectorised count over a list padded
    to whole vectors with the largest key, no data-dependent branch), equal
    columns summed in product order. Returns the entries written at base."""
    n = 0
    for q in range(ap[r], ap[r + 1]):
        kk = ai[q]
        a = ad[q]
        for pp in range(bp[kk], bp[kk + 1]):
            keys[n] = np.int64(bi[pp]) * RANK_MAX + n
            pv[n] = a * bd[pp]
            n += 1
    npad = (n + 7) & ~7
    for i in range(n, npad):
        keys[i] = _KEY_PAD
    for i in range(n):
        key = keys[i]
        rk = 0
        for u in range(npad):
            rk += keys[u] < key
        scol[rk] = key // RANK_MAX
        sval[rk] = pv[i]
    w = 0
    i = 0
    while i < n:
        j = scol[i]
        v = sval[i]
        i += 1
        while i < n and scol[i] == j:
            v += sval[i]
            i += 1
        w = _emit(j, v, base, w, ci, cd, drop)
    return w


@njit(cache=True, parallel=True)
def fill_dense(ap, ai, ad, bp, bi, bd, p, prods, tasks, slot, ci, cd, counts, drop, coord_small):
    """Gustavson with a dense workspace: a value per column of B and a bitmap of
    the touched columns (p/8 bytes: in L1 for p up to ~2**18). Row r's sorted
    distinct columns and sums are written at slot[r] (zeros dropped when
    ``drop``); counts[r] = entries written. The columns come out of the bitmap
    in order (set bits of the words between the first and last touched column,
    by trailing-zero counts) when those words are at most SCAN_WORDS per
    column, else from an in-place sort of the row's column list. With
    ``coord_small``, rows of at most RANK_MAX products go by ``_coord_row``."""
    for t in prange(tasks.size - 1):
        _dense_task(ap, ai, ad, bp, bi, bd, p, prods, tasks[t], tasks[t + 1], slot, ci, cd, counts, drop,
                    coord_small)


@njit(cache=True)
def _dense_task(ap, ai, ad, bp, bi, bd, p, prods, r0, r1, slot, ci, cd, counts, drop, coord_small):
    """Rows r0..r1-1 of fill_dense (a function of its own: the workspace is
    allocated lazily, which a prange body must not do by reassignment)."""
    nwords = (p + 63) >> 6
    bits = np.empty(0, np.uint64)  # allocated at the first long row
    vals = np.empty(0, cd.dtype)
    keys = np.empty(RANK_MAX, np.int64)
    pv = np.empty(RANK_MAX, cd.dtype)
    scol = np.empty(RANK_MAX, ci.dtype)
    sval = np.empty(RANK_MAX, cd.dtype)
    for r in range(r0, r1):
        base = slot[r]
        if coord_small and prods[r] <= RANK_MAX:
            counts[r] = _coord_row(ap, ai, ad, bp, bi, bd, r, keys, pv, scol, sval, base, ci, cd, drop)
            continue
        if bits.size == 0:
            bits = np.zeros(nwords, np.uint64)
            vals = np.empty(p, cd.dtype)  # set at a column's first touch: no O(p) zeroing
        c = 0
        lo = p
        hi = -1
        for q in range(ap[r], ap[r + 1]):
            kk = ai[q]
            a = ad[q]
            for pp in range(bp[kk], bp[kk + 1]):
                j = np.int64(bi[pp])
                wi = j >> 6
                bit = _U(1) << _U(j & 63)
                word = bits[wi]
                if word & bit:
                    vals[j] += a * bd[pp]
                else:
                    bits[wi] = word | bit
                    vals[j] = a * bd[pp]
                    ci[base + c] = j
                    c += 1
                    lo = min(lo, j)
                    hi = max(hi, j)
        w = 0
        if c == 0:
            counts[r] = 0
            continue
        w0 = lo >> 6
        w1 = hi >> 6
        if w1 - w0 + 1 <= SCAN_WORDS * c:
            for wi in range(w0, w1 + 1):
                word = bits[wi]
                bits[wi] = 0
                while word:
                    j = (wi << 6) + np.int64(trailing_zeros(word))
                    w = _emit(j, vals[j], base, w, ci, cd, drop)
                    word &= word - _U(1)
        else:
            row = ci[base:base + c]
            row.sort()
            for i in range(c):
                j = np.int64(ci[base + i])
                bits[j >> 6] = 0
                w = _emit(j, vals[j], base, w, ci, cd, drop)
        counts[r] = w


@njit(cache=True, parallel=True)
def fill_sparse(ap, ai, ad, bp, bi, bd, prods, tasks, slot, ci, cd, counts, drop):
    """Insert-Sort-Merge, Coord policy: the row's products appended to a private
    coordinate workspace, stably sorted by column (``_coord_row`` up to RANK_MAX
    products, else a merge sort), equal columns summed in product order,
    written at slot[r] (zeros dropped when ``drop``)."""
    for t in prange(tasks.size - 1):
        longest = RANK_MAX
        for r in range(tasks[t], tasks[t + 1]):
            longest = max(longest, prods[r])
        cols = np.empty(longest, ci.dtype)
        pv = np.empty(longest, cd.dtype)
        keys = np.empty(RANK_MAX, np.int64)
        scol = np.empty(RANK_MAX, ci.dtype)
        sval = np.empty(RANK_MAX, cd.dtype)
        for r in range(tasks[t], tasks[t + 1]):
            base = slot[r]
            if prods[r] <= RANK_MAX:
                counts[r] = _coord_row(ap, ai, ad, bp, bi, bd, r, keys, pv, scol, sval, base, ci, cd, drop)
                continue
            n = 0
            for q in range(ap[r], ap[r + 1]):
                kk = ai[q]
                a = ad[q]
                for pp in range(bp[kk], bp[kk + 1]):
                    cols[n] = bi[pp]
                    pv[n] = a * bd[pp]
                    n += 1
            order = np.argsort(cols[:n], kind="mergesort")
            w = 0
            i = 0
            while i < n:
                j = cols[order[i]]
                v = pv[order[i]]
                i += 1
                while i < n and cols[order[i]] == j:
                    v += pv[order[i]]
                    i += 1
                w = _emit(j, v, base, w, ci, cd, drop)
            counts[r] = w


@njit(cache=True, parallel=True)
def compact(slot, counts, cp, tasks, ci, cd, oi, od):
    """Rows staged at slot[r] moved to their final place cp[r]."""
    for t in prange(tasks.size - 1):
        for r in range(tasks[t], tasks[t + 1]):
            s = slot[r]
            d = cp[r]
            for i in range(counts[r]):
                oi[d + i] = ci[s + i]
                od[d + i] = cd[s + i]
