"""N-d segment reductions: ``segment_csr``, ``segment_coo``, ``scatter``, ``gather_csr``,
and the N-d forms of ``segmented_sum``, ``segmented_scan`` and ``scan``.

An input of any rank is seen as ``[B, E, F]`` around the reduced (or scanned)
axis: the dimensions before it are independent batches, the dimensions after
it one contiguous feature vector per position, handled inside the kernels
(``_segreduce_kernels``), never by a Python loop over columns.

Reductions (``reduce=``): "sum" ("add"), "mean", "min", "max", "prod" ("mul").
Empty segments give 0 (prod: 1, the empty product, as torch_scatter's
scatter_mul and torch.segment_reduce); their ``arg`` (min/max with
``return_arg=True``) is the length of the reduced axis, as torch_scatter.
min/max: ties keep the lowest position; NaN propagates (a segment holding a
NaN gives NaN and the position of its first NaN), as torch. mean: the sum
divided by the count in the result dtype; integers: floor division (as
torch.scatter_reduce and torch_scatter.scatter_mean; torch_scatter's
segment_*_csr truncates toward zero instead, which differs for negative sums).
An integer mean always fits its dtype (it lies between the values), so it
never raises: where an int64 sum leaves int64 it is recomputed exactly
(``overflow="wrap"`` keeps floor(wrapped sum / count), as hardware would).

``axis=`` names the reduced axis; ``dim=`` is accepted as its alias (torch's name).

Dtypes follow the project rule (int8/16/32 -> int32, int64 -> int64, fp16 ->
fp32, fp32/fp64 kept) for every reduction; ``dtype=`` asks for another one
(int8 ... float64): integer results that do not fit raise OverflowError, or
wrap with ``overflow="wrap"``; float16 results are rounded from float32.
"""
from __future__ import annotations

import math
import numba
import numpy as np

from ..._validate import check_bool
from .._csr_input import check_indptr_order, long_segments
from .._policy import check_size, deliver, finish, like_input, out_buffer, overflow_error, result_dtypes
from .._variants import threads_pay
from . import _portable_nd as R

__all__ = ["reduce_nd", "reduce3", "starts_indptr", "as3d", "reduce_code"]

_I32 = np.iinfo(np.int32)
_I64 = np.iinfo(np.int64)

#: a segment longer than this share of a batch's elements (and of at least this many
#: elements) is reduced in parts by all threads when there are fewer batches than threads
_LONG_MIN = 1 << 15

#: ``starts_indptr`` takes numpy up to this many flags (its two kernels above)
_STARTS_SMALL = 1 << 16

#: scatter's direct float path reads the whole index once per thread: taken up to this many threads
_DIRECT_MAX_THREADS = 8
#: ... and with private copies of the result per thread while they take at most this many bytes
_PRIVATE_BYTES = 1 << 27


# ----------------------------------------------------------------------------- arguments


def as3d(x, axis):
    """(x as [B, E, F], B, E, F); a C-contiguous copy only when x is not already one."""
    B = math.prod(x.shape[:axis])
    F = math.prod(x.shape[axis + 1:])
    return np.ascontiguousarray(x).reshape(B, x.shape[axis], F), B, x.shape[axis], F


# ----------------------------------------------------------------------------- the reduction

def reduce_code(reduce):
    try:
        return R.REDUCE_CODES[reduce]
    except (KeyError, TypeError):
        raise ValueError(f"reduce must be one of 'sum', 'mean', 'min', 'max', 'prod' "
                         f"('add' and 'mul' are aliases), got {reduce!r}") from None


def _share(E):
    """Positions above which one segment is cut into parts, reduced by every thread."""
    return max(E // (2 * numba.get_num_threads()), _LONG_MIN)


def _tasks(bounds, B, E, split_long=True):
    """Tasks of whole segments balanced by element count: (t_b, t_lo, t_hi, long). The long
    segments (reduced in parts by the caller) are in no task: the tasks' ranges are cut around
    them. No segment is long when ``split_long`` is false."""
    T = numba.get_num_threads()
    N = bounds.size - 1
    per_batch = max(1, min(N, -(-4 * T // B), E // 1024 + 1))
    cuts = np.searchsorted(bounds, np.linspace(0, E, per_batch + 1)[1:-1].astype(np.int64), side="right") - 1
    seg = np.unique(np.concatenate([[0], np.clip(cuts, 0, N), [N]])).astype(np.int64)
    long = np.zeros(0, np.int64)
    if B < T and N and split_long:
        long = long_segments(bounds, _share(E))
    lo, hi = seg[:-1], seg[1:]
    if long.size:
        seg = np.unique(np.concatenate([seg, long, long + 1]))
        lo, hi = seg[:-1], seg[1:]  # a long segment n is the range [n, n + 1): dropped
        keep = ~np.isin(lo, long)
        lo, hi = lo[keep], hi[keep]
    t_b = np.repeat(np.arange(B, dtype=np.int64), lo.size)
    return t_b, np.tile(lo, B), np.tile(hi, B), long


def _by_column(x3, rows, want_arg):
    """Whether ``_run`` takes the one-column kernel (which also checks the offsets' order)."""
    return x3.dtype.kind == "f" and x3.shape[0] > 0 and x3.shape[2] == 1 and rows.size == 0 and not want_arg


def _run(x3, bounds, rows, op, out3, arg3, want_arg, empty_arg, t_b, t_lo, t_hi, check):
    """One kernel launch (the kernel made for this reduction, args, feature count and rows: see
    ``_portable_nd``); for integers returns ((min, max) of the int64 results, wrapped). The
    kernels check the offsets they read: a ValueError names the first decreasing one."""
    bad = np.zeros(t_b.size, np.bool_)
    B, E, F = x3.shape
    assert out3.flags.c_contiguous and arg3.flags.c_contiguous  # the flat views below are written
    xf, of, af = x3.reshape(-1), out3.reshape(-1), arg3.reshape(-1)
    lo_hi, wrapped = None, False
    par = t_b.size > 1 and threads_pay(B * (rows.size or E) * F)
    if x3.dtype.kind == "f":
        if _by_column(x3, rows, want_arg):  # one column in order: vector steps along segments
            R.csr_reduce_column_float(op, par)(xf, E, bounds, t_b, t_lo, t_hi, of, bad)
        else:
            R.csr_reduce_float(op, want_arg, F, rows.size > 0, par)(xf, E, F, bounds, rows, t_b, t_lo, t_hi, of,
                                                                    af, empty_arg, bad)
    else:
        ranges = np.empty((t_b.size, 2), np.int64)
        flags = np.zeros(t_b.size, np.int64)
        R.csr_reduce_int(op, want_arg, F, check, rows.size > 0, par)(xf, E, F, bounds, rows, t_b, t_lo, t_hi, of,
                                                                     af, empty_arg, bad, ranges, flags)
        if t_b.size:
            lo_hi, wrapped = (int(ranges[:, 0].min()), int(ranges[:, 1].max())), bool(flags.any())
    if bad.any():
        check_indptr_order(bounds)  # raises, naming the first decreasing offset
        raise ValueError("indptr must be non-decreasing")
    return lo_hi, wrapped


def reduce3(x3, bounds, rows, op, cdt, want_arg, check, out3=None):
    """Reduce x3 [B, E, F] over the segments ``bounds`` (positions ``rows[bounds[n]:bounds[n+1]]``
    when rows is not empty) into ``out3`` (a new [B, N, F] array of cdt when None), plus arg
    [B, N, F] (int64) when want_arg. Returns (out3, arg3, lo_hi, wrapped).

    A checked integer product is never split among threads: its exact decision needs the whole
    segment (a zero anywhere makes it 0, whatever the other parts' magnitudes)."""
    B, E, F = x3.shape
    N = bounds.size - 1
    if out3 is None:
        out3 = np.empty((B, N, F), cdt)
    arg3 = np.empty((B, N, F) if want_arg else (0, 0, 0), np.int64)
    if out3.size == 0:
        return out3, arg3, None, False
    t_b, t_lo, t_hi, long = _tasks(bounds, B, E, split_long=not (check and op == R.PROD))
    lo_hi, wrapped = _run(x3, bounds, rows, op, out3, arg3, want_arg, E, t_b, t_lo, t_hi, check)
    T = numba.get_num_threads()
    for n in long:  # a long segment: parts by every thread, then the parts' results reduced
        lo, hi = int(bounds[n]), int(bounds[n + 1])
        if not 0 <= lo <= hi <= E:  # in no task: the kernels checked the other segments
            check_indptr_order(bounds)
        P = 4 * T
        parts = np.linspace(lo, hi, P + 1).astype(np.int64)
        pop = R.SUM if op == R.MEAN else op
        pdt = np.dtype(np.int64) if cdt.kind == "i" else cdt
        pout = np.empty((B, P, F), pdt)
        parg = np.empty((B, P, F) if want_arg else (0, 0, 0), np.int64)
        pb = np.repeat(np.arange(B, dtype=np.int64), P)
        pl = np.tile(np.arange(P, dtype=np.int64), B)
        r1, w1 = _run(x3, parts, rows, pop, pout, parg, want_arg, E, pb, pl, pl + 1, check)
        one = np.array([0, P], np.int64)
        cout = np.empty((B, 1, F), pdt)
        carg = np.empty((B, 1, F) if want_arg else (0, 0, 0), np.int64)
        z = np.zeros(B, np.int64)
        r2, w2 = _run(pout, one, np.zeros(0, np.int64), pop, cout, carg, want_arg, P, np.arange(B, dtype=np.int64),
                      z, z + 1, check)
        wrapped = wrapped or w1 or w2
        v = cout[:, 0, :]
        if op == R.MEAN:
            v = v // (hi - lo) if cdt.kind == "i" else v / cdt.type(hi - lo)
        if cdt.kind == "i":
            vmin, vmax = int(v.min()), int(v.max())
            lo_hi = (vmin, vmax) if lo_hi is None else (min(lo_hi[0], vmin), max(lo_hi[1], vmax))
        out3[:, n, :] = v
        if want_arg:
            pi = carg[:, 0, :]  # the part that won, then that part's position
            arg3[:, n, :] = np.take_along_axis(parg, pi[:, None, :], axis=1)[:, 0, :]
    return out3, arg3, lo_hi, wrapped


def _count_dtype(op, E):
    """What scatter's direct paths count per id: positions (mean), occurrence marks (min/max),
    nothing (sum, prod); the narrowest dtype, as the count array is accessed at random."""
    if op == R.MEAN:
        return np.dtype(np.int32) if E < 2**31 else np.dtype(np.int64)
    if op in (R.MIN, R.MAX):
        return np.dtype(np.uint8)
    return None


_UINT_OF = {4: np.uint32, 8: np.uint64}


def _blend(a, b, take):
    """a[take] = b[take] in place, arithmetically: a += (b - a) * take in wrapping unsigned (or,
    for positions, exact signed) words, the same bits as a masked copy (which measured 11 ms
    against this 1.7 ms at 2.6e6 random positions)."""
    step = np.subtract(b, a)
    np.multiply(step, take, out=step)
    np.add(a, step, out=a)


def _scatter_float(x3, index, op, n, cdt, want_arg, buf3=None):
    """scatter's direct float paths (no sort): private copies per thread piece when they are
    small, else ownership of id ranges (see ``scatter``), into ``buf3`` when given. Returns
    (out3, arg3)."""
    B, E, F = x3.shape
    T = numba.get_num_threads()
    if T * B * n * F * cdt.itemsize <= _PRIVATE_BYTES and E >= T * 4096:
        cuts = np.linspace(0, E, T + 1).astype(np.int64)
        priv = np.empty((T, B, n, F), cdt)
        # the copies' positions in int32 where they fit: half the bytes the threads write at random
        # and fault in (min/max with positions at E = 4e5, F = 128: kernel 27 against 41 ms)
        pos_dt = np.int32 if want_arg and E < 2**31 else np.int64
        parg = np.empty((T, B, n, F) if want_arg else (0, 0, 0, 0), pos_dt)
        cdt_count = _count_dtype(op, E)
        pcount = np.empty((T, n if cdt_count is not None else 0), cdt_count or np.int32)
        R.scatter_private_float(op, want_arg)(x3.reshape(-1), B, E, F, n, index, cuts, priv.reshape(-1),
                                              parg.reshape(-1), pcount.reshape(-1))
        # the copies combined in piece order (position order for min/max, one rounding per piece for
        # sums), each piece in one in-place pass; into the caller's array when given, else into the
        # first copy (no new pages to fault in)
        out3 = priv[0] if buf3 is None else buf3
        if buf3 is not None:
            np.copyto(out3, priv[0])
        arg3 = parg[0] if want_arg else np.empty((0, 0, 0), np.int64)
        counts = pcount[0].astype(np.int64)
        with np.errstate(invalid="ignore"):
            for p in range(1, T):
                q = priv[p]
                if op in (R.SUM, R.MEAN):
                    np.add(out3, q, out=out3)
                elif op == R.PROD:
                    np.multiply(out3, q, out=out3)
                else:  # the sequential rule: a later piece's value where strictly better or a NaN
                    # (with positions: a NaN over a number only); ties keep the earlier piece's, so
                    # -0.0 and +0.0 come out as the sorted path gives them (np.maximum does not say
                    # which of two equal values it returns)
                    take = (q < out3) if op == R.MIN else (q > out3)
                    take |= (np.isnan(q) & ~np.isnan(out3)) if want_arg else np.isnan(q)
                    _blend(out3.view(_UINT_OF[cdt.itemsize]), q.view(_UINT_OF[cdt.itemsize]), take)
                    if want_arg:
                        _blend(arg3, parg[p], take)
                counts += pcount[p]  # (min/max: 0/1 marks, summed: still 0 only where empty)
            if op == R.MEAN:
                np.divide(out3, np.maximum(counts, 1).astype(cdt)[None, :, None], out=out3)
        if op in (R.MIN, R.MAX):
            out3[:, counts == 0, :] = 0
        arg3 = arg3.astype(np.int64, copy=False)
    else:
        out3 = np.empty((B, n, F), cdt) if buf3 is None else buf3
        arg3 = np.empty((B, n, F) if want_arg else (0, 0, 0), np.int64)
        cdt_count = _count_dtype(op, E)
        counts = np.empty(n if cdt_count is not None else 0, cdt_count or np.int32)
        assert out3.flags.c_contiguous  # written through its flat view
        parts = np.linspace(0, n, T + 1).astype(np.int64)
        R.scatter_direct_float(op, want_arg, threads_pay(B * E * F))(x3.reshape(-1), B, E, F, n, index, parts,
                                                                     out3.reshape(-1), arg3.reshape(-1), counts)
        counts = counts.astype(np.int64)
    if want_arg:  # segments whose values all equal the identity (+-inf): their first position
        stuck = (arg3 == E) & (counts > 0)[None, :, None]
        if stuck.any():
            first = np.full(n, E, np.int64)
            np.minimum.at(first, index, np.arange(E, dtype=np.int64))
            arg3[stuck] = np.broadcast_to(first[None, :, None], arg3.shape)[stuck]
    return out3, arg3


def _exact_fits(x3, bounds=None, rows=None, flags=None, exclusive=False):
    """Whether every output of the (segmented) sums or scans of each (batch, feature) column of
    int64 x3 lies in int64, decided exactly (128-bit partial sums): the rare re-check after a
    checked int64 add wrapped somewhere, as a wrapped partial sum may come back in range."""
    from . import _portable as K

    B, E, F = x3.shape
    for b in range(B):
        for k in range(F):
            col = x3[b, :, k] if rows is None or rows.size == 0 else x3[b, rows, k]
            col = np.ascontiguousarray(col, dtype=np.int64)
            if bounds is not None:
                ok = K.exact_csr_range(col, bounds, _I64.min, _I64.max)
            else:
                ok = K.exact_segscan_range(col, flags, exclusive, _I64.min, _I64.max)
            if not ok:
                return False
    return True


def _exact_int64_mean(x3, bounds, rows):
    """floor(exact sum / count) of int64 x3 [B, E, F] over the segments (count 1 for empty ones),
    where an int64 sum wrapped: each value split into its high (signed) and low 32-bit halves,
    whose segment sums stay inside int64 for segments shorter than 2**31, then combined and
    divided as Python integers (a rare path: the sums of some segment leave int64)."""
    B, E, F = x3.shape
    if E >= 2**31:
        raise OverflowError("mean: an int64 segment sum leaves int64 and the axis is too long (>= 2**31) "
                            "for the exact two-half method")
    hi = np.ascontiguousarray(x3 >> 32)
    lo = np.ascontiguousarray(x3 & 0xFFFFFFFF)
    sh = reduce3(hi, bounds, rows, R.SUM, np.dtype(np.int64), False, False)[0]
    sl = reduce3(lo, bounds, rows, R.SUM, np.dtype(np.int64), False, False)[0]
    cnt = np.maximum(np.diff(bounds), 1).astype(object).reshape(1, -1, 1)
    return ((sh.astype(object) * 2**32 + sl.astype(object)) // cnt).astype(np.int64)


def _int_check(x, op, overflow):
    """Whether the integer kernels must use checked int64 arithmetic."""
    if overflow != "raise" or x.dtype.kind != "i" or op in (R.MIN, R.MAX):
        return False
    if op == R.PROD:
        return True
    if x.dtype != np.int64 or x.size == 0:
        return False
    m = max(abs(int(x.min())), abs(int(x.max())))
    return x.size * m > _I64.max  # a sum of x may leave int64


def reduce_nd(src, x, axis, bounds, rows, reduce, return_arg, dtype, overflow, out, op_name, n_out,
              index=None, order_checked=True):
    """The shared body of segment_csr / segment_coo / scatter / segmented_sum (validated
    bounds and rows in hand; or, for scatter's direct float path, the validated ``index``).
    ``order_checked=False``: bounds (int64, bounds[0] == 0, bounds[-1] == E) are not yet known to
    be non-decreasing; the kernels check them in their pass (the reductions' and the one-column
    integer sums'), so only an input no kernel reads is checked here."""
    op = reduce_code(reduce)
    return_arg = check_bool(return_arg, "return_arg")
    if return_arg and op not in (R.MIN, R.MAX):
        raise ValueError(f"{op_name}: return_arg=True needs reduce='min' or 'max', got {reduce!r}")
    cdt, fin = result_dtypes(x, dtype, op_name)
    shape = x.shape[:axis] + (n_out,) + x.shape[axis + 1:]
    check_size(shape, max(cdt.itemsize, 8 if return_arg else 1), f"{op_name}: the output length {n_out}")
    buf = out_buffer(out, shape, cdt, fin, x, bounds, rows, index)  # the kernels write there when they can
    x3, B, E, F = as3d(x, axis)
    buf3 = buf.reshape(B, n_out, F) if buf is not None else None
    if cdt.kind == "f":
        x3 = x3.astype(cdt, copy=False)
    check = _int_check(x, op, overflow)
    if not order_checked and x3.size == 0:  # no kernel reads the offsets (the kernels check those they read)
        check_indptr_order(bounds)
    if B == 1 and F == 1 and index is None and rows.size == 0 and op in (R.SUM, R.MEAN) and E and cdt.kind == "i":
        # one integer column: the 1-D segment-sum kernels (prefix differences for short rows,
        # exact overflow decisions), then the count division (floats: ``reduce3``'s column kernel)
        from ._column import _segment_sum_csr_1d

        mean = op == R.MEAN
        try:
            sums = _segment_sum_csr_1d(x3.reshape(E), bounds, dtype=np.int64 if mean and cdt.kind == "i" else cdt,
                                       overflow="wrap" if mean else overflow,  # a mean's sum may leave int32
                                       into=None if mean or buf is None else buf.reshape(-1))
        except OverflowError:
            raise overflow_error(op_name, fin) from None
        if op == R.MEAN:
            cnt = np.maximum(np.diff(bounds), 1)
            sums = sums // cnt if cdt.kind == "i" else sums / cnt.astype(cdt)
            if cdt.kind == "i" and overflow == "raise" and x.dtype == np.int64 and _int_check(x, R.SUM, overflow):
                from . import _portable as K

                if not K.exact_csr_range(x3.reshape(E), bounds, _I64.min, _I64.max):
                    sums = _exact_int64_mean(x3, bounds, rows).reshape(-1)
        res = finish(sums.astype(cdt, copy=False).reshape(shape), None, cdt, fin, overflow, op_name)
        return deliver(res, out, src)
    if index is not None and cdt.kind == "f" and numba.get_num_threads() <= _DIRECT_MAX_THREADS:
        out3, arg3 = _scatter_float(x3, index, op, n_out, cdt, return_arg, buf3)
        lo_hi, wrapped = None, False
    else:
        if index is not None:
            parts = max(1, min(numba.get_num_threads(), index.size // 65536, (1 << 27) // max(8 * n_out, 1)))
            bounds, rows = R.counting_sort(index, n_out, parts)
        out3, arg3, lo_hi, wrapped = reduce3(x3, bounds, rows, op, cdt, return_arg, check, buf3)
    if wrapped and (op == R.PROD or not _exact_fits(x3, bounds, rows)):
        # a product's check is exact (magnitudes only grow, zeros are tracked); a sum's flags any
        # int64 partial sum that wrapped, so the outputs themselves are decided exactly here.
        # A mean of int64 values always fits int64 (it lies between them): computed exactly.
        if op != R.MEAN:
            raise overflow_error(op_name, fin)
        out3 = _exact_int64_mean(x3, bounds, rows)
    res = finish(out3.reshape(shape), lo_hi, cdt, fin, overflow, op_name)
    if not return_arg:
        return deliver(res, out, src)
    return deliver(res, out, src), like_input(arg3.reshape(shape), src)


# ----------------------------------------------------------------------------- public ops


# ----------------------------------------------------------------------------- N-d segmented ops

def starts_indptr(f, E):
    """CSR offsets of the segments that 0/1 start flags mark (position 0 always starts one), the
    flags checked for 0/1 in the same parallel pass (ValueError naming the first bad one)."""
    if E == 0:
        return np.zeros(1, np.int64)
    from . import _portable as K

    fu = np.ascontiguousarray(f).view(np.uint8)
    if E <= _STARTS_SMALL:  # numpy: as fast there, and no kernels to compile for a small first call
        if fu.max() > 1:
            i = int(np.argmax(fu > 1))
            raise ValueError(f"flags must hold only 0 and 1 (segment starts); flags[{i}] = {f[i]}")
        return np.concatenate([[0], np.flatnonzero(fu[1:]) + 1, [E]]).astype(np.int64)
    T = numba.get_num_threads()
    starts = np.linspace(0, E, max(1, min(4 * T, E // 16384)) + 1).astype(np.int64)
    counts = np.zeros(starts.size - 1, np.int64)
    bad = np.zeros(starts.size - 1, np.uint8)
    K.flag_stats(fu, starts, counts, bad)
    if bad.max() > 1:
        i = int(np.argmax(fu > 1))
        raise ValueError(f"flags must hold only 0 and 1 (segment starts); flags[{i}] = {f[i]}")
    bases = np.empty(counts.size, np.int64)
    bases[0] = 1
    np.cumsum(counts[:-1], out=bases[1:])
    bases[1:] += 1
    total = int(counts.sum())
    ip = np.empty(total + 3, np.int64)  # the last entry: the kernel's scratch slot
    K.flag_positions(fu, starts, bases, counts, ip)
    ip = ip[:total + 2]
    ip[0], ip[-1] = 0, E
    return ip


