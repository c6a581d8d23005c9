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

Cold start: a first call with an empty Numba cache compiles every kernel it
reaches, so the path of a small input (and of 2-D inputs, and of top-p) is one
dispatcher, made by a factory (``_variants.variant``) whose constants select code at
compile time: values emitted or not, chunks in parallel or in turn, a sort, top-k
or top-p. Whether the words are floats or integers is an argument (tested outside
the loops), so the integers and floats of one width (int32 and float32) share a
compiled kernel: a first sort of float32 after one of int32 compiles nothing.
Each variant is a closure with its own Numba cache entry (the cache keys an entry by the closure's cell values),
and a call compiles only its own; one chunk (small inputs, one thread) takes
the sequential variants, which compile several times faster than
``parallel=True`` kernels. Their helpers are written out in the body rather
than called as ``inline="always"`` functions: Numba inlines those by
deep-copying the callee's IR at every call site, which costs more to compile
than the code itself. Kernels move words, so values of one width share them
(split, compress); an integer kernel of one width also sorts keys (the order
key of a word with S = D = 0 is the word), so a long input's top-k sorts its
selected keys with ``argsort``'s integer kernel.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._variants import variant

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
def _row_keys(v, out, isf, S, F, INF, D):
    """out[i] = the key of the word v[i] (``_key``: of floats when ``isf``, else of integers),
    by a branch-free loop per kind (each vectorises). The row kernels call this function (of
    its own, not inlined: the two loops written out in a row kernel behind a test of ``isf``
    were merged by LLVM into one loop computing both keys, and a sort of int8 rows took a third
    longer)."""
    if isf:
        for i in range(v.size):
            kk = np.uint64(v[i])
            a = kk & (F ^ S)
            neg = np.uint64((kk & S) != np.uint64(0))
            kk = kk ^ (S | ((np.uint64(0) - neg) & F))
            kk = S if a == np.uint64(0) else kk
            kk = F if a > INF else kk
            out[i] = kk ^ D
    else:
        for i in range(v.size):
            out[i] = np.uint64(v[i]) ^ S ^ D


def _make_rows(VALS, PAR, TOPK, TOPP):
    @njit(cache=True, parallel=PAR)
    def rows(v, isf, flt, S, F, INF, D, X, k, ka, kb, ti, hist, passes, out_i, out_v, sel_i, probs, p, u, kept,
             out):
        """Each row r of the 2-D words v stably sorted by its keys (``_key`` of floats when
        ``isf``, else of integers; integers with S = D = 0: the words themselves): keys, every
        byte's histogram in one pass, then an LSB pass per byte that is not constant over the row
        (one pass on the top byte if all are). Positions to out_i[r]; when VALS, values to
        out_v[r] (``_value``: of floats when ``flt``, else of integers). ``isf`` and ``flt`` are
        arguments, not constants, so the integers and floats of one width share one compiled
        kernel; they are tested outside the loops (the keys by ``_row_keys``, the last pass by a
        loop per kind): tested per element, they cost int8 rows a third of their time (the
        keys) and int16 rows 15% (the last pass).

        TOPK (top-k): only the k (>= 1) smallest keys are sorted, chosen first by
        ``select_seq``'s MSB-first radix select (ties: the lower position is kept at the
        cut). TOPP (top-p): the positions to a row buffer, then the draw (``top_p_sample``)
        from probs[r], p and u[r] into out[r]. Rows in parallel (PAR), each a task with
        buffers of its own, or in turn in the buffers ka, kb (keys), ti (int64) of a row's
        size, hist (2 * nb, RADIX), passes (nb,), TOPK: sel_i (k,), TOPP: out_i (int64) and
        kept (float64) of a row's size."""
        PAR  # noqa: B018 (a closure cell: the cache keeps one entry per variant)
        for r in prange(v.shape[0]):
            n = v.shape[1]
            nb = v.itemsize
            if PAR:  # the row's own buffers
                kc = np.empty(n, v.dtype)
                kn = np.empty(n, v.dtype)
                tc = np.empty(n, np.int64)
                hc = np.empty((2 * nb, RADIX), np.int64)
                pc = np.empty(nb, np.intp)
            else:
                kc = ka
                kn = kb
                tc = ti
                hc = hist
                pc = passes
            if TOPP:
                oi = np.empty(n, np.int64) if PAR else out_i
            else:
                oi = out_i[r]
            vr = v[r]
            _row_keys(vr, kc, isf, S, F, INF, D)  # the keys (``_key``)
            m = n  # the keys to sort: ks[:m]
            ks = kc
            if TOPK:  # select the k smallest into kn[:k] (positions si), then sort those
                ci = tc
                si = np.empty(k, np.int64) if PAR else sel_i
                select_seq(kc, ci, True, n, k, nb - 1, kn, si, 0, hc[0])
                m = k
                ks = kn
                kn = kc
            # every byte's histogram: hc[b] and hc[nb + b], two interleaved counter sets
            # (runs of equal bytes do not serialise on one counter), then added up
            for b in range(2 * nb):
                for d in range(RADIX):
                    hc[b, d] = 0
            for i in range(0, m - 1, 2):
                k0 = np.uint64(ks[i])
                k1 = np.uint64(ks[i + 1])
                for b in range(nb):
                    sh = np.uint64(8 * b)
                    hc[b, (k0 >> sh) & _M8] += 1
                    hc[nb + b, (k1 >> sh) & _M8] += 1
            if m % 2:
                k0 = np.uint64(ks[m - 1])
                for b in range(nb):
                    hc[b, (k0 >> np.uint64(8 * b)) & _M8] += 1
            # the passes (bytes not constant over the keys; the top one if all are), their
            # histograms turned into offsets
            P = 0
            for b in range(nb):
                trivial = False
                for d in range(RADIX):
                    hc[b, d] += hc[nb + b, d]
                    if hc[b, d] == m:
                        trivial = True
                if not trivial or (b == nb - 1 and P == 0):
                    pc[P] = b
                    P += 1
                    t = 0
                    for d in range(RADIX):
                        cnt = hc[b, d]
                        hc[b, d] = t
                        t += cnt
            # position buffers: pass q < P-1 writes ib; pass P-2 must write ti (the last
            # pass reads it while writing oi), so pass 0 writes ti when P is even
            ia = tc
            ib = oi
            if P % 2 == 0:
                ib = tc
                ia = oi
            for q in range(P):
                o = hc[pc[q]]
                sh = np.uint64(8 * pc[q])
                if q < P - 1:  # (key, position) pairs to the next buffers
                    for i in range(m):
                        kk = ks[i]
                        d = (np.uint64(kk) >> sh) & _M8
                        j = np.uint64(o[d])
                        o[d] = j + 1
                        kn[j] = kk
                        ib[j] = i if q == 0 else ia[i]
                elif not (VALS and flt):  # the last pass: positions, and integer values (k ^ X)
                    # (a loop of its own per kind: one loop testing ``flt`` per key, measured,
                    # made sorts of 200x1000 rows 15% slower for int16, 6% for int32 and float32)
                    for i in range(m):
                        kk = ks[i]
                        d = (np.uint64(kk) >> sh) & _M8
                        j = np.uint64(o[d])
                        o[d] = j + 1
                        src = i if q == 0 else ia[i]
                        if TOPK:
                            src = si[src]
                        oi[j] = src
                        if VALS:
                            out_v[r, j] = np.uint64(kk) ^ X
                else:  # the last pass, float values (``_value``; zeros and NaNs from the input)
                    for i in range(m):
                        kk = ks[i]
                        d = (np.uint64(kk) >> sh) & _M8
                        j = np.uint64(o[d])
                        o[d] = j + 1
                        src = i if q == 0 else ia[i]
                        if TOPK:
                            src = si[src]
                        oi[j] = src
                        w = np.uint64(kk) ^ X
                        if w == F or w == S:
                            w = np.uint64(vr[src])
                        else:
                            w = w ^ (S if (w & S) != np.uint64(0) else F)
                        out_v[r, j] = w
                ks, kn = kn, ks
                ia, ib = ib, ia
            if TOPP:  # q in float64 in sorted order, kept where the exclusive sum e <= p
                pr = probs[r]
                kp = np.empty(n, np.float64) if PAR else kept
                e = 0.0
                total = 0.0
                for j in range(n):
                    q = np.float64(pr[oi[j]])
                    kq = q if e <= p else 0.0
                    kp[j] = kq
                    total += kq
                    e += q
                t = u[r] * total
                jj = -1  # the smallest j whose inclusive sum of kept q exceeds t
                cs = 0.0
                for j in range(n):
                    cs += kp[j]
                    if cs > t:
                        jj = j
                        break
                if jj < 0:  # none (u within an ulp of 1): the last kept q > 0
                    for j in range(n - 1, -1, -1):
                        if kp[j] > 0:
                            jj = j
                            break
                out[r] = oi[jj]
    return rows


def rows(vals, par, topk=False, topp=False):
    """The row kernel (``_make_rows``) emitting values when ``vals``; chunks of rows in parallel
    (``par``) or in turn; a sort, top-k (``topk``) or top-p (``topp``)."""
    return variant(_make_rows, bool(vals), bool(par), bool(topk), bool(topp))


# ----------------------------------------------------------------------------- parallel 1-D sort

@njit(cache=True)
def _hist_all(ks, hist):
    """hist[b, d] += keys of ks whose byte b is d (two interleaved counter sets,
    so runs of equal bytes do not serialise on one counter). A function of its own:
    inside a parallel loop's body the same loops compile to code half as fast."""
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


@njit(cache=True, parallel=True)
def keys_hist(v, isf, S, F, INF, D, starts, keys, hist):
    """keys[i] = the key of the word v[i] (``_key``: of floats when ``isf``, else of integers),
    and hist[c, b, d] = the keys of chunk c (starts) whose byte b is d: every byte's histogram
    of a chunk right after its keys. (Loops from 0 over the chunk's slices: signed indices from
    the chunk start would each need a negative-index fixup, and the keys would not vectorise.)"""
    for c in prange(starts.size - 1):
        vs = v[starts[c]:starts[c + 1]]
        ks = keys[starts[c]:starts[c + 1]]
        _row_keys(vs, ks, isf, S, F, INF, D)
        hc = hist[c]  # zeroed in place: an array assignment would compile numpy's shape-error path
        for b in range(v.itemsize):
            for d in range(RADIX):
                hc[b, d] = 0
        _hist_all(ks, hc)


def _make_scatter(VALS):
    @njit(cache=True, parallel=True)
    def scatter(kin, iin, first, last, starts, shift, offs, kout, iout, out_i, flt, S, F, X, v, vout):
        """One stable pass by the byte at ``shift``, each chunk from its offsets (the first
        pass: positions implicit): (key, position) pairs to kout, iout; the last pass
        (``last``): positions (int64) to out_i, and when VALS the values (``_value``: of floats
        when ``flt``, else of integers) to vout."""
        sh = np.uint64(shift)
        for c in prange(starts.size - 1):
            o = offs[c].copy()
            lo = starts[c]
            hi = starts[c + 1]
            ks = kin[lo:hi]
            js = iin[lo:hi] if not first else iin[0:0]
            if not last:
                for i in range(ks.size):
                    k = ks[i]
                    d = (np.uint64(k) >> sh) & _M8
                    p = np.uint64(o[d])
                    o[d] = p + 1
                    kout[p] = k
                    iout[p] = lo + i if first else np.int64(js[i])
            elif not (VALS and flt):  # positions, and integer values (k ^ X): a loop per kind
                for i in range(ks.size):
                    k = ks[i]
                    d = (np.uint64(k) >> sh) & _M8
                    p = np.uint64(o[d])
                    o[d] = p + 1
                    out_i[p] = lo + i if first else np.int64(js[i])
                    if VALS:
                        vout[p] = np.uint64(k) ^ X
            else:  # float values (``_value``; zeros and NaNs from the input)
                for i in range(ks.size):
                    k = ks[i]
                    d = (np.uint64(k) >> sh) & _M8
                    p = np.uint64(o[d])
                    o[d] = p + 1
                    src = lo + i if first else np.int64(js[i])
                    out_i[p] = src
                    w = np.uint64(k) ^ X
                    if w == F or w == S:
                        w = np.uint64(v[src])
                    else:
                        w = w ^ (S if (w & S) != np.uint64(0) else F)
                    vout[p] = w
    return scatter


def scatter(vals):
    """``scatter`` emitting values in its last pass when ``vals``."""
    return variant(_make_scatter, bool(vals))


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
def values_of(keys, idx, vmode, X, v, out):
    """out[j] = the value of sorted key j (``_value``)."""
    S, F = _sf(v)
    for j in prange(idx.size):
        out[j] = _value(vmode, keys[j], X, v, idx[j], S, F)


# ----------------------------------------------------------------------------- top-k

@njit(cache=True)
def select_seq(cv, ci, implicit, m, need, b, sel_k, sel_i, ns, h):
    """MSB-first radix select of the ``need`` smallest keys among cv[:m] (positions
    ci, or implicit 0..m-1), bytes b..0 left; appends them to sel_k/sel_i from ns
    in groups of increasing key, each group in position order (ties: the lower
    position is kept at the cut). Returns the new fill. The candidates are
    compacted in place (write position j <= read position i): cv[:m] and ci[:m]
    are overwritten, so ci must hold m entries also when the positions are
    implicit. h: (RADIX,) scratch. The row kernels' top-k selection too: a function
    of its own, not written out in their loop (with these loops inline, a row
    kernel took 5-9% longer on int32 rows)."""
    while b >= 0 and 0 < need < m:
        sh = np.uint64(8 * b)
        for d in range(RADIX):
            h[d] = 0
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
                cv[j] = k
                ci[j] = pos
                j += 1
        implicit = False
        m = h[d]
        need -= cum
    # every candidate left has the same key (or all of them are wanted): the first ``need``
    for i in range(need):
        sel_k[ns] = cv[i]
        sel_i[ns] = i if implicit else ci[i]
        ns += 1
    return ns


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

def _make_mask_counts(PAR):
    @njit(cache=True, parallel=PAR)
    def mask_counts(m, starts, counts, maxv):
        """counts[c] = ones in chunk c; maxv[c] = the largest mask byte there (> 1: invalid)."""
        PAR  # noqa: B018 (a closure cell: the cache keeps one entry per variant)
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
    return mask_counts


def mask_counts(par):
    """``mask_counts``: chunks in parallel (``par``) or in turn."""
    return variant(_make_mask_counts, bool(par))


def _make_split_scatter(PAR, IDX):
    @njit(cache=True, parallel=PAR)
    def split_scatter(x, m, starts, one_base, zero_base, out, idx):
        """Stable split: chunk c writes its ones from one_base[c], its zeros from zero_base[c]
        (IDX: and their positions to idx)."""
        PAR  # noqa: B018 (a closure cell: the cache keeps one entry per variant)
        for c in prange(starts.size - 1):
            o = one_base[c]
            z = zero_base[c]
            lo = starts[c]
            xs = x[lo:starts[c + 1]]
            ms = m[lo:starts[c + 1]]
            for i in range(xs.size):
                if ms[i] != 0:
                    out[o] = xs[i]
                    if IDX:
                        idx[o] = lo + i
                    o += 1
                else:
                    out[z] = xs[i]
                    if IDX:
                        idx[z] = lo + i
                    z += 1
    return split_scatter


def split_scatter(par, want_idx):
    """``split_scatter``: chunks in parallel (``par``) or in turn; positions written or not."""
    return variant(_make_split_scatter, bool(par), bool(want_idx))


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
def sample_float(w, u):
    """(the float64 total of w in index order, the smallest i with c_i > u * total or -1 if
    none; c = sequential float64 cumulative sums): ``weighted_sample``'s draw for a scalar u."""
    c = 0.0
    for i in range(w.size):
        c += np.float64(w[i])
    t = u * c
    s = 0.0
    for i in range(w.size):
        s += np.float64(w[i])
        if s > t:
            return c, i
    return c, -1


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
