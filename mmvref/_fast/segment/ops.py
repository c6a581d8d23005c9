"""Segment reductions and scans: the public ops of the family, its one boundary.

Ops: ``scan``, ``segmented_scan``, ``segmented_sum``, ``segment_sum_csr`` and ``segment_csr``,
``segment_coo``, ``scatter``, ``gather_csr``. An input of any rank is seen as ``[B, E, F]``
around the reduced (or scanned) axis: the dimensions before it independent batches, those after
it one contiguous feature vector per position, inside the kernels.

The path of a call: here, ``axis=`` / ``dim=`` and the route (torch tensors that need autograd,
or are traced, go to the custom ops of ``_torch``); then ``_arrays``, which validates and
normalises every argument once and dispatches by shape (one integer column: the one-column
kernels of ``_column``; anything else: the N-d machinery of ``_nd``); then the kernels of the
target ``_target`` chose (``_portable*``, ``_avx2``, ``_avx512``). Result dtypes, the overflow
decision and ``out=``: ``mmvref._fast._policy``, shared with every family.

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

Flags (``segmented_scan``, ``segmented_sum``) mark segment STARTS and are 0/1 in bool, int8 or
uint8; position 0 always starts a segment. ``segmented_sum`` is ``segment_csr`` over the starts'
offsets and ``segment_sum_csr`` is ``segment_csr(reduce="sum")``: one code path each, the same bits.

Dtypes follow the project rule (int8/16/32 -> int32, int64 -> int64, fp16 ->
fp32, fp32/fp64 kept) for every reduction; ``dtype=`` asks for another one
(int8 ... float64): integer results that do not fit raise OverflowError, or
wrap with ``overflow="wrap"``; float16 results are rounded from float32.

Float error bounds (u = unit roundoff of the result dtype; sums run in index
order inside a chunk, and a chunk's first segment gets the previous chunk's
carry added at the end, so at most one extra rounding per chunk boundary):
  scan, segmented_scan:  |err_i| <= (len_i + 1) * u * sum_{j in segment, j<=i} |x_j|
  segmented_sum, segment_sum_csr, segment_csr sums: |err_r| <= (len_r + parts) * u * sum_{j in row r} |x_j|
"""
from __future__ import annotations

from ..._threading import guarded
from .._policy import needs_torch_op
from . import _arrays

__all__ = ["scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "segment_csr", "segment_coo", "scatter",
           "gather_csr"]


def axis_or_dim(axis, dim, default):
    """``dim=`` (torch's name) as an alias of ``axis=``; both given must agree."""
    if dim is None:
        return axis
    if axis is not default and axis != dim:
        raise TypeError(f"pass axis= or dim=, not both (got axis={axis!r}, dim={dim!r})")
    return dim


@guarded
def scan(x, *, axis=None, exclusive=False, dtype=None, overflow="raise", out=None, dim=None):
    """Inclusive (or exclusive) prefix sums along ``axis``, like ``np.cumsum(x, axis)``:
    z[..., i, ...] = sum of x[..., :i+1, ...] (``exclusive``: x[..., :i, ...]).

    Parameters: x (any rank, int8/16/32/64 or fp16/32/64; numpy, array-like or
    torch CPU tensor); axis (None: x flattened, as np.cumsum); exclusive; dtype
    (result dtype; default the project rule); overflow ("raise" or "wrap"); out
    (an array of the result's shape and dtype to write into). A 1-D scan is
    split among threads by chunks; rows (the scanned axis last) are scanned in
    parallel; other axes scan each (batch, feature) column, features inside the
    kernel. torch in -> torch out (with autograd when x requires grad).
    """
    axis = axis_or_dim(axis, dim, None)
    if needs_torch_op(x):
        from . import _torch

        return _torch.scan(x, axis=axis, exclusive=exclusive, dtype=dtype, overflow=overflow, out=out)
    return _arrays.scan(x, axis=axis, exclusive=exclusive, dtype=dtype, overflow=overflow, out=out)


@guarded
def segmented_scan(x, flags, *, axis=0, exclusive=False, dtype=None, overflow="raise", out=None, dim=None):
    """Segmented prefix sums along ``axis`` (Problem 2.1): z[i] = x[i] where i == 0 or
    flags[i], else z[i-1] + x[i], for every (batch, feature) column.

    ``flags`` (1-D, bool/int8/uint8 holding 0/1, length x.shape[axis]) mark segment
    starts. With ``exclusive=True`` each segment's first output is 0 and z[i] sums
    the segment's elements before i. dtype / overflow / out: as ``scan``.
    """
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(x):
        from . import _torch

        return _torch.segmented_scan(x, flags, axis=axis, exclusive=exclusive, dtype=dtype,
                                     overflow=overflow, out=out)
    return _arrays.segmented_scan(x, flags, axis=axis, exclusive=exclusive, dtype=dtype, overflow=overflow,
                                  out=out)


@guarded
def segmented_sum(x, flags, *, axis=0, reduce="sum", return_arg=False, dtype=None, overflow="raise", out=None,
                  dim=None):
    """One reduction per segment along ``axis``, in order; ``flags`` (1-D 0/1, length
    x.shape[axis]) mark segment starts (position 0 always starts one), so there are
    1 + (set flags after position 0) segments for a non-empty axis, and none for an
    empty one.

    reduce: "sum" (default), "mean", "min", "max", "prod"; ``return_arg`` (min/max)
    also returns the int64 positions chosen. Semantics of the reductions, empty
    input, NaN and dtypes: this module's docstring. Integer sums are exact;
    1-D float sums accumulate each segment in index order (a segment crossing a
    chunk boundary gets one extra rounding per boundary).
    """
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(x):
        from . import _torch

        return _torch.segmented_sum(x, flags, axis=axis, reduce=reduce, return_arg=return_arg, dtype=dtype,
                                    overflow=overflow, out=out)
    return _arrays.segmented_sum(x, flags, axis=axis, reduce=reduce, return_arg=return_arg, dtype=dtype,
                                 overflow=overflow, out=out)


@guarded
def segment_sum_csr(x, indptr, *, axis=0, dtype=None, overflow="raise", out=None, dim=None):
    """Sums of x over the segments indptr[r]:indptr[r+1] along ``axis``; empty segments give 0.

    ``indptr``: integers, indptr[0] == 0, non-decreasing, indptr[-1] == x.shape[axis].
    Returns x.shape with the axis replaced by len(indptr) - 1. Rows are split among
    threads by element count; a row longer than a thread's share is itself split.
    ``segment_csr(x, indptr, reduce=...)`` takes the other reductions.
    """
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(x):
        from . import _torch

        return _torch.segment_sum_csr(x, indptr, axis=axis, dtype=dtype, overflow=overflow, out=out)
    return _arrays.segment_sum_csr(x, indptr, axis=axis, dtype=dtype, overflow=overflow, out=out)


@guarded
def segment_csr(src, indptr, *, axis=0, reduce="sum", return_arg=False, dtype=None, overflow="raise", out=None,
                dim=None):
    """Reduce ``src`` along ``axis`` over the segments ``indptr[n]:indptr[n+1]``.

    ``indptr``: 1-D integers, indptr[0] == 0, non-decreasing, indptr[-1] ==
    src.shape[axis]. Returns src.shape with the axis replaced by len(indptr) - 1
    (and the int64 argmin/argmax positions with ``return_arg=True``). One pass
    over src; segments are split among threads by element count, and a segment
    longer than a thread's share is itself split. Reductions, empty segments,
    NaN and dtypes: see the module docstring (this module's docstring).
    """
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(src):
        from . import _torch

        return _torch.segment_csr(src, indptr, axis=axis, reduce=reduce, return_arg=return_arg,
                                  dtype=dtype, overflow=overflow, out=out)
    return _arrays.segment_csr(src, indptr, axis=axis, reduce=reduce, return_arg=return_arg, dtype=dtype,
                               overflow=overflow, out=out)


@guarded
def segment_coo(src, index, *, axis=0, dim_size=None, reduce="sum", return_arg=False, dtype=None,
                overflow="raise", out=None, dim=None):
    """Reduce ``src`` along ``axis`` by a SORTED segment id per position (``index``, 1-D,
    non-decreasing, values in [0, dim_size); dim_size defaults to index.max() + 1).
    The ids become CSR offsets by one counting pass, then one segmented reduction
    (``segment_csr``); an unsorted index raises ValueError (use ``scatter``)."""
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(src):
        from . import _torch

        return _torch.segment_coo(src, index, axis=axis, dim_size=dim_size, reduce=reduce,
                                  return_arg=return_arg, dtype=dtype, overflow=overflow, out=out)
    return _arrays.segment_coo(src, index, axis=axis, dim_size=dim_size, reduce=reduce, return_arg=return_arg,
                               dtype=dtype, overflow=overflow, out=out)


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
        from . import _torch

        return _torch.scatter(src, index, axis=axis, dim_size=dim_size, reduce=reduce, return_arg=return_arg,
                              dtype=dtype, overflow=overflow, out=out)
    return _arrays.scatter(src, index, axis=axis, dim_size=dim_size, reduce=reduce, return_arg=return_arg,
                           dtype=dtype, overflow=overflow, out=out)


@guarded
def gather_csr(src, indptr, *, axis=0, out=None, dim=None):
    """The inverse pattern of segment_csr: every position of segment n gets src's n-th entry
    along ``axis`` (src.shape[axis] == len(indptr) - 1; the result has indptr[-1] positions).
    segment_csr's sum backward. Values keep their dtype."""
    axis = axis_or_dim(axis, dim, 0)
    if needs_torch_op(src):
        from . import _torch

        return _torch.gather_csr(src, indptr, axis=axis, out=out)
    return _arrays.gather_csr(src, indptr, axis=axis, out=out)
