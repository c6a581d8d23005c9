"""Numba kernels of the SpMV of a stencil matrix (``mmvref._fast.sparse.ops``: ``stencil_of``,
``StencilSpmv``): a CSR matrix whose rows, most of them, hold entries at one pattern of offsets
from the diagonal, in one order (row i: columns i + off[0], ..., i + off[K-1]), as a finite-
difference stencil gives (2-D 5-point, 3-D 7-point, 9- and 27-point, tridiagonal, banded).

Why: such a row's columns are known without reading them. The CSR kernel reads a value and a
column index per entry, and its rows are summed one at a time; here a run of stencil rows reads
its values and, for each offset, x at consecutive positions, and LLVM vectorizes the loop over
the rows (the values of W rows by wide loads and shuffles of an interleaved group, x by
contiguous loads). 2-D Poisson matrix of 1e6 rows, 2 threads, Zen 5 (ms, float32 / float64):
CSR kernel 1.56-1.68 / 2.29-2.45, this kernel 0.42-0.46 / 1.26-1.31; compiled for haswell
0.57 / 1.33, for the x86-64 baseline 0.69 / 1.45.

Rows (``stencil_rows``): cut into equal blocks, one task each; within a block, the stencil runs
(``runs``: maximal ranges of consecutive stencil rows, found once by ``stencil_match``) go
through ``_stencil_run``, specialized per pattern length (the pattern is a tuple), and the other
rows (a grid's boundary rows) through the CSR kernel's ``_scalar_rows``.

Constant coefficients (a prepared matrix's products, ``prepared_stencil_rows``): where every
stencil row holds the same K values, bit for bit (the finite-difference matrices of a constant-
coefficient operator, as the Poisson matrices), the first product finds it and the later ones
read the K values once (``_stencil_run_constant``) instead of K values a row: a stencil row then
reads x alone. 2-D Poisson matrix of 1e6 rows, 2 threads, Zen 3 (ms, float32 / float64): 0.60 /
1.38 reading the rows' values, 0.16 / 0.27-0.31 with the constant ones.

Summation order: every row, whichever code computes it, in ``_scalar_rows``'s order: products
k = 0, 1, 2, 3 of each group of four into four accumulators z0..z3 (starting at +0.0), the
remaining < 4 products into z0 in order, then (z0 + z1) + (z2 + z3); no fused multiply-add and no
reassociation (Numba compiles these loops without fast-math flags, and vectorizing across rows
keeps each row's order). So a row's bits depend on its entries and x alone, not on the thread
count or the blocks.

``stencil_match`` checks the structure as it goes (offsets in order and within the entries, a
matched row's columns in [0, n), the other rows' largest column): the caller falls back to the CSR
kernel, which raises the error, on a flag, so a bad matrix is never read out of bounds here.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from .._variants import variant
from ._portable_spmv import _scalar_rows

__all__ = ["stencil_rows", "prepared_stencil_rows", "stencil_match", "stencil_sample"]

_U = np.uint64


@njit(cache=True)
def _stencil_run(data, x, y, p, s, e, off):
    """y[i] for the stencil rows s <= i < e, whose values start at data[p] (K = len(off) a row, in
    order), row i's k-th at column i + off[k]. ``off`` is a tuple: its length, so the loop over a
    row's terms, is a compile-time constant (one specialization per pattern length), and LLVM
    unrolls it and vectorizes the loop over rows (the values by wide loads and shuffles of an
    interleaved group, x by contiguous loads). Unsigned positions: no negative-index wrap-around
    per access (a negative offset wraps to the same position, as every column exists)."""
    K = len(off)
    K4 = K - K % 4
    zero = x.dtype.type(0)
    q = _U(p)
    for i in range(_U(s), _U(e)):
        z0 = zero
        z1 = zero
        z2 = zero
        z3 = zero
        for k in range(0, K4, 4):
            z0 += data[q + _U(k)] * x[i + _U(off[k])]
            z1 += data[q + _U(k + 1)] * x[i + _U(off[k + 1])]
            z2 += data[q + _U(k + 2)] * x[i + _U(off[k + 2])]
            z3 += data[q + _U(k + 3)] * x[i + _U(off[k + 3])]
        for k in range(K4, K):
            z0 += data[q + _U(k)] * x[i + _U(off[k])]
        y[i] = (z0 + z1) + (z2 + z3)
        q += _U(K)


@intrinsic
def _coefficients(typingctx, coef, off):
    """The first len(off) elements of the contiguous 1-D array ``coef`` as a tuple (its length a
    compile-time constant: the values live in registers through a loop that stores to another array)."""
    K = len(off.types)
    if not (isinstance(coef, types.Array) and coef.ndim == 1 and coef.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        vals = [builder.load(builder.gep(arr.data, [ir.IntType(64)(k)])) for k in range(K)]
        return context.make_tuple(builder, sig.return_type, vals)

    return types.UniTuple(coef.dtype, K)(coef, off), codegen


@njit(cache=True)
def _stencil_run_constant(coef, x, y, s, e, off):
    """``_stencil_run`` where every row of every run holds the same K values, ``coef`` (found by
    a checking product: ``stencil_rows``): the same products and sums in the same order, with the values read once
    instead of once a row, so a row reads x alone. The K values are held in locals before the loop
    (``coef[k]`` inside it is reloaded on every row, as LLVM cannot tell that y does not alias it:
    2-D Poisson, 1e6 rows, 2 threads, Zen 3: 0.23 ms float64 and 0.11 ms float32, against 1.36 and
    0.55 ms for ``_stencil_run`` and 4.0 / 3.4 ms for scipy)."""
    K = len(off)
    K4 = K - K % 4
    zero = x.dtype.type(0)
    c = _coefficients(coef, off)
    for i in range(_U(s), _U(e)):
        z0 = zero
        z1 = zero
        z2 = zero
        z3 = zero
        for k in range(0, K4, 4):
            z0 += c[k] * x[i + _U(off[k])]
            z1 += c[k + 1] * x[i + _U(off[k + 1])]
            z2 += c[k + 2] * x[i + _U(off[k + 2])]
            z3 += c[k + 3] * x[i + _U(off[k + 3])]
        for k in range(K4, K):
            z0 += c[k] * x[i + _U(off[k])]
        y[i] = (z0 + z1) + (z2 + z3)


@njit(cache=True)
def _first_run_after(runs, r0):
    """The index of the first run (``runs``: flat (start, end) pairs, ascending) that ends after
    row r0 (the number of runs if none does)."""
    lo = 0
    hi = runs.size // 2
    while lo < hi:
        mid = (lo + hi) >> 1
        if runs[2 * mid + 1] <= r0:
            lo = mid + 1
        else:
            hi = mid
    return lo


#: rows a checking product (``stencil_rows`` with ``miss_out``) computes before it checks their values,
#: while they are still in cache
CHECK_ROWS = 2048


@njit(cache=True)
def _values_differ(bits, a, rows, K, ref):
    """Whether any of ``rows`` stencil rows whose values start at bits[a] (K a row, in row order)
    holds other values than ``ref``, bit for bit: the first row against ``ref``, each later value
    against the one K entries before it (the same position in the row before), in one flat loop
    without an early exit, which LLVM vectorizes."""
    miss = bits[0] ^ bits[0]
    for k in range(K):
        miss |= bits[a + k] ^ ref[k]
    for q in range(_U(a), _U(a + (rows - 1) * K)):
        miss |= bits[q + _U(K)] ^ bits[q]
    return miss != 0


def _make_stencil_rows(prepared):
    """The stencil SpMV kernel: ``spmv``'s (``prepared`` False), or a prepared matrix's, which can
    also look for constant values and read them once (``coef``, ``miss_out``). Two kernels, so
    that ``spmv``'s first call does not compile the prepared matrix's paths (with an empty Numba
    cache, 2-vCPU Zen 3: ``spmv`` of a 2-D Poisson matrix 4.7 s with its own kernel, 6.0 s with
    one kernel for both; a prepared matrix's first product then 2.1 s more. A task body compiled
    outside the parfor passes, ``_variants.TaskBody``, made both slower here: 5.1 and 2.6 s)."""

    def stencil_rows(indptr, indices, data, x, y, runs, blocks, off, coef, bits, ref, miss_out):
        """y = A x for a stencil matrix: rows blocks[c] .. blocks[c+1]-1 per task; the rows inside
        the runs (``runs``: flat (start, end) pairs, ascending) by ``_stencil_run``, the others by
        the CSR kernel's ``_scalar_rows``. The structure was checked (``stencil_match``).

        A prepared matrix's kernel: where ``coef`` is not empty, it holds the K values every run
        row holds, and the runs go through ``_stencil_run_constant``. Where ``miss_out`` is not
        empty (its first product), the product also looks whether every run row holds the values
        ``ref``: ``bits`` is ``data`` viewed as unsigned integers of its width, so -0.0 differs
        from +0.0 and a NaN matches only its own bits (the products of equal bits are equal bits),
        and block c sets miss_out[c] where one of its run rows differs. The values are read again
        CHECK_ROWS rows at a time, right after their products. ``spmv``'s kernel takes the same
        arguments and reads neither."""
        nruns = runs.size // 2
        K = len(off)
        check = miss_out.size > 0
        for c in prange(blocks.size - 1):
            r0 = blocks[c]
            r1 = blocks[c + 1]
            j = _first_run_after(runs, r0)
            t = r0
            miss = False
            while t < r1:
                s = runs[2 * j] if j < nruns else r1
                if s > t:  # rows outside the runs
                    g = s if s < r1 else r1
                    _scalar_rows(indptr, indices, data, x, y, t, g, np.int64(indptr[t]), np.int64(indptr[g]))
                    t = g
                    continue
                e = runs[2 * j + 1]
                e = e if e < r1 else r1
                if prepared:
                    if coef.size:
                        _stencil_run_constant(coef, x, y, t, e, off)
                    elif check:
                        for u in range(t, e, CHECK_ROWS):
                            v = min(u + CHECK_ROWS, e)
                            a = np.int64(indptr[u])
                            _stencil_run(data, x, y, a, u, v, off)
                            miss |= _values_differ(bits, a, v - u, K, ref)
                    else:
                        _stencil_run(data, x, y, np.int64(indptr[t]), t, e, off)
                else:
                    _stencil_run(data, x, y, np.int64(indptr[t]), t, e, off)
                t = e
                j += 1
            if check:
                miss_out[c] = miss

    return njit(cache=True, parallel=True)(stencil_rows)


stencil_rows = variant(_make_stencil_rows, False, name="stencil_rows")
prepared_stencil_rows = variant(_make_stencil_rows, True, name="prepared_stencil_rows")


#: ``stencil_match`` tries this many rows at once as one piece of a run (``_whole_piece``), then a
#: piece that is not whole SUB_PIECE rows at a time, then row by row. 2-D Poisson matrix of 1e6
#: rows (a boundary row every 1,000), 2 threads: 0.26-0.30 ms for 128 / 16, 0.28-0.29 for 64 / 8,
#: 0.30-0.33 for 256 / 8; 0.46-0.53 ms with 64 and no sub-pieces before the loops dropped their
#: signed indices
PIECE = 128
SUB_PIECE = 16


@njit(cache=True)
def _whole_piece(indptr, indices, i0, i1, off, omin, omax, n):
    """Whether rows i0 .. i1-1 all hold the pattern ``off`` (a tuple) with every column in
    [0, n): their offsets step by K from indptr[i0] (within the entries), the first row's K
    columns are i0 + off[k], and each later entry's column is one more than the entry K before it
    (row i + 1's k-th column is row i's plus one). Loops without an early exit over a stretch of
    indptr and one of indices, with unsigned indices (a signed one costs a wraparound test per load,
    which kept LLVM from vectorizing: 0.18 ms for the indptr of a 1e6-row matrix against 0.04)."""
    K = len(off)
    nnz = indices.size
    a0 = np.int64(indptr[i0])
    if a0 < 0 or a0 + (i1 - i0) * K > nnz or i0 + omin < 0 or i1 - 1 + omax >= n:
        return False
    miss = np.int64(0)
    for i in range(_U(i0 + 1), _U(i1 + 1)):
        miss |= np.int64(indptr[i]) ^ (a0 + (np.int64(i) - i0) * K)
    for k in range(K):
        miss |= np.int64(indices[a0 + k]) ^ (i0 + off[k])
    if miss != 0:
        return False
    step = indices[0] - indices[0]  # (the difference's type: no widening of every load to int64)
    for q in range(_U(a0), _U(a0 + (i1 - i0 - 1) * K)):
        step |= (indices[q + _U(K)] - indices[q]) ^ 1
    return step == 0


@njit(cache=True)
def _rows_one_by_one(indptr, indices, r0, r1, off, omin, omax, n, runs, slot, cnt, in_run, umax):
    """``stencil_match``'s rows r0 .. r1-1 one at a time: a matched row extends or opens the run,
    another closes it and counts its columns into ``umax``. Returns (cnt, in_run, umax, bad)."""
    K = len(off)
    nnz = indices.size
    b = np.int64(indptr[r0])
    for i in range(r0, r1):
        a = b
        b = np.int64(indptr[i + 1])
        if a > b or a < 0 or b > nnz:
            return cnt, in_run, umax, True
        match = b - a == K and i + omin >= 0 and i + omax < n
        if match:
            miss = np.int64(0)
            for k in range(K):
                miss |= np.int64(indices[a + k]) ^ (i + off[k])
            match = miss == 0
        if match:
            if not in_run:
                runs[slot + 2 * cnt] = i
                in_run = True
        else:
            if in_run:
                runs[slot + 2 * cnt + 1] = i
                cnt += 1
                in_run = False
            for q in range(a, b):
                u = _U(indices[q]) if indices[q] >= 0 else _U(0xFFFFFFFFFFFFFFFF)
                umax = u if u > umax else umax
    return cnt, in_run, umax, False


@njit(cache=True, parallel=True)
def stencil_match(indptr, indices, off, n, blocks, runs, counts, umax_out, bad_out):
    """Which rows are stencil rows of ``off`` (a tuple, as ``_stencil_run``'s: K = len(off) entries,
    row i's k-th at column i + off[k], every one in [0, n)), as runs: block c (rows blocks[c] ..
    blocks[c+1]-1) writes its maximal runs as (start, end) pairs from runs[2 blocks[c]] on, counts[c]
    of them (a block of b rows has at most (b + 1) // 2 runs: 2 b slots suffice). Rows are tried
    PIECE at a time (``_whole_piece``), a piece that is not whole SUB_PIECE at a time, row by row
    where a sub-piece is not whole (``_rows_one_by_one``). The structure is checked on the way:
    bad_out[c] an offset out of order or out of [0, nnz], umax_out[c] the largest column (unsigned:
    a negative one is huge) of the block's rows that are not stencil rows. A run may continue into
    the next block (the caller joins them)."""
    K = len(off)
    omin = off[0]
    omax = off[0]
    for k in range(K):
        omin = min(omin, off[k])
        omax = max(omax, off[k])
    for c in prange(blocks.size - 1):
        r0 = blocks[c]
        r1 = blocks[c + 1]
        slot = 2 * r0
        cnt = 0
        umax = _U(0)
        bad = False
        in_run = False
        p0 = r0
        while p0 < r1 and not bad:
            p1 = min(p0 + PIECE, r1)
            if _whole_piece(indptr, indices, p0, p1, off, omin, omax, n):
                if not in_run:
                    runs[slot + 2 * cnt] = p0
                    in_run = True
                p0 = p1
                continue
            s0 = p0
            while s0 < p1 and not bad:
                s1 = min(s0 + SUB_PIECE, p1)
                if _whole_piece(indptr, indices, s0, s1, off, omin, omax, n):
                    if not in_run:
                        runs[slot + 2 * cnt] = s0
                        in_run = True
                else:
                    cnt, in_run, umax, bad = _rows_one_by_one(indptr, indices, s0, s1, off, omin, omax, n,
                                                              runs, slot, cnt, in_run, umax)
                s0 = s1
            p0 = p1
        if in_run:
            runs[slot + 2 * cnt + 1] = r1
            cnt += 1
        counts[c] = cnt
        umax_out[c] = umax
        bad_out[c] = bad


@njit(cache=True)
def stencil_sample(indptr, indices, n, samples, max_terms):
    """The pattern (offsets of a row's entries from the diagonal, in entry order) that at least
    half of ``samples`` evenly spaced rows hold, else an empty array. The candidates are the
    patterns of the first samples/2 + 1 sampled rows (a pattern held by half of the samples is held
    by one of them). Reads only the sampled rows, checking their offsets first (the matrix is not
    validated yet)."""
    m = indptr.size - 1
    nnz = indices.size
    none = np.empty(0, np.int64)
    if m < 1 or samples < 1:
        return none
    rows = np.empty(samples, np.int64)
    for s in range(samples):
        rows[s] = (m - 1) * s // max(samples - 1, 1)
    need = (samples + 1) // 2
    for cand in range(min(samples, samples // 2 + 1)):
        i = rows[cand]
        a = np.int64(indptr[i])
        b = np.int64(indptr[i + 1])
        if a < 0 or b > nnz or b - a < 1 or b - a > max_terms:
            continue
        off = np.empty(b - a, np.int64)
        for k in range(b - a):
            off[k] = np.int64(indices[a + k]) - i
        hits = 0
        for s in range(samples):
            i = rows[s]
            a = np.int64(indptr[i])
            b = np.int64(indptr[i + 1])
            if a < 0 or b > nnz or b - a != off.size:
                continue
            ok = True
            for k in range(off.size):
                if np.int64(indices[a + k]) != i + off[k]:
                    ok = False
                    break
            if ok:
                hits += 1
        if hits >= need:
            return off
    return none
