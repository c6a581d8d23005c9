"""N-d segment sums (and means), golden, stage by stage: ``segment_csr``,
``segment_coo``, ``scatter``, ``gather_csr``.

An N-d ``src`` is reduced along ``axis`` by laying every other coordinate out
as a column: the [E, B*F] matrix of words whose columns are reduced by
``column_segment_sums`` (the columns end to end, ONE scan for all of them,
GatherSpMV, DIFF: App. Alg. 4 lines 3-5, as SpMM does for its k columns).
``segment_coo`` first turns the sorted ids into offsets; ``scatter`` first
sorts the ids by the radix sort of the Ascend scan paper (§5, stable: the
permutation) and GATHERs the values into that order, the MMV-RAM way.

Only "sum" and "mean" (the sum divided by the count; integers: floor
division) exist here: the papers define no MMV-RAM algorithm for min, max or
prod, so the golden functions refuse them (NotImplementedError); the fast
ops' min/max/prod are checked against plain-loop oracles in the tests.
"""
from __future__ import annotations

import numpy as np

from .. import bounds, mmv
from .._validate import _asarray, as_indptr, check_s
from ._words import DEFAULT_S, finish, max_abs_int, to_words
from .scan_operators import argsort
from .spmm import column_segment_sums

__all__ = ["segment_csr", "segment_coo", "scatter", "gather_csr"]


def _src(src):
    x = _asarray(src, "src")
    if x.ndim == 0:
        raise ValueError("src must be at least 1-D, got a scalar")
    return x


def _axis(axis, ndim):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"axis={axis!r} is out of range for an array of {ndim} dimension(s)")
    return int(axis) % ndim


def _reduce(reduce):
    if reduce in ("sum", "add"):
        return "sum"
    if reduce == "mean":
        return "mean"
    if reduce in ("min", "max", "prod", "mul"):
        raise NotImplementedError(f"golden: reduce={reduce!r} has no MMV-RAM algorithm in the papers "
                                  "(sum and mean only)")
    raise ValueError(f"reduce must be one of 'sum', 'mean', 'min', 'max', 'prod', got {reduce!r}")


def segment_csr(src, indptr, s=DEFAULT_S, *, axis=0, reduce="sum", overflow="raise"):
    """Sums (or means) of src along ``axis`` over indptr[n]:indptr[n+1]: every other coordinate
    a column of one ``column_segment_sums`` (Scan, GatherSpMV, DIFF for all columns at once).
    Empty segments give 0; the result dtype follows the project rule."""
    x = _src(src)
    s = check_s(s)
    axis = _axis(axis, x.ndim)
    red = _reduce(reduce)
    E = x.shape[axis]
    ip = as_indptr(indptr, "indptr", nnz=E)
    N = len(ip) - 1
    moved = np.moveaxis(x, axis, 0)
    C = int(np.prod(moved.shape[1:], dtype=np.int64))  # columns: every other coordinate
    P = np.ascontiguousarray(to_words(moved).reshape(E, C))
    y = column_segment_sums(P, ip, s)  # N x (other coordinates)
    if red == "mean":
        cnt = np.maximum(np.diff(ip), 1).reshape(N, 1)
        y = y // cnt if x.dtype.kind != "f" else y / cnt.astype(y.dtype)
    y = np.moveaxis(y.reshape((N,) + moved.shape[1:]), 0, axis)
    if x.dtype.kind != "f":
        b = bounds.scd(E, s, max_abs_int(x))

        def exact():
            xs = moved.reshape(E, C).astype(object)
            sums = [[sum(xs[ip[r]:ip[r + 1], c].tolist()) for c in range(xs.shape[1])] for r in range(N)]
            if red == "mean":
                sums = [[v // max(int(ip[r + 1] - ip[r]), 1) for v in row] for r, row in enumerate(sums)]
            return [v for row in sums for v in row]

        if red == "mean" and overflow == "raise" and b.magnitude > np.iinfo(np.int64).max:
            # the words hold floor((sum mod 2**64) / count), not the mean; a mean lies between its
            # values, so it always fits: the exact means (overflow="wrap" keeps the words, as hardware)
            y = np.moveaxis(np.array(exact(), dtype=np.int64).reshape((N,) + moved.shape[1:]), 0, axis)
            return finish(y, x.dtype, overflow, op="golden.segment_csr")
        return finish(y, x.dtype, overflow, bound_magnitude=b.magnitude, exact=exact, op="golden.segment_csr")
    return finish(y, x.dtype, overflow)


def _ids(index, E):
    a = _asarray(index, "index", empty_dtype=np.int64)
    if a.ndim != 1 or a.shape[0] != E or a.dtype.kind not in "iu":
        raise ValueError(f"index must be 1-D integers of length {E}, got {a.dtype} of shape {a.shape}")
    a = a.astype(np.int64)
    if a.size and a.min() < 0:
        raise ValueError("index must be non-negative")
    return a


def _offsets(ids, n):
    """CSR offsets of sorted ids in [0, n): the count of ids below each v (argument conversion)."""
    if ids.size and ids.max() >= n:
        raise ValueError(f"index holds {ids.max()}, outside [0, {n})")
    return np.concatenate([[0], np.cumsum(np.bincount(ids, minlength=n))]).astype(np.int64)


def segment_coo(src, index, s=DEFAULT_S, *, axis=0, dim_size=None, reduce="sum", overflow="raise"):
    """segment_csr by a sorted segment id per position (dim_size: index.max() + 1 by default)."""
    x = _src(src)
    axis = _axis(axis, x.ndim)
    ids = _ids(index, x.shape[axis])
    if ids.size > 1 and (np.diff(ids) < 0).any():
        raise ValueError("index must be sorted (non-decreasing) for segment_coo")
    n = int(dim_size) if dim_size is not None else (int(ids.max()) + 1 if ids.size else 0)
    return segment_csr(x, _offsets(ids, n), s, axis=axis, reduce=reduce, overflow=overflow)


def scatter(src, index, s=DEFAULT_S, *, axis=0, dim_size=None, reduce="sum", overflow="raise"):
    """segment_coo after a stable radix sort of the ids (Ascend §5) and a GATHER of src's
    positions into that order."""
    x = _src(src)
    axis = _axis(axis, x.ndim)
    ids = _ids(index, x.shape[axis])
    n = int(dim_size) if dim_size is not None else (int(ids.max()) + 1 if ids.size else 0)
    perm = argsort(ids, s) if ids.size else np.zeros(0, np.int64)
    moved = np.moveaxis(x, axis, 0)
    cols = moved.reshape(len(ids), int(np.prod(moved.shape[1:], dtype=np.int64)))
    gathered = np.stack([mmv.gather(np.ascontiguousarray(c), perm) for c in cols.T], axis=1) if moved.size else cols
    xs = np.moveaxis(gathered.reshape(moved.shape), 0, axis)
    return segment_csr(xs, _offsets(ids[perm], n), s, axis=axis, reduce=reduce, overflow=overflow)


def gather_csr(src, indptr, s=DEFAULT_S, *, axis=0):
    """Every position of segment n gets src's n-th entry along ``axis``: the segment id of each
    position is the scan of the start marks (Alg. 1) minus one, then one GATHER per column."""
    x = _src(src)
    s = check_s(s)
    axis = _axis(axis, x.ndim)
    ip = as_indptr(indptr, "indptr")
    N = len(ip) - 1
    if N != x.shape[axis]:
        raise ValueError(f"indptr has {N} segments but src has {x.shape[axis]} entries along the axis")
    E = int(ip[-1])
    marks = np.zeros(E + 1, np.int64)
    np.add.at(marks, ip[1:-1], 1)  # a mark where each later segment starts (empty ones stack)
    from .scan import scan_words

    seg = scan_words(marks[:E], s) if E else np.zeros(0, np.int64)
    moved = np.moveaxis(x, axis, 0)
    cols = moved.reshape(N, int(np.prod(moved.shape[1:], dtype=np.int64)))
    out = np.stack([mmv.gather(np.ascontiguousarray(cols[:, j]), seg) for j in range(cols.shape[1])], axis=1) \
        if E and cols.shape[1] else np.zeros((E, cols.shape[1]), x.dtype)
    return np.moveaxis(out.reshape((E,) + moved.shape[1:]), 0, axis)
