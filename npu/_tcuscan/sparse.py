"""TcuscanBackend's SpMV and SpMM (four SpMV kernels as ``variant=``), and the SpMV stages.

- ``spmv(A, x, variant=None)``: "v1" (run_spmv, the default: CSR gather, multi-core scan, gather at the
  row ends, diff), "multi_cube" (run_spmv_multi_cube: the scan on the cube units), "v2" (run_spmv_v2:
  the fused segmented-sum kernel) and "v2_multi_cube" (run_spmv_v2_multi_cube). fp16 data and x in
  every variant (fp32 -> fp32 rows); "v2" also takes fp32 (its spmv_v2_fp32 kernel). Refused
  (TypeError): int16 (run_spmv narrows the products to int8; the others have no int16 kernel), fp32
  in the other variants (run_spmv's scan reads fp32 as int8 bytes, the multi-cube kernels are half
  only), mixed data / x dtypes. Leading empty rows are cut before the call and returned as 0 (with
  tile_len or more of them run_gather_spmv's leading-zero loop would run past its first tile); A
  without stored entries gives zeros without a launch. A longer x than the vector core's Unified
  Buffer holds next to the CSR gather tile (87,040 fp16 / 41,472 fp32 columns for tiles of 1024)
  raises NotImplementedError naming the kernel.
  Rounding: every kernel stores the products a(k) x(col(k)) in the input dtype, so fp16 products are
  rounded to fp16 (relative error up to 2^-11, absolute up to 2^-25 in fp16's subnormal range) before
  the fp32 sums. The conformance suite's derived fp32 "prefix" bound (2 (nnz + 2s) 2^-24 A_r, A_r
  the prefix of |products|) does not cover that: a row needs in addition 2^-11 sum over its own
  products |a(k) x(col(k))| + (its nnz) 2^-25.
- ``spmm(A, D, variant=None)``: one spmv per column of D (tcuscan has no SpMM kernel: k launches,
  k passes over A), the same variants and dtypes.
- ``csr_gather(data, indices, x)`` (stage csr_gather, App. Alg. 5): run_csr_gather, fp16 or fp32
  data and x (same dtype), result as fp32 words. fp32 runs csr_gather_fp32: the products as the
  stage's contract (one fp32 rounding). fp16 runs csr_gather_fp16 (the kernel run_spmv uses), whose
  products are rounded to fp16 and returned widened: they differ from the stage's exact fp32
  products by up to 2^-11 |product| (+ 2^-25 for fp16-subnormal products), beyond the stage check's
  fp32 bound; the backend returns the kernel's products as they are (honest), not a recomputation.
- ``gather_spmv(yhat, indptr)`` (stage gather_spmv, App. Alg. 6): run_gather_spmv with the row ends
  indptr(1:), leading zeros (leading empty rows) set here and cut from the kernel's indices (see
  above). The kernel moves 4-byte words: float32, int32 and uint32 go as they are; int64 words (the
  stage's integer words) go as int32 when every value fits (else ValueError) and come back as int64.

Not wrapped (NOT_WRAPPED says why): run_mc_gather.
"""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_csr_matrix, as_values

_F16 = ("float16",)
_F16_F32 = ("float16", "float32")

#: spmv / spmm variant -> (kernel, value dtypes it takes)
SPMV_KERNELS = {
    "v1": ("run_spmv", _F16),
    "v2": ("run_spmv_v2", _F16_F32),
    "multi_cube": ("run_spmv_multi_cube", _F16),
    "v2_multi_cube": ("run_spmv_v2_multi_cube", _F16),
}
SPMV_VARIANTS = {v: dts for v, (_k, dts) in SPMV_KERNELS.items()}
#: upstream's Unified Buffer budget of a vector core (UB_SIZE_BYTES) and run_csr_gather's tile
_UB_BYTES = 190 * 1024
_CSR_TILE = 1024
#: the gather_spmv tile the backend launches with (run_spmv's own)
_GATHER_TILE = 128

WRAPS = {
    "run_spmv": "op spmv, variant=v1; op spmm, variant=v1",
    "run_spmv_v2": "op spmv, variant=v2; op spmm, variant=v2",
    "run_spmv_multi_cube": "op spmv, variant=multi_cube; op spmm, variant=multi_cube",
    "run_spmv_v2_multi_cube": "op spmv, variant=v2_multi_cube; op spmm, variant=v2_multi_cube",
    "run_csr_gather": "stage csr_gather",
    "run_gather_spmv": "stage gather_spmv",
}

NOT_WRAPPED = {
    "run_mc_gather": "a plain gather values[idxs] (sorted uint32 indices): GATHER is an MMV-RAM instruction, "
                     "not a registry op or conformance stage, and no wrapped op uses it",
}


class SparseMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these; spmv's and spmm's
    #: fp32 examples are checked under the variant that takes fp32, OP_VARIANTS)
    OP_DTYPES = {
        "spmv": _F16_F32,
        "spmm": _F16_F32,
        "stage:gather_spmv": ("int32", "float32"),
        # fp16 runs csr_gather_fp16, whose products are rounded to fp16: not the stage's contract (exact
        # fp32 products), so the suite checks fp32 only; the fp16 kernel is checked by the upstream ports
        "stage:csr_gather": ("float32",),
    }
    #: op -> the kernel variants its ``variant=`` picks and the value dtypes each takes
    OP_VARIANTS = {"spmv": dict(SPMV_VARIANTS), "spmm": dict(SPMV_VARIANTS)}
    #: the products are stored in the input dtype before the scan (fp16: rounded to fp16)
    OP_ERROR_MODELS = {"spmv": "prefix_input_products", "spmm": "prefix_input_products"}

    def _spmv_kernel(self, variant, data, x):
        variant = variant or "v1"
        if variant not in SPMV_KERNELS:
            raise ValueError(f"variant must be one of {tuple(SPMV_KERNELS)}, got {variant!r}")
        kernel, dts = SPMV_KERNELS[variant]
        self._refuse(kernel, data, dts)
        self._refuse(kernel, x, (data.dtype.name,))
        return variant, kernel

    @staticmethod
    def _products_fit_fp16(indices, data, x):
        """The kernels store a(k) x(col(k)) in fp16: a product of finite values beyond 65504 would
        become inf there. Refused rather than returned as inf (NotImplementedError: the conformance
        suite counts it as a declined input)."""
        if data.dtype != np.float16 or not len(data):
            return
        p = np.abs(data.astype(np.float64)[:, None] * np.asarray(x, np.float64).reshape(len(x), -1)[indices])
        if (np.isfinite(p) & (p > float(np.finfo(np.float16).max))).any():
            raise NotImplementedError("a product a(k) x(col(k)) exceeds 65504: the kernels store products in "
                                      "fp16, where it would become inf; use fp32 (variant='v2') or another backend")

    def _x_fits(self, kernel, n, dtype, tile=_CSR_TILE):
        size = np.dtype(dtype).itemsize
        if n * size + tile * (4 * size + 12) > _UB_BYTES:
            raise NotImplementedError(
                f"{kernel} holds x in the vector core's Unified Buffer: {n} {np.dtype(dtype).name} columns do "
                f"not fit next to its gather tile of {tile} (at most {(_UB_BYTES - tile * (4 * size + 12)) // size})")

    def _spmv_launch(self, variant, kernel, indptr, indices, data, x):
        """One SpMV launch on CSR arrays (nnz > 0, rows >= 1); the rows as fp32."""
        rows = len(indptr) - 1
        lead = int(np.count_nonzero(indptr[1:] == 0))  # leading empty rows: cut, returned as 0
        ptr = indptr[lead:]
        tile = min(_CSR_TILE, self.s * self.s) if variant == "v2" else _CSR_TILE
        self._x_fits(kernel, len(x), data.dtype, tile)
        m = self.module
        vals, cols, xt = self._t(data), self._t(indices.astype(np.int32)), self._t(x)
        if variant == "v1":
            z = m.run_spmv(vals, self._t(ptr.astype(np.uint32)), cols, xt, self.s)
        elif variant == "v2":
            z = m.run_spmv_v2(vals, self._t(ptr.astype(np.int32)), cols, xt, self.s)
        else:
            upper, lower = self._constants(self.s, self._torch.float16)
            fn = m.run_spmv_multi_cube if variant == "multi_cube" else m.run_spmv_v2_multi_cube
            p = ptr.astype(np.uint32 if variant == "multi_cube" else np.int32)
            z = fn(vals, self._t(p), cols, xt, upper, lower)
        out = np.zeros(rows, np.float32)
        out[lead:] = self._np(z)
        return out

    def spmv(self, A, x, *, variant=None):
        """y = A x on one of the four SpMV kernels (``variant``: "v1" run_spmv, the default; "v2"
        run_spmv_v2; "multi_cube" run_spmv_multi_cube; "v2_multi_cube" run_spmv_v2_multi_cube): fp16
        data and x (v2 also fp32), fp32 out; the products are rounded to the input dtype (module
        docstring)."""
        indptr, indices, data, (m, n) = as_csr_matrix(A, "A")  # rows and columns from A's shape
        x = as_values(x, "x")
        if len(x) != n:
            raise ValueError(f"x has length {len(x)} but A has {n} columns (shape {(m, n)})")
        variant, kernel = self._spmv_kernel(variant, data, x)
        self._products_fit_fp16(indices, data, x)
        rows = len(indptr) - 1
        if rows <= 0 or len(data) == 0:
            return np.zeros(max(rows, 0), np.float32)
        return self._spmv_launch(variant, kernel, indptr, indices, data, x)

    def spmm(self, A, D, *, variant=None):
        """O = A D as one SpMV launch per column of D (tcuscan has no SpMM kernel, so this costs k
        launches and k passes over A); ``variant`` and dtypes as ``spmv``; fp32 out."""
        indptr, indices, data, shape = as_csr_matrix(A, "A")  # rows and columns from A's shape
        D = as_values(D, "D", ndim=2)
        if D.shape[0] != shape[1]:
            raise ValueError(f"D must have {shape[1]} rows (A has {shape[1]} columns), got shape {D.shape}")
        variant, kernel = self._spmv_kernel(variant, data, D)
        self._products_fit_fp16(indices, data, D)
        rows, k = len(indptr) - 1, D.shape[1]
        if rows <= 0 or k == 0 or len(data) == 0:
            return np.zeros((max(rows, 0), k), np.float32)
        return np.stack([self._spmv_launch(variant, kernel, indptr, indices, data, np.ascontiguousarray(D[:, j]))
                         for j in range(k)], axis=1)

    def gather_spmv(self, yhat, indptr):
        """Stage: run_gather_spmv with the row ends indptr[1:]: the scan at every row end, 0 for
        leading empty rows; 4-byte words (float32 / int32 / uint32; int64 words that fit int32)."""
        yhat = np.asarray(yhat)
        words = yhat
        if yhat.dtype == np.int64:
            if yhat.size and (yhat.min() < np.iinfo(np.int32).min or yhat.max() > np.iinfo(np.int32).max):
                raise ValueError("run_gather_spmv moves 4-byte words: int64 values beyond int32 do not fit")
            words = yhat.astype(np.int32)
        elif yhat.dtype.name not in ("float32", "int32", "uint32"):
            raise TypeError(f"run_gather_spmv mishandles {yhat.dtype} words (it moves 4-byte words: float32, "
                            "int32, uint32; int64 within int32)")
        ends = np.asarray(indptr, dtype=np.int64)[1:]
        out = np.zeros(len(ends), yhat.dtype)
        lead = int(np.count_nonzero(ends == 0))
        if lead < len(ends):
            z = self.module.run_gather_spmv(self._t(words), self._t(ends[lead:].astype(np.int32)), _GATHER_TILE)
            out[lead:] = self._np(z)
        return out

    def csr_gather(self, data, indices, x):
        """Stage: run_csr_gather (int32 columns), fp16 or fp32 data and x of one dtype -> fp32 words.
        fp16 products come from the fp16 kernel, rounded to fp16 (module docstring)."""
        data, x = as_values(data, "data"), as_values(x, "x")
        self._refuse("run_csr_gather", data, _F16_F32)
        self._refuse("run_csr_gather", x, (data.dtype.name,))
        idx = np.asarray(indices)
        if idx.size and (idx.min() < 0 or idx.max() >= len(x)):
            raise ValueError("indices out of range for x")
        if len(data) == 0:
            return np.zeros(0, np.float32)
        self._x_fits("run_csr_gather", len(x), x.dtype)
        z = self.module.run_csr_gather(self._t(data), self._t(idx.astype(np.int32)), self._t(x))
        return self._np(z).astype(np.float32)
