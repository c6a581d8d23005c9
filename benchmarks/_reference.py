"""Double-double CSR SpMV: the reference for the accuracy columns of the spmv
benchmark (about 2**-104 relative to sum |a_ij x_j| per row, far below the
float64 results it judges)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_SPLIT = 134217729.0  # 2**27 + 1


@njit(inline="always")
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(inline="always")
def _two_prod(a, b):
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit(parallel=True, cache=True)
def _kernel(indptr, indices, data, x, ref, mag):
    for r in prange(ref.size):
        hi_ = 0.0
        lo_ = 0.0
        m = 0.0
        for k in range(indptr[r], indptr[r + 1]):
            p, pe = _two_prod(data[k], x[indices[k]])
            s, e = _two_sum(hi_, p)
            e += lo_ + pe
            hi_, lo_ = _two_sum(s, e)
            m += abs(data[k] * x[indices[k]])
        ref[r] = hi_ + lo_
        mag[r] = m


def dd_spmv(indptr, indices, data, x):
    """(A @ x rounded from double-double, sum_j |a_ij x_j|), float64 inputs."""
    ref = np.empty(indptr.size - 1)
    mag = np.empty(indptr.size - 1)
    _kernel(indptr, indices, data, x, ref, mag)
    return ref, mag
