"""TcuscanBackend's sorting and selection: run_radix_sort, run_topk_int16."""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_csr_matrix, as_flags, as_indptr, as_values, check_bool, check_int  # noqa: F401

from ._base import VARIANTS  # noqa: F401

_F16 = ("float16",)


class SortSelectMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "radix_sort": ("int16", "float16"),
        "argsort": ("int16", "float16"),
        "topk": ("int16",),
    }

    def radix_sort(self, x, *, descending=False):
        """run_radix_sort: ascending, stable; int32 indices widened to int64."""
        x = as_values(x, "x")
        self._refuse("run_radix_sort", x, ("int16", "float16"))
        if check_bool(descending, "descending"):
            raise NotImplementedError("run_radix_sort sorts ascending only; use another backend for "
                                      "descending=True")
        if x.dtype == np.float16 and np.isnan(x).any():
            raise NotImplementedError("run_radix_sort's placement of NaN is undocumented; refused")
        if len(x) == 0:
            return x.copy(), np.zeros(0, np.int64)
        v, i = self.module.run_radix_sort(self._t(x), self.s)
        return self._np(v), self._np(i).astype(np.int64)

    def topk(self, x, k, *, largest=True):
        """run_topk_int16: x padded to a multiple of S^2 with int16's minimum
        (padding can only be picked among equal minima, and is then swapped for
        a real position holding that value); values sorted descending."""
        x = as_values(x, "x")
        self._refuse("run_topk_int16", x, ("int16",))
        k = check_int(k, "k", 0, len(x), what=" (the length of x)")
        if not check_bool(largest, "largest"):
            raise NotImplementedError("run_topk_int16 selects the largest values only")
        if k == 0:
            return x[:0].copy(), np.zeros(0, np.int64)
        lo = np.int16(np.iinfo(np.int16).min)
        tile = self.s * self.s
        padded = np.full(-(-len(x) // tile) * tile, lo, np.int16)
        padded[: len(x)] = x
        v, i = self.module.run_topk_int16(self._t(padded), k, int(lo), int(padded.max()), self.s)
        v, i = self._np(v), self._np(i).astype(np.int64)
        if (i >= len(x)).any():  # a padding slot won a tie with real minima: take unused real ones
            spare = np.setdiff1d(np.flatnonzero(x == lo), i[i < len(x)])
            i[i >= len(x)] = spare[: int((i >= len(x)).sum())]
        order = np.argsort(-v.astype(np.int32), kind="stable")
        return v[order], i[order]

    def argsort(self, x, *, descending=False):
        return self.radix_sort(x, descending=descending)[1]
