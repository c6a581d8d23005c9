"""TcuscanBackend's segmented ops: segmented scans (run_seg_scan, run_seg_scan_vec), the revert stage
(run_seg_scan_mc_revert), the SCD segmented sum (run_seg_sum) and the CSR segment sums
(run_seg_sum_single_core / _multi_core / _single_cube / _multi_cube).

- ``segmented_scan(x, flags, exclusive=False, variant=None)``: fp16 values; ``variant`` "single_core"
  (run_seg_scan, the default) or "vec_single_core" (run_seg_scan_vec). Both kernels read a tile's
  segment count from the last slot of the tile buffer, stale in a partial last tile, so x and the
  flags are zero-padded to whole S^2-tiles and the result trimmed.
- ``segmented_sum(x, flags)``: run_seg_sum, which reads segment END flags (start flags are converted).
  fp16 only: any other dtype goes to the multi-core scan's int8 kernel and comes back as fp32.
- ``segment_sum_csr(x, indptr, variant=None)``: "single_core" / "multi_core" (int8 -> int32, fp16 ->
  fp32), "single_cube" / "multi_cube" (fp16 only; int8 refused); default: the backend's variant.
  single_core's and single_cube's outputs come from torch.empty and the kernels write nothing after
  the first segment ending at nnz, so trailing empty rows are cut before the call and returned as 0.
  run_seg_sum_single_cube reads its offsets as segment ENDS (its cube revert starts at indptr(0), as
  the multi-cube one does), so it is passed the full offsets and its first output (the "segment"
  ending at 0) dropped; passed the starts as its wrapper documents (and upstream's test does), it
  returns the sums shifted by one and writes the last one past its output.
- ``revert(xhat, fhat, w)`` (stage revert): run_seg_scan_mc_revert, xhat - w(fhat - 1). fp32 words
  only (int64 words would be read as fp32). The kernel reads a 4096-tile's largest segment id from the
  last slot of the tile buffer (stale in a partial tile) and reads w up to index max(fhat): xhat is
  zero-padded to whole tiles (fhat repeating its last id), w padded with one 0, the result trimmed.

Every kernel of the family is wrapped (WRAPS); NOT_WRAPPED is empty.
"""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_indptr, as_values, check_bool

_F16 = ("float16",)
_I8_F16 = ("int8", "float16")

#: segmented_scan's kernels: run_seg_scan (cube + vector, single core), run_seg_scan_vec (vector only)
SEG_SCAN_VARIANTS = ("single_core", "vec_single_core")
#: segment_sum_csr's kernels (run_seg_sum_<variant>) and the value dtypes each takes
CSR_VARIANTS = {"single_core": _I8_F16, "multi_core": _I8_F16, "single_cube": _F16, "multi_cube": _F16}
#: run_seg_scan_mc_revert's tile
_REVERT_TILE = 4 * 1024

WRAPS = {
    "run_seg_scan": "op segmented_scan, variant=single_core",
    "run_seg_scan_vec": "op segmented_scan, variant=vec_single_core",
    "run_seg_scan_mc_revert": "stage revert",
    "run_seg_sum": "op segmented_sum",
    "run_seg_sum_single_core": "op segment_sum_csr, variant=single_core",
    "run_seg_sum_multi_core": "op segment_sum_csr, variant=multi_core",
    "run_seg_sum_single_cube": "op segment_sum_csr, variant=single_cube",
    "run_seg_sum_multi_cube": "op segment_sum_csr, variant=multi_cube",
}

NOT_WRAPPED: dict = {}


class SegmentsMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these; segment_sum_csr's
    #: int8 examples are checked under the variants that take int8, OP_VARIANTS)
    OP_DTYPES = {
        "segmented_scan": _F16,
        "segmented_sum": _F16,
        "segment_sum_csr": _I8_F16,
        "stage:revert": ("float16", "float32"),
    }
    #: op -> the kernel variants its ``variant=`` picks (the conformance suite checks each)
    OP_VARIANTS = {"segmented_scan": SEG_SCAN_VARIANTS, "segment_sum_csr": dict(CSR_VARIANTS)}

    def segmented_scan(self, x, flags, *, exclusive=False, variant=None):
        """run_seg_scan (``variant="single_core"``, the default) or run_seg_scan_vec
        (``"vec_single_core"``): fp16 values, int8 START flags, fp32 out."""
        x = as_values(x, "x")
        exclusive = check_bool(exclusive, "exclusive")
        variant = variant or "single_core"
        if variant not in SEG_SCAN_VARIANTS:
            raise ValueError(f"variant must be one of {SEG_SCAN_VARIANTS}, got {variant!r}")
        kernel = "run_seg_scan" if variant == "single_core" else "run_seg_scan_vec"
        self._refuse(kernel, x, _F16)
        f = self._flags_i8(flags, len(x), "flags")
        n = len(x)
        if n == 0:
            return np.zeros(0, np.float32)
        f[0] = 1
        m = -(-n // (self.s * self.s)) * self.s * self.s  # whole S^2-tiles (see the module docstring)
        xp, fp = np.zeros(m, np.float16), np.zeros(m, np.int8)
        xp[:n], fp[:n] = x, f
        z = self._np(getattr(self.module, kernel)(self._t(xp), self._t(fp), self.s))[:n]
        if exclusive:
            z = (z.astype(np.float64) - x.astype(np.float64)).astype(np.float32)
        return z

    def segmented_sum(self, x, flags):
        """run_seg_sum, which reads segment END flags: starts are converted
        (end(i) = start(i+1), the last position ends the last segment)."""
        x = as_values(x, "x")
        self._refuse("run_seg_sum", x, _F16)  # int8 would come back as fp32
        f = self._flags_i8(flags, len(x), "flags")
        if len(x) == 0:
            return np.zeros(0, np.float32)
        ends = np.concatenate([f[1:], np.ones(1, np.int8)]).astype(np.int8)
        return self._np(self.module.run_seg_sum(self._t(x), self._t(ends), self.s))

    def segment_sum_csr(self, x, indptr, *, variant=None):
        """run_seg_sum_single_core / _multi_core / _single_cube / _multi_cube (by ``variant``;
        default: the backend's)."""
        x = as_values(x, "x")
        variant = variant or self.variant
        if variant not in CSR_VARIANTS:
            raise ValueError(f"variant must be one of {tuple(CSR_VARIANTS)}, got {variant!r}")
        kernel = f"run_seg_sum_{variant}"
        self._refuse(kernel, x, CSR_VARIANTS[variant])
        ptr = as_indptr(indptr, "indptr", nnz=len(x)).astype(np.int64)
        n, rows = len(x), len(ptr) - 1
        out_dt = np.float32 if x.dtype == np.float16 else np.int32
        if rows <= 0:
            return np.zeros(0, out_dt)
        if n == 0:
            return np.zeros(rows, out_dt)
        if n >= 2**31:
            raise ValueError(f"{kernel} reads 4-byte offsets: nnz {n} does not fit")
        t = self._torch
        if variant in ("multi_core", "multi_cube"):
            t_ptr = self._t(ptr.astype(np.int32))
            if variant == "multi_core":
                return self._np(self.module.run_seg_sum_multi_core(self._t(x), t_ptr, self.s))
            up, lo = self._constants(self.s, t.float16)
            return self._np(self.module.run_seg_sum_multi_cube(self._t(x), up, lo, t_ptr))
        # single core / single cube: nothing is written after the first segment ending at n
        k = int(np.searchsorted(ptr, n, side="left"))  # rows k.. are empty
        out = np.zeros(rows, out_dt)
        t_ptr = self._t(ptr[: k + 1].astype(np.int64)).to(t.uint32)
        if variant == "single_core":
            out[:k] = self._np(self.module.run_seg_sum_single_core(self._t(x), t_ptr, self.s))
        else:
            up, lo = self._constants(self.s, t.float16)
            out[:k] = self._np(self.module.run_seg_sum_single_cube(self._t(x), up, lo, t_ptr, self.s))[1:]
        return out

    def revert(self, xhat, fhat, w):
        """Stage revert: run_seg_scan_mc_revert, xhat - w(fhat - 1) (fhat = 0: xhat), fp32 words."""
        xhat, w = np.asarray(xhat), np.asarray(w)
        fhat = np.asarray(fhat)
        self._refuse("run_seg_scan_mc_revert", xhat, ("float32",))
        self._refuse("run_seg_scan_mc_revert", w, ("float32",))
        if fhat.dtype.kind not in "iu" or fhat.shape != xhat.shape:
            raise TypeError(f"run_seg_scan_mc_revert: fhat must be integer segment ids of x's shape, got "
                            f"{fhat.dtype}{fhat.shape}")
        n = len(xhat)
        if n == 0:
            return np.zeros(0, np.float32)
        ids = fhat.astype(np.int64)
        if ids.min() < 0 or (n > 1 and (np.diff(ids) < 0).any()) or ids.max() > len(w):
            raise ValueError("run_seg_scan_mc_revert: fhat must be non-decreasing segment ids in "
                             f"[0, len(w) = {len(w)}] (a scan of flags)")
        m = -(-n // _REVERT_TILE) * _REVERT_TILE
        xp, fp = np.zeros(m, np.float32), np.full(m, ids[-1], np.int32)
        xp[:n], fp[:n] = xhat, ids
        wp = np.concatenate([w, np.zeros(1, np.float32)])
        z = self._np(self.module.run_seg_scan_mc_revert(self._t(xp), self._t(fp), self._t(wp)))
        return z[:n]
