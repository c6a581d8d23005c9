"""The numpy entry of the segment family: every argument validated and normalised here, once,
then the one dispatch by shape and dtype.

Each op sees its input as ``[B, E, F]`` around the reduced (or scanned) axis (``_nd.as3d``).
One column (B == F == 1) of integers takes the one-column kernels of ``_column`` (the
AVX-512 / AVX2 / portable scans and sums of int8/16/32 -> int32, exact int64); every other
shape, and every float reduction, the N-d machinery of ``_nd``. ``ops`` (the public names) and
``_torch`` (the autograd route) both call these functions; semantics are documented there.
"""
from __future__ import annotations

import math
import numpy as np

from ..._dtypes import VALUE_DTYPES
from ..._threading import guarded
from ..._validate import _asarray, as_flags, as_indptr, check_bool, check_overflow, to_numpy
from .._policy import check_size, computed, deliver, finish, out_buffer, overflow_error, result_dtypes
from .._variants import threads_pay
from . import _portable_nd as R
from ._column import _scan_1d, _segmented_scan_1d, _segmented_sum_1d, scan_rows
from ._nd import _I64, _exact_fits, _int_check, as3d, reduce_code, reduce_nd, starts_indptr

__all__ = ["scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "segment_csr", "segment_coo", "scatter",
           "gather_csr"]


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


# ----------------------------------------------------------------------------- the ops


@guarded
def scan(x, *, axis=None, exclusive=False, dtype=None, overflow="raise", out=None):
    """``ops.scan`` of numpy arrays (validated here, once)."""
    src = x
    x = values_nd(x, "x")
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    B = math.prod(x.shape[:axis])
    F = math.prod(x.shape[axis + 1:])
    if B == 1 and F == 1:
        cdt, fin = result_dtypes(x, dtype, "scan")
        buf = out_buffer(out, x.shape, cdt, fin, x)  # the kernels write there when they can
        res = computed(lambda: _scan_1d(x.reshape(-1), exclusive=exclusive, dtype=cdt, overflow=overflow,
                                         into=None if buf is None else buf.reshape(-1)),
                        cdt, fin, "scan").reshape(x.shape)
        return deliver(finish(res, None, cdt, fin, overflow, "scan"), out, src)
    if F == 1 and x.shape[axis]:
        cdt, fin = result_dtypes(x, dtype, "scan")
        buf = out_buffer(out, x.shape, cdt, fin, x)
        rows = np.ascontiguousarray(x).reshape(B, x.shape[axis])
        res = computed(lambda: scan_rows(rows, exclusive, cdt, overflow,
                                              into=None if buf is None else buf.reshape(rows.shape)),
                        cdt, fin, "scan").reshape(x.shape)
        return deliver(finish(res, None, cdt, fin, overflow, "scan"), out, src)
    return nd_scan(src, x, None, axis, exclusive, dtype, overflow, out, "scan")


@guarded
def segmented_scan(x, flags, *, axis=0, exclusive=False, dtype=None, overflow="raise", out=None):
    """``ops.segmented_scan`` of numpy arrays (validated here, once)."""
    src = x
    x = values_nd(x, "x")
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    if x.ndim == 1:
        cdt, fin = result_dtypes(x, dtype, "segmented_scan")
        buf = out_buffer(out, x.shape, cdt, fin, x)  # the kernels write there when they can
        res = computed(lambda: _segmented_scan_1d(x, flags, exclusive=exclusive, dtype=cdt, overflow=overflow,
                                                   into=buf), cdt, fin, "segmented_scan")
        return deliver(finish(res, None, cdt, fin, overflow, "segmented_scan"), out, src)
    return nd_scan(src, x, flags, axis, exclusive, dtype, overflow, out, "segmented_scan")


@guarded
def segmented_sum(x, flags, *, axis=0, reduce="sum", return_arg=False, dtype=None, overflow="raise", out=None):
    """``ops.segmented_sum`` of numpy arrays (validated here, once)."""
    src = x
    x = values_nd(x, "x")
    if x.ndim == 1 and reduce_code(reduce) == R.SUM and not return_arg and x.dtype.kind != "f":
        cdt, fin = result_dtypes(x, dtype, "segmented_sum")
    else:
        cdt = None
    if cdt is not None and cdt.kind == "i":
        # one integer column: the 1-D kernels (exact, so the same bits as segment_csr's). Float results
        # take segment_csr's reduction over the starts' offsets: one result, one rounding, one code path.
        norm_axis(axis, 1)
        check_overflow(overflow)
        def into(nseg):  # the caller's out, when the kernels can write it as it is
            return out_buffer(out, (nseg,), cdt, fin, x)

        res = computed(lambda: _segmented_sum_1d(x, flags, dtype=cdt, overflow=overflow, into=into), cdt, fin,
                        "segmented_sum")
        return deliver(finish(res, None, cdt, fin, overflow, "segmented_sum"), out, src)
    return nd_segmented_sum(src, x, flags, axis, reduce, return_arg, dtype, overflow, out)


@guarded
def segment_sum_csr(x, indptr, *, axis=0, dtype=None, overflow="raise", out=None):
    """``ops.segment_sum_csr`` of numpy arrays (validated here, once)."""
    src = x
    x = values_nd(x, "x")
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    # segment_csr(reduce="sum")'s one code path (the 1-D integer kernels are its one-column case)
    ip = as_indptr(to_numpy(indptr, "indptr"), "indptr", nnz=x.shape[axis], check_order=False)
    return reduce_nd(src, x, axis, ip, np.zeros(0, np.int64), "sum", False, dtype, overflow, out,
                        "segment_sum_csr", ip.size - 1, order_checked=False)


@guarded
def segment_csr(src, indptr, *, axis=0, reduce="sum", return_arg=False, dtype=None, overflow="raise", out=None):
    """``ops.segment_csr`` of numpy arrays (validated here, once)."""
    x = values_nd(src)
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    ip = as_indptr(to_numpy(indptr, "indptr"), "indptr", nnz=x.shape[axis], check_order=False)
    return reduce_nd(src, x, axis, ip, np.zeros(0, np.int64), reduce, return_arg, dtype, overflow, out,
                     "segment_csr", ip.size - 1, order_checked=False)  # the order: in the kernels' pass


@guarded
def segment_coo(src, index, *, axis=0, dim_size=None, reduce="sum", return_arg=False, dtype=None,
                overflow="raise", out=None):
    """``ops.segment_coo`` of numpy arrays (validated here, once)."""
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
            overflow="raise", out=None):
    """``ops.scatter`` of numpy arrays (validated here, once)."""
    x = values_nd(src)
    axis = norm_axis(axis, x.ndim)
    check_overflow(overflow)
    idx, n, bounds = _index(index, x.shape[axis], dim_size)
    if bounds is not None:
        return reduce_nd(src, x, axis, bounds, np.zeros(0, np.int64), reduce, return_arg, dtype,
                         overflow, out, "scatter", n)
    return reduce_nd(src, x, axis, None, None, reduce, return_arg, dtype, overflow, out, "scatter", n, index=idx)


@guarded
def gather_csr(src, indptr, *, axis=0, out=None):
    """``ops.gather_csr`` of numpy arrays (validated here, once)."""
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
    cdt, fin = result_dtypes(x, dtype, op_name)
    buf = out_buffer(out, x.shape, cdt, fin, x, f)
    x3, B, E, F = as3d(x, axis)
    res = np.empty((B, E, F), cdt) if buf is None else buf.reshape(B, E, F)
    lo_hi = None
    if res.size:
        assert res.flags.c_contiguous  # a new array, or ``out_buffer``'s: written through its flat view
        of = res.reshape(-1)
        if cdt.kind == "f":
            R.column_scan_float(seg, exclusive, threads_pay(res.size))(x3.astype(cdt, copy=False).reshape(-1), B, E,
                                                                        F, f, of)
        else:
            nfb = -(-F // (16 if F >= 16 else F))
            ranges = np.empty((B * nfb, 2), np.int64)
            wrapped = np.zeros(B * nfb, np.bool_)
            check = overflow == "raise" and x.dtype == np.int64 and _int_check(x, R.SUM, overflow)
            R.column_scan_int(seg, exclusive, check, threads_pay(res.size))(x3.reshape(-1), B, E, F, f, of, ranges,
                                                                             wrapped)
            fl = f if seg else np.zeros(E, np.uint8)
            if wrapped.any() and not _exact_fits(x3, flags=fl, exclusive=exclusive):
                raise overflow_error(op_name, np.dtype(np.int64))
            lo_hi = (int(ranges[:, 0].min()), int(ranges[:, 1].max()))
    return deliver(finish(res.reshape(x.shape), lo_hi, cdt, fin, overflow, op_name), out, src)
