"""Fast CPU scan-based operators (parallel-scan-ascend.txt §4-§5): batched
scan, split / split_ind, radix sort / argsort, top-k, weighted sampling and
top-p sampling. Thin wrappers that validate, allocate and call the Numba
kernels of ``_scanfamily_kernels``.

What they compute (the order, ties, NaNs, the rounding of the sampling sums)
is stated once in DEVELOPERS.md, "Scan-based operators". numpy in, numpy out;
torch CPU tensors in, torch out; non-contiguous and read-only inputs are
copied to contiguous ones first.

Algorithms:
  radix_sort/argsort  LSB radix sort, 8-bit digits, of the order keys (one
                      vectorised pass computes them); one counting pass gives
                      every byte's histogram and a byte constant over all keys
                      is skipped. 1-D inputs of at least PAR_MIN elements:
                      chunk histograms, a scan over (digit, chunk), chunk
                      scatters in parallel; intermediate positions as int32.
                      2-D: rows in parallel. The last pass writes the values:
                      integers from their keys, floats too except zeros and
                      NaNs, which are read from the input (bits kept).
  topk                long 1-D input: a key threshold t from a strided sample
                      of SAMPLE keys, one parallel pass counting keys <= t
                      and one collecting them (blocks without a hit skipped);
                      when that leaves fewer than k or more than n/4, parallel
                      MSB-first radix-select levels instead. Then an exact
                      sequential radix select among the candidates, and a
                      radix sort of the k selected by (key, position). 2-D:
                      rows in parallel, each by radix select.
  batched_scan        rows in parallel, each accumulated in index order (int64
                      words for integers, the result dtype for floats); fewer
                      long rows than threads: each row by the parallel
                      ``segops.scan``.
  weighted_sample,    float64 sums in index order (bit-equal to np.cumsum in
  top_p_sample        float64); integers in exact int64.

Cold start: below PAR_MIN elements (or on one thread) a 1-D sort or top-k is
one sequential kernel (keys, the top-k selection, histograms and passes:
``_portable.rows`` on one row); 2-D sorts, top-k and top-p rows are the same
kernel over chunks of rows, sequential below PAR_MIN elements. Only the paths
of longer 1-D inputs use the parallel 1-D kernels.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ..._threading import guarded
from ..._validate import (
    as_flags,
    as_uniform,
    as_values,
    check_bool,
    check_int,
    check_overflow,
    check_weights,
    is_tensor,
    to_numpy,
)
from .._policy import kernel_result_dtype, like_input
from ..segment._column import scan_rows
from . import _portable as K

__all__ = ["batched_scan", "split", "split_ind", "radix_sort", "argsort", "topk", "weighted_sample",
           "top_p_sample"]

#: 1-D sorts/selections of at least this many elements run in parallel
PAR_MIN = 1 << 16
#: elements per chunk below which fewer chunks are used (split; tests lower it)
MIN_CHUNK = 1 << 15
#: chunks per thread of the parallel radix passes
CHUNKS_PER_THREAD = 2

_I32 = np.iinfo(np.int32)
_EXP_BITS = {2: 5, 4: 8, 8: 11}


# ----------------------------------------------------------------------------- helpers

def _chunks(n):
    c = max(1, min(numba.get_num_threads() * 4, n // max(MIN_CHUNK, 1)))
    return np.linspace(0, n, c + 1).astype(np.int64)


def _values(x, name="x", ndims=(1,)):
    a = to_numpy(x, name)
    nd = np.ndim(a)
    if nd not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{name} must be {want}, got an array of shape {np.shape(a)}")
    return np.ascontiguousarray(as_values(a, name, ndim=nd))


def _bits(x):
    """The values as unsigned words of their width (fp16 included: numba cannot load fp16)."""
    return x.view(f"u{x.dtype.itemsize}")


def _key_params(dtype, descending):
    """(isf, S, F, INF, D) of ``_key`` for values of ``dtype``, as the kernels take them."""
    w = 8 * dtype.itemsize
    S = 1 << (w - 1)
    F = (1 << w) - 1
    isf = dtype.kind == "f"
    INF = (((1 << _EXP_BITS[dtype.itemsize]) - 1) << (w - 1 - _EXP_BITS[dtype.itemsize])) if isf else 0
    return isf, np.uint64(S), np.uint64(F), np.uint64(INF), np.uint64(F if descending else 0)


def _keys(b, kp):
    """The order keys of the words b (any shape, C-contiguous), computed in parallel."""
    out = np.empty_like(b)
    K.make_keys(b.reshape(-1), *kp, out.reshape(-1))
    return out


def _emit_mode(dtype, kp):
    """How values come back from sorted keys (``_scanfamily_kernels._value``):
    (1, S ^ D) for integers (value = key ^ S ^ D); (3, D) for floats (the
    inverse key, zeros and NaNs read from the input by position, as their
    keys forget the sign / payload)."""
    if dtype.kind == "f":
        return 3, kp[4]
    return 1, np.uint64(int(kp[1]) ^ int(kp[4]))


def _par_chunks(n):
    C = max(1, numba.get_num_threads() * CHUNKS_PER_THREAD)
    return np.linspace(0, n, C + 1).astype(np.int64)


def _psort(b, kp, vmode, X):
    """Parallel stable LSB radix sort of the 1-D words b by their keys (kp): (values per
    vmode, positions int64)."""
    n = b.size
    starts = _par_chunks(n)
    C = starts.size - 1
    nb = b.itemsize
    isf, S, F, INF, D = kp
    keys = np.empty_like(b)
    hist = np.empty((C, nb, K.RADIX), np.int64)
    K.keys_hist(b, isf, S, F, INF, D, starts, keys, hist)
    tot = hist.sum(axis=0)
    # the bytes not constant over the keys (the top one if all are: one pass keeps the order)
    passes = [j for j in range(nb) if tot[j].max() < n] or [nb - 1]
    out_i = np.empty(n, np.int64)
    out_v = np.empty(n if vmode else 0, b.dtype)
    itype = np.int32 if n < 2**31 else np.int64
    P = len(passes)
    kb = [keys, np.empty_like(keys) if P > 1 else keys[:0]]
    ib = [np.empty(n if P > 1 else 0, itype), np.empty(n if P > 2 else 0, itype)]
    h = np.ascontiguousarray(hist[:, passes[0], :])
    cur_i = np.empty(0, itype)
    kernel = K.scatter(vmode != 0)
    flt = vmode == 3
    for j, byte in enumerate(passes):
        last = j == P - 1
        nk, ni = kb[(j + 1) % 2], ib[j % 2]
        # offs[c, d] = all keys of smaller digits + keys of digit d in earlier chunks
        flat = h.T.reshape(-1)
        offs = np.ascontiguousarray((np.cumsum(flat) - flat).reshape(K.RADIX, C).T)
        kernel(kb[j % 2], cur_i, j == 0, last, starts, 8 * byte, offs, nk, ni, out_i, flt, S, F, X, b, out_v)
        if not last:
            K.hist_byte(nk, starts, 8 * passes[j + 1], h)
            cur_i = ni
    return out_v, out_i


def _row_par(rows, n):
    """Whether a row kernel runs its rows in parallel: several rows, threads and at least
    PAR_MIN elements."""
    return rows > 1 and numba.get_num_threads() > 1 and rows * n >= PAR_MIN


def _ident(itemsize):
    """``_key_params`` under which the integer key of a word is the word itself (S = D = 0):
    how sorted keys are sorted again (``argsort``'s integer kernel of that width)."""
    z = np.uint64(0)
    return False, z, np.uint64((1 << (8 * itemsize)) - 1), z, z


def _sort_rows(b, kp, vmode, X, k=None, topp=None):
    """Each row of the 2-D words b stably sorted by its keys: (values per vmode, positions
    int64), by ``_portable.rows``; ``k``: only the k (>= 1) smallest keys of each row (top-k);
    ``topp`` = (probs rows, p, u, out): top-p's draw instead (returns nothing). Rows in
    parallel (buffers allocated per row there), or in turn in one set of buffers."""
    R, n = b.shape
    nb = b.itemsize
    par = _row_par(R, n)
    isf, S, F, INF, D = kp
    m = n if k is None else k
    out_v = np.empty((R, m), b.dtype) if vmode else None
    out_i = np.empty((R, m), np.int64) if topp is None else None
    ka = kb = ti = hist = passes = sel_i = kept = None
    if not par:
        ka, kb, ti = np.empty(n, b.dtype), np.empty(n, b.dtype), np.empty(n, np.int64)
        hist, passes = np.empty((2 * nb, K.RADIX), np.int64), np.empty(nb, np.intp)
        sel_i = None if k is None else np.empty(k, np.int64)
    probs = p = u = out = None
    if topp is not None:
        probs, p, u, out = topp
        if not par:
            out_i, kept = np.empty(n, np.int64), np.empty(n, np.float64)
    K.rows(vmode != 0, par, k is not None, topp is not None)(
        b, isf, vmode == 3, S, F, INF, D, X, m, ka, kb, ti, hist, passes, out_i, out_v, sel_i, probs, p, u, kept,
        out)
    return out_v, out_i


def _sort_1d(b, kp, vmode, X):
    """Stable sort of the 1-D words b by their keys: (values per vmode, positions int64)."""
    n = b.size
    if n >= PAR_MIN and numba.get_num_threads() > 1:
        return _psort(b, kp, vmode, X)
    sv, idx = _sort_rows(b.reshape(1, n), kp, vmode, X)
    return (sv.reshape(n) if vmode else np.empty(0, b.dtype)), idx.reshape(n)


# ----------------------------------------------------------------------------- split

def _split(x, mask, want_idx):
    x = _values(x)
    m = np.ascontiguousarray(as_flags(to_numpy(mask, "mask"), x.size, "mask", check_values=False)).view(np.uint8)
    n = x.size
    starts = _chunks(n)
    C = starts.size - 1
    par = C > 1 and numba.get_num_threads() > 1
    counts = np.zeros(C, np.int64)
    maxv = np.zeros(C, np.uint8)
    if n <= PAR_MIN:  # numpy: as fast there, and no kernel to compile
        for c in range(C):
            ms = m[starts[c]:starts[c + 1]]
            counts[c] = np.count_nonzero(ms)
            maxv[c] = ms.max(initial=0)
    else:
        K.mask_counts(par)(m, starts, counts, maxv)
    if n and int(maxv.max()) > 1:
        i = int(np.argmax(m > 1))
        bad = to_numpy(mask, "mask")
        raise ValueError(f"mask must hold only 0 and 1; mask[{i}] = {np.asarray(bad).reshape(-1)[i]}")
    one_base = np.zeros(C, np.int64)
    np.cumsum(counts[:-1], out=one_base[1:])
    zero_base = int(counts.sum()) + (starts[:-1] - one_base)  # zeros before chunk c = elements - ones
    out = np.empty_like(x)
    idx = np.empty(n if want_idx else 0, np.int64)
    K.split_scatter(par, want_idx)(_bits(x), m, starts, one_base, zero_base, _bits(out), idx)
    return out, idx


@guarded
def split(x, mask):
    """Stable split: the elements with mask 1 first, then those with mask 0,
    each group in input order. x 1-D (any value dtype); mask 0/1 of
    bool/int8/uint8 with len(x) entries. Returns an array like x."""
    out, _ = _split(x, mask, False)
    return like_input(out, x)


@guarded
def split_ind(x, mask):
    """``split`` -> (values, original indices int64)."""
    out, idx = _split(x, mask, True)
    return like_input(out, x), like_input(idx, x)


# ----------------------------------------------------------------------------- radix sort

def _sort(x, descending):
    x = _values(x, ndims=(1, 2))
    kp = _key_params(x.dtype, check_bool(descending, "descending"))
    return x, _bits(x), kp


@guarded
def radix_sort(x, *, descending=False):
    """Stable sort -> (values, indices int64), like ``torch.sort(stable=True)``.

    x 1-D, or 2-D sorted row by row; int8/16/32/64, fp16/32/64. Ascending puts
    NaNs last (as np.sort), descending first (as torch); -0.0 == +0.0 in input
    order; equal keys keep input order in both directions; values come back
    bit for bit (DEVELOPERS.md, "Order").
    """
    src = x
    x, b, kp = _sort(x, descending)
    vmode, X = _emit_mode(x.dtype, kp)
    sv, idx = (_sort_1d if x.ndim == 1 else _sort_rows)(b, kp, vmode, X)
    return like_input(sv.view(x.dtype), src), like_input(idx, src)


@guarded
def argsort(x, *, descending=False):
    """The indices (int64) of ``radix_sort(x, descending=...)`` (stable)."""
    src = x
    x, b, kp = _sort(x, descending)
    _, idx = (_sort_1d if x.ndim == 1 else _sort_rows)(b, kp, 0, np.uint64(0))
    return like_input(idx, src)


# ----------------------------------------------------------------------------- top-k

#: sample size of the top-k threshold estimate
SAMPLE = 4096


def _threshold(b, k, kp):
    """A key t such that, very likely, k <= #(keys <= t) << n, from a strided
    sample of the keys; None when no useful t exists (k a large part of n)."""
    n = b.size
    s = min(SAMPLE, n)
    pos = np.linspace(0, n - 1, s).astype(np.int64)
    sk = np.sort(_keys(np.ascontiguousarray(b[pos]), kp))
    mean = k * s / n
    q = int(math.ceil(mean + 4 * math.sqrt(mean) + 8))
    if q >= s // 8:
        return None
    return sk[q]


def _finish_rows(b, sel_k, sel_i):
    """The selected (key, position) pairs of each row (2-D) sorted by key, stably ->
    (values: the words of b at those positions, positions)."""
    _, perm = _sort_rows(sel_k, _ident(sel_k.itemsize), 0, np.uint64(0))
    idx = np.take_along_axis(sel_i, perm, axis=1)
    return np.take_along_axis(b, idx, axis=1), idx


def _topk_rows(b, k, kp, vmode, X):
    """(values, positions) of the k smallest keys of each row of the 2-D words b, sorted by
    (key, position): ``_portable.rows`` selecting, then sorting."""
    R, n = b.shape
    if k == 0 or R == 0:
        return np.empty((R, k), b.dtype), np.empty((R, k), np.int64)
    return _sort_rows(b, kp, vmode, X, k=k)


def _topk_1d(b, k, kp, vmode, X):
    """(values, positions) of the k smallest keys of the 1-D words b, sorted by (key, position)."""
    n = b.size
    nb = b.itemsize
    out_i = np.empty(k, np.int64)
    out_v = np.empty(k, b.dtype)
    if k == 0:
        return out_v, out_i
    sel_k = np.empty(k, b.dtype)
    sel_i = np.empty(k, np.int64)
    par = numba.get_num_threads() > 1
    done = False
    if n >= PAR_MIN:
        t = _threshold(b, k, kp)
        if t is not None:  # one counting pass, one collecting pass, then a small select
            starts = _chunks(n)
            counts = np.zeros(starts.size - 1, np.int64)
            K.count_le(b, starts, np.uint64(t), *kp, counts)
            tot = int(counts.sum())
            if k <= tot <= n // 4:
                offs = np.zeros(counts.size, np.int64)
                np.cumsum(counts[:-1], out=offs[1:])
                ck = np.empty(tot, b.dtype)
                ci = np.empty(tot, np.int64)
                K.collect_le(b, starts, np.uint64(t), *kp, offs, ck, ci)
                if k < PAR_MIN or not par:  # select and sort the candidates (in position order) at once
                    _, j = _sort_rows(ck.reshape(1, tot), _ident(nb), 0, np.uint64(0), k=k)
                    idx = ci[j.reshape(k)]
                    return b[idx], idx
                K.select_seq(ck, ci, False, tot, k, nb - 1, sel_k, sel_i, 0, np.empty(K.RADIX, np.int64))
                done = True
    if not done and (n < PAR_MIN or not par):  # sequential: the row kernels on one row
        sv, idx = _topk_rows(b.reshape(1, n), k, kp, vmode, X)
        return sv.reshape(k), idx.reshape(k)
    if not done:
        keys = _keys(b, kp)
        cv, ci, implicit, m, need, byte, ns = keys, np.empty(0, np.int64), True, n, k, nb - 1, 0
        while par and byte >= 0 and 0 < need < m and m >= PAR_MIN:
            starts = _par_chunks(m)
            C = starts.size - 1
            hist = np.empty((C, K.RADIX), np.int64)
            K.hist_byte(cv, starts, 8 * byte, hist)
            tot = hist.sum(axis=0)
            cum = np.cumsum(tot)
            d = int(np.searchsorted(cum, need))  # the first digit whose inclusive count reaches need
            below = int(cum[d] - tot[d])
            if int(tot[d]) == m:
                byte -= 1
                continue
            sure_off = ns + np.concatenate([[0], np.cumsum(hist[:, :d].sum(axis=1))[:-1]]).astype(np.int64)
            cand_off = np.concatenate([[0], np.cumsum(hist[:, d])[:-1]]).astype(np.int64)
            nv = np.empty(int(tot[d]), b.dtype)
            ni = np.empty(int(tot[d]), np.int64)
            K.select_collect(cv, ci, implicit, starts, 8 * byte, d, sel_k, sel_i, sure_off, nv, ni, cand_off)
            cv, ci, implicit, m = nv, ni, False, int(tot[d])
            ns += below
            need -= below
            byte -= 1
        if implicit:  # compacted in place: positions need a buffer of their own
            ci = np.empty(m, np.int64)
        K.select_seq(cv, ci, implicit, m, need, byte, sel_k, sel_i, ns, np.empty(K.RADIX, np.int64))
    if k >= PAR_MIN and par:
        sk, perm = _psort(sel_k, _ident(nb), 1, np.uint64(0))  # sk: the sorted keys
        out_i = sel_i[perm]
        K.values_of(sk, out_i, vmode, X, b, out_v)
        return out_v, out_i
    sv, idx = _finish_rows(b.reshape(1, n), sel_k.reshape(1, k), sel_i.reshape(1, k))
    return sv.reshape(k), idx.reshape(k)


@guarded
def topk(x, k, *, largest=True):
    """The k largest (``largest=False``: smallest) values, sorted (descending,
    resp. ascending), and their indices int64. Among equal values the lower
    index comes first and is the one kept at the cut; NaN is the largest value
    (as in torch.topk). x 1-D, or 2-D row by row; 0 <= k <= x.shape[-1]."""
    src = x
    x = _values(x, ndims=(1, 2))
    n = x.shape[-1]
    k = check_int(k, "k", 0, n, what=" (the length of x's last axis)")
    kp = _key_params(x.dtype, check_bool(largest, "largest"))
    vmode, X = _emit_mode(x.dtype, kp)
    b = _bits(x)
    if x.ndim == 1:
        sv, idx = _topk_1d(b, k, kp, vmode, X)
    else:
        sv, idx = _topk_rows(b, k, kp, vmode, X)
    return like_input(sv.view(x.dtype), src), like_input(idx, src)


# ----------------------------------------------------------------------------- batched scan

@guarded
def batched_scan(x, *, exclusive=False, dtype=None, overflow="raise"):
    """Each row of a 2-D ``x`` scanned on its own (like ``torch.cumsum(x, dim=1)``);
    ``exclusive=True``: z[r, i] = sum(x[r, :i]).

    Dtype and overflow rules as ``segops.scan``: int8/16/32 -> int32, int64 ->
    int64, fp16 -> fp32, fp32/fp64 kept; ``dtype=`` overrides (int32, int64,
    float32, float64; not integers for a float x). An integer result outside
    the result dtype raises OverflowError unless ``overflow="wrap"``
    (two's-complement). Floats accumulate in the result dtype in index order
    (equal to np.cumsum(x, axis=1, dtype=result dtype)); fewer long rows than
    threads use the parallel 1-D scan (its error bound, segops).
    """
    src = x
    x = _values(x, ndims=(2,))
    rdt = kernel_result_dtype(x, dtype, "batched_scan")
    check_overflow(overflow)
    ex = check_bool(exclusive, "exclusive")
    return like_input(scan_rows(x, ex, rdt, overflow), src)


# ----------------------------------------------------------------------------- sampling

def _weights(w):
    w = _values(w, "w")
    check_weights(w, "w")
    if w.dtype == np.float16:
        w = w.astype(np.float32)  # exact; numba cannot load fp16
    return w


@guarded
def weighted_sample(w, u):
    """Index i drawn with probability w[i] / sum(w) by inverse transform with the
    caller's uniform u in [0, 1) (DEVELOPERS.md): c = inclusive sums of w (int64
    exact, OverflowError beyond int64; floats: float64 in index order), t = u *
    c[-1] in float64, the smallest i with c[i] > t (integers: c[i] > floor(t));
    if none (u within an ulp of 1), the last i with w[i] > 0. w 1-D,
    non-negative, finite, positive total. Returns np.int64 for a scalar u, an
    int64 array shaped like an array u (torch when u is a tensor)."""
    usrc = u
    w = _weights(w)
    u = as_uniform(to_numpy(u, "u"))
    isf = w.dtype.kind == "f"
    if isf and u.ndim == 0:  # the total and the draw in one kernel
        total, i = K.sample_float(w, float(u))
        if not total > 0:
            raise ValueError("w must have a positive total, got " + repr(total))
        return np.int64(i if i >= 0 else K.last_positive(w))
    if isf:
        total = K.total_float(w)
    else:
        total, ovf = K.total_int(w)
        if ovf:
            raise OverflowError("weighted_sample: the total of the weights w overflows int64")
        total = int(total)
    if not total > 0:
        raise ValueError("w must have a positive total, got " + repr(total))
    ftotal = float(total)

    def last():
        return int(K.last_positive(w))

    if u.ndim == 0:  # integers (floats: above)
        ft = math.floor(float(u) * ftotal)
        i = K.first_above_int(w, ft) if ft < total else -1
        return np.int64(i if i >= 0 else last())
    uf = u.reshape(-1)
    t = uf * ftotal
    if isf:
        c = np.empty(w.size, np.float64)
        K.cumsum_float(w, c)
        i = np.searchsorted(c, t, side="right")
    else:
        c = np.empty(w.size, np.int64)
        K.cumsum_int(w, c)
        ft = np.floor(t)  # < 2**63: exact as int64; a threshold at or past the total selects nothing
        ti = np.where(ft >= ftotal, 0, ft).astype(np.int64)
        i = np.searchsorted(c, ti, side="right")
        i = np.where(ft >= ftotal, w.size, i)
    i = np.where(i >= w.size, last(), i).astype(np.int64).reshape(u.shape)
    return like_input(i, usrc) if is_tensor(usrc) else i


@guarded
def top_p_sample(probs, p, u):
    """Nucleus sampling with a given uniform u (Llama 3's sample_top_p; DEVELOPERS.md):
    per row, order = stable descending sort; q = probs[order] in float64; e =
    exclusive float64 sums in index order; keep q_j where e_j <= p; then
    weighted_sample(kept q, u) -> sorted position j; the token is order[j].
    probs 1-D (u a float; returns np.int64) or 2-D (u of shape (rows,);
    returns int64 (rows,), torch for a torch probs); float dtypes, finite,
    non-negative, positive row totals; 0 <= p <= 1; u in [0, 1)."""
    src = probs
    probs = _values(probs, "probs", ndims=(1, 2))
    if probs.dtype.kind != "f":
        raise TypeError(f"probs must be float16, float32 or float64, got {probs.dtype}")
    check_weights(probs, "probs")
    try:
        if not isinstance(p, (int, float, np.integer, np.floating)) or isinstance(p, (bool, np.bool_)):
            raise TypeError
        pf = float(p)
    except (TypeError, ValueError):
        raise TypeError(f"p must be a float, got {type(p).__name__}") from None
    if not 0 <= pf <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    u = as_uniform(to_numpy(u, "u"))
    rows = probs if probs.ndim == 2 else probs.reshape(1, -1)
    if probs.ndim == 2 and u.shape != (rows.shape[0],):
        raise ValueError(f"u must have shape ({rows.shape[0]},) (one sample per row of probs), got {u.shape}")
    if probs.ndim == 1 and u.ndim != 0:
        raise ValueError(f"u must be a scalar for 1-D probs, got shape {u.shape}")
    if rows.dtype == np.float16:
        rows = rows.astype(np.float32)  # exact and order-preserving; numba cannot load fp16
    R = rows.shape[0]
    out = np.empty(R, np.int64)
    if R:
        totals = rows.sum(axis=1, dtype=np.float64)
        bad = np.flatnonzero(~(totals > 0))
        if bad.size:
            raise ValueError(f"probs row {int(bad[0])} must have a positive total")
        rows = np.ascontiguousarray(rows)
        _sort_rows(_bits(rows), _key_params(rows.dtype, True), 0, np.uint64(0),
                   topp=(rows, pf, np.ascontiguousarray(u.reshape(-1)), out))
    if probs.ndim == 1:
        return np.int64(out[0])
    return like_input(out, src)
