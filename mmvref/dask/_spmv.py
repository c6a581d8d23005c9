"""spmv on Dask: the CSR matrix partitioned by rows, x one graph key that every row block reads (so the
distributed scheduler sends it to each worker once), each block ``mmvref.spmv``. Rows are independent:
no carries, and each block decides its own rows' overflow exactly."""
from __future__ import annotations

import dask.array as da
import numpy as np

from .._fast.sparse import ops as sparse_ops
from .._dtypes import result_dtype
from .._fast._csr_input import csr_parts, int_array
from .._validate import to_numpy
from .._validate import as_indptr, as_values, check_overflow
from . import _graph as G

__all__ = ["spmv"]

#: stored entries per row block when ``row_chunks`` is not given
BLOCK_NNZ = 1 << 22


def _block(indptr, indices, data, shape, x, overflow):
    return sparse_ops.spmv((indptr, indices, data, shape), x, overflow=overflow)


def _row_cuts(ip, m, row_chunks):
    """Row boundaries of the blocks: ``row_chunks`` None (blocks of about BLOCK_NNZ entries), an int
    (that many blocks of about equal entries) or a tuple of row counts summing to m."""
    nnz = int(ip[-1])
    if row_chunks is None or isinstance(row_chunks, (int, np.integer)):
        k = max(1, -(-nnz // BLOCK_NNZ)) if row_chunks is None else int(row_chunks)
        if k < 1:
            raise ValueError(f"spmv: row_chunks must be positive, got {row_chunks}")
        k = min(k, max(m, 1))
        cuts = np.searchsorted(ip, np.linspace(0, nnz, k + 1)[1:-1].astype(np.int64), side="left")
        cuts = np.unique(np.concatenate([[0], np.clip(cuts, 0, m), [m]])).astype(np.int64)
        return cuts if cuts.size > 1 else np.zeros(2, np.int64)  # no rows: one empty block
    sizes = np.asarray(row_chunks, dtype=np.int64)
    if sizes.ndim != 1 or (sizes < 0).any() or int(sizes.sum()) != m:
        raise ValueError(f"spmv: row_chunks must be row counts summing to A's {m} rows, got {row_chunks!r}")
    return np.concatenate([[0], np.cumsum(sizes)])


def spmv(A, x, *, row_chunks=None, overflow="raise"):
    """y = A @ x, a lazy dask array of A's rows in blocks. ``A``: a scipy.sparse CSR matrix or array, or
    (indptr, indices, data, shape), on the client; its offsets are checked at the call, its column
    indices by each block's task. ``x``: numpy or a dask array of length shape[1] (rechunked to one
    chunk: every block reads all of it). ``row_chunks``: None (blocks of about 4M stored entries), a
    number of blocks of about equal entries, or a tuple of row counts. Dtypes, exactness and
    ``overflow`` as ``mmvref.spmv``."""
    check_overflow(overflow)
    indptr, indices, data, (m, n) = csr_parts(A)
    # the single-machine boundary: torch tensors (dtypes numpy lacks, e.g. bfloat16, refused naming the
    # argument), [] as no int64 indices, value dtypes checked
    if not isinstance(x, da.Array):
        x = da.from_array(as_values(to_numpy(x, "x"), "x"), chunks=-1)
    data = as_values(to_numpy(data, "data"), "data")
    ip = as_indptr(int_array(indptr, "indptr"), "indptr", nnz=data.shape[0])
    if ip.size != m + 1:
        raise ValueError(f"spmv: indptr has {ip.size} entries for {m} rows (expected {m + 1})")
    indices = int_array(indices, "indices")
    if indices.shape[0] != data.shape[0]:
        raise ValueError(f"indices has length {indices.shape[0]} but data has length {data.shape[0]}")
    if x.ndim != 1 or x.shape[0] != n:
        raise ValueError(f"spmv: x must be 1-D of length {n} (A's columns), got shape {x.shape}")
    G.check_known(x, "x", "spmv")
    try:
        rdt = result_dtype(np.result_type(data.dtype, x.dtype))
    except (KeyError, TypeError):
        raise TypeError(f"spmv: values of dtypes {data.dtype} (A) and {x.dtype} (x) are not accepted; "
                        f"accepted: int8/16/32/64, float16/32/64") from None
    x1 = x.rechunk(-1) if x.numblocks[0] != 1 else x
    cuts = _row_cuts(ip, m, row_chunks)
    name = G.token("spmv", ip, indices, data, m, n, x1, cuts, overflow)
    dsk = {}
    for b in range(cuts.size - 1):
        r0, r1 = int(cuts[b]), int(cuts[b + 1])
        lo, hi = int(ip[r0]), int(ip[r1])
        dsk[(name, b)] = (_block, ip[r0:r1 + 1] - lo, indices[lo:hi], data[lo:hi], (r1 - r0, n), (x1.name, 0),
                          overflow)
    return G.new_array(name, dsk, [x1], (tuple(int(v) for v in np.diff(cuts)),), rdt)
