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

Specializations (the cold start: what a first call compiles). The reduction, whether args are
kept, the feature block width, whether positions are read through ``rows`` and (integers)
checked arithmetic are constants of each kernel, not runtime codes: ``csr_reduce_float``,
``csr_reduce_int``, ``csr_reduce_column_float``, ``scatter_direct_float`` and
``scatter_private_float`` return the kernel made for them on first use, a closure over them
(``cache=True``: one cache entry per closure value), whose other branches Numba prunes before
typing, so a call compiles only the loop it runs. A kernel is a parallel loop over tasks calling
its serial task body (``_variants.TaskBody``): the body is compiled once, outside the parfor machinery; each
kernel has a serial twin (``<name>__serial``) running the same tasks in turn, taken below
``_variants.PARALLEL_MIN`` elements (the same bits; its first call compiles no parfor). The
features are reduced in blocks of one vector width W (``block_widths(F)``: the widest of 32, 16,
8, 4 that F holds, or F itself below 4), then, where features are left, one block of the
narrowest width Wt that holds them, ending at F: it may recompute a few features of the block
before, with the same values in the same order, so the results are those of disjoint blocks, at
most two vector loops per kernel, and no scalar tail. Small validation and sorting steps
(``coo_bounds``, ``counting_sort``) take numpy below a size where it is as fast.

min/max: ties keep the lowest position, a NaN wins over every number and the first NaN stays
(NaN propagates, as torch). Empty segments: 0 (prod: 1), arg = ``empty_arg``.

The offsets need not have been checked: a segment without 0 <= lo <= hi <= E is not read (its
result is 0) and sets bad[t] of its task (every pair valid <=> offsets in [0, E] and
non-decreasing), so the caller's order check is folded into the reduction's pass.

Integers accumulate in int64 words (finished in the vector registers: a mean floor-divided,
the words stored at the result's width). ``ranges`` receives per task the smallest and largest
int64 result written, so the caller decides int32 overflow exactly; ``flags`` receives per task
bit 1 when an int64 sum or product may have wrapped (checked scalar arithmetic in the kernels
made with ``check``).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit, prange

from .._variants import TaskBody

from ._portable_nd_vec import MAX, MEAN, MIN, PROD, ROW_STEPS, ROW_W, SUM, vextreme_into, vreduce, vrow

REDUCE_CODES = {"sum": SUM, "add": SUM, "mean": MEAN, "min": MIN, "max": MAX, "prod": PROD, "mul": PROD}

#: the vector widths of the feature blocks (``block_widths``)
WIDTHS = (32, 16, 8, 4)

_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min


def block_widths(F):
    """(W, Wt): the feature blocks of the N-d kernels for F features. W: the widest of ``WIDTHS`` not
    above F, or F itself below 4 (one block of 1, 2 or 3 lanes); blocks of W from feature 0 while
    they fit. Wt: 0 when they cover F, else the width of one last block ending at F, the narrowest
    of ``WIDTHS`` holding the F mod W features left (it may overlap the block before)."""
    F = int(F)
    W = next((w for w in WIDTHS if F >= w), max(F, 1))
    rem = F % W
    return W, (min(w for w in WIDTHS if w >= rem) if rem else 0)


def _key(op, want_arg):
    """(op, want_arg) as kernel constants: an arg is only kept by min/max."""
    op = int(op)
    if op not in (SUM, MEAN, MIN, MAX, PROD):
        raise ValueError(f"unknown reduction code {op}")
    return op, bool(want_arg) and op in (MIN, MAX)


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


@njit(cache=True, inline="always")
def _reduce_int_checked(x, F, rows, use_rows, xb, lo, hi, op, acc):
    """One non-empty segment, integers, in checked int64 arithmetic into the words acc[0:F] (op:
    SUM, or PROD); returns 1 when a sum/product left int64 (the caller then decides exactly or
    raises), else 0. A product's feature that left int64 is not reported when a zero factor
    makes its true product 0. x flat: features xb + r*F + [0, F) of the rows r."""
    wrapped = 0
    r = rows[lo] if use_rows else lo
    xr = x[xb + r * F:xb + (r + 1) * F]  # a row through a slice: its index k is known non-negative
    for k in range(F):
        acc[k] = xr[k]
    if op == PROD:
        # int64 words wrap exactly modulo 2**64
        ovf = np.zeros(F, np.bool_)
        zero = np.zeros(F, np.bool_)
        for k in range(F):
            zero[k] = acc[k] == 0
        for e in range(lo + 1, hi):
            r = rows[e] if use_rows else e
            xr = x[xb + r * F:xb + (r + 1) * F]
            for k in range(F):
                v = np.int64(xr[k])
                p = acc[k]
                if v == 0:
                    zero[k] = True
                elif p != 0 and _mul_leaves_int64(p, v):
                    ovf[k] = True
                acc[k] = np.int64(np.uint64(p) * np.uint64(v))  # wraps modulo 2**64, no signed overflow
        for k in range(F):
            if ovf[k] and not zero[k]:
                wrapped = 1
    else:
        for e in range(lo + 1, hi):
            r = rows[e] if use_rows else e
            xr = x[xb + r * F:xb + (r + 1) * F]
            for k in range(F):
                v = np.int64(xr[k])
                s = _wrapping_add(acc[k], v)
                if ((acc[k] ^ s) & (v ^ s)) < 0:  # both operands differ in sign from the sum
                    wrapped = 1
                acc[k] = s
    return wrapped


@njit(cache=True, inline="always")
def _row(x, lo, hi, op):
    """One column: the reduction of x[lo:hi] (non-empty; ``vrow`` reads x[lo:lo + ROW_STEPS *
    ROW_W] and x[:hi + ROW_W - 1], which must exist). A mean is the sum divided by the count,
    rounded once; min/max give the bits ``_row_scalar`` gives (NaN propagates; of tied zeros,
    the first)."""
    if op == SUM:
        return vrow(x, lo, hi, 0)
    if op == MEAN:
        return vrow(x, lo, hi, 0) / x.dtype.type(hi - lo)
    if op == PROD:
        return vrow(x, lo, hi, 4)
    m = vrow(x, lo, hi, 2 if op == MIN else 3)
    if m == 0:  # +0.0 and -0.0 tie: the first zero's sign, as the in-order rule (``_row_scalar``) keeps
        for e in range(lo, hi):
            if x[e] == 0:
                return x[e]
    return m


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


# ----------------------------------------------------------------------------- specialized kernels
# A kernel is a parallel loop over tasks (``prange``) calling the serial task body made for its
# constants (``_variants.TaskBody``): compiled once, outside the parfor machinery, and linked into
# the kernel, whose cache entry holds both.


def _compiled(name, body, make_kernel):
    """The kernels of ``make_kernel(TaskBody(name, body))``: (parallel, serial), both ``cache=True``,
    named ``name`` and ``name + "__serial"``: the names of their cache files and the module
    attributes under which they are listed (so that tools/cold_start.py counts them). Both run
    the same tasks through the same body, so they give the same bits; the serial one runs them in
    turn, for inputs too small to gain from threads, and its compile skips the parfor passes
    (a few tenths of a second per kernel: most first calls are on small inputs)."""
    task_body = TaskBody(name, body)
    made = []
    for kname, parallel in ((name, True), (name + "__serial", False)):
        py_func = make_kernel(task_body)  # a function object per kernel: the cache keys them by name
        py_func.__name__ = py_func.__qualname__ = kname
        made.append(njit(cache=True, parallel=parallel)(py_func))
        globals()[kname] = made[-1]
    return tuple(made)


def _column_float_body(op):
    def body(t, xf, E, bounds, t_b, t_lo, t_hi, o, bad):
        """Task t of ``csr_reduce_column_float``."""
        N = bounds.size - 1
        v0 = o.dtype.type(1) if op == PROD else o.dtype.type(0)
        row_end = xf.size - (ROW_W - 1)  # vrow's reads stay inside x (its docstring)
        head_end = xf.size - ROW_STEPS * ROW_W
        uE = np.uint64(E)
        b = t_b[t]
        wrong = False
        for n in range(t_lo[t], t_hi[t]):
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
    return body


def _column_float_kernel(body):
    def csr_reduce_column_float(x, E, bounds, t_b, t_lo, t_hi, out, bad):
        """``csr_reduce_float`` for one column read in order, without args (x: [B, E] and out: [B, N],
        flat): each segment in vector steps of ROW_W positions (``vrow``; lanes combined as a tree,
        so a sum is reassociated, within its error model). The last segments of x, whose steps
        would read past its end, take a scalar loop (positions in order). Offsets: see the module."""
        for t in prange(t_b.size):
            body(np.int64(t), x, E, bounds, t_b, t_lo, t_hi, out, bad)
    return csr_reduce_column_float


def _float_body(op, want_arg, W, Wt, use_rows):
    def body(t, xf, E, F, bounds, rows, t_b, t_lo, t_hi, o, a, empty_arg, bad):
        """Task t of ``csr_reduce_float``."""
        N = bounds.size - 1
        v0 = o.dtype.type(1) if op == PROD else o.dtype.type(0)
        uE = np.uint64(E)
        b = t_b[t]
        xb = b * E * F
        wrong = False
        for n in range(t_lo[t], t_hi[t]):
            lo, hi = bounds[n], bounds[n + 1]
            ob = (b * N + n) * F
            if np.uint64(lo) < np.uint64(hi) and np.uint64(hi) <= uE:  # 0 <= lo < hi <= E
                k = 0
                while k + W <= F:  # blocks of W features, then one of Wt ending at F (see the module)
                    vreduce(xf, rows, lo, hi, F, xb + k, o, ob + k, a, None, op, W, use_rows, want_arg)
                    k += W
                if Wt and k < F:
                    k = F - Wt
                    vreduce(xf, rows, lo, hi, F, xb + k, o, ob + k, a, None, op, Wt, use_rows, want_arg)
            else:
                wrong |= hi != lo or np.uint64(hi) > uE
                o[ob:ob + F] = v0
                if want_arg:
                    a[ob:ob + F] = empty_arg
        bad[t] = wrong
    return body


def _float_kernel_of(body):
    def csr_reduce_float(x, E, F, bounds, rows, t_b, t_lo, t_hi, out, arg, empty_arg, bad):
        """Float segments: task t reduces segments t_lo[t]..t_hi[t]-1 of batch t_b[t];
        segment n spans positions bounds[n]..bounds[n+1]-1 (read through ``rows`` when
        ``use_rows``). x: [B, E, F] (F >= W); out: [B, N, F] of x's dtype; arg: the same shape
        (int64) when want_arg, else empty; all three flat (C order). Offsets: see the module
        (bad[t])."""
        for t in prange(t_b.size):
            body(np.int64(t), x, E, F, bounds, rows, t_b, t_lo, t_hi, out, arg, empty_arg, bad)
    return csr_reduce_float


def _int_body(op, want_arg, W, Wt, check, use_rows):
    cop = PROD if op == PROD else SUM  # the checked path: a mean's sum, floor-divided below

    def body(t, xf, E, F, bounds, rows, t_b, t_lo, t_hi, o, a, empty_arg, bad, ranges, flags):
        """Task t of ``csr_reduce_int``: ranges[t] = (min, max) of the int64 results."""
        N = bounds.size - 1
        uE = np.uint64(E)
        b = t_b[t]
        xb = b * E * F
        mm = ranges[t]
        mm[0] = _I64_MAX
        mm[1] = _I64_MIN
        if check:  # checked scalar int64 arithmetic into these words, then stored
            acc = np.empty(F, np.int64)
        fl = 0
        wrong = False
        for n in range(t_lo[t], t_hi[t]):
            lo, hi = bounds[n], bounds[n + 1]
            ob = (b * N + n) * F
            if np.uint64(lo) < np.uint64(hi) and np.uint64(hi) <= uE:  # 0 <= lo < hi <= E
                if check:
                    fl |= _reduce_int_checked(xf, F, rows, use_rows, xb, lo, hi, cop, acc)
                    c = np.int64(hi - lo)
                    orow = o[ob:ob + F]
                    for k in range(F):
                        v = acc[k] // c if op == MEAN else acc[k]
                        mm[0] = min(mm[0], v)
                        mm[1] = max(mm[1], v)
                        orow[k] = v
                else:  # blocks of W features, the last one ending at F (see the module), finished in registers
                    k = 0
                    while k + W <= F:
                        vreduce(xf, rows, lo, hi, F, xb + k, o, ob + k, a, mm, op, W, use_rows, want_arg)
                        k += W
                    if Wt and k < F:
                        k = F - Wt
                        vreduce(xf, rows, lo, hi, F, xb + k, o, ob + k, a, mm, op, Wt, use_rows, want_arg)
            else:
                wrong |= hi != lo or np.uint64(hi) > uE
                v0 = 1 if op == PROD else 0
                mm[0] = min(mm[0], v0)
                mm[1] = max(mm[1], v0)
                o[ob:ob + F] = v0
                if want_arg:
                    a[ob:ob + F] = empty_arg
        flags[t] = fl
        bad[t] = wrong
    return body


def _int_kernel_of(body):
    def csr_reduce_int(x, E, F, bounds, rows, t_b, t_lo, t_hi, out, arg, empty_arg, bad, ranges, flags):
        """Integer segments (see csr_reduce_float; x, out, arg flat): int64 words, written to out's dtype
        (int32 words wrap: the caller decides overflow from ranges[t] = (min, max) of the
        int64 results). mean: floor division by the count. Made with ``check`` (sums, means,
        products), the segments run in checked scalar int64 arithmetic and flags[t] = 1 where
        one wrapped."""
        for t in prange(t_b.size):
            body(np.int64(t), x, E, F, bounds, rows, t_b, t_lo, t_hi, out, arg, empty_arg, bad, ranges,
                 flags)
    return csr_reduce_int


_OP_NAMES = {SUM: "sum", MEAN: "mean", MIN: "min", MAX: "max", PROD: "prod"}


def _suffix(op, want_arg):
    return _OP_NAMES[op] + ("_arg" if want_arg else "")


def _widths(W, Wt):
    return f"_w{W}" + (f"_{Wt}" if Wt else "")


@functools.lru_cache(maxsize=None)
def _column_kernel(op):
    return _compiled(f"csr_reduce_column_float__{_OP_NAMES[op]}", _column_float_body(op), _column_float_kernel)


@functools.lru_cache(maxsize=None)
def _float_kernel(op, want_arg, W, Wt, use_rows):
    return _compiled(f"csr_reduce_float__{_suffix(op, want_arg)}{_widths(W, Wt)}{'_rows' if use_rows else ''}",
                     _float_body(op, want_arg, W, Wt, use_rows), _float_kernel_of)


@functools.lru_cache(maxsize=None)
def _int_kernel(op, want_arg, W, Wt, check, use_rows):
    return _compiled(f"csr_reduce_int__{_suffix(op, want_arg)}" + ("_checked" if check else _widths(W, Wt))
                     + ("_rows" if use_rows else ""), _int_body(op, want_arg, W, Wt, check, use_rows),
                     _int_kernel_of)


def csr_reduce_column_float(op, parallel=True):
    """The one-column float kernel of reduction ``op``: kernel(x, E, bounds, t_b, t_lo, t_hi, out, bad)
    (x: [B, E] flat, out: [B, N] flat); its tasks run on threads when ``parallel``, else in turn
    (the same bits either way)."""
    return _column_kernel(_key(op, False)[0])[0 if parallel else 1]


def csr_reduce_float(op, want_arg, F, use_rows, parallel=True):
    """The float kernel of reduction ``op`` (with args when ``want_arg``, min/max) for F features,
    reading positions through ``rows`` when ``use_rows``: kernel(x, E, F, bounds, rows, t_b, t_lo,
    t_hi, out, arg, empty_arg, bad) (x: [B, E, F], out and arg: [B, N, F], all flat); tasks on threads
    when ``parallel``, else in turn."""
    op, want_arg = _key(op, want_arg)
    return _float_kernel(op, want_arg, *block_widths(F), bool(use_rows))[0 if parallel else 1]


def csr_reduce_int(op, want_arg, F, check, use_rows, parallel=True):
    """The integer kernel of reduction ``op`` for F features, in checked int64 arithmetic when
    ``check`` (sums, means and products only), reading positions through ``rows`` when
    ``use_rows``: kernel(x, E, F, bounds, rows, t_b, t_lo, t_hi, out, arg, empty_arg, bad, ranges, flags)
    (x, out, arg flat, as ``csr_reduce_float``); tasks on threads when ``parallel``, else in turn."""
    op, want_arg = _key(op, want_arg)
    check = bool(check) and op in (SUM, MEAN, PROD)
    W, Wt = (1, 0) if check else block_widths(F)  # checked: scalar, no vector blocks
    return _int_kernel(op, want_arg, W, Wt, check, bool(use_rows))[0 if parallel else 1]


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


def counting_sort(index, n, parts):
    """A stable counting sort of ``index`` (values in [0, n), checked before): returns
    (bounds, perm): bounds[v]..bounds[v+1]-1 are the positions of perm holding the
    positions i with index[i] == v, in increasing i. ``parts`` pieces counted in parallel
    (``counting_sort_pass``), their offsets by one exclusive scan in (id, piece) order."""
    E = index.size
    cuts = E * np.arange(parts + 1, dtype=np.int64) // parts
    counts = np.zeros(parts * n, np.int64)  # [parts, n]
    perm = np.empty(E, np.int64)
    counting_sort_pass(index, cuts, counts, perm, False)
    bounds = np.empty(n + 1, np.int64)
    bounds[0] = 0
    if parts == 1:
        np.cumsum(counts, out=bounds[1:])
        counts = bounds[:-1].copy()
    else:
        by_id = counts.reshape(parts, n).T.ravel()  # [n, parts]: the order of the positions in perm
        offs = np.cumsum(by_id) - by_id
        bounds[:n] = offs[::parts]
        bounds[n] = E
        counts = np.ascontiguousarray(offs.reshape(n, parts).T).ravel()
    counting_sort_pass(index, cuts, counts, perm, True)
    return bounds, perm


@njit(cache=True, parallel=True)
def counting_sort_pass(index, cuts, counts, perm, place):
    """``counting_sort``'s parallel passes over pieces p (positions cuts[p]..cuts[p+1]-1; counts:
    [pieces, n], flat): count the ids of each piece (``place`` false), or (``place``, counts
    holding each (piece, id)'s first slot) write each position to its id's next slot of perm."""
    n = counts.size // (cuts.size - 1)
    for p in prange(cuts.size - 1):
        o = p * n
        if place:
            for i in range(cuts[p], cuts[p + 1]):
                v = o + index[i]
                perm[counts[v]] = i
                counts[v] += 1
        else:
            for i in range(cuts[p], cuts[p + 1]):
                counts[o + index[i]] += 1


def _direct_body(op, want_arg):
    def body(p, x, B, E, F, n, index, parts, out, arg, counts):
        """Part p of ``scatter_direct_float``."""
        zero = out.dtype.type(0)
        if op == PROD:
            init = out.dtype.type(1)
        elif op == MIN:
            init = out.dtype.type(np.inf)
        elif op == MAX:
            init = out.dtype.type(-np.inf)
        else:
            init = zero
        v0, v1 = parts[p], parts[p + 1]
        for v in range(v0, v1):
            if op != SUM and op != PROD:
                counts[v] = 0
            for b in range(B):
                o0 = (b * n + v) * F
                out[o0:o0 + F] = init
                if want_arg:
                    arg[o0:o0 + F] = E
        _accumulate(x, B, E, F, index, 0, E, v0, v1, n, op, out, arg, want_arg, counts)
        if op != SUM and op != PROD:
            for v in range(v0, v1):
                c = counts[v]
                if c == 0:
                    for b in range(B):
                        o0 = (b * n + v) * F
                        out[o0:o0 + F] = zero
                elif op == MEAN:
                    for b in range(B):
                        orow = out[(b * n + v) * F:(b * n + v + 1) * F]
                        for k in range(F):
                            orow[k] /= c
    return body


def _direct_kernel_of(body):
    def scatter_direct_float(x, B, E, F, n, index, parts, out, arg, counts):
        """scatter without a sort, for floats: part p owns the segment ids parts[p]..parts[p+1]-1
        and reads the whole index, reducing the positions with one of its ids in increasing
        order into out (the same order, ties and NaN rule as the sorted path). x: [B, E, F] and
        out: [B, n, F] (arg: the same, int64, when want_arg), flat; out starts at the reduction's
        identity (min/max: +-inf) so that no branch depends on a first visit; counts: [n]
        positions per id for mean, 1 where an id occurs for min/max (empty for sum/prod). Empty
        segments end at 0 (prod 1), arg = E. A min/max segment whose values all equal the
        identity (+-inf) keeps arg = E here: the caller fixes those."""
        for p in prange(parts.size - 1):
            body(np.int64(p), x, B, E, F, n, index, parts, out, arg, counts)
    return scatter_direct_float


def _private_body(op, want_arg):
    def body(p, x, B, E, F, n, index, cuts, priv, parg, pcount):
        """Piece p of ``scatter_private_float``."""
        if op == PROD:
            init = priv.dtype.type(1)
        elif op == MIN:
            init = priv.dtype.type(np.inf)
        elif op == MAX:
            init = priv.dtype.type(-np.inf)
        else:
            init = priv.dtype.type(0)
        P = cuts.size - 1
        size = B * n * F
        pv = priv[p * size:(p + 1) * size]
        m = pcount.size // P
        pc = pcount[p * m:(p + 1) * m]
        for v in range(m):
            pc[v] = 0
        for i in range(size):
            pv[i] = init
        if want_arg:
            pa = parg[p * size:(p + 1) * size]
            for i in range(size):
                pa[i] = E
            _accumulate(x, B, E, F, index, cuts[p], cuts[p + 1], 0, n, n, op, pv, pa, want_arg, pc)
        else:
            _accumulate(x, B, E, F, index, cuts[p], cuts[p + 1], 0, n, n, op, pv, parg, want_arg, pc)
    return body


def _private_kernel_of(body):
    def scatter_private_float(x, B, E, F, n, index, cuts, priv, parg, pcount):
        """scatter's private-copy path, for floats: piece p reduces positions cuts[p]..cuts[p+1]-1
        in increasing order into its own copy priv[p] ([P, B, n, F], flat, starting at the
        reduction's identity, min/max +-inf; parg: the positions chosen, likewise; pcount[p]
        ([P, n], flat): positions per id for mean, 1 where an id occurs for min/max, unused
        (empty) for sum/prod: the random-access working set per thread stays small, measured 8x
        faster at 1e6 ids than int64 counts beside float32 sums). No branch but the reduction's
        own; the caller combines the copies in piece order, in numpy, one in-place pass per piece
        (a second parallel loop here saved 2 of 6 ms for max at n = 25,000, F = 64, and cost a
        first call 2.6 s more compile)."""
        for p in prange(cuts.size - 1):
            body(np.int64(p), x, B, E, F, n, index, cuts, priv, parg, pcount)
    return scatter_private_float


@functools.lru_cache(maxsize=None)
def _direct_kernel(op, want_arg):
    return _compiled(f"scatter_direct_float__{_suffix(op, want_arg)}", _direct_body(op, want_arg),
                     _direct_kernel_of)


@functools.lru_cache(maxsize=None)
def _private_kernel(op, want_arg):
    return _compiled(f"scatter_private_float__{_suffix(op, want_arg)}", _private_body(op, want_arg),
                     _private_kernel_of)


def scatter_direct_float(op, want_arg, parallel=True):
    """scatter's owned-ids float kernel of reduction ``op``: kernel(x, B, E, F, n, index, parts, out,
    arg, counts); parts on threads when ``parallel``, else in turn."""
    return _direct_kernel(*_key(op, want_arg))[0 if parallel else 1]


def scatter_private_float(op, want_arg, parallel=True):
    """scatter's private-copy float kernel of reduction ``op``: kernel(x, B, E, F, n, index, cuts,
    priv, parg, pcount); pieces on threads when ``parallel``, else in turn."""
    return _private_kernel(*_key(op, want_arg))[0 if parallel else 1]


@njit(cache=True, inline="always")
def _accumulate(x, B, E, F, index, e0, e1, v0, v1, n, op, out, arg, want_arg, counts):
    """Positions e0..e1-1 in increasing order, those whose id v is in [v0, v1), into out[:, v, :]
    (and arg; x [B, E, F] and out [B, n, F] flat); counts[v] += 1 for mean, = 1 for min/max. One
    loop for the kernel's reduction (a constant: the other loops are pruned), and scalar loops
    for one batch and one feature. A row of F features is read through a slice, so that its
    index k is known non-negative and the loop over it vectorizes."""
    own = v0 > 0 or v1 < n
    if B == 1 and F == 1:  # one value per position: no row slice per position
        if op == MEAN:  # the counts in a loop of their own: one random stream per loop
            for e in range(e0, e1):
                v = index[e]
                if own and (v < v0 or v >= v1):
                    continue
                counts[v] += 1
        for e in range(e0, e1):
            v = index[e]
            if own and (v < v0 or v >= v1):
                continue
            w = x[e]
            if op == SUM or op == MEAN:
                out[v] += w
            elif op == PROD:
                out[v] *= w
            else:
                counts[v] = 1
                if want_arg:
                    if _better(w, out[v], op):
                        out[v] = w
                        arg[v] = e
                else:
                    c = out[v]
                    out[v] = w if (w < c if op == MIN else w > c) or w != w else c
        return
    if op == SUM or op == MEAN:
        for e in range(e0, e1):
            v = index[e]
            if own and (v < v0 or v >= v1):
                continue
            if op == MEAN:
                counts[v] += 1
            for b in range(B):
                xr = x[(b * E + e) * F:(b * E + e + 1) * F]
                orow = out[(b * n + v) * F:(b * n + v + 1) * F]
                for k in range(F):
                    orow[k] += xr[k]
    elif op == PROD:
        for e in range(e0, e1):
            v = index[e]
            if own and (v < v0 or v >= v1):
                continue
            for b in range(B):
                xr = x[(b * E + e) * F:(b * E + e + 1) * F]
                orow = out[(b * n + v) * F:(b * n + v + 1) * F]
                for k in range(F):
                    orow[k] *= xr[k]
    else:
        for e in range(e0, e1):
            v = index[e]
            if own and (v < v0 or v >= v1):
                continue
            counts[v] = 1
            for b in range(B):
                _extreme_into_row(x, (b * E + e) * F, out, (b * n + v) * F, arg, e, op == MIN, F, want_arg)


@njit(cache=True, inline="always")
def _extreme_into_row(x, xo, out, oo, arg, e, is_min, F, want_arg):
    """out[oo:oo + F] = the running min/max with x[xo:xo + F] (and arg = e where x's value is
    taken, when ``want_arg``), by whole vectors of 8 and 4 lanes and then lane by lane
    (``vextreme_into``). A loop Numba vectorizes runs 32 float32 lanes a step on AVX2, so rows
    of 16 never entered it; and its select-then-store became a masked store."""
    k = np.int64(0)
    F = np.int64(F)
    while F - k >= 8:
        vextreme_into(x, xo + k, out, oo + k, arg, e, is_min, 8, want_arg)
        k += 8
    if F - k >= 4:
        vextreme_into(x, xo + k, out, oo + k, arg, e, is_min, 4, want_arg)
        k += 4
    while k < F:
        vextreme_into(x, xo + k, out, oo + k, arg, e, is_min, 1, want_arg)
        k += 1


#: ``coo_bounds`` takes numpy where the positions plus the ids are at most this many: as fast there
#: (a kernel would run one chunk), and no kernel to compile for a small first call
COO_SMALL = 1 << 16


def coo_bounds(index, n):
    """CSR bounds of an index, checked in the same pass: (bounds, lo, hi, down) with lo / hi the
    smallest / largest value and down whether some value is below its predecessor. The bounds
    hold only when lo >= 0, hi < n and not down: bounds[v] is the first position holding a value
    >= v. Otherwise the caller raises (bounds are garbage). Large inputs: one parallel pass
    (``coo_bounds_chunks``)."""
    E = index.size
    if E == 0:
        return np.zeros(n + 1, np.int64), 0, -1, False
    if E + n <= COO_SMALL:
        down = bool((index[1:] < index[:-1]).any())
        lo, hi = (int(index.min()), int(index.max())) if down else (int(index[0]), int(index[-1]))
        if lo >= 0 and hi < n and not down:
            return np.searchsorted(index, np.arange(n + 1, dtype=np.int64)).astype(np.int64, copy=False), lo, hi, down
        return np.zeros(n + 1, np.int64), lo, hi, down
    C = max(1, min(64, E // 65536))
    bounds = np.empty(n + 1, np.int64)
    stats = np.empty((C, 3), np.int64)
    coo_bounds_chunks(index, n, bounds, stats)
    last = int(index[E - 1])
    bounds[0 if last < 0 else min(last, n) + 1:] = E  # ids above every value (and the end)
    return bounds, int(stats[:, 0].min()), int(stats[:, 1].max()), bool(stats[:, 2].any())


@njit(cache=True, inline="always")
def _range_and_order(chunk, prev):
    """(smallest value, largest value, 1 where some value is below its predecessor) of ``chunk``,
    whose predecessor is ``prev``. One branch-free pass: three reductions that vectorize (read
    through the slice, so that i - 1 is known non-negative), 25x faster than a loop that also
    tracks new ids (measured at 1e6 random ids)."""
    mn, mx, down = _I64_MAX, _I64_MIN, False
    if chunk.size:
        mn = mx = chunk[0]
        down = chunk[0] < prev
    for i in range(1, chunk.size):
        v = chunk[i]
        mn = min(mn, v)
        mx = max(mx, v)
        down |= v < chunk[i - 1]
    return mn, mx, down


@njit(cache=True, parallel=True)
def coo_bounds_chunks(index, n, bounds, stats):
    """``coo_bounds``' pass over stats.shape[0] chunks of the index: stats[c] = (smallest value,
    largest value, 1 where some value is below its predecessor) of chunk c, and, for a chunk in
    order, bounds[v] for the ids v it reaches: bounds[v] is the first position holding a value
    >= v, written by that position alone, so the pass is parallel. A chunk out of order writes no
    bound (an unsorted index, scatter's case, costs one vectorized pass); writes are clamped to
    [0, n], never a wild write."""
    E = index.size
    C = stats.shape[0]
    for c in prange(C):
        a, b = c * E // C, (c + 1) * E // C
        p = index[a - 1] if a > 0 else -1
        mn, mx, down = _range_and_order(index[a:b], p)
        stats[c, 0] = mn
        stats[c, 1] = mx
        stats[c, 2] = down
        if down:
            continue
        for i in range(a, b):  # in order: a new id at one position in ~10 at GNN degrees
            v = index[i]
            if v > p:
                # ids after the previous value's, to this one's; clamped to [0, n] BEFORE the +1: an id
                # near 2**63 would wrap a sum (undefined in LLVM, which then drops the clamps)
                for w in range(0 if p < 0 else min(p, n) + 1, min(v, n) + 1):
                    bounds[w] = i
            p = v


@njit(cache=True, inline="always")
def _scan_task(w, F):
    """(batch, first feature, end feature) of column-scan task w: one batch, a block of up to 16
    features."""
    FB = 16 if F >= 16 else F
    nfb = (F + FB - 1) // FB
    b = w // nfb
    k0 = (w - b * nfb) * FB
    return b, k0, min(F, k0 + FB)


def _scan_float_body(seg, exclusive):
    def body(w, x, E, F, flags, out):
        """Task w of ``column_scan_float``."""
        b, k0, k1 = _scan_task(w, F)
        acc = np.zeros(k1 - k0, out.dtype)
        for e in range(E):
            if seg and e > 0 and flags[e] != 0:
                acc[:] = 0
            i = (b * E + e) * F
            xr = x[i + k0:i + k1]  # slices: their index k is known non-negative (the loop vectorizes)
            orow = out[i + k0:i + k1]
            for k in range(k1 - k0):
                s = acc[k] + xr[k]
                orow[k] = acc[k] if exclusive else s
                acc[k] = s
    return body


def _scan_float_kernel_of(body):
    def column_scan_float(x, B, E, F, flags, out):
        """Scans along the middle axis of x [B, E, F] (flat) for every (batch, feature), restarting
        where flags[e] is set when ``seg``; a task is one batch and a block of up to 16 features,
        summed in position order in out's dtype."""
        FB = 16 if F >= 16 else F
        for w in prange(B * ((F + FB - 1) // FB)):
            body(np.int64(w), x, E, F, flags, out)
    return column_scan_float


def _scan_int_body(seg, exclusive, check):
    def body(w, x, E, F, flags, out, ranges, wrapped):
        """Task w of ``column_scan_int``."""
        b, k0, k1 = _scan_task(w, F)
        acc = np.zeros(k1 - k0, np.int64)
        lo_v = np.int64(0)
        hi_v = np.int64(0)
        wr = False
        for e in range(E):
            if seg and e > 0 and flags[e] != 0:
                acc[:] = 0
            i = (b * E + e) * F
            xr = x[i + k0:i + k1]
            orow = out[i + k0:i + k1]
            for k in range(k1 - k0):
                v = np.int64(xr[k])
                a = acc[k]
                s = _wrapping_add(a, v)
                if check and ((a ^ s) & (v ^ s)) < 0:
                    wr = True
                r = a if exclusive else s
                orow[k] = r
                lo_v = min(lo_v, r)
                hi_v = max(hi_v, r)
                acc[k] = s
        ranges[w, 0] = lo_v
        ranges[w, 1] = hi_v
        wrapped[w] = wr
    return body


def _scan_int_kernel_of(body):
    def column_scan_int(x, B, E, F, flags, out, ranges, wrapped):
        """column_scan_float for integers: int64 words, written to out's dtype (int32 words wrap);
        ranges[w] = (min, max) of the int64 results written by task w, wrapped[w] set where a
        checked int64 add wrapped."""
        FB = 16 if F >= 16 else F
        for w in prange(B * ((F + FB - 1) // FB)):
            body(np.int64(w), x, E, F, flags, out, ranges, wrapped)
    return column_scan_int


def _scan_suffix(seg, exclusive):
    return ("seg" if seg else "all") + ("_exclusive" if exclusive else "_inclusive")


@functools.lru_cache(maxsize=None)
def _scan_float_kernel(seg, exclusive):
    return _compiled(f"column_scan_float__{_scan_suffix(seg, exclusive)}", _scan_float_body(seg, exclusive),
                     _scan_float_kernel_of)


@functools.lru_cache(maxsize=None)
def _scan_int_kernel(seg, exclusive, check):
    return _compiled(f"column_scan_int__{_scan_suffix(seg, exclusive)}{'_checked' if check else ''}",
                     _scan_int_body(seg, exclusive, check), _scan_int_kernel_of)


def column_scan_float(seg, exclusive, parallel=True):
    """The float column-scan kernel, segmented (restarting at flags) when ``seg``:
    kernel(x, B, E, F, flags, out) (x and out: [B, E, F], flat); on threads when ``parallel``."""
    return _scan_float_kernel(bool(seg), bool(exclusive))[0 if parallel else 1]


def column_scan_int(seg, exclusive, check, parallel=True):
    """The integer column-scan kernel, with checked int64 adds when ``check``:
    kernel(x, B, E, F, flags, out, ranges, wrapped) (x and out: [B, E, F], flat); on threads when
    ``parallel``."""
    return _scan_int_kernel(bool(seg), bool(exclusive), bool(check))[0 if parallel else 1]


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
