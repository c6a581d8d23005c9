"""Numba kernels of the fast scan-based operators (``scanops``).

Keys are the unsigned order keys of ``mmvref._order`` (uint8/16/32/64); a
radix pass is a stable counting sort on one byte. Parallel passes cut the
input into chunks: per-chunk histograms (parallel), one exclusive scan over
(digit, chunk) (sequential, 256 * chunks entries), per-chunk stable scatters
(parallel): the split of the Ascend paper, 256 ways at once.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

RADIX = 256


# ----------------------------------------------------------------------------- batched scan

@njit(cache=True, parallel=True)
def rows_scan_int(x, out, exclusive, lo, hi):
    """Row-wise scans accumulated in int64 (exact for int8/16/32 rows shorter
    than 2**32), stored into ``out`` of the result dtype (a narrowing store
    wraps, two's complement); lo/hi[r] = min/max of the row's exact results,
    for the overflow check."""
    for r in prange(x.shape[0]):
        xr = x[r]
        orow = out[r]
        a = np.int64(0)
        mn = np.int64(0)
        mx = np.int64(0)
        for i in range(xr.size):
            if exclusive:
                orow[i] = a
                mn = min(mn, a)
                mx = max(mx, a)
            a += xr[i]
            if not exclusive:
                orow[i] = a
                mn = min(mn, a)
                mx = max(mx, a)
        lo[r] = mn
        hi[r] = mx


@njit(cache=True, parallel=True)
def rows_scan_float(x, out, exclusive, zero):
    """Row-wise scans accumulated in the result dtype (that of ``zero``), in index order."""
    for r in prange(x.shape[0]):
        xr = x[r]
        orow = out[r]
        a = zero
        for i in range(xr.size):
            if exclusive:
                orow[i] = a
            a += xr[i]
            if not exclusive:
                orow[i] = a


# ----------------------------------------------------------------------------- split

@njit(cache=True, parallel=True)
def count_ones(m, starts, counts):
    for c in prange(starts.size - 1):
        k = 0
        for i in range(starts[c], starts[c + 1]):
            k += m[i] != 0
        counts[c] = k


@njit(cache=True, parallel=True)
def split_scatter(x, m, starts, one_base, zero_base, out, idx, want_idx):
    """Stable split: chunk c writes its ones from one_base[c], its zeros from zero_base[c]."""
    for c in prange(starts.size - 1):
        o = one_base[c]
        z = zero_base[c]
        for i in range(starts[c], starts[c + 1]):
            if m[i] != 0:
                out[o] = x[i]
                if want_idx:
                    idx[o] = i
                o += 1
            else:
                out[z] = x[i]
                if want_idx:
                    idx[z] = i
                z += 1


# ----------------------------------------------------------------------------- radix sort

@njit(cache=True)
def _digit(k, shift):
    """Byte ``shift // 8`` of key k (unsigned arithmetic throughout: numba turns
    int64 mixed with uint64 into float)."""
    return np.intp((np.uint64(k) >> np.uint64(shift)) & np.uint64(0xFF))


@njit(cache=True, parallel=True)
def histograms(keys, starts, shift, hist):
    """hist[c, d] = number of keys in chunk c whose byte at ``shift`` is d."""
    for c in prange(starts.size - 1):
        h = hist[c]
        h[:] = 0
        for i in range(starts[c], starts[c + 1]):
            h[_digit(keys[i], shift)] += 1


@njit(cache=True)
def digit_offsets(hist, offs):
    """offs[c, d] = where chunk c's first key of digit d goes: all keys of
    smaller digits, then the earlier chunks' keys of digit d. Returns True
    when one digit holds every key (the pass would not move anything)."""
    C = hist.shape[0]
    total = 0
    trivial = False
    n = 0
    for c in range(C):
        for d in range(RADIX):
            n += hist[c, d]
    for d in range(RADIX):
        col = 0
        for c in range(C):
            col += hist[c, d]
        if col == n:
            trivial = True
        for c in range(C):
            offs[c, d] = total
            total += hist[c, d]
    return trivial


@njit(cache=True, parallel=True)
def radix_scatter(keys, idx, starts, shift, offs, keys_out, idx_out):
    """Stable scatter of one radix pass (each chunk in index order)."""
    for c in prange(starts.size - 1):
        o = offs[c].copy()
        for i in range(starts[c], starts[c + 1]):
            d = _digit(keys[i], shift)
            p = o[d]
            keys_out[p] = keys[i]
            idx_out[p] = idx[i]
            o[d] = p + 1


@njit(cache=True)
def _sort_row(keys, idx, kt, it):
    """Sequential stable LSB radix sort of one row (keys, idx in place; kt/it scratch)."""
    n = keys.size
    h = np.zeros(RADIX, np.int64)
    for b in range(keys.itemsize):
        shift = 8 * b
        h[:] = 0
        for i in range(n):
            h[_digit(keys[i], shift)] += 1
        skip = False
        for d in range(RADIX):
            if h[d] == n:
                skip = True
        if skip:
            continue
        t = 0
        for d in range(RADIX):
            v = h[d]
            h[d] = t
            t += v
        for i in range(n):
            d = _digit(keys[i], shift)
            kt[h[d]] = keys[i]
            it[h[d]] = idx[i]
            h[d] += 1
        keys[:] = kt
        idx[:] = it


@njit(cache=True, parallel=True)
def sort_rows(keys, idx):
    """Each row of ``keys`` sorted (stable), ``idx`` = the original column of each key."""
    for r in prange(keys.shape[0]):
        for j in range(keys.shape[1]):
            idx[r, j] = j
        _sort_row(keys[r], idx[r], np.empty_like(keys[r]), np.empty_like(idx[r]))


@njit(cache=True, parallel=True)
def gather_rows(x, idx, out):
    for r in prange(x.shape[0]):
        xr = x[r]
        ir = idx[r]
        orow = out[r]
        for j in range(ir.size):
            orow[j] = xr[ir[j]]


@njit(cache=True, parallel=True)
def gather(x, idx, out):
    for i in prange(idx.size):
        out[i] = x[idx[i]]


# ----------------------------------------------------------------------------- top-k

@njit(cache=True)
def _kth_key(keys, k):
    """The k-th smallest key (1-based k >= 1) by MSB-first radix select."""
    prefix = np.uint64(0)
    mask = np.uint64(0)
    h = np.zeros(RADIX, np.int64)
    for b in range(keys.itemsize - 1, -1, -1):
        shift = 8 * b
        h[:] = 0
        for i in range(keys.size):
            kk = np.uint64(keys[i])
            if (kk & mask) == prefix:
                h[_digit(kk, shift)] += 1
        d = 0
        while k > h[d]:
            k -= h[d]
            d += 1
        prefix = prefix | (np.uint64(d) << np.uint64(shift))
        mask = mask | (np.uint64(0xFF) << np.uint64(shift))
    return prefix


@njit(cache=True)
def _topk_row(keys, k, sel, kt, it):
    """sel[:k] = the columns of the k smallest keys, sorted by (key, column)."""
    if k == 0:
        return
    t = _kth_key(keys, k)
    less = 0
    for i in range(keys.size):
        less += np.uint64(keys[i]) < t
    need = k - less
    j = 0
    for i in range(keys.size):
        kk = np.uint64(keys[i])
        if kk < t or (kk == t and need > 0):
            if kk == t:
                need -= 1
            sel[j] = i
            kt[j] = keys[i]
            j += 1
    sk = kt[:k].copy()
    si = sel[:k].copy()
    _sort_row(sk, si, kt[:k], it[:k])
    sel[:k] = si


@njit(cache=True, parallel=True)
def topk_rows(keys, k, sel):
    for r in prange(keys.shape[0]):
        n = keys.shape[1]
        _topk_row(keys[r], k, sel[r], np.empty(n, keys.dtype), np.empty(n, np.int64))


# ----------------------------------------------------------------------------- sampling

@njit(cache=True)
def first_above_float(w, t):
    """Smallest i with c_i > t, c = sequential float64 cumulative sums of w; -1 if none."""
    c = 0.0
    for i in range(w.size):
        c += np.float64(w[i])
        if c > t:
            return i
    return -1


@njit(cache=True)
def first_above_int(w, t):
    """Smallest i with c_i > t, c = int64 cumulative sums of w (no overflow: checked by the caller); -1 if none."""
    c = np.int64(0)
    for i in range(w.size):
        c += np.int64(w[i])
        if c > t:
            return i
    return -1


@njit(cache=True)
def sum_float(w):
    c = 0.0
    for i in range(w.size):
        c += np.float64(w[i])
    return c


@njit(cache=True)
def cumsum_float(w, out):
    c = 0.0
    for i in range(w.size):
        c += np.float64(w[i])
        out[i] = c


@njit(cache=True)
def _last_positive(w):
    for i in range(w.size - 1, -1, -1):
        if w[i] > 0:
            return i
    return -1


@njit(cache=True, parallel=True)
def top_p_rows(keys, probs, p, u, out):
    """Per row: stable descending order (keys are descending keys), q in float64,
    e = exclusive sequential sum, kept q where e <= p, then the inverse transform
    with u[r] on the kept q (sequential sums); out[r] = original column."""
    for r in prange(keys.shape[0]):
        n = keys.shape[1]
        kr = keys[r].copy()
        idx = np.empty(n, np.int64)
        for j in range(n):
            idx[j] = j
        _sort_row(kr, idx, np.empty_like(kr), np.empty(n, np.int64))
        pr = probs[r]
        kept = np.empty(n, np.float64)
        e = 0.0
        for j in range(n):
            q = np.float64(pr[idx[j]])
            kept[j] = q if e <= p else 0.0
            e += q
        total = sum_float(kept)
        t = u[r] * total
        j = first_above_float(kept, t)
        if j < 0:
            j = _last_positive(kept)
        out[r] = idx[j]
