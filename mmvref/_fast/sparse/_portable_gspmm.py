"""Numba kernels of graph message passing without messages (``mmvref.pyg``'s fused path, issue 33).

A graph's edges e = (src_e -> dst_e) with an optional weight w[e, h] per edge and head aggregate
the source rows of x into the destination rows of out, the E x F messages never built:

    out[i, f] = reduce over edges e into i of  w[e, f // C] * x[src_e, f]     (C = F // H)

The graph arrives as CSR by destination (``indptr``, ``col`` = src per entry, ``perm`` = the
original edge id of each entry, so weights and weight gradients stay in the caller's edge order).
The transposed product (the features' gradient) is the same kernel over the CSR by source. The
unweighted sum and the sum with one weight per edge are SpMMs (values 1, or the weights in CSR
order) and run the prepared SpMM's kernel (``ops.spmm_into_any_k``: register accumulators, 1.6-3x
the loop over an output row in memory that was here before, the same bits); this module keeps the
sum with a weight per edge and head (GAT), max/min and the weights' gradient.

Rows in parallel, in tasks of about equal entries (``tasks``: row boundaries, so power-law rows
do not leave a thread idle); each row is accumulated in order into its own output row, a multiply
then an add: the sum of a row is the sequential sum in CSR order (stable by edge id), whatever
the thread count. Max/min keep the first extreme (the lowest CSR position) and its edge id for
the backward's routing; a row with no edge gives 0 and edge id -1 (PyG's and torch_scatter's
convention).

One kernel per job and dtype; the weight layout (one per edge, one per edge and head) and whether
a max/min gradient reaches the weights are runtime branches outside the feature loop, so a first
call compiles a few small kernels for its dtype, not one per combination. Max/min have a kernel
without weights and one with (forward and backward): a parallel kernel's compile time grows fast
with its code under LLVM's -O3, and a first SAGE-max step needs only the unweighted ones.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["csr_by_key", "row_tasks", "gspmm_sum_head_weights", "gspmm_extreme", "gspmm_extreme_weighted",
           "gspmm_extreme_backward", "gspmm_extreme_backward_weighted", "sddmm"]


@njit(cache=True)
def csr_by_key(key, other, n_rows, n_other):
    """Stable counting sort of edges by ``key`` (int64, E): (indptr int64[n_rows + 1], other's
    entries in that order as int32, edge ids int32, ok). ``ok`` is False, and nothing else is
    meaningful, when a key leaves [0, n_rows) or an ``other`` leaves [0, n_other)."""
    E = key.shape[0]
    indptr = np.empty(n_rows + 1, np.int64)
    for r in range(n_rows + 1):  # (not np.zeros: its implementation compiles for 0.15 s in a first step)
        indptr[r] = 0
    col = np.empty(E, np.int32)
    perm = np.empty(E, np.int32)
    for e in range(E):
        k = key[e]
        o = other[e]
        if k < 0 or k >= n_rows or o < 0 or o >= n_other:
            return indptr, col, perm, False
        indptr[k + 1] += 1
    for r in range(n_rows):
        indptr[r + 1] += indptr[r]
    fill = indptr[:-1].copy()
    for e in range(E):
        k = key[e]
        p = fill[k]
        fill[k] = p + 1
        col[p] = other[e]
        perm[p] = e
    return indptr, col, perm, True


@njit(cache=True)
def row_tasks(indptr, n_tasks):
    """Row boundaries of ``n_tasks`` tasks of about equal entries (+ rows, so that runs of empty
    rows count too): int64[n_tasks + 1], first 0, last n_rows."""
    n = indptr.shape[0] - 1
    total = indptr[n] + n
    bounds = np.empty(n_tasks + 1, np.int64)
    bounds[0] = 0
    r = 0
    for t in range(1, n_tasks):
        target = (total * t) // n_tasks
        while r < n and indptr[r] + r < target:
            r += 1
        bounds[t] = r
    bounds[n_tasks] = n
    return bounds


@njit(cache=True, fastmath={"reassoc", "contract"})
def _dot(a, b):
    """<a, b> (views of equal length >= 1), reassociated so that it vectorises (an in-order sum
    of products stays scalar: 1.6-2.5x slower). The order is fixed per compile target, so a
    weight's gradient is deterministic; it is the one result here not summed in CSR order."""
    s = a[0] * b[0]
    for c in range(1, a.shape[0]):
        s += a[c] * b[c]
    return s


@njit(parallel=True, cache=True)
def gspmm_sum_head_weights(tasks, indptr, col, perm, w, heads, x, out):
    """The sum with one weight per edge and head (``w`` (E, heads), heads | F: GAT's alpha):
    out[i, f] = sum of w[e, f // C] * x[src_e, f], each row in CSR order, ``out`` (n_rows, F)
    overwritten. (The unweighted sum and the sum with one weight per edge are the prepared
    SpMM's kernel: ``ops.spmm_into_any_k``.)"""
    F = x.shape[1]
    C = F // heads
    for t in prange(tasks.shape[0] - 1):
        for i in range(tasks[t], tasks[t + 1]):
            o = out[i]
            for f in range(F):
                o[f] = 0
            for p in range(indptr[i], indptr[i + 1]):
                xr = x[col[p]]
                e = perm[p]
                for h in range(heads):
                    wv = w[e, h]
                    b = h * C
                    for c in range(C):
                        o[b + c] += wv * xr[b + c]


@njit(parallel=True, cache=True)
def gspmm_extreme(tasks, indptr, col, perm, x, out, arg, is_max):
    """Max (``is_max``) or min of the source rows and the edge id that gave it (the first in CSR
    order among equals; NaN wins and stays, as in torch's amax/amin); rows without entries give 0
    and -1. The comparison is a select, not a branch, so the feature loop vectorises (with a
    branch, max took ten times as long as sum). Weighted rows: ``gspmm_extreme_weighted`` (a
    kernel of its own, so that a first unweighted step compiles no weighted code)."""
    F = x.shape[1]
    for t in prange(tasks.shape[0] - 1):
        for i in range(tasks[t], tasks[t + 1]):
            o = out[i]
            a = arg[i]
            p0 = indptr[i]
            p1 = indptr[i + 1]
            if p0 == p1:
                for f in range(F):
                    o[f] = 0
                    a[f] = -1
                continue
            e = perm[p0]
            xr = x[col[p0]]
            for f in range(F):
                o[f] = xr[f]
                a[f] = e
            for p in range(p0 + 1, p1):
                _extreme_step(o, a, x[col[p]], perm[p], is_max)


@njit(parallel=True, cache=True)
def gspmm_extreme_weighted(tasks, indptr, col, perm, w, heads, x, out, arg, is_max):
    """``gspmm_extreme`` of the weighted source rows: w[e, f // C] * x[src_e, f] (``w`` (E, heads),
    heads | F)."""
    F = x.shape[1]
    C = F // heads
    for t in prange(tasks.shape[0] - 1):
        for i in range(tasks[t], tasks[t + 1]):
            o = out[i]
            a = arg[i]
            p0 = indptr[i]
            p1 = indptr[i + 1]
            if p0 == p1:
                for f in range(F):
                    o[f] = 0
                    a[f] = -1
                continue
            e = perm[p0]
            xr = x[col[p0]]
            for h in range(heads):
                wv = w[e, h]
                for c in range(h * C, h * C + C):
                    o[c] = wv * xr[c]
                    a[c] = e
            for p in range(p0 + 1, p1):
                e = perm[p]
                xr = x[col[p]]
                for h in range(heads):
                    _extreme_step_weighted(o[h * C:h * C + C], a[h * C:h * C + C], xr[h * C:h * C + C], w[e, h], e,
                                           is_max)


@njit(cache=True)
def _extreme_step(o, a, xr, e, is_max):
    """One entry into a row's running max/min ``o`` and edge ids ``a`` (whole views: a loop over
    0..len with no offset, which LLVM vectorises)."""
    if is_max:
        for f in range(o.shape[0]):
            v = xr[f]
            take = (v > o[f]) | (v != v)
            o[f] = v if take else o[f]
            a[f] = e if take else a[f]
    else:
        for f in range(o.shape[0]):
            v = xr[f]
            take = (v < o[f]) | (v != v)
            o[f] = v if take else o[f]
            a[f] = e if take else a[f]


@njit(cache=True)
def _extreme_step_weighted(o, a, xr, wv, e, is_max):
    """``_extreme_step`` of the entry's row times its weight ``wv``."""
    if is_max:
        for f in range(o.shape[0]):
            v = wv * xr[f]
            take = (v > o[f]) | (v != v)
            o[f] = v if take else o[f]
            a[f] = e if take else a[f]
    else:
        for f in range(o.shape[0]):
            v = wv * xr[f]
            take = (v < o[f]) | (v != v)
            o[f] = v if take else o[f]
            a[f] = e if take else a[f]


#: columns per task of the max/min backward (several outputs may route to one source row, so the
#: threads split the features, not the rows)
_BACKWARD_COLUMNS = 16


@njit(parallel=True, cache=True)
def gspmm_extreme_backward(arg, src, g, grad_x):
    """The max/min backward of unweighted rows: each output entry's gradient to the source row of
    the edge that gave it. Blocks of ``_BACKWARD_COLUMNS`` columns, each thread's writes to its own
    columns. ``grad_x`` must be zeroed by the caller. (A kernel of its own: the weighted one's
    code compiled 0.99 s in a first SAGE-max step, this one about half.)"""
    n, F = g.shape
    step = _BACKWARD_COLUMNS
    for b in prange((F + step - 1) // step):
        lo = b * step
        hi = min(F, lo + step)
        for i in range(n):
            for f in range(lo, hi):
                e = arg[i, f]
                if e >= 0:
                    grad_x[src[e], f] += g[i, f]


@njit(parallel=True, cache=True)
def gspmm_extreme_backward_weighted(arg, src, w, heads, g, x, grad_x, grad_w):
    """The max/min backward of weighted rows: each output entry's gradient to the source row times
    the weight and, when ``grad_w`` has rows, to the weight of the edge that gave it. Blocks of
    columns as ``gspmm_extreme_backward``; a weight's gradient sums its head's columns, so then a
    thread owns whole heads. ``grad_x`` and ``grad_w`` must be zeroed by the caller."""
    n, F = g.shape
    C = F // heads if heads else F
    need_w = grad_w.shape[0] > 0
    step = C if need_w else _BACKWARD_COLUMNS  # a weight's gradient: one thread per head
    blocks = (F + step - 1) // step
    for b in prange(blocks):
        lo = b * step
        hi = min(F, lo + step)
        for i in range(n):
            for f in range(lo, hi):
                e = arg[i, f]
                if e < 0:
                    continue
                j = src[e]
                gv = g[i, f]
                h = f // C
                grad_x[j, f] += w[e, h] * gv
                if need_w:
                    grad_w[e, h] += gv * x[j, f]


@njit(parallel=True, cache=True)
def sddmm(tasks, indptr, col, perm, heads, a, b, grad_w):
    """The edge weights' gradient of a sum: grad_w[e, h] = <a[dst_e, head h], b[src_e, head h]>,
    over the CSR by destination (a: the output's gradient, b: the source features)."""
    F = a.shape[1]
    C = F // heads
    for t in prange(tasks.shape[0] - 1):
        for i in range(tasks[t], tasks[t + 1]):
            ar = a[i]
            for p in range(indptr[i], indptr[i + 1]):
                br = b[col[p]]
                e = perm[p]
                for h in range(heads):
                    grad_w[e, h] = _dot(ar[h * C:h * C + C], br[h * C:h * C + C]) if C else 0
