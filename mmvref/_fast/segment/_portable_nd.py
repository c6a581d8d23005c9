"""Numba kernels of the N-d segment reductions (``segreduce``).

Every array is seen as 3-D, ``[B, E, F]``: B independent batches (the
dimensions before the axis), E positions along the axis, F contiguous
features (the dimensions after it). A segment is a range of positions; its
result is one F-vector per batch. The innermost loops run over the F
features of one position, so they are contiguous and vectorize at any F
without reassociating a float sum: each feature is still summed in position
order (the error model of ``segment_sum_csr``: |err| <= len * u * sum |x|).
One column (F = 1, no args) has no features to vectorize over: its kernel
(``csr_reduce_column_float``) reads ROW_W positions of a segment per vector
step instead, so its sums are reassociated (the same bound holds for any
order; min/max are order-free).

Work is split into tasks of whole segments balanced by element count
(``tasks`` in ``segreduce``); a segment longer than a task's share is cut into
parts whose partial results are combined by a second reduction of the same
kind over the parts (``part_reduce`` then ``csr_reduce`` with one segment).

Reductions are a runtime code (one compiled kernel per dtype pair, not per
reduction): SUM, MEAN, MIN, MAX, PROD. min/max: ties keep the lowest
position, a NaN wins over every number and the first NaN stays (NaN
propagates, as torch). Empty segments: 0 (prod: 1), arg = ``empty_arg``.

Integers accumulate in int64 words. ``ranges`` receives per task the
smallest and largest int64 result written, so the caller decides int32
overflow exactly; ``flags`` receives per task bit 1 when an int64 sum or
product may have wrapped (checked arithmetic only where ``check`` is set).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._portable_nd_vec import MAX, MEAN, MIN, PROD, ROW_STEPS, ROW_W, SUM, vreduce, vrow

REDUCE_CODES = {"sum": SUM, "add": SUM, "mean": MEAN, "min": MIN, "max": MAX, "prod": PROD, "mul": PROD}

_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min


@njit(cache=True, inline="always")
def _better(v, cur, op):
    """True when v replaces cur: strictly smaller (min) / larger (max), or the first NaN."""
    if op == MIN:
        return v < cur or (v != v and cur == cur)
    return v > cur or (v != v and cur == cur)


@njit(cache=True, inline="always")
def _wrapping_add(a, b):
    """a + b modulo 2**64 by unsigned words: a signed add is assumed not to overflow by LLVM
    (nsw), which lets it fold an overflow test written after it to false."""
    return np.int64(np.uint64(a) + np.uint64(b))


@njit(cache=True, inline="always")
def _mul_leaves_int64(p, v):
    """Whether p * v (both non-zero) leaves int64, decided on unsigned magnitudes (never by
    dividing a wrapped product, which LLVM may fold away)."""
    ap = np.uint64(p) if p > 0 else np.uint64(0) - np.uint64(p)
    av = np.uint64(v) if v > 0 else np.uint64(0) - np.uint64(v)
    lim = np.uint64(_I64_MAX) if (p > 0) == (v > 0) else np.uint64(_I64_MAX) + np.uint64(1)
    return ap > lim // av


@njit(cache=True)
def _reduce_int(x, rows, use_rows, b, lo, hi, op, acc, check):
    """One segment, integers, into the int64 words acc[0:F]; returns 1 when a checked int64
    sum/product wrapped (the caller then raises), else 0; arg positions are kept in the
    second row of acc's owner (see csr_reduce_int)."""
    F = x.shape[2]
    wrapped = 0
    if hi <= lo:
        v0 = 1 if op == PROD else 0
        for k in range(F):
            acc[k] = v0
        return 0
    r = rows[lo] if use_rows else lo
    for k in range(F):
        acc[k] = x[b, r, k]
    if op == SUM or op == MEAN:
        if check:
            for e in range(lo + 1, hi):
                r = rows[e] if use_rows else e
                for k in range(F):
                    v = np.int64(x[b, r, k])
                    s = _wrapping_add(acc[k], v)
                    if ((acc[k] ^ s) & (v ^ s)) < 0:  # both operands differ in sign from the sum
                        wrapped = 1
                    acc[k] = s
        else:
            for e in range(lo + 1, hi):
                r = rows[e] if use_rows else e
                for k in range(F):
                    acc[k] += x[b, r, k]
    elif op == PROD:
        # int64 words wrap exactly modulo 2**64; with ``check`` a feature whose product left
        # int64 is reported unless a zero factor makes its true product 0
        ovf = np.zeros(F if check else 0, np.bool_)
        zero = np.zeros(F if check else 0, np.bool_)
        if check:
            for k in range(F):
                zero[k] = acc[k] == 0
        for e in range(lo + 1, hi):
            r = rows[e] if use_rows else e
            for k in range(F):
                v = np.int64(x[b, r, k])
                p = acc[k]
                if check:
                    if v == 0:
                        zero[k] = True
                    elif p != 0 and _mul_leaves_int64(p, v):
                        ovf[k] = True
                acc[k] = np.int64(np.uint64(p) * np.uint64(v))  # wraps modulo 2**64, no signed overflow
        if check:
            for k in range(F):
                if ovf[k] and not zero[k]:
                    wrapped = 1
    return wrapped


@njit(cache=True, inline="always")
def _v32(x, rows, lo, hi, F, xb, out, ob, arg, op, use_rows, want_arg):
    if op == SUM:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 0, 32, use_rows, False)
    elif op == MEAN:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 1, 32, use_rows, False)
    elif op == PROD:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 4, 32, use_rows, False)
    elif op == MIN:
        if want_arg:
            vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 2, 32, use_rows, True)
        else:
            vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 2, 32, use_rows, False)
    elif want_arg:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 3, 32, use_rows, True)
    else:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 3, 32, use_rows, False)


@njit(cache=True, inline="always")
def _v16(x, rows, lo, hi, F, xb, out, ob, arg, op, use_rows, want_arg):
    if op == SUM:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 0, 16, use_rows, False)
    elif op == MEAN:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 1, 16, use_rows, False)
    elif op == PROD:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 4, 16, use_rows, False)
    elif op == MIN:
        if want_arg:
            vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 2, 16, use_rows, True)
        else:
            vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 2, 16, use_rows, False)
    elif want_arg:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 3, 16, use_rows, True)
    else:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 3, 16, use_rows, False)

@njit(cache=True, inline="always")
def _v8(x, rows, lo, hi, F, xb, out, ob, arg, op, use_rows, want_arg):
    if op == SUM:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 0, 8, use_rows, False)
    elif op == MEAN:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 1, 8, use_rows, False)
    elif op == PROD:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 4, 8, use_rows, False)
    elif op == MIN:
        if want_arg:
            vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 2, 8, use_rows, True)
        else:
            vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 2, 8, use_rows, False)
    elif want_arg:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 3, 8, use_rows, True)
    else:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 3, 8, use_rows, False)

@njit(cache=True, inline="always")
def _v4(x, rows, lo, hi, F, xb, out, ob, arg, op, use_rows, want_arg):
    if op == SUM:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 0, 4, use_rows, False)
    elif op == MEAN:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 1, 4, use_rows, False)
    elif op == PROD:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 4, 4, use_rows, False)
    elif op == MIN:
        if want_arg:
            vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 2, 4, use_rows, True)
        else:
            vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 2, 4, use_rows, False)
    elif want_arg:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 3, 4, use_rows, True)
    else:
        vreduce(x, rows, lo, hi, F, xb, out, ob, arg, 3, 4, use_rows, False)


@njit(cache=True, inline="always")
def _segment(x, rows, use_rows, xb, lo, hi, F, op, out, ob, arg, want_arg, divide):
    """One non-empty segment, features xb + r*F + [0, F) of its rows into out[ob:ob+F] (x, out,
    arg flat; out: x's float dtype or int64 words): vector blocks of 32, 16, 8 and 4 features,
    the rest one feature at a time with its accumulator in a register. MEAN divides by the
    count when ``divide`` (floats); integers get the sum (the caller floors)."""
    k0 = 0
    mop = op if divide or op != MEAN else SUM  # integers: the caller floors the sum
    op = mop
    while k0 + 32 <= F:
        _v32(x, rows, lo, hi, F, xb + k0, out, ob + k0, arg, op, use_rows, want_arg)
        k0 += 32
    if k0 + 16 <= F:
        _v16(x, rows, lo, hi, F, xb + k0, out, ob + k0, arg, op, use_rows, want_arg)
        k0 += 16
    if k0 + 8 <= F:
        _v8(x, rows, lo, hi, F, xb + k0, out, ob + k0, arg, op, use_rows, want_arg)
        k0 += 8
    if k0 + 4 <= F:
        _v4(x, rows, lo, hi, F, xb + k0, out, ob + k0, arg, op, use_rows, want_arg)
        k0 += 4
    for k in range(k0, F):
        r = rows[lo] if use_rows else lo
        acc = out.dtype.type(x[xb + r * F + k])
        a = r
        if op == SUM or op == MEAN:
            for e in range(lo + 1, hi):
                r = rows[e] if use_rows else e
                acc += x[xb + r * F + k]
        elif op == PROD:
            for e in range(lo + 1, hi):
                r = rows[e] if use_rows else e
                acc *= x[xb + r * F + k]
        else:
            for e in range(lo + 1, hi):
                r = rows[e] if use_rows else e
                v = out.dtype.type(x[xb + r * F + k])
                if _better(v, acc, op):
                    acc = v
                    a = r
        if op == MEAN:  # floats only (``mop``); a separate store keeps acc's type (int64 stays exact)
            out[ob + k] = acc / out.dtype.type(hi - lo)
        else:
            out[ob + k] = acc
        if want_arg:
            arg[ob + k] = a


@njit(cache=True, inline="always")
def _row(x, lo, hi, op):
    """One column: the reduction of x[lo:hi] (non-empty; ``vrow`` reads x[lo:lo + ROW_STEPS *
    ROW_W] and x[:hi + ROW_W - 1], which must exist). A mean is the sum divided by the count,
    rounded once."""
    if op == SUM:
        return vrow(x, lo, hi, 0)
    if op == MEAN:
        return vrow(x, lo, hi, 0) / x.dtype.type(hi - lo)
    if op == PROD:
        return vrow(x, lo, hi, 4)
    if op == MIN:
        return vrow(x, lo, hi, 2)
    return vrow(x, lo, hi, 3)


@njit(cache=True, parallel=True)
def csr_reduce_column_float(x, bounds, t_b, t_lo, t_hi, op, out, skip, bad):
    """``csr_reduce_float`` for one column read in order, without args (x: [B, E], out: [B, N]):
    each segment in vector steps of ROW_W positions (``vrow``; lanes combined as a tree, so a sum
    is reassociated, within its error model). The last segments of x, whose steps would read
    past its end, take a scalar loop (positions in order).

    The offsets need not have been checked: a segment without 0 <= lo <= hi <= E is not read
    (its result is 0) and sets bad[t] of its task (every pair valid <=> offsets in [0, E] and
    non-decreasing), so the caller's order check is folded into this pass."""
    B, E = x.shape
    N = bounds.size - 1
    xf = x.reshape(x.size)
    o = out.reshape(out.size)
    has_skip = skip.size > 0
    zero = out.dtype.type(0)
    v0 = out.dtype.type(1) if op == PROD else zero
    row_end = xf.size - (ROW_W - 1)  # vrow's reads stay inside x (its docstring)
    head_end = xf.size - ROW_STEPS * ROW_W
    uE = np.uint64(E)
    for t in prange(t_b.size):
        b = t_b[t]
        wrong = False
        for n in range(t_lo[t], t_hi[t]):
            if has_skip and skip[n]:
                continue
            lo, hi = bounds[n], bounds[n + 1]
            if np.uint64(lo) < np.uint64(hi) and np.uint64(hi) <= uE:  # 0 <= lo < hi <= E
                lo += b * E
                hi += b * E
                if hi <= row_end and lo <= head_end:
                    o[b * N + n] = _row(xf, lo, hi, op)
                else:
                    o[b * N + n] = _row_scalar(xf, lo, hi, op)
            else:
                o[b * N + n] = v0
                wrong |= hi != lo or np.uint64(hi) > uE
        bad[t] = wrong


@njit(cache=True, inline="always")
def _row_scalar(x, lo, hi, op):
    """``_row`` one position at a time, in order (min/max: strict comparisons, NaN propagates)."""
    acc = x[lo]
    for e in range(lo + 1, hi):
        v = x[e]
        if op == SUM or op == MEAN:
            acc += v
        elif op == PROD:
            acc *= v
        elif acc == acc and (v != v or (v < acc if op == MIN else v > acc)):
            acc = v
    if op == MEAN:
        return acc / x.dtype.type(hi - lo)
    return acc


@njit(cache=True, parallel=True)
def csr_reduce_float(x, bounds, rows, t_b, t_lo, t_hi, op, out, arg, want_arg, empty_arg, skip):
    """Float segments: task t reduces segments t_lo[t]..t_hi[t]-1 of batch t_b[t];
    segment n spans positions bounds[n]..bounds[n+1]-1 (read through ``rows`` when it is not
    empty). x: [B, E, F]; out: [B, N, F] of x's dtype; arg: the same shape (int64) when
    want_arg. Segments with skip[n] set are left alone (long segments, reduced in parts by
    the caller)."""
    B, E, F = x.shape
    N = bounds.size - 1
    xf = x.reshape(x.size)
    o = out.reshape(out.size)
    a = arg.reshape(arg.size)
    use_rows = rows.size > 0
    has_skip = skip.size > 0
    zero = out.dtype.type(0)
    one = out.dtype.type(1)
    for t in prange(t_b.size):
        b = t_b[t]
        for n in range(t_lo[t], t_hi[t]):
            if has_skip and skip[n]:
                continue
            lo, hi = bounds[n], bounds[n + 1]
            ob = (b * N + n) * F
            if hi <= lo:
                v0 = one if op == PROD else zero
                for k in range(F):
                    o[ob + k] = v0
                    if want_arg:
                        a[ob + k] = empty_arg
                continue
            _segment(xf, rows, use_rows, b * E * F, lo, hi, F, op, o, ob, a, want_arg, True)


@njit(cache=True, parallel=True)
def csr_reduce_int(x, bounds, rows, t_b, t_lo, t_hi, op, out, arg, want_arg, empty_arg, skip, check,
                   ranges, flags):
    """Integer segments (see csr_reduce_float): int64 words, written to out's dtype
    (int32 words wrap: the caller decides overflow from ranges[t] = (min, max) of the
    int64 results). mean: floor division by the count. With ``check``, sums and products
    run in checked scalar int64 arithmetic and flags[t] = 1 where one wrapped."""
    B, E, F = x.shape
    N = bounds.size - 1
    xf = x.reshape(x.size)
    o = out.reshape(out.size)
    a = arg.reshape(arg.size)
    use_rows = rows.size > 0
    has_skip = skip.size > 0
    for t in prange(t_b.size):
        b = t_b[t]
        acc = np.empty(F, np.int64)
        ag = np.empty(F, np.int64)
        lo_v = _I64_MAX
        hi_v = _I64_MIN
        fl = 0
        for n in range(t_lo[t], t_hi[t]):
            if has_skip and skip[n]:
                continue
            lo, hi = bounds[n], bounds[n + 1]
            ob = (b * N + n) * F
            if hi <= lo:
                v0 = 1 if op == PROD else 0
                for k in range(F):
                    acc[k] = v0
                    ag[k] = empty_arg
            elif check and op != MIN and op != MAX:
                fl |= _reduce_int(x, rows, use_rows, b, lo, hi, op, acc, check)
            else:
                _segment(xf, rows, use_rows, b * E * F, lo, hi, F, op, acc, 0, ag, want_arg, False)
            if op == MEAN and hi > lo:
                c = np.int64(hi - lo)
                for k in range(F):
                    acc[k] = acc[k] // c
            for k in range(F):
                v = acc[k]
                lo_v = min(lo_v, v)
                hi_v = max(hi_v, v)
                o[ob + k] = v
            if want_arg:
                for k in range(F):
                    a[ob + k] = ag[k]
        ranges[t, 0] = lo_v
        ranges[t, 1] = hi_v
        flags[t] = fl


@njit(cache=True, parallel=True)
def gather_csr(x, bounds, out):
    """out[b, e, :] = x[b, n, :] for every position e of segment n (x: [B, N, F], out: [B, E, F])."""
    B = x.shape[0]
    F = x.shape[2]
    N = bounds.size - 1
    for w in prange(B * N):
        b = w // N
        n = w - b * N
        for e in range(bounds[n], bounds[n + 1]):
            for k in range(F):
                out[b, e, k] = x[b, n, k]


@njit(cache=True, parallel=True)
def counting_sort(index, n, parts):
    """A stable counting sort of ``index`` (values in [0, n), checked before): returns
    (bounds, perm): bounds[v]..bounds[v+1]-1 are the positions of perm holding the
    positions i with index[i] == v, in increasing i. ``parts`` pieces counted in parallel."""
    E = index.size
    cuts = np.empty(parts + 1, np.int64)
    for p in range(parts + 1):
        cuts[p] = E * p // parts
    counts = np.zeros((parts, n), np.int64)
    for p in prange(parts):
        c = counts[p]
        for i in range(cuts[p], cuts[p + 1]):
            c[index[i]] += 1
    bounds = np.empty(n + 1, np.int64)
    s = 0
    for v in range(n):
        bounds[v] = s
        for p in range(parts):
            c = counts[p, v]
            counts[p, v] = s
            s += c
    bounds[n] = s
    perm = np.empty(E, np.int64)
    for p in prange(parts):
        c = counts[p]
        for i in range(cuts[p], cuts[p + 1]):
            v = index[i]
            perm[c[v]] = i
            c[v] += 1
    return bounds, perm


@njit(cache=True, parallel=True)
def scatter_direct_float(x, index, parts, op, out, arg, want_arg, counts):
    """scatter without a sort, for floats: part p owns the segment ids parts[p]..parts[p+1]-1 and
    reads the whole index, reducing the positions with one of its ids in increasing order
    into out (the same order, ties and NaN rule as the sorted path). out: [B, n, F] starts at
    the reduction's identity (min/max: +-inf) so that no branch depends on a first visit;
    counts: [n] positions per id for mean, 1 where an id occurs for min/max (empty for
    sum/prod). Empty segments end at 0 (prod 1), arg = E. A min/max segment whose values
    all equal the identity (+-inf) keeps arg = E here: the caller fixes those."""
    B, E, F = x.shape
    zero = out.dtype.type(0)
    if op == PROD:
        init = out.dtype.type(1)
    elif op == MIN:
        init = out.dtype.type(np.inf)
    elif op == MAX:
        init = out.dtype.type(-np.inf)
    else:
        init = zero
    need_counts = op != SUM and op != PROD
    for p in prange(parts.size - 1):
        v0, v1 = parts[p], parts[p + 1]
        for v in range(v0, v1):
            if need_counts:
                counts[v] = 0
            for b in range(B):
                for k in range(F):
                    out[b, v, k] = init
                    if want_arg:
                        arg[b, v, k] = E
        _accumulate(x, index, 0, E, v0, v1, op, out, arg, want_arg, counts)
        if need_counts:
            for v in range(v0, v1):
                c = counts[v]
                if c == 0:
                    for b in range(B):
                        for k in range(F):
                            out[b, v, k] = zero
                elif op == MEAN:
                    for b in range(B):
                        for k in range(F):
                            out[b, v, k] /= c


@njit(cache=True, parallel=True)
def scatter_private_float(x, index, cuts, op, priv, parg, want_arg, pcount):
    """scatter's private-copy path, for floats: piece p reduces positions cuts[p]..cuts[p+1]-1 in
    increasing order into its own copy priv[p] ([P, B, n, F], starting at the reduction's
    identity, min/max +-inf; parg: the positions chosen; pcount[p]: positions per id for mean,
    1 where an id occurs for min/max, unused (empty) for sum/prod: the random-access working
    set per thread stays small, measured 8x faster at 1e6 ids than int64 counts beside
    float32 sums). No branch but the reduction's own; the caller combines the copies in
    piece order."""
    B, E, F = x.shape
    if op == PROD:
        init = priv.dtype.type(1)
    elif op == MIN:
        init = priv.dtype.type(np.inf)
    elif op == MAX:
        init = priv.dtype.type(-np.inf)
    else:
        init = priv.dtype.type(0)
    n = priv.shape[2]
    for p in prange(cuts.size - 1):
        pc = pcount[p]
        pv = priv[p]
        for v in range(pc.size):
            pc[v] = 0
        for v in range(n):
            for b in range(B):
                for k in range(F):
                    pv[b, v, k] = init
                    if want_arg:
                        parg[p, b, v, k] = E
        _accumulate(x, index, cuts[p], cuts[p + 1], 0, n, op, pv, parg[p] if want_arg else parg.reshape(0, 0, 0),
                    want_arg, pc)


@njit(cache=True, inline="always")
def _accumulate(x, index, e0, e1, v0, v1, op, out, arg, want_arg, counts):
    """Positions e0..e1-1 in increasing order, those whose id v is in [v0, v1), into out[:, v, :]
    (and arg); counts[v] += 1 for mean, = 1 for min/max. One loop per reduction (the branch on
    the reduction stays outside), and a scalar loop for one batch and one feature."""
    B, E, F = x.shape
    own = v0 > 0 or v1 < out.shape[1]
    if op == SUM or op == MEAN:
        if B == 1 and F == 1:
            o = out.reshape(out.size)
            xf = x.reshape(x.size)
            for e in range(e0, e1):
                v = index[e]
                if own and (v < v0 or v >= v1):
                    continue
                if op == MEAN:
                    counts[v] += 1
                o[v] += xf[e]
        else:
            for e in range(e0, e1):
                v = index[e]
                if own and (v < v0 or v >= v1):
                    continue
                if op == MEAN:
                    counts[v] += 1
                for b in range(B):
                    for k in range(F):
                        out[b, v, k] += x[b, e, k]
    elif op == PROD:
        for e in range(e0, e1):
            v = index[e]
            if own and (v < v0 or v >= v1):
                continue
            for b in range(B):
                for k in range(F):
                    out[b, v, k] *= x[b, e, k]
    elif want_arg:
        for e in range(e0, e1):
            v = index[e]
            if own and (v < v0 or v >= v1):
                continue
            counts[v] = 1
            for b in range(B):
                for k in range(F):
                    w = x[b, e, k]
                    if _better(w, out[b, v, k], op):
                        out[b, v, k] = w
                        arg[b, v, k] = e
    else:
        for e in range(e0, e1):
            v = index[e]
            if own and (v < v0 or v >= v1):
                continue
            counts[v] = 1
            for b in range(B):
                for k in range(F):
                    w = x[b, e, k]
                    c = out[b, v, k]
                    out[b, v, k] = w if (w < c if op == MIN else w > c) or w != w else c


@njit(cache=True, parallel=True)
def coo_bounds(index, n):
    """CSR bounds of an index, checked in the same pass: (bounds, lo, hi, down) with lo / hi the
    smallest / largest value and down whether some value is below its predecessor. The bounds
    hold only when lo >= 0, hi < n and not down: bounds[v] is the first position holding a value
    >= v, written by that position alone, so the pass is parallel. Otherwise the caller raises
    (bounds are garbage): writes are clamped to [0, n] and a chunk stops writing at its first
    decrease, so a wrong index costs at most n writes per chunk, never a wild write."""
    E = index.size
    C = max(1, min(64, E // 65536))
    bounds = np.empty(n + 1, np.int64)
    lo_c = np.zeros(C, np.int64)
    hi_c = np.zeros(C, np.int64)
    down_c = np.zeros(C, np.bool_)
    for c in prange(C):
        a, b = c * E // C, (c + 1) * E // C
        if a >= b:
            continue
        mn, mx = index[a], index[a]
        d = False
        p = index[a - 1] if a > 0 else -1
        for i in range(a, b):
            v = index[i]
            mn = min(mn, v)
            mx = max(mx, v)
            d |= v < p
            if v > p and not d:  # a new id (one position in ~10 at GNN degrees: a rare branch)
                # ids after the previous value's, to this one's; clamped to [0, n] BEFORE the +1: an id
                # near 2**63 would wrap a sum (undefined in LLVM, which then drops the clamps)
                for w in range(0 if p < 0 else min(p, n) + 1, min(v, n) + 1):
                    bounds[w] = i
            p = v
        lo_c[c], hi_c[c], down_c[c] = mn, mx, d
    last = index[E - 1] if E > 0 else -1
    for w in range(0 if last < 0 else min(last, n) + 1, n + 1):  # ids above every value (and the end)
        bounds[w] = E
    if E == 0:
        return bounds, 0, -1, False
    return bounds, lo_c.min(), hi_c.max(), down_c.any()


@njit(cache=True, parallel=True)
def column_scan_float(x, flags, seg, exclusive, out):
    """Scans along the middle axis of x [B, E, F] for every (batch, feature), restarting where
    flags[e] is set when ``seg``; a task is one batch and a block of up to 16 features, summed
    in position order in out's dtype."""
    B, E, F = x.shape
    FB = 16 if F >= 16 else F
    nfb = (F + FB - 1) // FB
    for w in prange(B * nfb):
        b = w // nfb
        k0 = (w - b * nfb) * FB
        k1 = min(F, k0 + FB)
        acc = np.zeros(k1 - k0, out.dtype)
        for e in range(E):
            if seg and e > 0 and flags[e] != 0:
                acc[:] = 0
            for k in range(k1 - k0):
                s = acc[k] + x[b, e, k0 + k]
                out[b, e, k0 + k] = acc[k] if exclusive else s
                acc[k] = s


@njit(cache=True, parallel=True)
def column_scan_int(x, flags, seg, exclusive, out, check, ranges, wrapped):
    """column_scan_float for integers: int64 words, written to out's dtype (int32 words wrap);
    ranges[w] = (min, max) of the int64 results written by task w, wrapped[w] set where a
    checked int64 add wrapped."""
    B, E, F = x.shape
    FB = 16 if F >= 16 else F
    nfb = (F + FB - 1) // FB
    for w in prange(B * nfb):
        b = w // nfb
        k0 = (w - b * nfb) * FB
        k1 = min(F, k0 + FB)
        acc = np.zeros(k1 - k0, np.int64)
        lo_v = np.int64(0)
        hi_v = np.int64(0)
        wr = False
        for e in range(E):
            if seg and e > 0 and flags[e] != 0:
                acc[:] = 0
            for k in range(k1 - k0):
                v = np.int64(x[b, e, k0 + k])
                a = acc[k]
                s = _wrapping_add(a, v)
                if check and ((a ^ s) & (v ^ s)) < 0:
                    wr = True
                r = a if exclusive else s
                out[b, e, k0 + k] = r
                lo_v = min(lo_v, r)
                hi_v = max(hi_v, r)
                acc[k] = s
        ranges[w, 0] = lo_v
        ranges[w, 1] = hi_v
        wrapped[w] = wr


@njit(cache=True, parallel=True)
def route_arg(grad, arg, out):
    """The gradient of min/max: out[b, arg[b, n, k], k] = grad[b, n, k] (grad, arg: [B, N, F];
    out: [B, E, F], zeroed by the caller). arg == E (an empty segment) routes nothing. Each
    position is chosen by at most one output (it lies in one segment), so the writes never meet."""
    B, N, F = grad.shape
    E = out.shape[1]
    for bn in prange(B * N):
        b = bn // N
        n = bn - b * N
        for k in range(F):
            a = arg[b, n, k]
            if 0 <= a < E:
                out[b, a, k] = grad[b, n, k]
