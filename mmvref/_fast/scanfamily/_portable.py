"""Numba kernels of the fast scan-based operators (``scanfamily``).

Values move as unsigned words of their own width (uint8/16/32/64; fp16, which
numba cannot load, is only ever moved as uint16), so NaN payloads and -0.0
come back bit for bit. Sorting and selection work on order keys (``_key``:
DEVELOPERS.md, "Order"; Knuth 5.2.5 Ex. 8-9), unsigned words of the value's
width:

  integers: the sign bit flipped;
  floats:   NaN -> all ones, -0.0 -> +0.0's key, then non-negatives get the sign
            bit set and negatives every bit inverted;
  descending: every bit of the key inverted (``D`` = all ones), so an ascending
            stable sort of the keys is a stable descending sort of the values.

``_key`` is branch-free so that loops computing it vectorise (a branch on the
sign of random data is mispredicted half the time). Key arithmetic is
unsigned 64-bit throughout (numba turns int64 mixed with uint64 into float),
and array indices are unsigned where possible (no negative-index wraparound
code in the inner loops). A radix pass is a stable counting sort on one byte;
parallel passes cut the input into chunks: per-chunk histograms, one
exclusive scan over (digit, chunk), per-chunk stable scatters.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

RADIX = 256
_M8 = np.uint64(0xFF)


# ----------------------------------------------------------------------------- keys

@njit(cache=True, inline="always")
def _key(v, isf, S, F, INF, D):
    """Unsigned order key of the word v (S: sign bit, F: all ones of the width,
    INF: the bits of +inf for floats, D: 0 or F for descending)."""
    k = np.uint64(v)
    if isf:  # branch-free: the sign of random data would be mispredicted half the time
        a = k & (F ^ S)
        neg = np.uint64((k & S) != np.uint64(0))
        k = k ^ (S | ((np.uint64(0) - neg) & F))
        k = S if a == np.uint64(0) else k
        k = F if a > INF else k
    else:
        k = k ^ S
    return k ^ D


# ----------------------------------------------------------------------------- keys

@njit(cache=True, parallel=True)
def make_keys(v, isf, S, F, INF, D, out):
    """out[i] = key of v[i] (1-D; vectorises: the selects of ``_key`` stay branch-free)."""
    for i in prange(v.size):
        out[i] = _key(v[i], isf, S, F, INF, D)


@njit(cache=True, parallel=True)
def count_le(v, starts, t, isf, S, F, INF, D, counts):
    """counts[c] = keys <= t in chunk c (keys computed on the fly)."""
    for c in prange(starts.size - 1):
        vs = v[starts[c]:starts[c + 1]]
        k = 0
        for i in range(vs.size):
            k += _key(vs[i], isf, S, F, INF, D) <= t
        counts[c] = k


@njit(cache=True, parallel=True)
def collect_le(v, starts, t, isf, S, F, INF, D, offs, kout, iout):
    """Keys <= t (and their positions) of chunk c written from offs[c], in
    position order. Blocks of 64 are first counted (vectorised); a block
    without a hit is skipped, so a rare hit costs no per-element branch."""
    for c in prange(starts.size - 1):
        lo = starts[c]
        vs = v[lo:starts[c + 1]]
        j = offs[c]
        for b0 in range(0, vs.size, 64):
            blk = vs[b0:b0 + 64]
            hits = 0
            for i in range(blk.size):
                hits += _key(blk[i], isf, S, F, INF, D) <= t
            if hits == 0:
                continue
            for i in range(blk.size):
                k = _key(blk[i], isf, S, F, INF, D)
                if k <= t:
                    kout[j] = k
                    iout[j] = lo + b0 + i
                    j += 1


# ----------------------------------------------------------------------------- sequential sort (on keys)

@njit(cache=True)
def _hist_all(ks, hist):
    """hist[b, d] = keys of ks whose byte b is d (two interleaved counter sets,
    so runs of equal bytes do not serialise on one counter)."""
    nb = ks.itemsize
    h2 = np.zeros((nb, RADIX), np.int64)
    m2 = ks.size // 2 * 2
    for i in range(0, m2, 2):
        k0 = np.uint64(ks[i])
        k1 = np.uint64(ks[i + 1])
        for b in range(nb):
            sh = np.uint64(8 * b)
            hist[b, (k0 >> sh) & _M8] += 1
            h2[b, (k1 >> sh) & _M8] += 1
    if m2 < ks.size:
        k0 = np.uint64(ks[m2])
        for b in range(nb):
            hist[b, (k0 >> np.uint64(8 * b)) & _M8] += 1
    for b in range(nb):
        for d in range(RADIX):
            hist[b, d] += h2[b, d]


@njit(cache=True, inline="always")
def _value(vmode, k, X, v, src, S, F):
    """The value word of key k at input position src: k ^ X (vmode 1, integers:
    X = S ^ D); vmode 3 (floats, X = D): the inverse of ``_key``, except that
    zeros and NaNs (whose keys forget the sign / payload) are read from v[src]."""
    if vmode == 1:
        return np.uint64(k) ^ X
    kk = np.uint64(k) ^ X
    if kk == F or kk == S:
        return np.uint64(v[src])
    return kk ^ (S if (kk & S) != np.uint64(0) else F)


@njit(cache=True, inline="always")
def _sf(a):
    """(sign bit, all ones) of the words of array a, as uint64."""
    S = np.uint64(1) << np.uint64(8 * a.itemsize - 1)
    return S, S | (S - np.uint64(1))


@njit(cache=True)
def _emit(vmode, out_v, p, k, X, v, src):
    """out_v[p] = the value of key k (``_value``); vmode 0: nothing."""
    if vmode != 0:
        S, F = _sf(out_v)
        out_v[p] = _value(vmode, k, X, v, src, S, F)


@njit(cache=True)
def _sort_keys(k1, k2, out_i, ti, v, out_v, vmode, X):
    """Stable LSB radix sort of the keys k1 (clobbered; k2, ti scratch of the
    same size): out_i = positions in sorted order, out_v per ``vmode``
    (``_emit``). One counting pass gives every byte's histogram; a byte
    constant over all keys is skipped."""
    n = k1.size
    nb = k1.itemsize
    if n == 0:
        return
    hist = np.zeros((nb, RADIX), np.int64)
    _hist_all(k1, hist)
    passes = np.empty(nb, np.intp)
    P = 0
    for b in range(nb):
        trivial = False
        for d in range(RADIX):
            if hist[b, d] == n:
                trivial = True
        if not trivial:
            passes[P] = b
            P += 1
            t = 0
            for d in range(RADIX):
                c = hist[b, d]
                hist[b, d] = t
                t += c
    if P == 0:
        for i in range(n):
            out_i[i] = i
            _emit(vmode, out_v, i, k1[i], X, v, i)
        return
    ka = k1
    kb = k2
    # position buffers: pass q < P-1 writes ib; pass P-2 must write ti (the last pass
    # reads it while writing out_i), so pass 0 writes ti when P is even
    ia = ti
    ib = out_i
    if P % 2 == 0:
        ib = ti
        ia = out_i
    for q in range(P):
        o = hist[passes[q]]
        sh = np.uint64(8 * passes[q])
        last = q == P - 1
        for i in range(n):
            k = ka[i]
            d = (np.uint64(k) >> sh) & _M8
            p = np.uint64(o[d])
            o[d] = p + 1
            src = i if q == 0 else ia[i]
            if last:
                out_i[p] = src
                _emit(vmode, out_v, p, k, X, v, src)
            else:
                kb[p] = k
                ib[p] = src
        ka, kb = kb, ka
        ia, ib = ib, ia


@njit(cache=True)
def sort_keys(keys, out_i, v, out_v, vmode, X):
    n = keys.size
    _sort_keys(keys, np.empty_like(keys), out_i, np.empty(n, np.int64), v, out_v, vmode, X)


@njit(cache=True, parallel=True)
def sort_rows(keys, out_i, v, out_v, vmode, X):
    """Each row of ``keys`` sorted on its own (rows in parallel)."""
    n = keys.shape[1]
    for r in prange(keys.shape[0]):
        _sort_keys(keys[r], np.empty(n, keys.dtype), out_i[r], np.empty(n, np.int64), v[r], out_v[r], vmode, X)


# ----------------------------------------------------------------------------- parallel 1-D sort

@njit(cache=True, parallel=True)
def hist_all(keys, starts, hist):
    """hist[c, b, d] = keys of chunk c whose byte b is d (every byte, one read)."""
    for c in prange(starts.size - 1):
        h = np.zeros((keys.itemsize, RADIX), np.int64)
        _hist_all(keys[starts[c]:starts[c + 1]], h)
        hist[c] = h


@njit(cache=True, parallel=True)
def hist_byte(keys, starts, shift, hist):
    """hist[c, d] = keys of chunk c whose byte at ``shift`` is d (four counter sets)."""
    sh = np.uint64(shift)
    for c in prange(starts.size - 1):
        h0 = np.zeros(RADIX, np.int64)
        h1 = np.zeros(RADIX, np.int64)
        h2 = np.zeros(RADIX, np.int64)
        h3 = np.zeros(RADIX, np.int64)
        ks = keys[starts[c]:starts[c + 1]]
        m4 = ks.size // 4 * 4
        for i in range(0, m4, 4):
            h0[(np.uint64(ks[i]) >> sh) & _M8] += 1
            h1[(np.uint64(ks[i + 1]) >> sh) & _M8] += 1
            h2[(np.uint64(ks[i + 2]) >> sh) & _M8] += 1
            h3[(np.uint64(ks[i + 3]) >> sh) & _M8] += 1
        for i in range(m4, ks.size):
            h0[(np.uint64(ks[i]) >> sh) & _M8] += 1
        for d in range(RADIX):
            hist[c, d] = h0[d] + h1[d] + h2[d] + h3[d]


@njit(cache=True, parallel=True)
def scatter_mid(kin, iin, first, starts, shift, offs, kout, iout):
    """A pass that is not the last: (key, position) pairs move stably by the
    byte at ``shift``, each chunk from its offsets (the first pass: positions implicit)."""
    sh = np.uint64(shift)
    for c in prange(starts.size - 1):
        o = offs[c].copy()
        lo = starts[c]
        hi = starts[c + 1]
        ks = kin[lo:hi]
        js = iin[lo:hi] if not first else iin[0:0]
        for i in range(ks.size):
            k = ks[i]
            d = (np.uint64(k) >> sh) & _M8
            p = np.uint64(o[d])
            o[d] = p + 1
            kout[p] = k
            iout[p] = lo + i if first else js[i]


@njit(cache=True, parallel=True)
def scatter_last(kin, iin, first, starts, shift, offs, iout, vmode, X, v, vout):
    """The last pass: positions (int64) and values per ``vmode`` (``_value``)."""
    sh = np.uint64(shift)
    S, F = _sf(v)
    for c in prange(starts.size - 1):
        o = offs[c].copy()
        lo = starts[c]
        hi = starts[c + 1]
        ks = kin[lo:hi]
        js = iin[lo:hi] if not first else iin[0:0]
        for i in range(ks.size):
            k = ks[i]
            d = (np.uint64(k) >> sh) & _M8
            p = np.uint64(o[d])
            o[d] = p + 1
            src = lo + i if first else np.int64(js[i])
            iout[p] = src
            if vmode != 0:
                vout[p] = _value(vmode, k, X, v, src, S, F)


@njit(cache=True, parallel=True)
def identity_emit(keys, iout, vmode, X, v, vout):
    """No pass needed (every byte constant): positions 0..n-1, values per ``vmode``."""
    S, F = _sf(v)
    for i in prange(keys.size):
        iout[i] = i
        if vmode != 0:
            vout[i] = _value(vmode, keys[i], X, v, i, S, F)


@njit(cache=True)
def offsets(hist, offs):
    """offs[c, d] = all keys of smaller digits + keys of digit d in earlier chunks."""
    C = hist.shape[0]
    t = 0
    for d in range(RADIX):
        for c in range(C):
            offs[c, d] = t
            t += hist[c, d]


@njit(cache=True, parallel=True)
def values_of(keys, idx, vmode, X, v, out):
    """out[j] = the value of sorted key j (``_value``)."""
    S, F = _sf(v)
    for j in prange(idx.size):
        out[j] = _value(vmode, keys[j], X, v, idx[j], S, F)


# ----------------------------------------------------------------------------- top-k

@njit(cache=True)
def select_seq(cv, ci, implicit, m, need, b, sel_k, sel_i, ns):
    """MSB-first radix select of the ``need`` smallest keys among cv[:m]
    (positions ci, or implicit 0..m-1), bytes b..0 left; appends them to
    sel_k/sel_i from ns in groups of increasing key, each group in position
    order (ties: the lower position is kept at the cut). Returns the new fill."""
    h = np.zeros(RADIX, np.int64)
    while b >= 0 and 0 < need < m:
        sh = np.uint64(8 * b)
        h[:] = 0
        for i in range(m):
            h[(np.uint64(cv[i]) >> sh) & _M8] += 1
        cum = 0
        d = 0
        while cum + h[d] < need:
            cum += h[d]
            d += 1
        b -= 1
        if h[d] == m:
            continue
        if implicit:  # first compaction: fresh buffers with explicit positions
            nv = np.empty(h[d], cv.dtype)
            ni = np.empty(h[d], np.int64)
        else:  # in place: write position j <= read position i
            nv = cv
            ni = ci
        j = 0
        ud = np.uint64(d)
        for i in range(m):
            k = cv[i]
            dd = (np.uint64(k) >> sh) & _M8
            pos = i if implicit else ci[i]
            if dd < ud:
                sel_k[ns] = k
                sel_i[ns] = pos
                ns += 1
            elif dd == ud:
                nv[j] = k
                ni[j] = pos
                j += 1
        cv = nv
        ci = ni
        implicit = False
        m = h[d]
        need -= cum
    # every candidate left has the same key (or all of them are wanted): the first ``need``
    for i in range(need):
        sel_k[ns] = cv[i]
        sel_i[ns] = i if implicit else ci[i]
        ns += 1
    return ns


@njit(cache=True)
def _finish(sel_k, sel_i, out_i, v, out_v, vmode, X):
    """Sort the selected (key, position) pairs by key (stable) -> positions and values."""
    k = sel_k.size
    perm = np.empty(k, np.int64)
    sk = np.empty_like(sel_k)
    _sort_keys(sel_k, np.empty_like(sel_k), perm, np.empty(k, np.int64), sel_k, sk, 1, np.uint64(0))
    S, F = _sf(v)
    for j in range(k):
        src = sel_i[perm[j]]
        out_i[j] = src
        out_v[j] = _value(vmode, sk[j], X, v, src, S, F)


@njit(cache=True)
def finish(sel_k, sel_i, out_i, v, out_v, vmode, X):
    _finish(sel_k, sel_i, out_i, v, out_v, vmode, X)


@njit(cache=True, parallel=True)
def topk_rows(keys, k, out_i, v, out_v, vmode, X):
    """Per row: the k smallest keys sorted by (key, column)."""
    nb = keys.itemsize
    for r in prange(keys.shape[0]):
        if k == 0:
            continue
        sel_k = np.empty(k, keys.dtype)
        sel_i = np.empty(k, np.int64)
        kr = keys[r]
        select_seq(kr, np.empty(0, np.int64), True, kr.size, k, nb - 1, sel_k, sel_i, 0)
        _finish(sel_k, sel_i, out_i[r], v[r], out_v[r], vmode, X)


@njit(cache=True, parallel=True)
def select_collect(cv, ci, implicit, starts, shift, dstar, sel_k, sel_i, sure_off, nv, ni, cand_off):
    """One parallel select level: per chunk, keys of digit < dstar go to
    sel from sure_off[c], those of digit dstar to (nv, ni) from cand_off[c]."""
    sh = np.uint64(shift)
    ud = np.uint64(dstar)
    for c in prange(starts.size - 1):
        lo = starts[c]
        hi = starts[c + 1]
        s = sure_off[c]
        j = cand_off[c]
        ks = cv[lo:hi]
        for i in range(ks.size):
            k = ks[i]
            dd = (np.uint64(k) >> sh) & _M8
            if dd < ud:
                sel_k[s] = k
                sel_i[s] = lo + i if implicit else ci[lo + i]
                s += 1
            elif dd == ud:
                nv[j] = k
                ni[j] = lo + i if implicit else ci[lo + i]
                j += 1


# ----------------------------------------------------------------------------- split

@njit(cache=True, parallel=True)
def mask_counts(m, starts, counts, maxv):
    """counts[c] = ones in chunk c; maxv[c] = the largest mask byte there (> 1: invalid)."""
    for c in prange(starts.size - 1):
        ms = m[starts[c]:starts[c + 1]]
        k = 0
        mx = np.uint8(0)
        for i in range(ms.size):
            v = ms[i]
            k += v != 0
            mx = max(mx, v)
        counts[c] = k
        maxv[c] = mx


@njit(cache=True, parallel=True)
def split_scatter(x, m, starts, one_base, zero_base, out, idx, want_idx):
    """Stable split: chunk c writes its ones from one_base[c], its zeros from zero_base[c]."""
    for c in prange(starts.size - 1):
        o = one_base[c]
        z = zero_base[c]
        lo = starts[c]
        xs = x[lo:starts[c + 1]]
        ms = m[lo:starts[c + 1]]
        for i in range(xs.size):
            if ms[i] != 0:
                out[o] = xs[i]
                if want_idx:
                    idx[o] = lo + i
                o += 1
            else:
                out[z] = xs[i]
                if want_idx:
                    idx[z] = lo + i
                z += 1


# ----------------------------------------------------------------------------- batched scan


# ----------------------------------------------------------------------------- sampling

@njit(cache=True)
def total_float(w):
    c = 0.0
    for i in range(w.size):
        c += np.float64(w[i])
    return c


@njit(cache=True)
def total_int(w):
    """(exact int64 total of non-negative integers, True when it left int64)."""
    c = np.int64(0)
    for i in range(w.size):
        c += np.int64(w[i])
        if c < 0:
            return c, True
    return c, False


@njit(cache=True)
def first_above_float(w, t):
    """Smallest i with c_i > t, c = sequential float64 cumulative sums; -1 if none."""
    c = 0.0
    for i in range(w.size):
        c += np.float64(w[i])
        if c > t:
            return i
    return -1


@njit(cache=True)
def first_above_int(w, t):
    """Smallest i with c_i > t, c = int64 cumulative sums (exact: the total fits); -1 if none."""
    c = np.int64(0)
    for i in range(w.size):
        c += np.int64(w[i])
        if c > t:
            return i
    return -1


@njit(cache=True)
def cumsum_float(w, out):
    c = 0.0
    for i in range(w.size):
        c += np.float64(w[i])
        out[i] = c


@njit(cache=True)
def cumsum_int(w, out):
    c = np.int64(0)
    for i in range(w.size):
        c += np.int64(w[i])
        out[i] = c


@njit(cache=True)
def last_positive(w):
    for i in range(w.size - 1, -1, -1):
        if w[i] > 0:
            return i
    return -1


@njit(cache=True, parallel=True)
def top_p_rows(keys, probs, p, u, out):
    """Per row: stable descending order (``keys``: descending keys, clobbered),
    q in float64, e = exclusive sequential sum, kept q where e <= p, then the
    inverse transform with u[r] on the kept q; out[r] = original column."""
    n = keys.shape[1]
    for r in prange(keys.shape[0]):
        order = np.empty(n, np.int64)
        kr = keys[r]
        _sort_keys(kr, np.empty(n, keys.dtype), order, np.empty(n, np.int64), kr, kr, 0, np.uint64(0))
        pr = probs[r]
        kept = np.empty(n, np.float64)
        e = 0.0
        total = 0.0
        for j in range(n):
            q = np.float64(pr[order[j]])
            kq = q if e <= p else 0.0
            kept[j] = kq
            total += kq
            e += q
        t = u[r] * total
        j = first_above_float(kept, t)
        if j < 0:
            j = last_positive(kept)
        out[r] = order[j]
