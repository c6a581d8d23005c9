"""The scan-based operators of the Ascend scan paper (parallel-scan-ascend.txt §5),
stage by stage: split / SplitInd, LSB radix sort, top-k by repeated splits,
weighted sampling and top-p (nucleus) sampling. What each computes (order,
ties, NaNs, rounding) is stated once in DEVELOPERS.md, "Scan-based operators".

Every scan here is MCScan (Alg. 3) on machine words, as SplitInd does ("executes
an exclusive scan using MCScan on the mask array"); ``s`` and ``cores`` pick its
tiling. Integer scans run in int64 words; the sampling scans in float64 words.
"""
from __future__ import annotations

import math

import numpy as np

from .. import mmv
from .._validate import as_flags, as_uniform, as_values, check_bool, check_cores, check_int, check_s, check_weights
from ._words import DEFAULT_S
from .ascend_scan import exclusive_shift, mc_scan_words, reduce_sum

__all__ = [
    "split", "split_ind", "radix_sort", "argsort", "topk", "weighted_sample", "top_p_sample",
    "split_positions", "radix_pass", "select_smallest", "inverse_transform",
]

DEFAULT_CORES = 20  # AI cores of the 910B4 (§6)


def _iota(n):
    """The constant vector 0, 1, ..., n-1 (a constant of the machine's memory, like U_s)."""
    return np.arange(n, dtype=np.int64)


# ----------------------------------------------------------------------------- split

def split_positions(m, s, cores):
    """Output position of every element under a stable split by 0/1 words ``m``
    (SplitInd, §5): e = exclusive MCScan(m); T = number of ones (scalar read);
    ones go to e(i), zeros to T + i - e(i) (the zeros before i). Returns (pos, T)."""
    n = len(m)
    if n == 0:
        return m.copy(), 0
    e = exclusive_shift(mc_scan_words(m, s, cores))
    t = int(e[-1] + m[-1])
    zero_pos = mmv.add(mmv.sub(_iota(n), e), t)
    pos = mmv.add(mmv.mask(e, m), mmv.mask(zero_pos, mmv.not_(m)))
    return pos, t


def _check_sc(s, cores):
    return check_s(s), check_cores(cores)


def split_ind(x, mask, s=DEFAULT_S, cores=DEFAULT_CORES):
    """SplitInd (§5): (values, original indices int64) with the mask-1 elements
    first, then the mask-0 ones, each group in input order."""
    x = as_values(x, "x")
    m = np.ascontiguousarray(as_flags(mask, len(x), "mask"), dtype=np.int64)
    s, cores = _check_sc(s, cores)
    pos, _ = split_positions(m, s, cores)
    return mmv.scatter(x, pos, len(x)), mmv.scatter(_iota(len(x)), pos, len(x))


def split(x, mask, s=DEFAULT_S, cores=DEFAULT_CORES):
    """Split (§5): the mask-1 elements first, then the mask-0 ones, stable."""
    return split_ind(x, mask, s, cores)[0]


# ----------------------------------------------------------------------------- radix sort

def radix_pass(keys, idx, b, s, cores):
    """One LSB radix-sort step (§5, Radix sort): the split by NOT bit b of the
    keys (RadixSingle: ShiftRight and Not), zeros first; keys and indices move."""
    m = mmv.not_(mmv.bit(keys, b))
    pos, _ = split_positions(m, s, cores)
    return mmv.scatter(keys, pos, len(keys)), mmv.scatter(idx, pos, len(idx))


def _sort_row(x, descending, s, cores):
    keys = mmv.orderkey(x, descending)
    idx = _iota(len(x))
    for b in range(8 * x.dtype.itemsize):
        keys, idx = radix_pass(keys, idx, b, s, cores)
    return mmv.gather(x, idx), idx


def _rows(x, name="x"):
    if np.ndim(x) not in (1, 2):
        raise ValueError(f"{name} must be 1-D, or 2-D (rows), got shape {np.shape(x)}")
    x = np.ascontiguousarray(as_values(x, name, ndim=np.ndim(x)))
    return x, (x if x.ndim == 2 else x[None, :])


def _stack(parts, shape, dtype):
    return np.stack(parts).reshape(shape) if parts else np.zeros(shape, dtype=dtype)


def radix_sort(x, s=DEFAULT_S, cores=DEFAULT_CORES, *, descending=False):
    """Stable LSB radix sort (§5): one split per key bit on the order-preserving
    keys of ``mmv.orderkey``; returns (values, indices int64) like torch.sort.
    x 1-D, or 2-D sorted row by row."""
    x, rows = _rows(x)
    s, cores = _check_sc(s, cores)
    descending = check_bool(descending, "descending")
    vals, idxs = [], []
    for row in rows:
        v, i = _sort_row(row, descending, s, cores)
        vals.append(v)
        idxs.append(i)
    return _stack(vals, x.shape, x.dtype), _stack(idxs, x.shape, np.int64)


def argsort(x, s=DEFAULT_S, cores=DEFAULT_CORES, *, descending=False):
    """The indices of ``radix_sort``."""
    return radix_sort(x, s, cores, descending=descending)[1]


# ----------------------------------------------------------------------------- top-k

def select_smallest(keys, k, s, cores):
    """Selection by repeated splits (§5, Top-k: partial quicksort on SplitInd),
    MSB first: at bit b the candidates split into bit-0 and bit-1 groups (stable);
    if the bit-0 group fits in what is still needed it is taken whole and the
    search goes on in the bit-1 group, else the search narrows to the bit-0
    group. Candidates left after the last bit have equal keys; the first ones
    (lowest indices) fill the rest. Returns a 0/1 word vector of the chosen."""
    n = len(keys)
    chosen = np.zeros(n, dtype=np.int64)
    cand = _iota(n)
    ck = keys
    need = k
    for b in range(63 if keys.dtype.itemsize == 8 else 8 * keys.dtype.itemsize - 1, -1, -1):
        if need == 0 or len(cand) == 0:
            break
        zeros = mmv.not_(mmv.bit(ck, b))
        cnt = int(reduce_sum(zeros, s))
        pos, _ = split_positions(zeros, s, cores)
        cand_s = mmv.scatter(cand, pos, len(cand))
        ck_s = mmv.scatter(ck, pos, len(ck))
        if cnt <= need:
            chosen = mmv.scatter(np.ones(cnt, np.int64), cand_s[:cnt], n) + chosen
            need -= cnt
            cand, ck = cand_s[cnt:], ck_s[cnt:]
        else:
            cand, ck = cand_s[:cnt], ck_s[:cnt]
    if need:
        chosen = mmv.scatter(np.ones(need, np.int64), cand[:need], n) + chosen
    return chosen


def topk(x, k, s=DEFAULT_S, cores=DEFAULT_CORES, *, largest=True):
    """Top-k (§5): the k largest (smallest) values, sorted, with their indices
    (int64). The keys are taken so that the wanted values have the smallest
    keys; ``select_smallest`` picks them; the picked ones, compressed in index
    order, are sorted by the stable radix sort."""
    x, rows = _rows(x)
    s, cores = _check_sc(s, cores)
    n = x.shape[-1]
    k = check_int(k, "k", 0, n, what=" (the length of x)")
    largest = check_bool(largest, "largest")
    vals, idxs = [], []
    for row in rows:
        keys = mmv.orderkey(row, descending=largest)
        chosen = select_smallest(keys, k, s, cores)
        pos, _ = split_positions(chosen, s, cores)
        sel = mmv.scatter(_iota(n), pos, n)[:k]  # COMPRESS: chosen, in index order
        sk = mmv.gather(keys, sel)
        order = _iota(k)
        for b in range(8 * row.dtype.itemsize):
            sk, order = radix_pass(sk, order, b, s, cores)
        i = mmv.gather(sel, order)
        vals.append(mmv.gather(row, i))
        idxs.append(i)
    shape = x.shape[:-1] + (k,)
    return _stack(vals, shape, x.dtype), _stack(idxs, shape, np.int64)


# ----------------------------------------------------------------------------- sampling

def inverse_transform(c, w, u, s, cores):
    """Inverse-transform sampling (§5, Weighted sampling): t = u * c(-1); the
    predicate c(i) > t (NOT LEQ; integers compare with floor(t), exactly), then
    SplitInd puts the true positions first: the first index out is the sample.
    If rounding leaves no c(i) > t, the last index with w(i) > 0."""
    n = len(c)
    t = u * float(c[-1])
    thr = math.floor(t) if c.dtype.kind == "i" else t
    pred = mmv.not_(mmv.leq(c, thr))
    pos, cnt = split_positions(pred, s, cores)
    order = mmv.scatter(_iota(n), pos, n)
    if cnt:
        return np.int64(order[0])
    return np.int64(np.flatnonzero(w > 0)[-1])


def _cdf(w, s, cores):
    """c = inclusive MCScan of the weights: int64 words (exact: OverflowError if
    the total leaves int64) or float64 words."""
    if w.dtype.kind == "f":
        return mc_scan_words(np.ascontiguousarray(w, dtype=np.float64), s, cores)
    w = np.ascontiguousarray(w, dtype=np.int64)
    if len(w) and len(w) * int(w.max()) > np.iinfo(np.int64).max and sum(int(v) for v in w) > np.iinfo(
            np.int64).max:
        raise OverflowError("weighted_sample: the total of the weights overflows int64")
    return mc_scan_words(w, s, cores)


def weighted_sample(w, u, s=DEFAULT_S, cores=DEFAULT_CORES):
    """Weighted sampling (§5): index i with probability w(i) / sum(w), by inverse
    transform with the caller's uniform sample(s) u in [0, 1): scan, then SplitInd
    with the predicate scan(w) > u * sum(w). Returns np.int64 for a scalar u,
    else an int64 array shaped like u."""
    w = as_values(w, "w")
    s, cores = _check_sc(s, cores)
    check_weights(w, "w")
    u = as_uniform(u)
    c = _cdf(w, s, cores)
    if len(w) == 0 or c[-1] <= 0:
        raise ValueError("w must have a positive total")
    if u.ndim == 0:
        return inverse_transform(c, w, float(u), s, cores)
    return np.array([inverse_transform(c, w, float(v), s, cores) for v in u.ravel()],
                    dtype=np.int64).reshape(u.shape)


def top_p_sample(probs, p, u, s=DEFAULT_S, cores=DEFAULT_CORES):
    """Top-p (nucleus) sampling (§5; Llama 3's sample_top_p with a given u), per
    row: stable descending radix sort; q in float64; e = exclusive scan of q;
    keep q where e <= p (MASK by LEQ); inverse transform on the kept q with u;
    the token is the sorted position's original index. Returns np.int64 for 1-D
    probs (u a float), else int64 of shape (rows,) (u of that shape)."""
    if np.ndim(probs) not in (1, 2):
        raise ValueError(f"probs must be 1-D, or 2-D (rows), got shape {np.shape(probs)}")
    probs = as_values(probs, "probs", ndim=np.ndim(probs))
    if probs.dtype.kind != "f":
        raise TypeError(f"probs must be float16, float32 or float64, got {probs.dtype}")
    s, cores = _check_sc(s, cores)
    check_weights(probs, "probs")
    if not 0 <= float(p) <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    u = as_uniform(u)
    rows = probs if probs.ndim == 2 else probs[None, :]
    us = np.broadcast_to(u, (rows.shape[0],)) if probs.ndim == 2 else u.reshape(1)
    if probs.ndim == 2 and u.shape != (rows.shape[0],):
        raise ValueError(f"u must have shape ({rows.shape[0]},) (one sample per row), got {u.shape}")
    if probs.ndim == 1 and u.ndim != 0:
        raise ValueError(f"u must be a scalar for 1-D probs, got shape {u.shape}")
    out = np.empty(rows.shape[0], dtype=np.int64)
    for r, row in enumerate(rows):
        if row.size == 0 or not float(np.sum(row, dtype=np.float64)) > 0:
            raise ValueError(f"probs row {r} must have a positive total")
        _, order = _sort_row(np.ascontiguousarray(row), True, s, cores)
        q = mmv.gather(np.ascontiguousarray(row, dtype=np.float64), order)
        e = exclusive_shift(mc_scan_words(q, s, cores))
        kept = mmv.mask(q, mmv.leq(e, float(p)))
        c = mc_scan_words(kept, s, cores)
        out[r] = order[inverse_transform(c, kept, float(us[r]), s, cores)]
    return out if probs.ndim == 2 else np.int64(out[0])
