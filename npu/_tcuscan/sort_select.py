"""TcuscanBackend's sorting and selection: radix_sort / argsort (run_radix_sort) and topk
(run_topk_int16, run_topk_fp16).

- radix_sort: the kernel sorts ascending and stably, int16 and float16 only, lengths that are a
  multiple of S^2 only (upstream's ISSUE-52). The backend pads x to whole S^2 tiles with the largest
  key (int16 32767; float16 the bit pattern 0x7FFF, a NaN above every other key), which the stable
  sort leaves after every real element, and trims. The kernel orders float16 by bit pattern (-0.0
  before +0.0, negative NaNs first); the project's order has -0.0 == +0.0 in input order and every
  NaN last. So the backend sorts a copy with -0.0 made +0.0 and every NaN made the positive quiet NaN
  0x7E00 (below the padding), whose stable order is exactly the project's, and returns x[indices]:
  the values bit for bit as given. Descending sorts have no kernel: NotImplementedError.
- topk: run_topk_int16 / run_topk_fp16 with x_min / x_max = x's own minimum and maximum (the
  bisection's starting range); largest only; float16 NaN or +-inf refused (NotImplementedError: the
  bisection has no midpoint for an infinite range, and no mask selects NaN). The kernel documents
  neither which of equal values it keeps nor its output order, so the values are sorted here
  (largest first) and ``topk_ties = "kernel"`` holds the indices to x[indices] == values.

Not wrapped (NOT_WRAPPED says why): run_topk_pivot_fp16, run_searchsorted, run_histogram.
"""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_values, check_bool, check_int

_SORT = ("int16", "float16")

WRAPS = {
    "run_radix_sort": "op radix_sort; op argsort",
    "run_topk_int16": "op topk",
    "run_topk_fp16": "op topk",
}

NOT_WRAPPED = {
    "run_topk_pivot_fp16": "a statistical lower-bound estimate of the k-th largest fp16 value (k is "
                           "ignored; k_inner / k_outer fixed), sampled from 8 tiles per block: no registry "
                           "op or stage has a defined result to compare with",
    "run_searchsorted": "lower-bound binary search of int32 needles in a sorted int32 array: no registry "
                        "op or stage (upstream fused it into run_spmv_v2_multi_cube, wrapped as spmv)",
    "run_histogram": "equal-width histogram over [min(x), max(x)] (fp16 only): no registry op or stage",
}

#: float16 bit patterns: the padding key (above every other) and the one NaN the backend sorts
_F16_PAD, _F16_NAN = np.uint16(0x7FFF), np.uint16(0x7E00)


class SortSelectMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "radix_sort": _SORT,
        "argsort": _SORT,
        "topk": _SORT,
    }

    def _sort_keys(self, x):
        """x, padded to whole S^2 tiles, as the kernel sorts it into the project's order."""
        tile = self.s * self.s
        padded = -(-max(len(x), 1) // tile) * tile
        if x.dtype == np.float16:
            bits = x.view(np.uint16).copy()
            bits[bits == np.uint16(0x8000)] = 0  # -0.0 -> +0.0
            bits[np.isnan(x)] = _F16_NAN
            keys = np.full(padded, _F16_PAD, np.uint16)
            keys[: len(x)] = bits
            return keys.view(np.float16)
        keys = np.full(padded, np.iinfo(np.int16).max, np.int16)
        keys[: len(x)] = x
        return keys

    def radix_sort(self, x, *, descending=False):
        """run_radix_sort: ascending, stable; x padded to whole S^2 tiles (see the module docstring);
        int32 indices widened to int64, values x[indices]."""
        x = as_values(x, "x")
        self._refuse("run_radix_sort", x, _SORT)
        if check_bool(descending, "descending"):
            raise NotImplementedError("run_radix_sort sorts ascending only; use another backend for "
                                      "descending=True")
        if len(x) == 0:
            return x.copy(), np.zeros(0, np.int64)
        _, i = self.module.run_radix_sort(self._t(self._sort_keys(x)), self.s)
        i = self._np(i).astype(np.int64)[: len(x)]
        return x[i], i

    def argsort(self, x, *, descending=False):
        return self.radix_sort(x, descending=descending)[1]

    def topk(self, x, k, *, largest=True):
        """run_topk_int16 / run_topk_fp16 with x's own bounds; values sorted descending here."""
        x = as_values(x, "x")
        self._refuse("run_topk_int16 / run_topk_fp16", x, _SORT)
        k = check_int(k, "k", 0, len(x), what=" (the length of x)")
        if not check_bool(largest, "largest"):
            raise NotImplementedError("run_topk_int16 / run_topk_fp16 select the largest values only")
        if x.dtype == np.float16 and not np.isfinite(x).all():
            raise NotImplementedError("run_topk_fp16 bisects [x_min, x_max]: NaN or an infinite value has no "
                                      "midpoint; refused")
        if k == 0:
            return x[:0].copy(), np.zeros(0, np.int64)
        if x.dtype == np.int16:
            v, i = self.module.run_topk_int16(self._t(x), k, int(x.min()), int(x.max()), self.s)
        else:
            v, i = self.module.run_topk_fp16(self._t(x), k, float(x.min()), float(x.max()), self.s)
        v, i = self._np(v), self._np(i).astype(np.int64)
        order = np.lexsort((i, -v.astype(np.float32)))  # largest first; among equal values, lower index
        return v[order], i[order]
