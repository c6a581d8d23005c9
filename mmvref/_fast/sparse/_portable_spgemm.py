"""Numba kernels of the fast SpGEMM (``mmvref._fast.sparse.ops.spgemm``):
row-wise Gustavson, rows in parallel (tasks of about equal products).

- ``structure``: both operands validated and every row's number of products
  (the upper bound of its length by which rows are staged) counted, in one
  pass (a task validates a chunk of A's rows, then counts their products; or
  validates a chunk of B's).
- ``fill_kernel(...)``: the numeric pass. Rows of at most RANK_MAX products
  by a private coordinate list (the sparse workspace; with the "auto" rule
  also when the workspace is dense), stably sorted by column by rank (in L1,
  no mispredicted branch; measured 26 vs 46 ms for an insertion sort on 2.6M
  entries), runs summed; longer rows by the dense workspace (a value per
  column of B and a bitmap of the touched ones; the row's distinct columns
  read off the bitmap in order, or sorted in place when they are very spread
  out) or by the sparse one (a merge sort).
- ``count_dense`` / ``count_sparse``: the counting pass of the fallback when
  staging would be too large.
- ``compact``: staged rows moved to their final offsets.

Both workspaces add a column's products in product order (A's entries in
order, then B's), so they agree bit for bit; with ``drop`` they skip exact
zeros. ``check_structure`` validates one operand (spmm's path without a
product pass).

Cold start (a user's first call compiles these; issue 31): ``fill_kernel``
builds one kernel per combination of the row paths a call takes, which the
caller reads off the row products (``small``: a row goes by the coordinate
list; ``big``: by the bitmap or the merge sort; ``sort``: the bitmap's sort
fallback, possible only when B has more than 64 * SCAN_WORDS columns), the
flags compile-time constants held in closure cells, so a path the input does
not take is pruned before typing; and in a serial flavour for small products
(``packed``: rows written at their final offsets as they are finished, which
one thread can do, so no ``compact``; the workspaces are the caller's, so no
allocation is compiled in). Numba caches each closure under its cells'
values. The row paths are spelled out in one function body (Numba's
inlining of helpers costs more compile time than their code), and builtin
``min``/``max`` (an overload compile per type) are conditional expressions.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from .._variants import flag_name, variant

__all__ = ["check_structure", "valid_small", "structure", "fill_kernel", "fill_scratch", "count_dense", "count_sparse",
           "compact", "RANK_MAX", "SCAN_WORDS"]

#: rows of at most this many products are sorted by stable rank in a private coordinate list
RANK_MAX = 128
#: a long row's columns are read off the bitmap when it spans at most this many words per column
SCAN_WORDS = 16

_U = np.uint64
_KEY_PAD = np.iinfo(np.int64).max


# ----------------------------------------------------------------------------- structure

#: entries of a block of rows in ``check_structure``'s search for rows like the row before (64 KB of
#: int32 indices: within L2)
SAME_BLOCK = 1 << 14


def check_structure_kernel(narrow=False, runs=False):
    """The structure check (``check_structure``) compiled for what the caller wants besides the
    check: ``narrow`` (the uint16 columns written in the same pass), ``runs`` (the rows like the row
    before found in it). The flags are compile-time constants (closure cells): each kernel holds its
    own path only. One kernel for all three took 1.63 s to compile against 0.67 for the check alone,
    on every first ``spgemm`` and ``prepare`` of a process with a fresh cache."""
    key = (bool(narrow), bool(runs))
    return variant(_make_check, *key, name=flag_name("check_structure_", ("narrow", "runs"), key) if any(key)
                   else "_check_structure_plain")


def _make_check(narrow_out, runs):
    def check_structure(indptr, indices, ncols, chunks, bad, narrow, same):
        """bad[t] when rows chunks[t]..chunks[t+1]-1 have indptr out of order or a
        column index outside [0, ncols) (one vectorisable max over the indices).
        ``narrow``: empty, or nnz uint16 that receive the column indices in the
        same pass (a prepared matrix's compact columns, ``ops.COMPACT_MAX_COLS``:
        the caller reads them only where no chunk is bad, i.e. where every index
        is below ncols <= 2**16). ``same``: empty, or one flag a row, set where
        the row holds the columns of the row before in the same order (within a
        chunk: a chunk's first row is not compared), found in the same pass
        (a prepared matrix's ``ops.shared_columns``). Returns the entries of the
        rows so flagged."""
        nnz = indices.size
        held = 0
        for t in prange(chunks.size - 1):
            r0 = chunks[t]
            r1 = chunks[t + 1]
            ok = True
            for r in range(r0, r1):
                ok &= indptr[r] <= indptr[r + 1]
            if not ok or indptr[r0] < 0 or indptr[r1] > nnz:
                bad[t] = True
                continue
            umax = _U(0)
            part = indices[indptr[r0]:indptr[r1]]  # (read through the slice: positions known non-negative,
            if runs:                               # so the max vectorizes: 5.0 -> 0.56 ms on 9.4M indices)
                # rows in blocks of about SAME_BLOCK entries: the block's max over its whole range (a max
                # row by row did not vectorize: 0.57 against 0.09 ms on attention b-4 r-8), then each
                # row's compare with the row before while the block is in cache (a second pass over a
                # chunk's part read it from memory again: b-16 r-2 1.4 -> 2.35 ms a preparation)
                base = np.int64(indptr[r0])
                part_held = 0
                r = r0
                while r < r1:
                    rs = r + 1
                    while rs < r1 and np.int64(indptr[rs]) - np.int64(indptr[r]) < SAME_BLOCK:
                        rs += 1
                    block = part[np.int64(indptr[r]) - base:np.int64(indptr[rs]) - base]
                    if narrow_out:  # (both: a prepared matrix of short rows that share their columns)
                        dest = narrow[np.int64(indptr[r]):np.int64(indptr[rs])]
                        for q in range(block.size):
                            v = _U(block[q])
                            umax = v if v > umax else umax
                            dest[q] = np.uint16(v)
                    else:
                        for q in range(block.size):
                            v = _U(block[q])
                            umax = v if v > umax else umax
                    for rr in range(max(r, r0 + 1), rs):
                        a0 = np.int64(indptr[rr - 1]) - base
                        a1 = np.int64(indptr[rr]) - base
                        n = np.int64(indptr[rr + 1]) - base - a1
                        eq = False
                        if a1 - a0 == n:
                            prev = part[a0:a1]
                            cur = part[a1:a1 + n]
                            differ = prev.dtype.type(0)
                            for q in range(n):  # (xor and or: an integer reduction, which vectorizes)
                                differ |= prev[q] ^ cur[q]
                            eq = differ == 0
                        same[rr] = eq
                        if eq:
                            part_held += n
                    r = rs
                held += part_held
            elif narrow_out:
                dest = narrow[indptr[r0]:indptr[r1]]
                for q in range(part.size):
                    v = _U(part[q])
                    umax = v if v > umax else umax
                    dest[q] = np.uint16(v)  # (wraps only where umax is out of range: bad)
            else:
                for q in range(part.size):
                    v = _U(part[q])
                    umax = v if v > umax else umax
            if r1 > r0 and indptr[r1] > indptr[r0] and umax >= _U(ncols):
                bad[t] = True
        return held

    return njit(cache=True, parallel=True)(check_structure)


#: the structure check alone (``spgemm``'s operands, a prepared matrix that keeps no other columns)
check_structure = check_structure_kernel()


@njit(cache=True)
def valid_small(indptr, indices, ncols):
    """Offsets non-decreasing and column indices in [0, ncols) (unsigned: a negative one is huge),
    on the calling thread: small operands (the ends of indptr are checked by the caller). Two
    loops that vectorize; about 0.4 us on a 1,000-row matrix of 5,000 entries, where numpy's two
    reductions took 2.7 (a prepared matrix's preparation: issue 32)."""
    ok = True
    for r in range(indptr.size - 1):
        ok &= indptr[r] <= indptr[r + 1]
    umax = _U(0)
    for q in range(indices.size):
        v = _U(indices[q])
        umax = v if v > umax else umax
    return ok and (indices.size == 0 or umax < _U(ncols))


@njit(cache=True, parallel=True)
def structure(ap, ai, bp, bi, n, p, ca, cb, prods, bad_a, bad_b, n_tasks):
    """Task t validates A's rows ca[t]..ca[t+1]-1 (bad_a[t]: offsets out of order or
    outside [0, nnz], or a column index outside [0, n)) and, when valid, sets prods[r] =
    the number of products of row r of A B (the sum of the lengths of the rows of B it
    selects: an upper bound of its length); and validates B's rows cb[t]..cb[t+1]-1
    against p columns (bad_b[t]); n_tasks = the larger count of chunks (computed by the
    caller: a conditional bound is not a loop Numba parallelizes). prods is meaningful only
    when nothing is bad. (The two validations are spelled out rather than one helper inlined
    twice: Numba's inlining costs more compile time than the code.) Large operands only: the
    caller does small ones with numpy (no kernel to compile on a first call)."""
    ta = ca.size - 1
    tb = cb.size - 1
    # task t: A's chunk t and B's chunk t (threads get contiguous ranges of tasks: A's and B's
    # chunks side by side keep them balanced)
    for t in prange(n_tasks):
        if t < ta:
            r0 = ca[t]
            r1 = ca[t + 1]
            ok = True
            for r in range(r0, r1):
                ok &= ap[r] <= ap[r + 1]
            if ok and ap[r0] >= 0 and ap[r1] <= ai.size:
                umax = _U(0)
                part = ai[ap[r0]:ap[r1]]  # (through the slice: the max vectorizes, see check_structure)
                for q in range(part.size):
                    v = _U(part[q])
                    umax = v if v > umax else umax
                ok = not (r1 > r0 and ap[r1] > ap[r0] and umax >= _U(n))
            else:
                ok = False
            if ok:  # A's indices in [0, n): B's offsets can be read
                for r in range(r0, r1):
                    s = 0
                    for q in range(ap[r], ap[r + 1]):
                        kk = ai[q]
                        s += bp[kk + 1] - bp[kk]
                    prods[r] = s
            else:
                bad_a[t] = True
        if t < tb:
            r0 = cb[t]
            r1 = cb[t + 1]
            ok = True
            for r in range(r0, r1):
                ok &= bp[r] <= bp[r + 1]
            if ok and bp[r0] >= 0 and bp[r1] <= bi.size:
                umax = _U(0)
                part = bi[bp[r0]:bp[r1]]
                for q in range(part.size):
                    v = _U(part[q])
                    umax = v if v > umax else umax
                ok = not (r1 > r0 and bp[r1] > bp[r0] and umax >= _U(p))
            else:
                ok = False
            if not ok:
                bad_b[t] = True


# ----------------------------------------------------------------------------- counting pass

@njit(cache=True, parallel=True)
def count_dense(ap, ai, bp, bi, p, tasks, counts, mark_proto):
    """Distinct columns of every row of A B (the counting pass of the fallback)."""
    for t in prange(tasks.size - 1):
        mark = np.full(p, -1, mark_proto.dtype)
        for r in range(tasks[t], tasks[t + 1]):
            c = 0
            for q in range(ap[r], ap[r + 1]):
                kk = ai[q]
                for pp in range(bp[kk], bp[kk + 1]):
                    j = bi[pp]
                    if mark[j] != r:
                        mark[j] = r
                        c += 1
            counts[r] = c


@njit(cache=True, parallel=True)
def count_sparse(ap, ai, bp, bi, prods, tasks, counts):
    for t in prange(tasks.size - 1):
        longest = 0
        for r in range(tasks[t], tasks[t + 1]):
            longest = prods[r] if prods[r] > longest else longest
        cols = np.empty(longest, bi.dtype)
        for r in range(tasks[t], tasks[t + 1]):
            w = 0
            for q in range(ap[r], ap[r + 1]):
                kk = ai[q]
                for pp in range(bp[kk], bp[kk + 1]):
                    cols[w] = bi[pp]
                    w += 1
            row = cols[:w]
            row.sort()
            c = 0
            for i in range(w):
                c += i == 0 or row[i] != row[i - 1]
            counts[r] = c


# ----------------------------------------------------------------------------- SpGEMM: numeric

def fill_kernel(dense, small, big, sort, drop, parallel, packed=False):
    """The numeric pass for one combination of paths (see the module docstring):
    ``k(ap, ai, ad, bp, bi, bd, p, prods, tasks, slot, ci, cd, counts, *fill_scratch(...))``
    writes every row's sorted columns and sums (exact zeros dropped when ``drop``) at
    slot[r] (``packed``, serial only: consecutively from 0) and counts[r] = its entries.
    ``small``: rows of at most RANK_MAX products go by the coordinate list (every row
    when not ``big``); ``big``: the other rows by the bitmap (``dense``) or the merge
    sort; ``sort``: the bitmap's in-place sort fallback (``dense`` only). Built once per
    combination and process; compiled (or loaded from the cache) at its first call."""
    key = (bool(dense), bool(small), bool(big), bool(sort and dense and big), bool(drop), bool(parallel),
           bool(packed and not parallel))
    return variant(_make_fill, *key, name=flag_name("fill_", _FLAG_NAMES, key))


def fill_scratch(key, n_tasks, p, longest, idx_t, wd):
    """The scratch arrays of a ``fill_kernel(*key)`` call: the coordinate list's (a row of
    RANK_MAX per task), and, for one task (serial), the long rows' workspace (the bitmap and
    a value per column of B, or the merge sort's lists of ``longest``); the parallel kernels
    allocate the latter per task. Arrays of no use to the kernel are empty (their dtypes fixed,
    so that one signature serves)."""
    dense, small, big, _sort, _drop, parallel = key[:6]
    ns = n_tasks if small else 0
    one = big and not parallel
    return (np.empty((ns, RANK_MAX), np.int64), np.empty((ns, RANK_MAX), wd), np.empty((ns, RANK_MAX), idx_t),
            np.empty((ns, RANK_MAX), wd),
            np.zeros(((p + 63) >> 6) if one and dense else 0, np.uint64), np.empty(p if one and dense else 0, wd),
            np.empty(longest if one and not dense else 0, idx_t), np.empty(longest if one and not dense else 0, wd))
_FLAG_NAMES = ("dense", "small", "big", "sort", "drop", "parallel", "packed")


def _make_fill(dense, small, big, sort, drop, parallel, packed):
    """One kernel of ``fill_kernel``. The flags are closure cells: Numba keys its cache on
    their values (one entry per combination) and prunes the branches that a flag in a
    bare condition turns off before typing them. One function body, no ``inline`` helpers:
    Numba's inlining of a helper costs more compile time than the helper's own code."""

    def fill(ap, ai, ad, bp, bi, bd, p, prods, tasks, slot, ci, cd, counts, keys_t, pv_t, scol_t, sval_t, bits0,
             vals0, cols0, pl0):
        if parallel:  # referenced, so that it is a cell: part of the cache key
            pass
        for t in prange(tasks.size - 1):
            r0 = tasks[t]
            r1 = tasks[t + 1]
            if small:  # the coordinate list's scratch: row t of the caller's (tasks, RANK_MAX) arrays
                keys = keys_t[t]
                pv = pv_t[t]
                scol = scol_t[t]
                sval = sval_t[t]
            if big:
                if parallel:
                    # the workspace of the task's long rows, allocated once when it has one
                    longest = 0
                    for r in range(r0, r1):
                        if not small or prods[r] > RANK_MAX:
                            longest = prods[r] if prods[r] > longest else longest
                    if dense:
                        need = longest > 0 or (not small and r1 > r0)
                        bits = np.zeros(((p + 63) >> 6) if need else 0, np.uint64)
                        vals = np.empty(p if need else 0, cd.dtype)  # set at a column's first touch: no O(p) zeroing
                    else:
                        cols = np.empty(longest, ci.dtype)
                        pl = np.empty(longest, cd.dtype)
                else:  # one task: the caller's workspace (no allocation compiled in)
                    bits = bits0
                    vals = vals0
                    cols = cols0
                    pl = pl0
            base = np.int64(0)
            for r in range(r0, r1):
                if packed:
                    pass
                else:
                    base = slot[r]
                w = np.int64(-1)
                if small:
                    if not big or prods[r] <= RANK_MAX:
                        # the coordinate list held in L1: products appended as (key, value) with
                        # key = column * RANK_MAX + position (distinct keys, ordered by column then
                        # product order), each placed at its rank (the number of smaller keys: one
                        # vectorised count over a list padded to whole vectors with the largest
                        # key, no data-dependent branch), equal columns summed in product order
                        n = 0
                        for q in range(ap[r], ap[r + 1]):
                            kk = ai[q]
                            a = ad[q]
                            for pp in range(bp[kk], bp[kk + 1]):
                                keys[n] = np.int64(bi[pp]) * RANK_MAX + n
                                pv[n] = a * bd[pp]
                                n += 1
                        npad = (n + 7) & ~7
                        for i in range(n, npad):
                            keys[i] = _KEY_PAD
                        for i in range(n):
                            key = keys[i]
                            rk = 0
                            for u in range(npad):
                                rk += keys[u] < key
                            scol[rk] = key // RANK_MAX
                            sval[rk] = pv[i]
                        w = 0
                        i = 0
                        while i < n:
                            j = scol[i]
                            v = sval[i]
                            i += 1
                            while i < n and scol[i] == j:
                                v += sval[i]
                                i += 1
                            ci[base + w] = j
                            cd[base + w] = v
                            w = w + 1 if (not drop or v != 0) else w
                if big:
                    if w < 0:
                        w = 0
                        if dense:
                            # the dense workspace: a value per column of B and a bitmap of the
                            # touched columns (p/8 bytes: in L1 for p up to ~2**18)
                            c = 0
                            lo = p
                            hi = -1
                            for q in range(ap[r], ap[r + 1]):
                                kk = ai[q]
                                a = ad[q]
                                for pp in range(bp[kk], bp[kk + 1]):
                                    jb = np.int64(bi[pp])
                                    wi = jb >> 6
                                    bit = _U(1) << _U(jb & 63)
                                    word = bits[wi]
                                    if word & bit:
                                        vals[jb] += a * bd[pp]
                                    else:
                                        bits[wi] = word | bit
                                        vals[jb] = a * bd[pp]
                                        ci[base + c] = jb
                                        c += 1
                                        lo = jb if jb < lo else lo
                                        hi = jb if jb > hi else hi
                            # the sorted distinct columns: the set bits of the words between the
                            # first and last touched column, by trailing-zero counts, when those
                            # words are at most SCAN_WORDS per column (always, without ``sort``: B
                            # has no more words), else an in-place sort of the row's column list
                            w0 = lo >> 6
                            w1 = hi >> 6
                            scan = c > 0
                            if sort:
                                if c > 0 and w1 - w0 + 1 > SCAN_WORDS * c:
                                    scan = False
                                    row = ci[base:base + c]
                                    row.sort()
                                    for i in range(c):
                                        jb = np.int64(ci[base + i])
                                        bits[jb >> 6] = 0
                                        vb = vals[jb]
                                        ci[base + w] = jb
                                        cd[base + w] = vb
                                        w = w + 1 if (not drop or vb != 0) else w
                            if scan:
                                for wi in range(w0, w1 + 1):
                                    word = bits[wi]
                                    bits[wi] = 0
                                    while word:
                                        jb = (wi << 6) + np.int64(trailing_zeros(word))
                                        vb = vals[jb]
                                        ci[base + w] = jb
                                        cd[base + w] = vb
                                        w = w + 1 if (not drop or vb != 0) else w
                                        word &= word - _U(1)
                        else:
                            # the sparse workspace beyond RANK_MAX products: products appended,
                            # stably sorted by column (merge sort), equal columns summed in order
                            nm = 0
                            for q in range(ap[r], ap[r + 1]):
                                kk = ai[q]
                                a = ad[q]
                                for pp in range(bp[kk], bp[kk + 1]):
                                    cols[nm] = bi[pp]
                                    pl[nm] = a * bd[pp]
                                    nm += 1
                            order = np.argsort(cols[:nm], kind="mergesort")
                            i = 0
                            while i < nm:
                                jm = cols[order[i]]
                                vm = pl[order[i]]
                                i += 1
                                while i < nm and cols[order[i]] == jm:
                                    vm += pl[order[i]]
                                    i += 1
                                ci[base + w] = jm
                                cd[base + w] = vm
                                w = w + 1 if (not drop or vm != 0) else w
                counts[r] = w
                if packed:
                    base += w

    return njit(cache=True, parallel=parallel)(fill)


@njit(cache=True, parallel=True)
def compact(slot, counts, cp, tasks, ci, cd, oi, od):
    """Rows staged at slot[r] moved to their final place cp[r]."""
    for t in prange(tasks.size - 1):
        for r in range(tasks[t], tasks[t + 1]):
            s = slot[r]
            d = cp[r]
            for i in range(counts[r]):
                oi[d + i] = ci[s + i]
                od[d + i] = cd[s + i]
