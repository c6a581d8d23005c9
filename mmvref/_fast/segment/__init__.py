"""Segment reductions and scans: ``scan``, ``segmented_scan``, ``segmented_sum``,
``segment_sum_csr``, ``segment_csr``, ``segment_coo``, ``scatter``, ``gather_csr``.

Modules, in the order a call passes through them:

- ``ops``: the public functions (the family's boundary: ``axis=`` / ``dim=``, the torch route)
- ``_torch``: the torch custom ops that carry autograd (and torch.compile) for tensor inputs
- ``_arrays``: validation and normalisation, once; the dispatch by shape and dtype
- ``_column``: one column (1-D) drivers: the int8/16/32 -> int32 scans and sums, exact int64
- ``_nd``: the N-d machinery ([B, E, F]: tasks by element count, long segments in parts, scatter)
- kernels by target (``_target.FAMILIES`` chooses): ``_portable`` (one-column and rows kernels),
  ``_portable_nd`` (N-d kernels), ``_portable_vec`` / ``_portable_nd_vec`` (generic LLVM vector
  IR, lowered for any target), ``_avx2`` and ``_avx512`` (x86 intrinsics; imported only when the
  compile target has them)
"""
from .ops import (  # noqa: F401
    gather_csr,
    scan,
    scatter,
    segment_coo,
    segment_csr,
    segment_sum_csr,
    segmented_scan,
    segmented_sum,
)
