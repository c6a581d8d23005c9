"""Sparse x dense (SpMM) by segmented sums, and the TCA formulation
(tca-spmm-tensor-cores.txt §4), golden, stage by stage.

``spmm``: O = S D (CSR S, m x n; dense D, n x k). Stage ``gather_rows``: the
rows of D picked by the column indices and scaled by the values (GATHER, MUL;
k columns at once); stage ``column_segment_sums``: the k columns laid end to
end, each column's rows being segments of it, so ONE scan (one MATMUL with U_s
per recursion level) serves every column, then GatherSpMV and DIFF (App. Alg.
4 lines 3-5); empty rows give 0. Floats: rows are differences of prefix sums,
so a row's error scales with the prefix of its column (as for spmv).

``spmm_tca``: per row, its nonzeros cut into fragments of ``frag`` (64 = 8 x 8);
for every output column j the fragment's values V and the gathered D[cols, j]
G are laid out as 8 x 8 matrices with V @ G^T's diagonal holding the products
(one MMU call), read off by GATHER and summed (one MMU call with 1_8); rows
longer than a fragment add fragments up. Padding slots hold value 0 AND a
gathered 0 (never a real D entry), so an inf or NaN in D cannot leak into a
row through 0 * inf. ``tca_warps`` is the TCA kernel's row bucketing.
"""
from __future__ import annotations

import math

import numpy as np

from .. import bounds, mmv
from .._dtypes import result_dtype
from .._validate import _asarray, as_csr, as_values, check_s
from ._words import DEFAULT_S, finish, max_abs_int, to_words
from .scan import scan_words
from .segmented import diff
from .spmv import gather_spmv

__all__ = ["spmm", "spmm_tca", "gather_rows", "column_segment_sums", "tca_warps", "tca_fragment_product"]


def _as_dense(D, n_rows):
    D = _asarray(D, "D")  # the shared boundary: byte order, torch tensors (their dtypes named)
    if D.ndim != 2:
        raise ValueError(f"D must be 2-D (n x k), got shape {D.shape}")
    if D.shape[0] != n_rows:
        raise ValueError(f"D has {D.shape[0]} rows but S has {n_rows} columns")
    return as_values(D, "D", ndim=2)


def gather_rows(data, indices, D):
    """P(i, :) = data(i) * D(indices(i), :) for every nonzero i (GATHER of whole
    rows, then MUL by the broadcast value): an nnz x k matrix of words."""
    k = D.shape[1]
    cols = []
    for j in range(k):  # one GATHER + MUL per column, all columns the same stage
        cols.append(mmv.mul(mmv.gather(np.ascontiguousarray(D[:, j]), indices), data))
    return np.stack(cols, axis=1) if cols else np.zeros((len(data), 0), D.dtype)


def column_segment_sums(P, indptr, s):
    """Row sums of P (nnz x k) over the CSR row segments, every column at once:
    the columns end to end (length k*nnz), the rows of column j being segments
    at offsets j*nnz + indptr; Scan (one MATMUL per level for all columns),
    GatherSpMV, DIFF. Returns m x k."""
    nnz, k = P.shape
    m = len(indptr) - 1
    if k == 0 or m == 0:
        return np.zeros((m, k), P.dtype)
    flat = np.ascontiguousarray(P.T).reshape(-1)
    ptr_all = np.concatenate([[0]] + [indptr[1:] + j * nnz for j in range(k)]).astype(np.int64)
    if nnz == 0:
        return np.zeros((m, k), P.dtype)
    y = diff(gather_spmv(scan_words(flat, s), ptr_all))
    return y.reshape(k, m).T.copy()


def spmm(indptr, indices, data, D, s=DEFAULT_S, *, overflow="raise"):
    """O = S D for CSR S (``indptr``, ``indices``, ``data``; n = D.shape[0]
    columns) and dense D (n x k). Result dtype: the project rule on
    np.result_type(data, D); integers exact (overflow raises unless "wrap")."""
    D = _asarray(D, "D")
    s = check_s(s)
    D = _as_dense(D, D.shape[0] if D.ndim == 2 else -1)  # S's columns are checked against D's rows below
    indptr, indices, data = as_csr(indptr, indices, data, n_cols=D.shape[0])
    dt = np.result_type(data, D)
    result_dtype(dt)
    dw, Dw = to_words(np.asarray(data, dtype=dt)), to_words(np.asarray(D, dtype=dt))
    P = gather_rows(dw, indices, Dw)
    y = column_segment_sums(P, indptr, s)
    if dt.kind != "f":
        b = bounds.spmv(len(data) * max(D.shape[1], 1), s, max_abs_int(data), max_abs_int(D))

        def exact():
            ds, Ds = data.astype(object), D.astype(object)
            return [sum(ds[q] * Ds[indices[q], j] for q in range(indptr[r], indptr[r + 1]))
                    for r in range(len(indptr) - 1) for j in range(D.shape[1])]

        return finish(y.reshape(-1), dt, overflow, bound_magnitude=b.magnitude, exact=exact,
                      op="golden.spmm").reshape(y.shape)
    return finish(y, dt, overflow)


# ----------------------------------------------------------------------------- TCA

def tca_warps(indptr, frag=64):
    """The TCA kernel's row bucketing: warps per row by its nonzero count:
    0 -> 0 (no work), <= frag/8 -> 1, <= frag/4 -> 2, <= frag/2 -> 4, else 8
    (a row longer than one fragment keeps 8 warps and loops over fragments)."""
    lens = np.diff(np.asarray(indptr, dtype=np.int64))
    w = np.full(lens.shape, 8, np.int64)
    w[lens <= frag // 2] = 4
    w[lens <= frag // 4] = 2
    w[lens <= frag // 8] = 1
    w[lens == 0] = 0
    return w


def tca_fragment_product(v, g, side):
    """One fragment: v (values) and g (the gathered D entries of one output
    column), both zero-padded to side*side, as side x side matrices V and G; the
    MMU computes V @ G^T, whose diagonal holds sum_q v[side*p+q] g[side*p+q];
    GATHER reads the diagonal, a MATMUL with 1_side sums it. Returns the dot product."""
    Gt = np.ascontiguousarray(g.reshape(side, side).T)
    prod = mmv.matmul(v, Gt)  # v read row-major as V: (V @ G^T) row-major
    diag = mmv.gather(prod, np.arange(side, dtype=np.int64) * (side + 1))
    return mmv.matmul(diag, mmv.ones(side, diag.dtype))[side - 1]


def spmm_tca(indptr, indices, data, D, frag=64, *, overflow="raise", counter=None):
    """O = S D by the TCA formulation (module docstring); ``frag`` a square
    (64 = 8 x 8). ``counter``, a dict, gets "fragment_products" added."""
    D = _asarray(D, "D")
    D = _as_dense(D, D.shape[0] if D.ndim == 2 else -1)
    indptr, indices, data = as_csr(indptr, indices, data, n_cols=D.shape[0])
    side = math.isqrt(int(frag))
    if side * side != frag or side < 2:
        raise ValueError(f"frag must be a square >= 4 (e.g. 64 = 8 x 8), got {frag}")
    dt = np.result_type(data, D)
    result_dtype(dt)
    dw, Dw = to_words(np.asarray(data, dtype=dt)), to_words(np.asarray(D, dtype=dt))
    m, k = len(indptr) - 1, D.shape[1]
    out = np.zeros((m, k), dw.dtype)
    count = 0
    for r in range(m):
        a, b = int(indptr[r]), int(indptr[r + 1])
        for f0 in range(a, b, frag):  # fragments; rows with 0 nonzeros do no work
            f1 = min(f0 + frag, b)
            v = np.zeros(frag, dw.dtype)
            v[: f1 - f0] = dw[f0:f1]
            cols = indices[f0:f1]
            for j in range(k):
                g = np.zeros(frag, dw.dtype)  # padding gathers 0, never a D entry
                g[: f1 - f0] = mmv.gather(np.ascontiguousarray(Dw[:, j]), cols)
                out[r, j] = out[r, j] + tca_fragment_product(v, g, side)
                count += 1
    if counter is not None:
        counter["fragment_products"] = counter.get("fragment_products", 0) + count
    if dt.kind != "f":
        return finish(out.reshape(-1), dt, overflow, op="golden.spmm_tca").reshape(m, k)
    return finish(out, dt, overflow)
