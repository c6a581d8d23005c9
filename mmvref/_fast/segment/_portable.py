"""Numba kernels of the fast segmented ops.

Structure (App. A.2 Alg. 1 / MCScan): the input is cut into chunks; a
parallel chunk-local pass; a sequential carry propagation over the (few)
chunks; a parallel fix-up of each chunk's first segment.

Integer kernels work in int64 on the speculative global form of the paper:
P = running (unsegmented) prefix sum, b = P just before the latest segment
start, out = P - b. Both recurrences have a one-cycle dependency chain (a
segmented accumulator ``a = x + (a if not f else 0)`` has two), and int64 is
exact for every int8/16/32 input of fewer than 2**32 elements. Overflow of an
int32 result is screened per block of ``BLOCK`` elements with a bound that is
cheap to compute from L1: |out_i| <= |out before the block| + len * max |x| over the
block; a block that fails the screen marks its chunk "suspect", and the caller
then decides exactly with a sequential checked pass (``exact_*`` below).

Float kernels accumulate directly (no prefix differences: those lose accuracy
on long inputs) in the result dtype, in index order within a chunk; the carry
is added to a chunk's first segment afterwards.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from .._variants import variant
from ._portable_vec import block_prefix, count_nonzero_or, prefetch, rows_from_prefix, same_width, sum_i64

BLOCK = 1024
I32_MAX = 2147483647


# ----------------------------------------------------------------------------- scan

@njit(cache=True, parallel=True)
def chunk_sums(x, starts, out):
    """out[c] = sum(x[starts[c]:starts[c+1]]) in the dtype of ``out`` (zero-initialised)."""
    for c in prange(starts.size - 1):
        xs = x[starts[c]:starts[c + 1]]
        a = out[c] - out[c]
        for i in range(xs.size):
            a += xs[i]
        out[c] = a


@njit(cache=True)
def _abs_sum(xs):
    """A cheap upper bound of sum |xs|: len * max|xs|, from a min/max in the
    input's own width (vectorizes at full SIMD width, unlike a widening abs-sum)."""
    if xs.size == 0:
        return np.int64(0)
    lo = xs[0]
    hi = xs[0]
    for i in range(xs.size):
        v = xs[i]
        lo = min(lo, v)
        hi = max(hi, v)
    m = max(np.int64(hi), -np.int64(lo))
    return m * xs.size


@njit(cache=True, parallel=True)
def scan_int(x, out, starts, offs, exclusive, check, suspect):
    """Inclusive/exclusive scan of integers, chunk c starting from offs[c] (int64)."""
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        p = offs[c]
        sus = False
        for b0 in range(lo, hi, BLOCK):
            b1 = min(b0 + BLOCK, hi)
            xs = x[b0:b1]
            os = out[b0:b1]
            if check:
                pa = p if p >= 0 else -p
                if pa + _abs_sum(xs) > I32_MAX:
                    sus = True
            if exclusive:
                for i in range(xs.size):
                    os[i] = p
                    p += xs[i]
            else:
                for i in range(xs.size):
                    p += xs[i]
                    os[i] = p
        suspect[c] = sus


@njit(cache=True, parallel=True)
def scan_float(x, out, starts, offs, exclusive):
    for c in prange(starts.size - 1):
        xs = x[starts[c]:starts[c + 1]]
        os = out[starts[c]:starts[c + 1]]
        p = offs[c]
        if exclusive:
            for i in range(xs.size):
                os[i] = p
                p += xs[i]
        else:
            for i in range(xs.size):
                p += xs[i]
                os[i] = p


# ----------------------------------------------------------------------------- flags

#: ``flag_stats`` counts with numpy up to this many flags: as fast there (a few chunks at most), and
#: no kernel to compile for a small first call
FLAGS_SMALL = 1 << 16


def flag_stats(f, starts, counts, bad):
    """counts[c] = number of set flags in chunk c, ignoring global position 0
    (it always starts a segment); bad[c] = OR of the raw flag bytes (> 1: invalid).
    f: uint8. One parallel pass (``flag_stats_chunks``) above ``FLAGS_SMALL`` flags."""
    if f.size > FLAGS_SMALL:
        flag_stats_chunks(f, starts, counts, bad)
        return
    for c in range(starts.size - 1):
        lo, hi = int(starts[c]), int(starts[c + 1])
        k = np.count_nonzero(f[lo:hi])
        if lo == 0 and hi > 0 and f[0] != 0:
            k -= 1
        counts[c] = k
        bad[c] = np.bitwise_or.reduce(f[lo:hi]) if hi > lo else 0


@njit(cache=True, parallel=True)
def flag_stats_chunks(f, starts, counts, bad):
    """``flag_stats``' parallel pass: chunk c counted and OR-ed by ``count_nonzero_or``."""
    for c in prange(starts.size - 1):
        lo = starts[c]
        hi = starts[c + 1]
        k, o = count_nonzero_or(f, lo, hi)
        if lo == 0 and hi > 0 and f[0] != 0:
            k -= 1
        counts[c] = k
        bad[c] = o


@njit(cache=True, parallel=True)
def flag_positions(f, starts, bases, counts, out):
    """out[bases[c] + j] = the position of the j-th set flag of chunk c after global position 0
    (``flag_stats`` counted them, ``counts``; bases is their exclusive scan, offset by the caller;
    f holds 0/1 only): the segment starts as CSR offsets, one parallel pass. Branch-free: every
    position is written to the chunk's next slot and the slot advances by the flag, so random
    flags cost no mispredicted branch; once a chunk's slots are full its writes go to the last
    entry of ``out``, a scratch slot the caller overwrites."""
    scratch = out.size - 1
    for c in prange(starts.size - 1):
        k = bases[c]
        kend = bases[c] + counts[c]
        lo = max(starts[c], 1)
        hi = starts[c + 1]
        i = lo
        while i + 32 <= hi:  # blocks of 32 flags: skipped when none is set (sparse flags)
            any_ = np.uint8(0)
            for j in range(32):
                any_ |= f[i + j]
            if any_ != 0:
                for j in range(i, i + 32):
                    out[k if k < kend else scratch] = j
                    k += np.int64(f[j])
            i += 32
        for j in range(i, hi):
            out[k if k < kend else scratch] = j
            k += np.int64(f[j])


# ----------------------------------------------------------------------------- segmented scan

@njit(cache=True)
def _first_flag(fs):
    """Index of the first set flag in fs, or fs.size."""
    for i in range(fs.size):
        if fs[i] != 0:
            return i
    return fs.size


@njit(cache=True, parallel=True)
def segscan_int(x, f, out, starts, exclusive, check, suspect, tails, has_flag, bad):
    """Chunk-local segmented scan (a chunk's start acts as a segment start).

    tails[c] = the chunk's last inclusive segmented value (int64);
    has_flag[c] = whether a segment starts anywhere in the chunk;
    bad[c] = OR of the raw flag bytes (> 1 means an invalid flag).
    """
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        p = np.int64(0)   # P: local prefix sum
        b = np.int64(0)   # P just before the latest segment start
        o = np.uint8(0)
        sus = False
        for b0 in range(lo, hi, BLOCK):
            b1 = min(b0 + BLOCK, hi)
            xs = x[b0:b1]
            fs = f[b0:b1]
            os = out[b0:b1]
            if check:
                v = p - b
                va = v if v >= 0 else -v
                if va + _abs_sum(xs) > I32_MAX:
                    sus = True
            if exclusive:
                for i in range(xs.size):
                    fi = fs[i]
                    o |= fi
                    b = p if fi != 0 else b
                    os[i] = p - b
                    p += xs[i]
            else:
                for i in range(xs.size):
                    fi = fs[i]
                    o |= fi
                    b = p if fi != 0 else b
                    p += xs[i]
                    os[i] = p - b
        tails[c] = p - b
        has_flag[c] = _first_flag(f[lo:hi]) < hi - lo
        suspect[c] = sus
        bad[c] = o


@njit(cache=True, parallel=True)
def segscan_float(x, f, out, starts, exclusive, tails, has_flag, bad):
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        xs = x[lo:hi]
        fs = f[lo:hi]
        os = out[lo:hi]
        zero = tails[c] - tails[c]
        a = zero
        o = np.uint8(0)
        if exclusive:
            for i in range(xs.size):
                fi = fs[i]
                o |= fi
                a = a if fi == 0 else zero
                os[i] = a
                a += xs[i]
        else:
            for i in range(xs.size):
                fi = fs[i]
                o |= fi
                a = xs[i] + (a if fi == 0 else zero)
                os[i] = a
        tails[c] = a
        has_flag[c] = _first_flag(fs) < fs.size
        bad[c] = o


@njit(cache=True, parallel=True)
def fix_first_segment_float(f, out, starts, carry):
    """out[i] += carry[c] for the positions of chunk c before its first flag."""
    for c in prange(1, starts.size - 1):
        cr = carry[c]
        lo, hi = starts[c], starts[c + 1]
        fs = f[lo:hi]
        os = out[lo:hi]
        for i in range(_first_flag(fs)):
            os[i] += cr


@njit(cache=True, parallel=True)
def fix_first_segment_int(x, f, out, starts, carry, exclusive, mins, maxs):
    """Integer fix-up, exact: chunk c's first-segment values recomputed in int64
    from the carry (``out`` holds only the wrapped local values); their min/max."""
    for c in prange(1, starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        fs = f[lo:hi]
        xs = x[lo:hi]
        os = out[lo:hi]
        m = _first_flag(fs)
        v = carry[c]
        mn = v
        mx = v
        for i in range(m):
            if exclusive:
                os[i] = v
                mn = min(mn, v)
                mx = max(mx, v)
                v += xs[i]
            else:
                v += xs[i]
                os[i] = v
                mn = min(mn, v)
                mx = max(mx, v)
        if m == 0:
            mn = 0
            mx = 0
        mins[c] = mn
        maxs[c] = mx


# ----------------------------------------------------------------------------- segmented sum

@njit(cache=True, parallel=True)
def segsum_int(x, f, starts, bases, out, heads, tails, check, suspect):
    """Segment sums of integers written straight to ``out``.

    Chunk c owns the segments that START inside it (global ids bases[c]+1 ..
    bases[c]+counts[c]); their running sums are stored on every element
    (branch-free: out[k] = P - b, k += flag), so a slot keeps the last, full
    value. The chunk's head (the elements before its first flag, continuing a
    segment from the left) is summed apart into heads[c], and the value of its
    last segment at the chunk end into tails[c] (both exact, int64): the caller
    joins segments across chunks. Chunk 0's head is global segment 0.
    """
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        fs = f[lo:hi]
        xs = x[lo:hi]
        m = 0 if lo == 0 else _first_flag(fs)
        if lo == 0 and xs.size > 0:
            m = _first_flag(fs[1:]) + 1
        h = np.int64(0)
        for i in range(m):
            h += xs[i]
        heads[c] = h
        k = np.uint64(bases[c])  # unsigned: no negative-index wraparound test per store
        p = np.int64(0)
        b = np.int64(0)
        sus = False
        for b0 in range(m, xs.size, BLOCK):
            b1 = min(b0 + BLOCK, xs.size)
            xb = xs[b0:b1]
            fb = fs[b0:b1]
            if check:
                v = p - b
                va = v if v >= 0 else -v
                if va + _abs_sum(xb) > I32_MAX:
                    sus = True
            for i in range(xb.size):
                fi = fb[i]
                k += np.uint64(fi)
                b = p if fi != 0 else b
                p += xb[i]
                out[k] = p - b
        tails[c] = p - b
        suspect[c] = sus


@njit(cache=True)
def _next_flag(f, f64, g, end):
    """Smallest global index i in [g, end) with f[i] != 0, else end. Eight flags
    at a time through ``f64`` (f's first 8*len(f64) bytes viewed as uint64
    words): the word holding g is masked below g, zero words are skipped, and
    the first set byte is found with a trailing-zero count (no byte loop, so
    one unpredictable branch per segment). Bytes past the words: one by one."""
    nw = f64.size
    q = g >> 3
    if q < nw:
        w = f64[q] & (np.uint64(0xFFFFFFFFFFFFFFFF) << np.uint64(8 * (g & 7)))
        while w == 0:
            q += 1
            if q >= nw or (q << 3) >= end:
                break
            w = f64[q]
        if q < nw and (q << 3) < end:
            return min((q << 3) + (trailing_zeros(w) >> 3), end)
        g = max(g, nw << 3)
    while g < end:
        if f[g] != 0:
            return g
        g += 1
    return end


@njit(cache=True)
def _sum_range(xs):
    a = np.int64(0)
    for i in range(xs.size):
        a += xs[i]
    return a


@njit(cache=True, parallel=True)
def segsum_int_sparse(x, f, f64, starts, bases, out, heads, tails, mins, maxs):
    """Segment sums of integers for long segments (few flags): find the next
    flag eight at a time, then sum the segment with one vectorized reduction.
    Same ownership and head/tail protocol as ``segsum_int``; sums are exact
    int64, so min/max of the owned complete segments decide overflow."""
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        first = lo + 1 if lo == 0 else lo
        pos = _next_flag(f, f64, first, hi) if hi > lo else hi
        heads[c] = _sum_range(x[lo:pos])
        k = np.uint64(bases[c])
        mn = np.int64(0)
        mx = np.int64(0)
        t = np.int64(0)
        while pos < hi:
            nxt = _next_flag(f, f64, pos + 1, hi)
            v = _sum_range(x[pos:nxt])
            k += np.uint64(1)
            out[k] = v
            if nxt < hi:
                mn = min(mn, v)
                mx = max(mx, v)
            t = v
            pos = nxt
        tails[c] = t
        mins[c] = mn
        maxs[c] = mx


# ----------------------------------------------------------------------------- CSR segment sums

@njit(cache=True, parallel=True)
def indptr_min_step(ip, starts, out):
    """One parallel pass over the offsets: per chunk c of rows [starts[c], starts[c+1]), -1 when
    some step decreases (ip[r+1] < ip[r]), else 0. Compared, never subtracted (a difference of
    offsets near +-2**63 wraps); a branch-free min, so the loop vectorizes and runs at memory
    speed; the caller looks for the position only when a chunk has a decrease."""
    for c in prange(starts.size - 1):
        mn = np.int64(0)
        for r in range(starts[c], starts[c + 1]):
            mn = min(mn, np.int64(ip[r + 1] >= ip[r]) - 1)
        out[c] = mn


@njit(cache=True, parallel=True)
def csr_sums_int(x, indptr, rstarts, share, out, mins, maxs):
    """Segment sums over offsets; rows [rstarts[t], rstarts[t+1]) per task.
    Every row is summed whole by the task that owns it (rows are assigned so
    each task gets about the same number of elements; a row longer than a task's
    share is skipped here and split by the caller into element ranges)."""
    for t in prange(rstarts.size - 1):
        mn = np.int64(0)
        mx = np.int64(0)
        for r in range(rstarts[t], rstarts[t + 1]):
            if indptr[r + 1] - indptr[r] > share:
                continue
            a = sum_i64(x, np.int64(indptr[r]), np.int64(indptr[r + 1]))  # offsets checked by the caller
            out[r] = a
            mn = min(mn, a)
            mx = max(mx, a)
        mins[t] = mn
        maxs[t] = mx


def _make_csr_sums_int_short(parallel):
    @njit(cache=True, parallel=parallel)
    def csr_sums_int_short(x, indptr, rstarts, out, mins, maxs, bad, bufs, suspect):
        """Integer segment sums for short rows: one running prefix sum per task,
        kept in an L1-sized buffer block by block; a row's sum is the prefix at its
        end minus the prefix at the previous row's end. Avoids a loop set-up per
        row, which dominates when rows hold ~10 elements.

        ``bufs`` (tasks x B, row t for task t): int64 prefixes are exact; int32
        prefixes (int8/16/32 values) wrap, take half the instructions, and a row's
        value is its sum modulo 2**32: suspect[t] is set when the task's longest
        row times its max |x| exceeds 2**31 - 1 (the caller then recomputes with
        int64 buffers), so an unflagged task's values and mins/maxs are exact.

        It also checks the offsets it reads (so the caller needs no separate pass):
        bad[t] >= 0 when task t saw a decreasing offset, else -1; buffer reads are
        clamped, so unsorted offsets give garbage, never a wild read, and the
        caller raises (naming the position after a separate search)."""
        B = bufs.shape[1]
        parallel  # noqa: B018 (a closure cell: one cache entry per variant)
        for t in prange(rstarts.size - 1):
            r0, r1 = rstarts[t], rstarts[t + 1]
            ip = indptr[r0:r1 + 1]
            os = out[r0:r1]
            nr = r1 - r0
            e0 = ip[0]
            e1 = ip[nr]
            if e0 < 0 or e1 > x.size or e1 < e0:  # offsets out of order: no read outside x
                for q in range(nr):
                    os[q] = 0
                mins[t] = 0
                maxs[t] = 0
                bad[t] = r0
                continue
            buf = bufs[t]
            mn = np.int64(0)
            xmax = np.int64(0)
            lmax = np.int64(0)
            mx = np.int64(0)
            first_bad = -1
            unsorted = False
            r = 0
            while r < nr and ip[r + 1] == e0:  # leading empty rows
                os[r] = 0
                r += 1
            prev = np.int64(0)
            p = np.int64(0)
            last = e0
            for b0 in range(e0, e1, B):
                b1 = min(b0 + B, e1)
                prefetch(x, b1, min(b1 + B, e1))  # the next block's values arrive while this one is worked
                p, bx = block_prefix(x, b0, b1, buf, p)  # the block's running prefix
                xmax = max(xmax, bx)
                r, prev, last, u, mn, mx, ln = rows_from_prefix(ip, r, nr, b0, b1, buf, prev, os, last, mn, mx)
                lmax = max(lmax, ln)
                unsorted |= u != 0
                while r < nr and ip[r + 1] <= b1:  # the rows the eight-row steps left
                    end = ip[r + 1]
                    unsorted |= end < last  # branch-free: the caller finds the position
                    lmax = max(lmax, end - last)
                    last = end
                    j = min(np.uint64(end - 1 - b0), np.uint64(B - 1))  # clamped (negative -> huge -> B-1)
                    v = same_width(buf, buf[j] - prev)
                    os[r] = v
                    prev += v
                    mn = min(mn, v)
                    mx = max(mx, v)
                    r += 1
            for q in range(r, nr):  # rows the block loop never reached: only with unsorted offsets
                if first_bad < 0 and (ip[q + 1] < ip[q] or ip[q + 1] > e1 or e1 < e0):
                    first_bad = r0 + q
                os[q] = 0
            if (e1 < e0 or unsorted) and first_bad < 0:
                first_bad = r0
            mins[t] = mn
            maxs[t] = mx
            bad[t] = first_bad
            suspect[t] = lmax * xmax > I32_MAX
    return csr_sums_int_short


# tasks on threads, and the serial twin for one task (its first call compiles no parfor)
csr_sums_int_short = variant(_make_csr_sums_int_short, True, name="csr_sums_int_short")
csr_sums_int_short_serial = variant(_make_csr_sums_int_short, False, name="csr_sums_int_short_serial")


# ----------------------------------------------------------------------------- compress


# ----------------------------------------------------------------------------- exact checks (rare path)
# An exact running sum is kept as hi * 2**64 + a, with a the wrapped int64 word
# and hi counting the wrap-arounds; a value fits int64 iff hi == 0.

@njit(cache=True)
def _add_exact(hi, a, v):
    # unsigned add: a signed add may be assumed not to overflow by the optimizer
    r = np.int64(np.uint64(a) + np.uint64(v))
    if a >= 0 and v >= 0 and r < 0:
        hi += 1
    elif a < 0 and v < 0 and r >= 0:
        hi -= 1
    return hi, r


@njit(cache=True)
def exact_segscan_range(x, f, exclusive, lo_lim, hi_lim):
    """True iff every (exclusive or inclusive) segmented-scan output lies in
    [lo_lim, hi_lim] (exact; ``f`` all-zero gives the plain scan)."""
    hi = np.int64(0)
    a = np.int64(0)
    for i in range(x.size):
        if i > 0 and f[i] != 0:
            hi = np.int64(0)
            a = np.int64(0)
        if exclusive and (hi != 0 or a < lo_lim or a > hi_lim):
            return False
        hi, a = _add_exact(hi, a, np.int64(x[i]))
        if not exclusive and (hi != 0 or a < lo_lim or a > hi_lim):
            return False
    return True


@njit(cache=True)
def exact_segsum_range(x, f, lo_lim, hi_lim):
    """True iff every segment sum lies in [lo_lim, hi_lim] (exact)."""
    hi = np.int64(0)
    a = np.int64(0)
    for i in range(x.size):
        if i > 0 and f[i] != 0:
            if hi != 0 or a < lo_lim or a > hi_lim:
                return False
            hi = np.int64(0)
            a = np.int64(0)
        hi, a = _add_exact(hi, a, np.int64(x[i]))
    return hi == 0 and a >= lo_lim and a <= hi_lim


@njit(cache=True)
def exact_csr_range(x, indptr, lo_lim, hi_lim):
    """True iff every segment sum over the offsets lies in [lo_lim, hi_lim] (exact)."""
    for r in range(indptr.size - 1):
        hi = np.int64(0)
        a = np.int64(0)
        for i in range(indptr[r], indptr[r + 1]):
            hi, a = _add_exact(hi, a, np.int64(x[i]))
        if hi != 0 or a < lo_lim or a > hi_lim:
            return False
    return True


# ----------------------------------------------------------------------------- rows (scan along the last axis)

@njit(cache=True)
def _scan_row_seq(xr, orow, exclusive, check64):
    """One row scanned in int64 words, tracking (min, max of the words,
    int64 overflow seen): exact, checked in index order, so the first int64
    overflow is seen exactly (every earlier word was exact)."""
    a = np.int64(0)
    mn = np.int64(0)
    mx = np.int64(0)
    bad = np.int64(0)
    last = xr.size - 1
    for i in range(xr.size):
        v = np.int64(xr[i])
        s = a + v
        if check64 and (i < last or not exclusive):  # an exclusive scan never writes the row total
            bad |= (a ^ s) & (v ^ s)
        r = a if exclusive else s
        orow[i] = r
        mn = min(mn, r)
        mx = max(mx, r)
        a = s
    return mn, mx, bad < 0


@njit(cache=True)
def _scan_row_or(xr, orow, exclusive):
    """One row scanned in int64 words; returns the OR of (word + 2**31) over the
    words written: a bit at or above bit 32 is set iff some word leaves int32
    (two operations per element where a min/max pair takes four)."""
    a = np.int64(0)
    b = np.int64(0)
    off = np.int64(2**31)
    if exclusive:
        for i in range(xr.size):
            orow[i] = a
            b |= a + off
            a += np.int64(xr[i])
    else:
        for i in range(xr.size):
            a += np.int64(xr[i])
            orow[i] = a
            b |= a + off
    return b


@njit(cache=True)
def _scan_row_plain(xr, orow, exclusive):
    a = np.int64(0)
    if exclusive:
        for i in range(xr.size):
            orow[i] = a
            a += np.int64(xr[i])
    else:
        for i in range(xr.size):
            a += np.int64(xr[i])
            orow[i] = a


@njit(cache=True, parallel=True)
def rows_scan_int(x, out, exclusive, mode, lo, hi, ovf):
    """Row-wise scans accumulated in int64 words, stored into ``out`` (a
    narrowing store wraps, two's complement). mode 0: no check; mode 1:
    ovf[r] = a word of row r leaves int32; mode 2: lo/hi[r] = min/max of the
    words and ovf[r] = an int64 word overflowed (``_scan_row_seq``)."""
    for r in prange(x.shape[0]):
        xr = x[r]
        orow = out[r]
        if mode == 2:
            mn, mx, bad = _scan_row_seq(xr, orow, exclusive, True)
            lo[r] = mn
            hi[r] = mx
            ovf[r] = bad
        elif mode == 1:
            ovf[r] = (_scan_row_or(xr, orow, exclusive) >> 32) != 0
        else:
            _scan_row_plain(xr, orow, exclusive)


@njit(cache=True, parallel=True)
def rows_scan_float(x, out, exclusive, zero):
    """Row-wise scans accumulated in the result dtype (that of ``zero``), in index order."""
    for r in prange(x.shape[0]):
        xr = x[r]
        orow = out[r]
        a = zero
        if exclusive:
            for i in range(xr.size):
                orow[i] = a
                a += xr[i]
        else:
            for i in range(xr.size):
                a += xr[i]
                orow[i] = a
