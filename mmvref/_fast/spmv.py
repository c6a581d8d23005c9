"""Fast CPU CSR sparse matrix-vector product: validate, allocate, call the
Numba kernels of ``_spmv_kernels`` (the design is described there).

This is the production path; ``mmvref.golden.spmv`` is the paper's Alg. 4
(global scan, gather, difference), which is not used here because in floating
point a row's error would scale with the global prefix sums instead of the row.
"""
from __future__ import annotations

import numba
import numpy as np

from .._dtypes import result_dtype
from .._threading import guarded
from .._validate import as_values, check_overflow
from . import _spmv_kernels as K
from . import _target
from ._csr_input import csr_parts, index_arrays, raise_invalid
from ._io import like_input, to_numpy

__all__ = ["spmv"]

#: cost (nonzeros + ROW_COST * rows) per chunk below which fewer chunks are used
#: (one chunk runs on the calling thread); tests lower it to split rows across
#: chunks on small matrices
MIN_CHUNK_COST = 1 << 15
#: chunks per thread
CHUNKS_PER_THREAD = 8
#: kernel level override for tests (None: ``_target.level()``); see ``_path``
_LEVEL = None

_SAFE_INT64 = float(1 << 62)  # a row whose sum of |a_ij x_j| stays below this never left int64


@guarded
def spmv(A, x, *, overflow="raise"):
    """y = A @ x for a CSR matrix A; rows without entries give 0.

    Parameters
    - A: a ``scipy.sparse`` CSR matrix or CSR array, a torch sparse CSR CPU
      tensor, or a tuple ``(indptr, indices, data, shape)``. Column indices
      may be unsorted and repeated within a row (repeats are summed). Any
      integer index dtypes; the arrays are used as given (no copy when they
      are contiguous, 32- or 64-bit).
    - x: 1-D, length ``shape[1]``; numpy, array-like or torch CPU tensor.
    - overflow: integer results only. ``"raise"`` (default) raises
      OverflowError when an exact row result does not fit the result dtype;
      ``"wrap"`` returns it modulo 2**32 / 2**64 (two's complement).

    Returns y of length ``shape[0]``: a numpy array, or a torch tensor when x
    is one.

    Dtypes: the values are promoted with ``np.result_type(data, x)`` and the
    project rule (``mmvref._dtypes.result_dtype``) gives the result dtype:
    int8/int16/int32 -> int32, int64 -> int64, float16 -> float32, float32
    and float64 kept. Examples: (float32, float32) -> float32; (float32,
    float64) -> float64; (int32, float32) -> float64 (numpy's promotion);
    (int8, int16) -> int32. Unsigned, bool and complex values raise TypeError.

    Integers are exact: products and sums run in int64 that wraps (exact
    modulo 2**64); with ``overflow="raise"`` a row whose float64 sum of
    |a_ij x_j| reaches 2**62 is recomputed with Python integers, so the check
    is on the exact value, products and sums of int64 inputs included.

    Floats accumulate in the result dtype in an order that is not the index
    order (W-lane partial sums, rows split across threads, a tree at the
    end). For a row i with k stored entries and u the unit roundoff of the
    result dtype (2**-24 float32, 2**-53 float64):

        |y_i - sum_j a_ij x_j| <= gamma_k * sum_j |a_ij x_j|,  gamma_k = k u / (1 - k u),

    where a_ij and x_j are the inputs converted to the result dtype (exact,
    except int64 values above 2**53 in float64: then use gamma_{k+2}). This is
    the bound of any summation order of the k products, so it covers the
    reassociation. NaN and inf propagate as in IEEE arithmetic.

    Validation (indptr starts at 0, ends at nnz and never decreases; every
    column index in [0, shape[1])) is fused into the kernel's single pass over
    the matrix: an invalid matrix is never read out of bounds, and the error
    (ValueError naming indptr or indices) is raised after that pass.
    """
    src = x
    check_overflow(overflow)
    indptr, indices, data, (m, n) = csr_parts(A)
    x = as_values(to_numpy(x, "x"), "x")
    if x.shape[0] != n:
        raise ValueError(f"x has length {x.shape[0]} but A has {n} columns (shape {(m, n)})")
    data = np.ascontiguousarray(as_values(to_numpy(data, "data"), "data"))
    rdt = result_dtype(np.result_type(data.dtype, x.dtype))
    indptr, indices = index_arrays(indptr, indices, data, m, n)
    nnz = data.shape[0]

    if nnz == 0 or m == 0:
        return like_input(np.zeros(m, dtype=rdt), src)
    if n == 0:  # entries but no column for them
        raise_invalid(indptr, indices, data, n)

    C = _n_chunks(nnz + K.ROW_COST * m)
    R, E = K.partition(indptr, C, K.ROW_COST)
    if R[0] != 0 or R[-1] != m:  # only offsets out of order leave rows outside every chunk
        raise_invalid(indptr, indices, data, n)
    umax = np.zeros(C, dtype=np.uint64)
    bad = np.zeros(C, dtype=np.bool_)
    if rdt.kind == "f":
        y = _float(indptr, indices, data, x, rdt, R, E, umax, bad, m, n)
    else:
        y = _int(indptr, indices, data, x, rdt, R, E, umax, bad, m, n, overflow)
    return like_input(y, src)


# ----------------------------------------------------------------------------- paths

def _float(indptr, indices, data, x, rdt, R, E, umax, bad, m, n):
    # values of another dtype (float16, integers with float x) are converted first: exact (the result
    # dtype holds them, see spmv's docstring), one extra pass over the values, and the kernels compile
    # for two value dtypes instead of seven (cold start, every user's first call)
    if data.dtype != rdt:
        data = data.astype(rdt)
    xk = np.ascontiguousarray(x, dtype=rdt)
    y = np.empty(m, dtype=rdt)
    C = R.size - 1
    first = np.zeros(C, dtype=rdt)
    last = np.zeros(C, dtype=rdt)
    kernel = K.float_rows if C > 1 else K.float_rows_serial
    P = _path()
    kernel(indptr, indices, data, xk, y, R, E, first, last, umax, bad, P.GATHER, P.LONG_ROW, P.SCALAR_SHORT)
    _check_flags(indptr, indices, data, n, umax, bad)
    K.combine(y, R, first, last)
    return y


def _int(indptr, indices, data, x, rdt, R, E, umax, bad, m, n, overflow):
    # x of another integer dtype than the values is widened to int64 (one pass over x; the kernels
    # compile for 7 dtype pairs instead of 16)
    xk = np.ascontiguousarray(x) if x.dtype == data.dtype else x.astype(np.int64)
    y = np.empty(m, dtype=np.int64)
    bnd = np.zeros(m, dtype=np.float64)
    C = R.size - 1
    first = np.zeros(C, dtype=np.int64)
    last = np.zeros(C, dtype=np.int64)
    fb = np.zeros(C, dtype=np.float64)
    lb = np.zeros(C, dtype=np.float64)
    check = overflow == "raise"
    kernel = K.int_rows if C > 1 else K.int_rows_serial
    kernel(indptr, indices, data, xk, y, bnd, R, E, first, last, fb, lb, umax, bad, check)
    _check_flags(indptr, indices, data, n, umax, bad)
    K.combine(y, R, first, last)
    if check:
        K.combine_bound(bnd, R, fb, lb)
        info = np.iinfo(rdt)
        suspect = np.flatnonzero(bnd >= _SAFE_INT64)
        if suspect.size:
            exact = {int(r): _exact_row(indptr, indices, data, x, int(r)) for r in suspect}
            for r, v in exact.items():
                if v < info.min or v > info.max:
                    raise _overflow_error(rdt, r, v)
                y[r] = v
        if rdt != np.int64:
            out = (y < info.min) | (y > info.max)
            if out.any():
                r = int(np.argmax(out))
                raise _overflow_error(rdt, r, int(y[r]))
    return y.astype(rdt, copy=False)


def _exact_row(indptr, indices, data, x, r):
    lo, hi = int(indptr[r]), int(indptr[r + 1])
    return sum(int(a) * int(x[int(j)]) for a, j in zip(data[lo:hi].tolist(), indices[lo:hi].tolist()))


def _overflow_error(rdt, r, v):
    return OverflowError(
        f"spmv: row {r} of the result is {v}, which overflows {rdt}; pass overflow='wrap' for "
        f"two's-complement wrap-around" + (" or use int64 values" if rdt == np.int32 else ""))


def _path():
    """The module of the chosen float path (``_target.FAMILIES["spmv"]``): it gives the
    kernels their gather kind and LONG_ROW."""
    return _target.kernels("spmv", _LEVEL)


def _n_chunks(cost):
    T = numba.get_num_threads()
    return int(max(1, min(T * CHUNKS_PER_THREAD, cost // MIN_CHUNK_COST)))


def _check_flags(indptr, indices, data, n, umax, bad):
    if K.flagged(umax, bad, n):
        raise_invalid(indptr, indices, data, n)


