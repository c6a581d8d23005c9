"""CSR operands of the fast sparse kernels (spmv, spmm, spgemm): the parts of
a scipy CSR matrix/array, a torch sparse CSR tensor or an (indptr, indices,
data, shape) tuple, without copying; O(1) checks here, the O(nnz) checks
fused into each kernel's pass (``raise_invalid`` names what they found)."""
from __future__ import annotations

import operator

import numba
import numpy as np

from .._dtypes import VALUE_DTYPES
from .._validate import as_csr, as_values
from .segment import _portable as K
from .._validate import is_tensor, to_numpy

__all__ = ["csr_parts", "csr_arrays", "shape_pair", "index_arrays", "int_array", "raise_invalid", "check_indptr_order",
           "long_segments"]


def csr_parts(A, name="A"):
    """(indptr, indices, data, (rows, cols)) of a CSR input, without copying."""
    if isinstance(A, tuple) or isinstance(A, list):
        if len(A) != 4:
            raise TypeError(f"{name} as a tuple must be (indptr, indices, data, shape), got {len(A)} items")
        indptr, indices, data, shape = A
        return indptr, indices, data, shape_pair(shape)
    mod = type(A).__module__
    if mod.startswith("scipy.sparse"):
        fmt = getattr(A, "format", "?")
        if fmt != "csr":
            raise TypeError(f"{name} must be in CSR format, got a scipy.sparse {type(A).__name__} in {fmt!r} "
                            f"format; convert it with {name}.tocsr()")
        return A.indptr, A.indices, A.data, shape_pair(A.shape)
    if is_tensor(A):
        import torch

        if A.layout != torch.sparse_csr:
            raise TypeError(f"{name} must be a sparse CSR tensor, got layout {A.layout}; convert it with "
                            f"{name}.to_sparse_csr()")
        if A.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got a tensor of shape {tuple(A.shape)}")
        return (to_numpy(A.crow_indices(), f"{name}.crow_indices()"), to_numpy(A.col_indices(), f"{name}.col_indices()"),
                to_numpy(A.values(), f"{name}.values()"), shape_pair(tuple(A.shape)))
    if hasattr(A, "tocsr"):
        raise TypeError(f"{name} must be a CSR matrix, got {type(A).__name__}; convert it with {name}.tocsr()")
    raise TypeError(f"{name} must be a scipy.sparse CSR matrix or array, a torch sparse CSR tensor or a tuple "
                    f"(indptr, indices, data, shape), got {type(A).__name__}")


def csr_arrays(A, name="A", data_name="data"):
    """(indptr, indices, data, (rows, cols)) of a CSR input as the kernels take them: ``data`` a
    C-contiguous 1-D array of a value dtype (``as_values``; TypeError / ValueError naming
    ``data_name``), ``indptr`` / ``indices`` int32 or int64 (``index_arrays``); the O(1) checks made,
    nothing copied that is already so. The one normalisation of the sparse family's matrix operands
    (``spmv``, ``spmm``, ``spgemm``, ``prepare``)."""
    indptr, indices, data, shape = csr_parts(A, name)
    if not (type(data) is np.ndarray and data.ndim == 1 and data.dtype in _VALUE_SET
            and data.flags.num & _CONTIGUOUS_WRITEABLE == _CONTIGUOUS_WRITEABLE):
        # (else data is a plain vector of a value dtype, which these return as it is: 0.7 us of a
        # 1,000-row matrix's preparation saved)
        data = np.ascontiguousarray(as_values(to_numpy(data, data_name), data_name))
    indptr, indices = index_arrays(indptr, indices, data, shape[0], shape[1], name)
    return indptr, indices, data, shape


def shape_pair(shape):
    try:
        m, n = shape
        m, n = operator.index(m), operator.index(n)
    except (TypeError, ValueError):
        raise TypeError(f"shape must be a pair of integers (rows, columns), got {shape!r}") from None
    if m < 0 or n < 0:
        raise ValueError(f"shape must be non-negative, got {(m, n)}")
    return m, n


def index_arrays(indptr, indices, data, m, n, name="A"):
    """Cheap O(1) checks and dtypes; the O(nnz) checks are fused into the kernels."""
    plain = _plain_index(indptr) and _plain_index(indices)
    if not plain:  # (else int_array returns them as they are)
        indptr = int_array(indptr, "indptr")
        indices = int_array(indices, "indices")
    nnz = data.shape[0]
    if indptr.shape[0] != m + 1:
        raise ValueError(f"indptr has length {indptr.shape[0]} but {name} has {m} rows (expected {m + 1})")
    if indices.shape[0] != nnz:
        raise ValueError(f"indices has length {indices.shape[0]} but data has length {nnz}")
    if indptr[0] != 0:
        raise ValueError(f"indptr[0] must be 0, got {indptr[0]}")
    if indptr[m] != nnz:
        raise ValueError(f"indptr[-1] must equal the number of entries ({nnz}), got {indptr[m]}")
    if nnz == 0 and m > 1 and indptr.any():  # no entries: no kernel pass checks the offsets
        raise_invalid(indptr, indices, data, n, name)
    if plain:  # int32 / int64 already
        return indptr, indices
    # The kernels take int32 and int64 only: two index dtypes each, four combinations, instead of
    # the eight integer dtypes squared (each a compile of seconds on a user's first call). Narrow
    # dtypes are widened (a copy, exact); unsigned ones are viewed as signed (no copy) once no value
    # can wrap: a value past the signed range would be out of range anyway, and is refused here,
    # with its own value in the message, before it could turn negative.
    if indptr.dtype.kind == "u" and indptr.dtype.itemsize >= 4 and indptr.max() > nnz:
        raise_invalid(indptr, indices, data, n, name)
    if indices.dtype.kind == "u" and indices.dtype.itemsize >= 4 and nnz and indices.max() >= n:
        raise_invalid(indptr, indices, data, n, name)
    return _signed_index(indptr, nnz), _signed_index(indices, n)


_VALUE_SET = frozenset(VALUE_DTYPES)  # (native byte order: a hash, not seven comparisons)
_PLAIN_INDEX = frozenset((np.dtype(np.int32), np.dtype(np.int64)))
#: numpy's flag bits C_CONTIGUOUS and WRITEABLE
_CONTIGUOUS_WRITEABLE = 0x0001 | 0x0400


def _plain_index(a):
    """A 1-D C-contiguous, writeable, native int32 / int64 ndarray: an index array as the kernels take it."""
    return (type(a) is np.ndarray and a.ndim == 1 and a.dtype in _PLAIN_INDEX
            and a.flags.num & _CONTIGUOUS_WRITEABLE == _CONTIGUOUS_WRITEABLE)


def _signed_index(a, bound):
    """``a`` (native order, contiguous, values known to be below ``bound`` where unsigned 32/64-bit)
    as int32 or int64 with the same values."""
    if a.dtype in _PLAIN_INDEX:
        return a
    if a.dtype.itemsize < 4:
        return a.astype(np.int32)
    if a.dtype.itemsize == 8 or bound < (1 << 31):  # uint64 below 2**63, uint32 below 2**31
        return a.view(np.int64 if a.dtype.itemsize == 8 else np.int32)
    return a.astype(np.int64)


def int_array(a, name):
    a = to_numpy(a, name)
    if isinstance(a, (list, tuple, range)) and len(a) == 0:
        a = np.zeros(0, np.int64)  # [] is no indices, not float64
    elif not isinstance(a, np.ndarray):
        a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype, got {a.dtype}")
    return np.ascontiguousarray(a)


def raise_invalid(indptr, indices, data, n, name="A"):
    """The kernels saw something invalid: find it with the shared validator (its messages name it)."""
    try:
        as_csr(indptr, indices, data, n_cols=n)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    raise ValueError(f"{name}: inconsistent CSR structure (indptr and indices do not describe the rows)")


def check_indptr_order(ip):
    """ValueError naming the first decreasing offset of ``ip`` (int64; one parallel pass, no
    temporaries: np.diff's two 8-byte arrays per segment cost more than the sums at ~10
    elements a segment)."""
    m = ip.size - 1
    if m <= 0:
        return
    T = numba.get_num_threads()
    row_chunks = np.linspace(0, m, max(1, min(T * 4, m // 4096 + 1)) + 1).astype(np.int64)
    steps = np.empty(row_chunks.size - 1, np.int64)
    K.indptr_min_step(ip, row_chunks, steps)
    if steps.min() < 0:
        i = int(np.flatnonzero(ip[1:] < ip[:-1])[0])  # the error path: a plain search
        raise ValueError(f"indptr must be non-decreasing; indptr[{i}] = {ip[i]} > indptr[{i + 1}] = {ip[i + 1]}")


def long_segments(ip, share):
    """The segments of ``ip`` (valid, non-decreasing offsets) longer than ``share`` (> 0), sorted.
    A segment longer than share (>= 2h) contains a multiple of h = share // 2: only the segments
    holding those few points can be long, so no pass over all offsets is needed."""
    m = ip.size - 1
    n = int(ip[-1]) if ip.size else 0
    h = max(share // 2, 1)
    cand = np.unique(np.searchsorted(ip, np.arange(h, n, h, dtype=np.int64), side="right") - 1)
    cand = cand[(cand >= 0) & (cand < m)]
    return cand[(ip[cand + 1] - ip[cand]) > share]
