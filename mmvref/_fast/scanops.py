"""Fast CPU scan-based operators (parallel-scan-ascend.txt §4-§5): batched scan,
split, radix sort / argsort, top-k, weighted and top-p sampling.

What they compute (order, ties, NaNs, rounding of the sampling sums) is
stated once in DEVELOPERS.md, "Scan-based operators"; the order is
``mmvref._order``. numpy in, numpy out; torch CPU tensors in, torch out.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from .._order import order_keys
from .._validate import as_flags, as_uniform, as_values, check_overflow, check_weights
from . import _scanops_kernels as K
from ._io import like_input, to_numpy
from .segops import _I64, _overflow, _result_dtype, _wrap, scan

__all__ = ["batched_scan", "split", "split_ind", "radix_sort", "argsort", "topk", "weighted_sample",
           "top_p_sample"]

#: elements per chunk below which fewer chunks are used (tests lower it)
MIN_CHUNK = 1 << 15


def _chunks(n):
    c = max(1, min(numba.get_num_threads() * 4, n // MIN_CHUNK))
    return np.linspace(0, n, c + 1).astype(np.int64)


def _values(x, name="x", ndims=(1,)):
    a = to_numpy(x, name)
    nd = np.ndim(a)
    if nd not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{name} must be {want}, got shape {np.shape(a)}")
    return np.ascontiguousarray(as_values(a, name, ndim=nd))


def _bits(x):
    """Values as same-width integers (fp16, which numba cannot load, moves as int16)."""
    return x.view(f"i{x.dtype.itemsize}") if x.dtype.kind == "f" else x


# ----------------------------------------------------------------------------- batched scan

def batched_scan(x, *, exclusive=False, dtype=None, overflow="raise"):
    """Each row of a 2-D ``x`` scanned on its own (like ``torch.cumsum(x, dim=1)``).

    Dtype and overflow rules as ``mmvref.scan``: int8/16/32 -> int32, int64 ->
    int64, fp16 -> fp32, fp32/fp64 kept; ``dtype=`` overrides; an integer
    overflow of the result dtype raises unless ``overflow="wrap"``. Floats are
    accumulated in the result dtype, in index order. Few long rows are scanned
    one by one with the parallel 1-D scan.
    """
    src = x
    x = _values(x, ndims=(2,))
    rdt = _result_dtype(x, dtype, "batched_scan")
    check_overflow(overflow)
    rows, n = x.shape
    if rows < numba.get_num_threads() and n >= 1 << 16:
        out = np.empty((rows, n), dtype=rdt)
        for r in range(rows):
            out[r] = scan(x[r], exclusive=exclusive, dtype=rdt, overflow=overflow)
        return like_input(out, src)
    if rdt.kind == "f":
        out = np.empty((rows, n), dtype=rdt)
        K.rows_scan_float(np.ascontiguousarray(x, dtype=rdt), out, bool(exclusive), rdt.type(0))
        return like_input(out, src)
    if x.dtype == np.int64 and rows and n and n * max(abs(int(x.min())), abs(int(x.max()))) > _I64.max:
        out = _exact_rows(x, exclusive, rdt, overflow)  # int64 words could wrap: exact Python ints
        return like_input(out, src)
    out = np.empty((rows, n), dtype=rdt)  # no int64 intermediate: fresh pages cost more than the scan
    lo = np.zeros(rows, np.int64)
    hi = np.zeros(rows, np.int64)
    K.rows_scan_int(x, out, bool(exclusive), lo, hi)
    info = np.iinfo(rdt)
    if overflow == "raise" and rows and (lo.min() < info.min or hi.max() > info.max):
        raise _overflow("batched_scan", rdt)
    return like_input(out, src)


def _exact_rows(x, exclusive, rdt, overflow):
    out = np.empty(x.shape, dtype=rdt)
    info = np.iinfo(rdt)
    for r, row in enumerate(x):
        acc = 0
        for i, v in enumerate(row.tolist()):
            if exclusive:
                val = acc
            acc += v
            val = val if exclusive else acc
            if overflow == "raise" and not info.min <= val <= info.max:
                raise _overflow("batched_scan", rdt)
            out[r, i] = _wrap(val, rdt)
    return out


# ----------------------------------------------------------------------------- split

def _split(x, mask, want_idx):
    x = _values(x)
    m = np.ascontiguousarray(as_flags(to_numpy(mask, "mask"), x.size, "mask")).view(np.uint8)
    n = x.size
    starts = _chunks(n)
    C = starts.size - 1
    counts = np.zeros(C, np.int64)
    K.count_ones(m, starts, counts)
    ones = int(counts.sum())
    one_base = np.zeros(C, np.int64)
    np.cumsum(counts[:-1], out=one_base[1:])
    zero_base = ones + (starts[:-1] - one_base)  # zeros before chunk c = elements before it - ones
    out = np.empty_like(x)
    idx = np.empty(n if want_idx else 0, np.int64)
    K.split_scatter(_bits(x), m, starts, one_base, zero_base, _bits(out), idx, want_idx)
    return out, idx


def split(x, mask):
    """The elements with mask 1 first, then those with mask 0, each group in
    input order (stable). mask: 0/1 of bool/int8/uint8, same length as x."""
    out, _ = _split(x, mask, False)
    return like_input(out, x)


def split_ind(x, mask):
    """``split`` and the original index (int64) of every output element."""
    out, idx = _split(x, mask, True)
    return like_input(out, x), like_input(idx, x)


# ----------------------------------------------------------------------------- radix sort

def _sort_1d(keys):
    """Parallel stable LSB radix sort of 1-D keys; returns the permutation."""
    n = keys.size
    idx = np.arange(n, dtype=np.int64)
    if n < 2:
        return idx
    starts = _chunks(n)
    C = starts.size - 1
    hist = np.zeros((C, K.RADIX), np.int64)
    offs = np.zeros((C, K.RADIX), np.int64)
    k2, i2 = np.empty_like(keys), np.empty_like(idx)
    for b in range(keys.itemsize):
        K.histograms(keys, starts, 8 * b, hist)
        if K.digit_offsets(hist, offs):
            continue  # one digit holds every key: this pass moves nothing
        K.radix_scatter(keys, idx, starts, 8 * b, offs, k2, i2)
        keys, k2 = k2, keys
        idx, i2 = i2, idx
    return idx


def radix_sort(x, *, descending=False):
    """Stable sort -> (values, indices int64), like ``torch.sort(stable=True)``.

    x 1-D, or 2-D sorted row by row. Order: DEVELOPERS.md (NaN above +inf and
    last when ascending, first when descending; -0.0 == +0.0 in input order);
    values come back bit-for-bit. LSB radix sort on 8-bit digits; a pass whose
    digit is the same for every key is skipped.
    """
    src = x
    x = _values(x, ndims=(1, 2))
    keys = order_keys(x, bool(descending))
    if x.ndim == 1:
        idx = _sort_1d(keys)
        vals = np.empty_like(x)
        K.gather(_bits(x), idx, _bits(vals))
    else:
        idx = np.empty(x.shape, np.int64)
        K.sort_rows(keys, idx)
        vals = np.empty_like(x)
        K.gather_rows(_bits(x), idx, _bits(vals))
    return like_input(vals, src), like_input(idx, src)


def argsort(x, *, descending=False):
    """The indices of ``radix_sort`` (stable)."""
    return radix_sort(x, descending=descending)[1]


# ----------------------------------------------------------------------------- top-k

def topk(x, k, *, largest=True):
    """The k largest (``largest=False``: smallest) values, sorted, and their
    indices (int64): radix select of the k-th key, then a radix sort of the k
    chosen. Ties: the lower index first, and it is the one kept at the cut.
    NaN counts as the largest value (as in torch.topk). x 1-D or 2-D (rows)."""
    src = x
    x = _values(x, ndims=(1, 2))
    n = x.shape[-1]
    k = int(k)
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, {n}] (the length of x), got {k}")
    rows = x if x.ndim == 2 else x.reshape(1, n)
    keys = order_keys(rows, bool(largest))
    sel = np.empty((rows.shape[0], n), np.int64)
    K.topk_rows(keys, k, sel)
    idx = np.ascontiguousarray(sel[:, :k])
    vals = np.empty((rows.shape[0], k), dtype=x.dtype)
    K.gather_rows(_bits(rows), idx, _bits(vals))
    shape = x.shape[:-1] + (k,)
    return like_input(vals.reshape(shape), src), like_input(idx.reshape(shape), src)


# ----------------------------------------------------------------------------- sampling

def _int_total(w):
    """Exact total of non-negative integer weights; OverflowError beyond int64."""
    if w.size and w.size * int(w.max()) > _I64.max:
        total = sum(int(v) for v in w.tolist())
        if total > _I64.max:
            raise OverflowError("weighted_sample: the total of the weights overflows int64")
        return total
    return int(w.sum(dtype=np.int64))


def weighted_sample(w, u):
    """Index i drawn with probability w[i] / sum(w) by inverse transform with
    the caller's uniform sample u in [0, 1): the smallest i with c[i] > t, c the
    cumulative sums (integers: int64, exact, compared with floor(t); floats:
    float64, sequential in index order, so bit-equal to np.cumsum), t = u *
    c[-1]. w 1-D, non-negative, finite, positive total; any length. Returns
    np.int64 for a scalar u, an int64 array shaped like an array u."""
    w = _values(w, "w")
    check_weights(w, "w")
    u = as_uniform(to_numpy(u, "u"))
    if w.dtype == np.float16:
        w = w.astype(np.float32)  # exact; numba cannot load fp16
    if w.dtype.kind == "f":
        total = K.sum_float(w)
    else:
        total = _int_total(w)
    if not total > 0:
        raise ValueError("w must have a positive total")

    def one(uv):
        t = uv * float(total)
        if w.dtype.kind == "f":
            i = K.first_above_float(w, t)
        else:
            ft = math.floor(t)
            i = K.first_above_int(w, ft) if ft < total else -1
        return i if i >= 0 else int(np.flatnonzero(w > 0)[-1])

    if u.ndim == 0:
        return np.int64(one(float(u)))
    if u.size <= 4:
        return np.array([one(float(v)) for v in u.ravel()], dtype=np.int64).reshape(u.shape)
    # many samples: one cumulative pass, then binary searches
    if w.dtype.kind == "f":
        c = np.empty(w.size, np.float64)
        K.cumsum_float(w, c)
        t = u.ravel() * float(total)
    else:
        c = np.cumsum(w, dtype=np.int64)
        tf = np.floor(u.ravel() * float(total))
        # exact integer thresholds; one at or past the total selects nothing (fallback below)
        t = np.where(tf >= float(total), total, tf).astype(np.int64)
    i = np.searchsorted(c, t, side="right")
    i = np.where(i >= w.size, np.flatnonzero(w > 0)[-1], i)
    return i.astype(np.int64).reshape(u.shape)


def top_p_sample(probs, p, u):
    """Nucleus sampling with a given uniform u (Llama 3's sample_top_p), per
    row: stable descending order; q in float64; keep q_j where the exclusive
    sequential sum before it is <= p; inverse transform with u on the kept q.
    probs 1-D (u a float; returns np.int64) or 2-D (u of shape (rows,); returns
    int64 (rows,)); finite, non-negative, positive row totals; 0 <= p <= 1."""
    src = probs
    probs = _values(probs, "probs", ndims=(1, 2))
    if probs.dtype.kind != "f":
        raise TypeError(f"probs must be float16, float32 or float64, got {probs.dtype}")
    check_weights(probs, "probs")
    p = float(p)
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    u = as_uniform(to_numpy(u, "u"))
    rows = probs if probs.ndim == 2 else probs.reshape(1, -1)
    if probs.ndim == 2 and u.shape != (rows.shape[0],):
        raise ValueError(f"u must have shape ({rows.shape[0]},) (one sample per row), got {u.shape}")
    if probs.ndim == 1 and u.ndim != 0:
        raise ValueError(f"u must be a scalar for 1-D probs, got shape {u.shape}")
    totals = rows.astype(np.float64).sum(axis=1) if rows.size else np.zeros(rows.shape[0])
    bad = np.flatnonzero(~(totals > 0))
    if bad.size:
        raise ValueError(f"probs row {int(bad[0])} must have a positive total")
    out = np.empty(rows.shape[0], np.int64)
    vals = rows.astype(np.float32) if rows.dtype == np.float16 else rows  # exact; numba cannot load fp16
    K.top_p_rows(order_keys(rows, True), vals, p, np.ascontiguousarray(u.reshape(-1)), out)
    if probs.ndim == 1:
        return np.int64(out[0])
    return like_input(out, src)
