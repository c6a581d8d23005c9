"""TcuscanBackend's segmented ops: run_seg_scan, run_seg_sum and the CSR segment sums."""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_csr_matrix, as_flags, as_indptr, as_values, check_bool, check_int  # noqa: F401

from ._base import VARIANTS  # noqa: F401

_F16 = ("float16",)


class SegmentsMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "segmented_scan": _F16,
        "segmented_sum": _F16,
        "segment_sum_csr": ("int8", "float16"),
    }
    #: op -> the kernel variants its ``variant=`` picks (the conformance suite checks each)
    OP_VARIANTS = {"segment_sum_csr": VARIANTS}

    def segmented_scan(self, x, flags, *, exclusive=False):
        """run_seg_scan (fp16 values, int8 START flags, fp32 out)."""
        x = as_values(x, "x")
        exclusive = check_bool(exclusive, "exclusive")
        self._refuse("run_seg_scan", x, ("float16",))
        f = self._flags_i8(flags, len(x), "flags")
        if len(x) == 0:
            return np.zeros(0, np.float32)
        f[0] = 1
        z = self._np(self.module.run_seg_scan(self._t(x), self._t(f), self.s))
        if exclusive:
            z = (z.astype(np.float64) - x.astype(np.float64)).astype(np.float32)
        return z

    def segmented_sum(self, x, flags):
        """run_seg_sum, which reads segment END flags: starts are converted
        (end(i) = start(i+1), the last position ends the last segment)."""
        x = as_values(x, "x")
        self._refuse("run_seg_sum", x, ("float16",))  # int8 would come back as fp32
        f = self._flags_i8(flags, len(x), "flags")
        if len(x) == 0:
            return np.zeros(0, np.float32)
        ends = np.concatenate([f[1:], np.ones(1, np.int8)]).astype(np.int8)
        return self._np(self.module.run_seg_sum(self._t(x), self._t(ends), self.s))

    def segment_sum_csr(self, x, indptr, *, variant=None):
        """run_seg_sum_single_core / _multi_core / _multi_cube (by ``variant``;
        default: the backend's); the full offsets as uint32."""
        x = as_values(x, "x")
        variant = variant or self.variant
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        kernel = f"run_seg_sum_{variant}"
        self._refuse(kernel, x, ("float16",) if variant == "multi_cube" else ("int8", "float16"))
        ptr = as_indptr(indptr, "indptr", nnz=len(x))
        out_dt = np.float32 if x.dtype == np.float16 else np.int32
        if len(ptr) <= 1:
            return np.zeros(0, out_dt)
        if len(x) == 0:
            return np.zeros(len(ptr) - 1, out_dt)
        t_ptr = self._t(ptr.astype(np.int64)).to(self._torch.uint32)
        if variant == "multi_cube":
            up, lo = self._constants(self.s, self._torch.float16)
            return self._np(self.module.run_seg_sum_multi_cube(self._t(x), up, lo, t_ptr))
        return self._np(getattr(self.module, kernel)(self._t(x), t_ptr, self.s))
