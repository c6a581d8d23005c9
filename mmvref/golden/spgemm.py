"""Sparse x sparse (SpGEMM), CSR x CSR -> CSR, three golden ways that must agree
(sparse-workspaces-compilation.txt: sparse scattering, dense and sparse
workspaces, Insert-Sort-Merge; compression to CSR by counting then
prefix-summing).

Every result has sorted column indices, duplicates summed, and entries that
cancel to exactly zero DROPPED (as scipy's A @ B does), in all three.
Inputs: (indptr, indices, data, shape) tuples or anything with those CSR
attributes (scipy.sparse). Integer data is exact in int64 words.

- ``spgemm_esc``: Expand every product a_ik b_kj with its key (i, j) =
  i * n_cols + j; Sort by key with the scan-based LSB radix sort
  (``radix_sort``: one split per key bit); Compress: a segmented sum over runs
  of equal keys (SCD), the run heads compressed out; row counts by counting,
  then a prefix sum (Alg. 1) gives indptr.
- ``spgemm_gustavson``: row by row, a dense workspace of n_cols values plus an
  occupancy mask; each a_ik adds a_ik * B[k, :] into it (GATHER, MUL, ADD), the
  occupied columns are compressed out in order (COMPRESS), the workspace reset.
- ``spgemm_ism``: Insert-Sort-Merge with a sparse workspace of ``capacity``
  entries and a policy: "coord" (an unsorted list of (col, val)), "hash" (open
  addressing on col), "bucket" (col ranges, one list each). When the workspace
  is full it is sorted and merged into the row's output run; at the row end the
  last contents are sorted and merged. Any capacity >= 1 gives the same result.
"""
from __future__ import annotations

import numpy as np

from .. import mmv
from .._dtypes import result_dtype
from .._validate import as_csr_matrix, check_int
from .scan import scan_words
from .scan_operators import radix_sort
from .segmented import compress_words, scd

__all__ = ["spgemm_esc", "spgemm_gustavson", "spgemm_ism", "ISM_POLICIES"]

ISM_POLICIES = ("coord", "hash", "bucket")


def _operands(A, B):
    a, b = as_csr_matrix(A, "A"), as_csr_matrix(B, "B")
    if a[3][1] != b[3][0]:
        raise ValueError(f"shapes {a[3]} and {b[3]} do not multiply")
    dt = np.result_type(a[2].dtype, b[2].dtype)
    rdt = result_dtype(dt)  # refuses dtypes outside the project's rule
    wd = np.int64 if dt.kind in "iub" else np.result_type(dt, np.float32)
    if rdt.kind == "i":
        _check_exact(a, b, rdt)
    return a, b, np.dtype(wd)


def _check_exact(a, b, rdt):
    """The int64 words are exact modulo 2**64 only: where a row's products can
    sum beyond int64 (bound: products x max|a| x max|b|), the exact entries
    (Python ints) decide, and one outside ``rdt`` raises OverflowError."""
    (ap, ai, ad, _), (bp, bi, bd, _) = a, b
    if not ad.size or not bd.size:
        return
    ma = max(abs(int(ad.min())), abs(int(ad.max())))
    mb = max(abs(int(bd.min())), abs(int(bd.max())))
    per_entry = (bp[ai + 1] - bp[ai]).astype(np.int64)
    c = np.concatenate([[0], np.cumsum(per_entry)])
    prods = c[ap[1:]] - c[ap[:-1]]  # products per row of A
    if int(prods.max(initial=0)) * ma * mb < 2**63:
        return
    info = np.iinfo(rdt)
    for r in np.flatnonzero(prods.astype(np.float64) * (float(ma) * float(mb)) >= 2.0**62):
        acc = {}
        for q in range(ap[r], ap[r + 1]):
            k = int(ai[q])
            for t in range(bp[k], bp[k + 1]):
                acc[int(bi[t])] = acc.get(int(bi[t]), 0) + int(ad[q]) * int(bd[t])
        bad = [v for v in acc.values() if v < info.min or v > info.max]
        if bad:
            raise OverflowError(f"golden spgemm: a result ({bad[0]}) in row {r} overflows {rdt}")


def _finish(rows, cols, vals, shape, dtype, in_dtype=None):
    """Drop exact zeros, build indptr by counting then a prefix sum; values in
    the project's result dtype (integers: OverflowError if one does not fit)."""
    if in_dtype is not None:
        rdt = result_dtype(in_dtype)
        if rdt.kind == "i" and vals.size:
            info = np.iinfo(rdt)
            if vals.min() < info.min or vals.max() > info.max:
                raise OverflowError(f"golden spgemm: a result overflows {rdt}")
        dtype = rdt
    keep = vals != 0
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    counts = np.bincount(rows, minlength=shape[0]).astype(np.int64)
    indptr = np.zeros(shape[0] + 1, np.int64)
    if shape[0]:
        indptr[1:] = scan_words(counts, 8) if counts.size else counts
    return indptr, cols.astype(np.int64), vals.astype(dtype), shape


def spgemm_esc(A, B):
    """C = A B by Expand, Sort, Compress (module docstring)."""
    (ap, ai, ad, (m, _)), (bp, bi, bd, (_, n)), wd = _operands(A, B)
    in_dt = np.result_type(ad.dtype, bd.dtype)
    rows, cols, vals = [], [], []
    for i in range(m):  # Expand: every product with its (row, col)
        for q in range(ap[i], ap[i + 1]):
            k = ai[q]
            seg = slice(bp[k], bp[k + 1])
            rows.append(np.full(bp[k + 1] - bp[k], i, np.int64))
            cols.append(bi[seg])
            vals.append(mmv.mul(np.asarray(bd[seg], wd), wd.type(ad[q])))
    if not rows:
        return _finish(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, wd), (m, n), wd, in_dt)
    rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals).astype(wd)
    keys = rows * max(n, 1) + cols
    # the narrowest key word: one radix pass per key bit, so 16-bit keys take 16 passes, not 64
    kdt = next(t for t in (np.int16, np.int32, np.int64) if m * max(n, 1) <= np.iinfo(t).max + 1)
    _, order = radix_sort(keys.astype(kdt), 8, 3)  # Sort: the scan-based LSB radix sort
    keys, vals = mmv.gather(keys, order), mmv.gather(vals, order)
    heads = np.concatenate([[1], (keys[1:] != keys[:-1]).astype(np.int64)]) if len(keys) else keys
    sums = scd(vals, heads.astype(np.uint8), 8, overflow="wrap")  # segmented sum over equal keys
    ukeys = compress_words(keys, heads, 8)  # Compress: one key per run
    return _finish(ukeys // max(n, 1), ukeys % max(n, 1), np.asarray(sums, wd), (m, n), wd, in_dt)


def spgemm_gustavson(A, B):
    """C = A B row by row with a dense workspace (module docstring)."""
    (ap, ai, ad, (m, _)), (bp, bi, bd, (_, n)), wd = _operands(A, B)
    in_dt = np.result_type(ad.dtype, bd.dtype)
    rows, cols, vals = [], [], []
    work = np.zeros(n, wd)
    occupied = np.zeros(n, np.int64)
    for i in range(m):
        for q in range(ap[i], ap[i + 1]):
            k = ai[q]
            seg = slice(bp[k], bp[k + 1])
            if bp[k + 1] == bp[k]:
                continue
            c = bi[seg]
            prod = mmv.mul(np.asarray(bd[seg], wd), wd.type(ad[q]))
            np.add.at(work, c, prod)  # scatter-add (a row of B may repeat a column)
            occupied[c] = 1
        if occupied.any():
            c_out = compress_words(np.arange(n, dtype=np.int64), occupied, 8)
            rows.append(np.full(len(c_out), i, np.int64))
            cols.append(c_out)
            vals.append(compress_words(work, occupied, 8))
            work[c_out] = 0
            occupied[c_out] = 0
    if not rows:
        return _finish(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, wd), (m, n), wd, in_dt)
    return _finish(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), (m, n), wd, in_dt)


def _merge(run_c, run_v, new_c, new_v):
    """Sort the workspace contents by column, sum equal columns, merge into the run."""
    c = np.concatenate([run_c, np.asarray(new_c, np.int64)])
    v = np.concatenate([run_v, np.asarray(new_v, run_v.dtype)])
    if len(c) == 0:
        return c, v
    order = np.argsort(c, kind="stable")
    c, v = c[order], v[order]
    heads = np.concatenate([[True], c[1:] != c[:-1]])
    idx = np.cumsum(heads) - 1
    out_v = np.zeros(int(heads.sum()), v.dtype)
    np.add.at(out_v, idx, v)
    return c[heads], out_v


class _Workspace:
    """A sparse accumulation workspace of ``capacity`` distinct columns."""

    def __init__(self, policy, capacity, n, dtype):
        self.policy, self.capacity, self.n, self.dtype = policy, capacity, n, dtype
        self.clear()

    def clear(self):
        if self.policy == "coord":
            self.c, self.v = [], []
        elif self.policy == "hash":
            self.slots_c = np.full(self.capacity, -1, np.int64)
            self.slots_v = np.zeros(self.capacity, self.dtype)
            self.used = 0
        else:
            nb = max(1, min(self.capacity, self.n))
            self.width = -(-max(self.n, 1) // nb)
            self.buckets = [([], []) for _ in range(nb)]
            self.used = 0

    def insert(self, col, val):
        """Insert (col, val); returns False when the workspace is full (nothing inserted)."""
        if self.policy == "coord":
            if len(self.c) >= self.capacity:
                return False
            self.c.append(col)
            self.v.append(val)
            return True
        if self.policy == "hash":
            h = (col * 2654435761) % self.capacity
            for probe in range(self.capacity):
                s = (h + probe) % self.capacity
                if self.slots_c[s] == col:
                    self.slots_v[s] += val
                    return True
                if self.slots_c[s] < 0:
                    self.slots_c[s], self.slots_v[s] = col, val
                    self.used += 1
                    return True
            return False
        if self.used >= self.capacity:
            return False
        bc, bv = self.buckets[min(col // self.width, len(self.buckets) - 1)]
        bc.append(col)
        bv.append(val)
        self.used += 1
        return True

    def contents(self):
        if self.policy == "coord":
            return self.c, self.v
        if self.policy == "hash":
            keep = self.slots_c >= 0
            return self.slots_c[keep], self.slots_v[keep]
        cs = [c for bc, _ in self.buckets for c in bc]
        vs = [v for _, bv in self.buckets for v in bv]
        return cs, vs


def _ism_rows(ap, ai, ad, bp, bi, bd, m, wd, ws, rows, cols, vals):
    """The rows of ``spgemm_ism``: each row's products inserted into the workspace ``ws``, which is
    sorted and merged into the row's run whenever it is full; (rows, cols, vals) appended per row."""
    for i in range(m):
        run_c, run_v = np.zeros(0, np.int64), np.zeros(0, wd)
        for q in range(ap[i], ap[i + 1]):
            k = ai[q]
            for t in range(bp[k], bp[k + 1]):
                col, val = int(bi[t]), wd.type(wd.type(ad[q]) * wd.type(bd[t]))
                if not ws.insert(col, val):  # full: sort and merge into the run, then insert
                    run_c, run_v = _merge(run_c, run_v, *ws.contents())
                    ws.clear()
                    ws.insert(col, val)
        run_c, run_v = _merge(run_c, run_v, *ws.contents())
        ws.clear()
        rows.append(np.full(len(run_c), i, np.int64))
        cols.append(run_c)
        vals.append(run_v)


def spgemm_ism(A, B, policy="hash", capacity=64):
    """C = A B by Insert-Sort-Merge with a sparse workspace (module docstring)."""
    if policy not in ISM_POLICIES:
        raise ValueError(f"policy must be one of {ISM_POLICIES}, got {policy!r}")
    capacity = check_int(capacity, "capacity", 1)
    (ap, ai, ad, (m, _)), (bp, bi, bd, (_, n)), wd = _operands(A, B)
    in_dt = np.result_type(ad.dtype, bd.dtype)
    ws = _Workspace(policy, capacity, n, wd)
    rows, cols, vals = [], [], []
    with np.errstate(over="ignore"):  # integer words wrap (exact modulo 2**64; ``_check_exact`` decided)
        _ism_rows(ap, ai, ad, bp, bi, bd, m, wd, ws, rows, cols, vals)
    if not rows:
        return _finish(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, wd), (m, n), wd, in_dt)
    return _finish(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), (m, n), wd, in_dt)
