"""Plain-loop oracles of the N-d segment reductions (issue 17), independent of mmvref.

Every input is seen as ``[B, E, F]``: B = the product of the dimensions before ``axis``,
E = the length along ``axis``, F = the product of the dimensions after it. A segment is
a list of positions along the axis (in increasing order); the oracle reduces, for every
batch b and feature f, the values ``x[b, i, f]`` for i in the segment, one at a time in
Python:

- integers as Python ints (exact, unbounded); the caller applies the result dtype
  (wrap / overflow) itself;
- floats as Python floats (float64; float16 and float32 values convert exactly): sums
  with ``math.fsum`` (correctly rounded), non-finite terms by the IEEE rules stated in
  ``_float_sum``; products in float64, in position order.

Every reduction also returns, per output element, the segment length and the sum of the
absolute values of its terms (floats), from which the tests derive their tolerance.

Conventions (the API contract): empty segments give 0 for sum, mean, min and max, 1 for
prod, and arg = E; min/max: ties keep the lowest position, the first NaN wins (a segment
holding a NaN gives NaN, arg = the position of its first NaN); integer mean = floor
division (Python ``//``).

Nothing here imports mmvref.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = [
    "to_bef", "out_shape", "csr_members", "coo_members", "scatter_members", "flag_members",
    "reduce_segments", "gather_csr", "segmented_scan", "scan",
]


def _axis(ndim, axis):
    if not -ndim <= axis < ndim:
        raise ValueError("axis out of range")
    return axis % ndim


def to_bef(x, axis):
    """(nested Python lists [B][E][F] of x's values, B, E, F)."""
    x = np.asarray(x)
    ax = _axis(x.ndim, axis)
    B = int(np.prod(x.shape[:ax], dtype=np.int64))
    E = x.shape[ax]
    F = int(np.prod(x.shape[ax + 1:], dtype=np.int64))
    return np.ascontiguousarray(x).reshape(B, E, F).tolist(), B, E, F


def out_shape(shape, axis, n):
    ax = _axis(len(shape), axis)
    return tuple(shape[:ax]) + (n,) + tuple(shape[ax + 1:])


# ----------------------------------------------------------------------------- segments as position lists

def csr_members(indptr):
    """Segment n = positions indptr[n] .. indptr[n+1]-1."""
    p = [int(v) for v in indptr]
    return [list(range(p[n], p[n + 1])) for n in range(len(p) - 1)]


def coo_members(index, n):
    """Segment k = the positions i with index[i] == k, k in [0, n)."""
    members = [[] for _ in range(n)]
    for i, k in enumerate(int(v) for v in index):
        members[k].append(i)
    return members


scatter_members = coo_members  # the same definition: any order of index, original positions


def flag_members(flags):
    """Segments start where flags[i] != 0, and at position 0."""
    members = []
    for i, f in enumerate(int(v) for v in flags):
        if i == 0 or f:
            members.append([])
        members[-1].append(i)
    return members


# ----------------------------------------------------------------------------- one reduction

def _is_nan(v):
    return isinstance(v, float) and v != v


def _float_sum(vals):
    """IEEE sum of the exact values: NaN if any NaN or both infinities; else the infinity
    present; else the correctly rounded sum of the finite terms."""
    if any(v != v for v in vals):
        return math.nan
    pos, neg = math.inf in vals, -math.inf in vals
    if pos and neg:
        return math.nan
    if pos:
        return math.inf
    if neg:
        return -math.inf
    return math.fsum(vals)


def _reduce_one(vals, positions, reduce, is_int, E):
    """(value, arg) of one segment's values (in position order)."""
    k = len(vals)
    if reduce == "sum":
        return (sum(vals) if is_int else _float_sum(vals)), E
    if reduce == "mean":
        if k == 0:
            return (0 if is_int else 0.0), E
        if is_int:
            return sum(vals) // k, E  # floor division
        return _float_sum(vals) / k, E
    if reduce == "prod":
        p = 1 if is_int else 1.0
        for v in vals:
            p = p * v
        return p, E
    if reduce in ("min", "max"):
        best, arg = None, E
        for v, i in zip(vals, positions):
            if _is_nan(v):
                best, arg = v, i  # the first NaN wins and stays
                break
            if best is None or (v < best if reduce == "min" else v > best):
                best, arg = v, i
        if best is None:
            return (0 if is_int else 0.0), E
        return best, arg
    raise ValueError(f"unknown reduce {reduce!r}")


def reduce_segments(x, members, reduce, *, axis=0):
    """Reduce x along ``axis`` over the segments ``members`` (lists of positions).

    Returns (values, arg, length, magnitude), each of the output shape (x.shape with the
    axis length replaced by len(members)):
      values     object array of Python ints (integer x) or float64 array;
      arg        int64 array (the chosen position for min/max, else E);
      length     int64 array: the segment's length;
      magnitude  float64 array: sum of |terms| (inf/nan terms count as 0; floats only)."""
    x = np.asarray(x)
    is_int = x.dtype.kind in "iub"
    rows, B, E, F = to_bef(x, axis)
    N = len(members)
    vals = np.empty((B, N, F), dtype=object if is_int else np.float64)
    arg = np.empty((B, N, F), dtype=np.int64)
    length = np.empty((B, N, F), dtype=np.int64)
    mag = np.zeros((B, N, F), dtype=np.float64)
    for b in range(B):
        for n, pos in enumerate(members):
            for f in range(F):
                col = [rows[b][i][f] for i in pos]
                v, a = _reduce_one(col, pos, reduce, is_int, E)
                vals[b, n, f] = v
                arg[b, n, f] = a
                length[b, n, f] = len(pos)
                if not is_int:
                    mag[b, n, f] = math.fsum(abs(c) for c in col if math.isfinite(c))
    shape = out_shape(x.shape, axis, N)
    return vals.reshape(shape), arg.reshape(shape), length.reshape(shape), mag.reshape(shape)


def gather_csr(src, indptr, *, axis=0):
    """out[..., indptr[n]:indptr[n+1], ...] = src[..., n, ...] along axis (src's own values)."""
    src = np.asarray(src)
    rows, B, N, F = to_bef(src, axis)
    p = [int(v) for v in indptr]
    E = p[-1]
    out = np.empty((B, E, F), dtype=src.dtype)
    for b in range(B):
        for n in range(N):
            for i in range(p[n], p[n + 1]):
                for f in range(F):
                    out[b, i, f] = rows[b][n][f]
    return out.reshape(out_shape(src.shape, axis, E))


# ----------------------------------------------------------------------------- scans

def segmented_scan(x, flags, *, axis=0, exclusive=False):
    """Running sums along axis restarting where flags != 0 (position 0 always starts).

    Returns (values, length, magnitude) of x's shape: values exact (ints) or float64 (a
    running float64 sum, in position order); length = the number of terms of each output
    (0 for an exclusive scan's first element); magnitude = the running sum of |terms|."""
    x = np.asarray(x)
    is_int = x.dtype.kind in "iub"
    rows, B, E, F = to_bef(x, axis)
    fl = [int(v) for v in flags]
    vals = np.empty((B, E, F), dtype=object if is_int else np.float64)
    length = np.empty((B, E, F), dtype=np.int64)
    mag = np.zeros((B, E, F), dtype=np.float64)
    for b in range(B):
        for f in range(F):
            acc, k, m = 0, 0, 0.0
            for i in range(E):
                if i == 0 or fl[i]:
                    acc, k, m = (0 if is_int else 0.0), 0, 0.0
                v = rows[b][i][f]
                if exclusive:
                    vals[b, i, f], length[b, i, f], mag[b, i, f] = acc, k, m
                acc, k = acc + v, k + 1
                m += abs(v) if (is_int or math.isfinite(v)) else 0.0
                if not exclusive:
                    vals[b, i, f], length[b, i, f], mag[b, i, f] = acc, k, m
    return vals.reshape(x.shape), length.reshape(x.shape), mag.reshape(x.shape)


def scan(x, *, axis=None, exclusive=False):
    """np.cumsum semantics: axis=None scans the C-order flattening (a 1-D result)."""
    x = np.asarray(x)
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    E = x.shape[_axis(x.ndim, axis)]
    return segmented_scan(x, [0] * E, axis=axis, exclusive=exclusive)
