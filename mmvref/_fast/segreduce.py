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

import numba
import numpy as np

from .._dtypes import VALUE_DTYPES, result_dtype
from .._threading import guarded
from .._validate import _asarray, as_flags, as_indptr, check_bool, check_overflow
from . import _segreduce_kernels as R
from ._csr_input import check_indptr_order, long_segments
from ._io import is_tensor, like_input, needs_torch_op, to_numpy

__all__ = ["segment_csr", "segment_coo", "scatter", "gather_csr", "nd_segmented_sum",
           "nd_scan"]

_I32 = np.iinfo(np.int32)
_I64 = np.iinfo(np.int64)
_ANY_RESULT = tuple(np.dtype(t) for t in ("int8", "int16", "int32", "int64", "float16", "float32", "float64"))

#: a segment longer than this share of a batch's elements (and of at least this many
#: elements) is reduced in parts by all threads when there are fewer batches than threads
_LONG_MIN = 1 << 15

#: scatter's direct float path reads the whole index once per thread: taken up to this many threads
_DIRECT_MAX_THREADS = 8
#: ... and with private copies of the result per thread while they take at most this many bytes
_PRIVATE_BYTES = 1 << 27


# ----------------------------------------------------------------------------- arguments

def values_nd(x, name="src"):
    """``x`` as a native-order ndarray of a value dtype, at least 1-D (never copied here)."""
    a = _asarray(to_numpy(x, name), name)
    if a.ndim == 0:
        raise ValueError(f"{name} must be at least 1-D, got a scalar")
    if a.dtype not in VALUE_DTYPES:
        raise TypeError(f"{name} has unsupported dtype {a.dtype}; supported: "
                        + ", ".join(str(d) for d in VALUE_DTYPES))
    return a


def norm_axis(axis, ndim, name="axis"):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {axis!r}")
    a = int(axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"{name}={a} is out of range for an array of {ndim} dimension(s)")
    return a % ndim


def as3d(x, axis):
    """(x as [B, E, F], B, E, F); a C-contiguous copy only when x is not already one."""
    B = int(np.prod(x.shape[:axis], dtype=np.int64))
    F = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    return np.ascontiguousarray(x).reshape(B, x.shape[axis], F), B, x.shape[axis], F


def axis_or_dim(axis, dim, default):
    """``dim=`` (torch's name) as an alias of ``axis=``; both given must agree."""
    if dim is None:
        return axis
    if axis is not default and axis != dim:
        raise TypeError(f"pass axis= or dim=, not both (got axis={axis!r}, dim={dim!r})")
    return dim


def reduce_code(reduce):
    try:
        return R.REDUCE_CODES[reduce]
    except (KeyError, TypeError):
        raise ValueError(f"reduce must be one of 'sum', 'mean', 'min', 'max', 'prod' "
                         f"('add' and 'mul' are aliases), got {reduce!r}") from None


def dtypes(x, dtype, op):
    """(compute dtype, final dtype): the project rule, or ``dtype`` computed at the rule's
    width (int8/int16 results from int32 words, float16 from float32) and narrowed."""
    if dtype is None:
        r = result_dtype(x.dtype)
        return r, r
    try:
        if type(dtype).__module__ == "torch" and str(dtype).startswith("torch."):
            dtype = str(dtype)[6:]  # a torch dtype names its numpy twin (bfloat16 has none: refused below)
        if not isinstance(dtype, (str, type, np.dtype)):
            raise TypeError
        fin = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: dtype must be a numpy dtype among "
                        f"{', '.join(map(str, _ANY_RESULT))} (or None), got {dtype!r}") from None
    if fin not in _ANY_RESULT:
        raise TypeError(f"{op}: dtype must be one of {', '.join(map(str, _ANY_RESULT))}, got {fin}")
    if x.dtype.kind == "f" and fin.kind != "f":
        raise TypeError(f"{op}: dtype={fin} cannot hold a result of {x.dtype} values; pass a float dtype")
    if fin.kind == "f":
        return (np.dtype(np.float32) if fin == np.float16 else fin), fin
    if x.dtype == np.int64 or fin == np.int64:
        return np.dtype(np.int64), fin
    return np.dtype(np.int32), fin


def _overflow(op, dt):
    return OverflowError(f"{op}: a result overflows {dt}; pass overflow='wrap' for two's-complement "
                         "wrap-around" + (", or a wider dtype=" if dt != np.int64 else ""))


def finish(res, lo_hi, cdt, fin, overflow, op):
    """``res`` (computed in cdt; for integers its exact int64 range lo_hi, or None when unknown)
    as ``fin``: integers checked against fin's range (raise) or wrapped; floats rounded."""
    if fin == cdt:
        if fin.kind == "i" and overflow == "raise" and lo_hi is not None:
            lim = np.iinfo(fin)
            if lo_hi[0] < lim.min or lo_hi[1] > lim.max:
                raise _overflow(op, fin)
        return res
    if fin.kind == "i" and overflow == "raise":
        lim = np.iinfo(fin)
        if lo_hi is None and res.size:
            lo_hi = (int(res.min()), int(res.max()))
        if lo_hi is not None and (lo_hi[0] < lim.min or lo_hi[1] > lim.max):
            raise _overflow(op, fin)
    with np.errstate(over="ignore"):  # float16: beyond its range rounds to inf, like every float cast
        return res.astype(fin)


def _native(dt):
    return dt.newbyteorder("=") if dt.byteorder not in "=|" else dt


def check_size(shape, itemsize, what):
    """ValueError naming ``what`` when a result of ``shape`` cannot even be addressed (its byte
    count reaches 2**63: numpy would say only "array is too big" or fail converting the size);
    a size that can be addressed but not allocated gets numpy's MemoryError, which states it."""
    n = 1
    for d in shape:  # numpy refuses the product of the non-zero dimensions, even beside a 0
        n *= int(d) or 1
    if n * itemsize >= 2**63:
        raise ValueError(f"{what}: a result of shape {tuple(int(d) for d in shape)} is more than an array can "
                         "address")


def check_out(out, shape, dtype, name="out"):
    """The caller's own ``out`` array, validated (its shape, dtype in any byte order, writeable): a
    numpy array itself (never a copy: a big-endian or strided ``out`` is written where it is) or a
    torch CPU tensor's numpy view (shared memory). None when ``out`` is None."""
    if out is None:
        return None
    if is_tensor(out):
        o = to_numpy(out, name)
    elif isinstance(out, np.ndarray):
        if isinstance(out, np.ma.MaskedArray):
            raise TypeError(f"{name} is a numpy masked array; pass a plain ndarray")
        o = out.view(np.ndarray) if type(out) is not np.ndarray else out
    else:
        raise TypeError(f"{name} must be an array (or a torch CPU tensor), got {type(out).__name__}")
    if o.shape != tuple(shape):
        raise ValueError(f"{name} has shape {o.shape}, the result has shape {tuple(shape)}")
    if _native(o.dtype) != dtype:
        raise TypeError(f"{name} has dtype {o.dtype}, the result has dtype {dtype}")
    if not o.flags.writeable:
        raise ValueError(f"{name} is read-only")
    return o


def out_buffer(out, shape, cdt, fin, *inputs):
    """Where the kernels write the result directly: the caller's ``out`` (validated here) when it can
    take the kernels' output as it is (the compute dtype is the result dtype, native byte order,
    C-contiguous, not overlapping an input the kernels still read), else None (the result is then
    computed into a new array and copied into ``out`` by ``deliver``)."""
    o = check_out(out, shape, fin)
    if o is None or fin != cdt or o.dtype != cdt or not o.flags.c_contiguous:
        return None
    if any(isinstance(a, np.ndarray) and np.may_share_memory(o, a) for a in inputs):
        return None
    return o


def _same_buffer(a, b):
    return (a.size == b.size and a.flags.c_contiguous and b.flags.c_contiguous
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def deliver(res, out, src):
    """The result as the caller asked: in ``out`` (returned; copied there unless the kernels wrote it
    in place, see ``out_buffer``), or like the input (torch in -> torch out)."""
    if out is not None:
        o = check_out(out, res.shape, res.dtype)
        if not _same_buffer(res, o):
            o[...] = res
        return out
    return like_input(res, src)


# ----------------------------------------------------------------------------- the reduction

def _share(E):
    """Positions above which one segment is cut into parts, reduced by every thread."""
    return max(E // (2 * numba.get_num_threads()), _LONG_MIN)


def _tasks(bounds, B, E, split_long=True):
    """Tasks of whole segments balanced by element count: (t_b, t_lo, t_hi, skip, long); no long
    segment is split when ``split_long`` is false."""
    T = numba.get_num_threads()
    N = bounds.size - 1
    per_batch = max(1, min(N, -(-4 * T // B), E // 1024 + 1))
    cuts = np.searchsorted(bounds, np.linspace(0, E, per_batch + 1)[1:-1].astype(np.int64), side="right") - 1
    seg = np.unique(np.concatenate([[0], np.clip(cuts, 0, N), [N]])).astype(np.int64)
    t_b = np.repeat(np.arange(B, dtype=np.int64), seg.size - 1)
    t_lo = np.tile(seg[:-1], B)
    t_hi = np.tile(seg[1:], B)
    long = np.zeros(0, np.int64)
    skip = np.zeros(0, np.bool_)
    if B < T and N and split_long:
        long = long_segments(bounds, _share(E))
        if long.size:
            skip = np.zeros(N, np.bool_)
            skip[long] = True
    return t_b, t_lo, t_hi, skip, long


def _by_column(x3, rows, want_arg):
    """Whether ``_run`` takes the one-column kernel (which also checks the offsets' order)."""
    return x3.dtype.kind == "f" and x3.shape[0] > 0 and x3.shape[2] == 1 and rows.size == 0 and not want_arg


def _run(x3, bounds, rows, op, out3, arg3, want_arg, empty_arg, skip, t_b, t_lo, t_hi, check):
    """One kernel launch; for integers returns ((min, max) of the int64 results, wrapped)."""
    if x3.dtype.kind == "f":
        B, E, F = x3.shape
        if _by_column(x3, rows, want_arg):  # one column in order: vector steps along segments
            bad = np.zeros(t_b.size, np.bool_)
            R.csr_reduce_column_float(x3.reshape(B, E), bounds, t_b, t_lo, t_hi, op,
                                      out3.reshape(B, out3.shape[1]), skip, bad)
            if bad.any():
                check_indptr_order(bounds)  # raises, naming the first decreasing offset
        else:
            R.csr_reduce_float(x3, bounds, rows, t_b, t_lo, t_hi, op, out3, arg3, want_arg, empty_arg, skip)
        return None, False
    ranges = np.empty((t_b.size, 2), np.int64)
    flags = np.zeros(t_b.size, np.int64)
    R.csr_reduce_int(x3, bounds, rows, t_b, t_lo, t_hi, op, out3, arg3, want_arg, empty_arg, skip, check,
                     ranges, flags)
    if t_b.size == 0:
        return None, False
    return (int(ranges[:, 0].min()), int(ranges[:, 1].max())), bool(flags.any())


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
    t_b, t_lo, t_hi, skip, long = _tasks(bounds, B, E, split_long=not (check and op == R.PROD))
    lo_hi, wrapped = _run(x3, bounds, rows, op, out3, arg3, want_arg, E, skip, t_b, t_lo, t_hi, check)
    T = numba.get_num_threads()
    for n in long:  # a long segment: parts by every thread, then the parts' results reduced
        lo, hi = int(bounds[n]), int(bounds[n + 1])
        if not 0 <= lo <= hi <= E:  # not read by the column kernel, which checked the others
            check_indptr_order(bounds)
        P = 4 * T
        parts = np.linspace(lo, hi, P + 1).astype(np.int64)
        pop = R.SUM if op == R.MEAN else op
        pdt = np.dtype(np.int64) if cdt.kind == "i" else cdt
        pout = np.empty((B, P, F), pdt)
        parg = np.empty((B, P, F) if want_arg else (0, 0, 0), np.int64)
        pb = np.repeat(np.arange(B, dtype=np.int64), P)
        pl = np.tile(np.arange(P, dtype=np.int64), B)
        r1, w1 = _run(x3, parts, rows, pop, pout, parg, want_arg, E, np.zeros(0, np.bool_), pb, pl, pl + 1,
                      check)
        one = np.array([0, P], np.int64)
        cout = np.empty((B, 1, F), pdt)
        carg = np.empty((B, 1, F) if want_arg else (0, 0, 0), np.int64)
        z = np.zeros(B, np.int64)
        r2, w2 = _run(pout, one, np.zeros(0, np.int64), pop, cout, carg, want_arg, P, np.zeros(0, np.bool_),
                      np.arange(B, dtype=np.int64), z, z + 1, check)
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


def _scatter_float(x3, index, op, n, cdt, want_arg, buf3=None):
    """scatter's direct float paths (no sort): private copies per thread piece when they are
    small, else ownership of id ranges (see ``scatter``), into ``buf3`` when given. Returns
    (out3, arg3)."""
    B, E, F = x3.shape
    T = numba.get_num_threads()
    if T * B * n * F * cdt.itemsize <= _PRIVATE_BYTES and E >= T * 4096:
        cuts = np.linspace(0, E, T + 1).astype(np.int64)
        priv = np.empty((T, B, n, F), cdt)
        parg = np.empty((T, B, n, F) if want_arg else (0, 0, 0, 0), np.int64)
        cdt_count = _count_dtype(op, E)
        pcount = np.empty((T, n if cdt_count is not None else 0), cdt_count or np.int32)
        R.scatter_private_float(x3, index, cuts, op, priv, parg, want_arg, pcount)
        out3, counts = priv[0], pcount[0].astype(np.int64)
        if buf3 is not None:  # the pieces are combined into the caller's array (one pass either way)
            buf3[...] = out3
            out3 = buf3
        arg3 = parg[0] if want_arg else np.empty((0, 0, 0), np.int64)
        with np.errstate(invalid="ignore"):
            for p in range(1, T):  # in piece order: position order for min/max, one rounding per piece for sums
                q = priv[p]
                if op in (R.SUM, R.MEAN):
                    out3 += q
                elif op == R.PROD:
                    out3 *= q
                else:
                    take = (q < out3) if op == R.MIN else (q > out3)
                    take |= np.isnan(q) & ~np.isnan(out3)
                    np.copyto(out3, q, where=take)
                    if want_arg:
                        np.copyto(arg3, parg[p], where=take)
                counts = counts + pcount[p]  # (min/max: 0/1 marks, summed: still 0 only where empty)
            if op == R.MEAN:
                out3 /= np.maximum(counts, 1)[None, :, None].astype(cdt)
        if op in (R.MIN, R.MAX):
            out3[:, counts == 0, :] = 0
    else:
        out3 = np.empty((B, n, F), cdt) if buf3 is None else buf3
        arg3 = np.empty((B, n, F) if want_arg else (0, 0, 0), np.int64)
        cdt_count = _count_dtype(op, E)
        counts = np.empty(n if cdt_count is not None else 0, cdt_count or np.int32)
        R.scatter_direct_float(x3, index, np.linspace(0, n, T + 1).astype(np.int64), op, out3, arg3,
                               want_arg, counts)
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
    from . import _seg_kernels as K

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
    be non-decreasing; the one-column kernel checks them in its pass, other paths first here."""
    op = reduce_code(reduce)
    return_arg = check_bool(return_arg, "return_arg")
    if return_arg and op not in (R.MIN, R.MAX):
        raise ValueError(f"{op_name}: return_arg=True needs reduce='min' or 'max', got {reduce!r}")
    cdt, fin = dtypes(x, dtype, op_name)
    shape = x.shape[:axis] + (n_out,) + x.shape[axis + 1:]
    check_size(shape, max(cdt.itemsize, 8 if return_arg else 1), f"{op_name}: the output length {n_out}")
    buf = out_buffer(out, shape, cdt, fin, x, bounds, rows, index)  # the kernels write there when they can
    x3, B, E, F = as3d(x, axis)
    buf3 = buf.reshape(B, n_out, F) if buf is not None else None
    if cdt.kind == "f":
        x3 = x3.astype(cdt, copy=False)
    check = _int_check(x, op, overflow)
    if not order_checked and not _by_column(x3, rows, return_arg):
        check_indptr_order(bounds)
    if B == 1 and F == 1 and index is None and rows.size == 0 and op in (R.SUM, R.MEAN) and E and cdt.kind == "i":
        # one integer column: the 1-D segment-sum kernels (prefix differences for short rows,
        # exact overflow decisions), then the count division (floats: ``reduce3``'s column kernel)
        from .segops import _segment_sum_csr_1d

        mean = op == R.MEAN
        try:
            sums = _segment_sum_csr_1d(x3.reshape(E), bounds, dtype=np.int64 if mean and cdt.kind == "i" else cdt,
                                       overflow="wrap" if mean else overflow,  # a mean's sum may leave int32
                                       into=None if mean or buf is None else buf.reshape(-1))
        except OverflowError:
            raise _overflow(op_name, fin) from None
        if op == R.MEAN:
            cnt = np.maximum(np.diff(bounds), 1)
            sums = sums // cnt if cdt.kind == "i" else sums / cnt.astype(cdt)
            if cdt.kind == "i" and overflow == "raise" and x.dtype == np.int64 and _int_check(x, R.SUM, overflow):
                from . import _seg_kernels as K

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
            raise _overflow(op_name, fin)
        out3 = _exact_int64_mean(x3, bounds, rows)
    res = finish(out3.reshape(shape), lo_hi, cdt, fin, overflow, op_name)
    if not return_arg:
        return deliver(res, out, src)
    return deliver(res, out, src), like_input(arg3.reshape(shape), src)


# ----------------------------------------------------------------------------- public ops

@guarded
def segment_csr(src, indptr, *, axis=0, reduce="sum", return_arg=False, dtype=None, overflow="raise", out=None,
                dim=None):
    """Reduce ``src`` along ``axis`` over the segments ``indptr[n]:indptr[n+1]``.

    ``indptr``: 1-D integers, indptr[0] == 0, non-decreasing, indptr[-1] ==
    src.shape[axis]. Returns src.shape with the axis replaced by len(indptr) - 1
    (and the int64 argmin/argmax positions with ``return_arg=True``). One pass
    over src; segments are split among threads by element count, and a segment
    longer than a thread's share is itself split. Reductions, empty segments,
    NaN and dtypes: see the module docstring (``mmvref._fast.segreduce``).
    """
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(src):
        from .. import _torch_ops

        return _torch_ops.segment_csr(src, indptr, axis=axis, reduce=reduce, return_arg=return_arg,
                                      dtype=dtype, overflow=overflow, out=out)
    x = values_nd(src)
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    ip = as_indptr(to_numpy(indptr, "indptr"), "indptr", nnz=x.shape[axis], check_order=False)
    return reduce_nd(src, x, axis, ip, np.zeros(0, np.int64), reduce, return_arg, dtype, overflow, out,
                     "segment_csr", ip.size - 1, order_checked=False)  # the order: in the kernels' pass


def _index(index, E, dim_size, name="index"):
    """(index as a 1-D int64 array of length E, dim_size resolved, its CSR bounds when the index is
    sorted, else None); values checked in [0, dim_size)."""
    a = _asarray(to_numpy(index, name), name, empty_dtype=np.int64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one segment id per position along the axis), "
                         f"got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype, got {a.dtype}")
    if a.shape[0] != E:
        raise ValueError(f"{name} has length {a.shape[0]} but src has {E} positions along the axis")
    if a.dtype == np.uint64 and a.size and int(a.max()) > _I64.max:
        raise ValueError(f"{name} holds a value above 2**63 - 1")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if dim_size is None:
        n = int(a.max()) + 1 if a.size else 0
        n = max(n, 0)
        check_size((n + 1,), 8, f"{name} (its largest id {n - 1} sets the output length)")
    else:
        if isinstance(dim_size, bool) or not isinstance(dim_size, (int, np.integer)) or dim_size < 0:
            raise ValueError(f"dim_size must be a non-negative int, got {dim_size!r}")
        n = int(dim_size)
        check_size((n + 1,), 8, "dim_size")
    bounds, lo, hi, down = R.coo_bounds(a, n)  # the values' range and order, checked in the same pass
    if lo < 0 or hi >= n:
        bad = int(np.flatnonzero((a < 0) | (a >= n))[0])
        raise ValueError(f"{name}[{bad}] = {a[bad]} is outside [0, {n})" + (" (dim_size)" if dim_size is not None
                                                                           else ""))
    return a, n, (None if down else bounds)


@guarded
def segment_coo(src, index, *, axis=0, dim_size=None, reduce="sum", return_arg=False, dtype=None,
                overflow="raise", out=None, dim=None):
    """Reduce ``src`` along ``axis`` by a SORTED segment id per position (``index``, 1-D,
    non-decreasing, values in [0, dim_size); dim_size defaults to index.max() + 1).
    The ids become CSR offsets by one counting pass, then one segmented reduction
    (``segment_csr``); an unsorted index raises ValueError (use ``scatter``)."""
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(src):
        from .. import _torch_ops

        return _torch_ops.segment_coo(src, index, axis=axis, dim_size=dim_size, reduce=reduce,
                                      return_arg=return_arg, dtype=dtype, overflow=overflow, out=out)
    x = values_nd(src)
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    idx, n, bounds = _index(index, x.shape[axis], dim_size)
    if bounds is None:
        i = int(np.argmax(idx[1:] < idx[:-1]))
        raise ValueError(f"index must be sorted (non-decreasing) for segment_coo; index[{i}] = {idx[i]} > "
                         f"index[{i + 1}] = {idx[i + 1]} (scatter takes any order)")
    return reduce_nd(src, x, axis, bounds, np.zeros(0, np.int64), reduce, return_arg, dtype,
                     overflow, out, "segment_coo", n)


@guarded
def scatter(src, index, *, axis=0, dim_size=None, reduce="sum", return_arg=False, dtype=None,
            overflow="raise", out=None, dim=None):
    """Reduce ``src`` along ``axis`` by a segment id per position in any order (``index``,
    1-D, values in [0, dim_size); dim_size defaults to index.max() + 1).

    Paths: a sorted index is one counting pass to CSR offsets, then
    ``segment_csr``. Otherwise, for floats, a direct path without a sort: each
    thread reduces its piece of the positions into a private copy of the result
    and the copies are combined in piece order (when the copies are small:
    ``_PRIVATE_BYTES``), or each thread owns a range of ids, reads the whole
    index and reduces its ids' positions straight into the result. Otherwise
    (integers, or more than ``_DIRECT_MAX_THREADS`` threads) the MMV-RAM way:
    a stable counting sort of the ids (a parallel count, an offset scan, a
    parallel stable placement: the permutation, never a copy of src), then one
    segmented reduction reading src through the permutation. Every path
    reduces positions in increasing order, so results are deterministic,
    min/max (values and ties: the lowest position) are identical across paths
    and ``arg`` holds positions in src; float sums, means and products of the
    private-copy path get one extra rounding per thread piece."""
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(src):
        from .. import _torch_ops

        return _torch_ops.scatter(src, index, axis=axis, dim_size=dim_size, reduce=reduce, return_arg=return_arg,
                                  dtype=dtype, overflow=overflow, out=out)
    x = values_nd(src)
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    idx, n, bounds = _index(index, x.shape[axis], dim_size)
    if bounds is not None:
        return reduce_nd(src, x, axis, bounds, np.zeros(0, np.int64), reduce, return_arg, dtype,
                         overflow, out, "scatter", n)
    return reduce_nd(src, x, axis, None, None, reduce, return_arg, dtype, overflow, out, "scatter", n, index=idx)


@guarded
def gather_csr(src, indptr, *, axis=0, out=None, dim=None):
    """The inverse pattern of segment_csr: every position of segment n gets src's n-th entry
    along ``axis`` (src.shape[axis] == len(indptr) - 1; the result has indptr[-1] positions).
    segment_csr's sum backward. Values keep their dtype."""
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(src):
        from .. import _torch_ops

        return _torch_ops.gather_csr(src, indptr, axis=axis, out=out)
    x = values_nd(src)
    axis = norm_axis(axis, x.ndim)
    ip = as_indptr(to_numpy(indptr, "indptr"), "indptr")
    if ip.size - 1 != x.shape[axis]:
        raise ValueError(f"indptr has {ip.size - 1} segments but src has {x.shape[axis]} entries along the axis")
    E = int(ip[-1])
    shape = x.shape[:axis] + (E,) + x.shape[axis + 1:]
    check_size(shape, x.dtype.itemsize, f"indptr (indptr[-1] = {E} sets the output length)")
    buf = out_buffer(out, shape, x.dtype, x.dtype, x, ip)
    x3, B, N, F = as3d(x, axis)
    if x3.dtype == np.float16:  # values are only moved: their bits, as Numba has no float16
        x3 = x3.view(np.int16)
    res = np.empty((B, E, F), x3.dtype) if buf is None else buf.view(x3.dtype).reshape(B, E, F)
    if res.size:
        R.gather_csr(x3, ip, res)
    res = res.view(x.dtype)
    return deliver(res.reshape(shape), out, src)


# ----------------------------------------------------------------------------- N-d segmented ops

def starts_indptr(f, E):
    """CSR offsets of the segments that 0/1 start flags mark (position 0 always starts one), the
    flags checked for 0/1 in the same parallel pass (ValueError naming the first bad one)."""
    if E == 0:
        return np.zeros(1, np.int64)
    from . import _seg_kernels as K

    fu = np.ascontiguousarray(f).view(np.uint8)
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


def nd_segmented_sum(src, x, flags, axis, reduce, return_arg, dtype, overflow, out):
    """segmented_sum of any rank (or any reduction): flags along ``axis`` -> offsets -> segment_csr's
    reduction (so a float segmented_sum and segment_csr over the same segments give the same bits)."""
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    E = x.shape[axis]
    f = as_flags(to_numpy(flags, "flags"), E, "flags", check_values=False)
    ip = starts_indptr(f, E)
    return reduce_nd(src, x, axis, ip, np.zeros(0, np.int64), reduce, return_arg, dtype, overflow, out,
                     "segmented_sum", ip.size - 1)


def nd_scan(src, x, flags, axis, exclusive, dtype, overflow, out, op_name):
    """(segmented) scan along ``axis`` of an N-d x whose axis is not the last one (or the last
    one of a batch): every (batch, feature) column scanned in position order."""
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    E = x.shape[axis]
    seg = flags is not None
    f = (as_flags(to_numpy(flags, "flags"), E, "flags").view(np.uint8) if seg else np.zeros(0, np.uint8))
    cdt, fin = dtypes(x, dtype, op_name)
    buf = out_buffer(out, x.shape, cdt, fin, x, f)
    x3, B, E, F = as3d(x, axis)
    res = np.empty((B, E, F), cdt) if buf is None else buf.reshape(B, E, F)
    lo_hi = None
    if res.size:
        if cdt.kind == "f":
            R.column_scan_float(x3.astype(cdt, copy=False), f, seg, exclusive, res)
        else:
            nfb = -(-F // (16 if F >= 16 else F))
            ranges = np.empty((B * nfb, 2), np.int64)
            wrapped = np.zeros(B * nfb, np.bool_)
            check = overflow == "raise" and x.dtype == np.int64 and _int_check(x, R.SUM, overflow)
            R.column_scan_int(x3, f, seg, exclusive, res, check, ranges, wrapped)
            fl = f if seg else np.zeros(E, np.uint8)
            if wrapped.any() and not _exact_fits(x3, flags=fl, exclusive=exclusive):
                raise _overflow(op_name, np.dtype(np.int64))
            lo_hi = (int(ranges[:, 0].min()), int(ranges[:, 1].max()))
    return deliver(finish(res.reshape(x.shape), lo_hi, cdt, fin, overflow, op_name), out, src)
