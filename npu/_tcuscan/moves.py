"""TcuscanBackend's data movement: run_compress, run_split, run_split_ind."""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_csr_matrix, as_flags, as_indptr, as_values, check_bool, check_int  # noqa: F401

from ._base import VARIANTS  # noqa: F401

_F16 = ("float16",)


class MovesMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "compress": ("int16", "float16"),
        "split": ("int16", "float16"),
        "split_ind": ("int16", "float16"),
    }

    def compress(self, x, mask):
        x = as_values(x, "x")
        self._refuse("run_compress", x, ("int16", "float16"))
        m = self._flags_i8(mask, len(x), "mask")
        if len(x) == 0:
            return x.copy()
        return self._np(self.module.run_compress(self._t(x), self._t(m), self.s))

    def split_ind(self, x, mask):
        x = as_values(x, "x")
        self._refuse("run_split_ind", x, ("int16", "float16"))
        m = self._flags_i8(mask, len(x), "mask")
        if len(x) == 0:
            return x.copy(), np.zeros(0, np.int64)
        v, i = self.module.run_split_ind(self._t(x), self._t(m), self._t(np.arange(len(x), dtype=np.int32)),
                                         self.s)
        return self._np(v), self._np(i).astype(np.int64)

    def split(self, x, mask):
        x = as_values(x, "x")
        self._refuse("run_split", x, ("int16", "float16"))
        m = self._flags_i8(mask, len(x), "mask")
        if len(x) == 0:
            return x.copy()
        return self._np(self.module.run_split(self._t(x), self._t(m), self.s))
