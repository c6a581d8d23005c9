"""TcuscanBackend's element-wise stages: run_diff."""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_csr_matrix, as_flags, as_indptr, as_values, check_bool, check_int  # noqa: F401

from ._base import VARIANTS  # noqa: F401

_F16 = ("float16",)


class ElementwiseMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "stage:diff": ("float16", "float32"),
    }

    def diff(self, z):
        """Stage: run_diff (z(i) - z(i-1)); fp32 words only (the kernel would read
        integer words as fp32)."""
        z = np.asarray(z)
        if z.dtype != np.float32:
            raise TypeError(f"run_diff mishandles {z.dtype} words (it takes float16 or float32)")
        return self._np(self.module.run_diff(self._t(z), len(z))) if len(z) else z.copy()
