"""TcuscanBackend's element-wise stage: ``diff`` (run_diff).

run_diff computes the diff stage (conformance/stages.py; mmvref.golden.diff: z(i) - z(i-1),
z(-1) = 0) for float16 (diff_fp16, rounded to fp16, returned as fp32 words) and float32 (diff_fp32).
Integer words would be reinterpreted as fp32 by diff_fp32 (4-byte) or read out of bounds (other
widths), so the backend refuses every other dtype.

Not wrapped (NOT_WRAPPED says why): run_copy, run_add, run_simple_pad, run_gen_lower, run_matmul_cce.
"""
from __future__ import annotations

import numpy as np

_DIFF = ("float16", "float32")

WRAPS = {
    "run_diff": "stage diff",
}

NOT_WRAPPED = {
    "run_copy": "a memory copy: no registry op or stage, nothing to check beyond torch's own copy",
    "run_add": "fp16 vector add: element-wise addition is no registry op or conformance stage",
    "run_simple_pad": "pads the last tile of a vector with zeros: a data-layout helper, no registry op "
                      "or stage",
    "run_gen_lower": "generates the constant lower-triangular ones matrix (the backend builds its "
                     "constants with torch, TcuscanBase._constants); no registry op or stage",
    "run_matmul_cce": "a dense fp16 matrix product (N, K multiples of 512): dense MATMUL is an MMV-RAM "
                      "instruction, not a registry op or conformance stage",
}


class ElementwiseMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "stage:diff": _DIFF,
    }

    def diff(self, z):
        """Stage diff: run_diff (z(i) - z(i-1), z(-1) = 0) on float16 (fp16 kernel, result as fp32)
        or float32 (fp32 kernel); other dtypes are refused (the fp32 kernel would read their words as
        fp32)."""
        z = np.asarray(z)
        self._refuse("run_diff", z, _DIFF)
        if not len(z):
            return np.zeros(0, np.float32)
        return self._np(self.module.run_diff(self._t(z), len(z))).astype(np.float32, copy=False)
