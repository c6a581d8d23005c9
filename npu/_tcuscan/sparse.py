"""TcuscanBackend's SpMV and SpMM, and the SpMV stages."""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_csr_matrix, as_flags, as_indptr, as_values, check_bool, check_int  # noqa: F401

from ._base import VARIANTS  # noqa: F401

_F16 = ("float16",)


class SparseMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "spmv": _F16,
        "spmm": _F16,
        "stage:gather_spmv": ("float32",),
        "stage:csr_gather": _F16,
    }

    def spmv(self, A, x):
        """run_spmv (App. Alg. 4 on the device): fp16 data and x, fp32 out;
        int16 is refused (the kernel narrows the products to int8)."""
        indptr, indices, data, (m, n) = as_csr_matrix(A, "A")  # rows and columns from A's shape
        x = as_values(x, "x")
        if len(x) != n:
            raise ValueError(f"x has length {len(x)} but A has {n} columns (shape {(m, n)})")
        self._refuse("run_spmv", data, ("float16",))
        self._refuse("run_spmv", x, ("float16",))
        rows = len(indptr) - 1
        if rows <= 0 or len(data) == 0:
            return np.zeros(max(rows, 0), np.float32)
        t_ptr = self._t(indptr.astype(np.int64)).to(self._torch.uint32)
        return self._np(self.module.run_spmv(self._t(data), t_ptr, self._t(indices.astype(np.int32)),
                                             self._t(x), self.s))

    def spmm(self, A, D):
        """O = A D as one run_spmv per column of D (tcuscan has no SpMM kernel, so
        this costs k launches and k passes over A): fp16 data and D, fp32 out."""
        indptr, indices, data, shape = as_csr_matrix(A, "A")  # rows and columns from A's shape
        D = as_values(D, "D", ndim=2)
        if D.shape[0] != shape[1]:
            raise ValueError(f"D must have {shape[1]} rows (A has {shape[1]} columns), got shape {D.shape}")
        self._refuse("run_spmv", data, ("float16",))
        self._refuse("run_spmv", D, ("float16",))
        rows, k = len(indptr) - 1, D.shape[1]
        if rows <= 0 or k == 0 or len(data) == 0:
            return np.zeros((max(rows, 0), k), np.float32)
        return np.stack([self.spmv((indptr, indices, data, shape), np.ascontiguousarray(D[:, j]))
                         for j in range(k)], axis=1)

    def gather_spmv(self, yhat, indptr):
        """Stage: run_gather_spmv with the row ends indptr[1:] (int32): the scan at
        every row end, 0 for leading empty rows; fp32 words."""
        yhat = np.asarray(yhat)
        if yhat.dtype != np.float32:
            raise TypeError(f"run_gather_spmv mishandles {yhat.dtype} words (it takes float32)")
        ends = np.asarray(indptr, dtype=np.int64)[1:].astype(np.int32)
        if len(ends) == 0:
            return np.zeros(0, np.float32)
        return self._np(self.module.run_gather_spmv(self._t(yhat), self._t(ends), self.s))

    def csr_gather(self, data, indices, x):
        """Stage: run_csr_gather (fp16 values, int32 columns) -> fp32 products."""
        data, x = as_values(data, "data"), as_values(x, "x")
        self._refuse("run_csr_gather", data, ("float16",))
        self._refuse("run_csr_gather", x, ("float16",))
        idx = np.asarray(indices)
        if idx.size and (idx.min() < 0 or idx.max() >= len(x)):
            raise ValueError("indices out of range for x")
        if len(data) == 0:
            return np.zeros(0, np.float32)
        return self._np(self.module.run_csr_gather(self._t(data), self._t(idx.astype(np.int32)), self._t(x)))
