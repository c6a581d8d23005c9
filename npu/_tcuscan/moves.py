"""TcuscanBackend's data movement: compress (run_compress / run_compress_pos), compress_ind
(run_compress_ind / run_compress_ind_no_arange), split (run_split), split_ind (run_split_ind).

- ``compress(x, mask, *, variant=None)``: ``"plain"`` (the default: run_compress, the ones counted
  on the host side first) or ``"pos"`` (run_compress_pos, given the output length sum(mask)).
- ``compress_ind(x, mask, *, variant=None)``: ``"arange"`` (the default: run_compress_ind with
  indices_in = arange(n) as int32) or ``"no_arange"`` (run_compress_ind_no_arange, positions made in
  the kernel); (values, int64 positions).
- ``split(x, mask)``, ``split_ind(x, mask)`` (indices_in = arange(n) as int32; int64 out).

Dtypes: the compress wrappers send float16 / int16 to their 2-byte kernels and every other dtype to
the 4-byte ones, which move words exactly: float16, int16, float32 and int32 are taken (in every
variant). int64 / float64 would have only the first half of their words moved (the rest of the
output uninitialised) and int8 would be read out of bounds: refused. The split kernels exist for
float16 / int16 only (any other dtype: uninitialised output): refused. Masks go down as int8 0/1.
Values keep x's dtype (registry: KEEP_DTYPE); indices come back int64.

Not wrapped (NOT_WRAPPED says why): run_filter_greater_eq, run_filter_less_eq, run_where,
run_count_if.
"""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_values

_2B = ("int16", "float16")
_WORDS = ("int16", "float16", "int32", "float32")

#: compress's kernels (variant -> kernel)
COMPRESS_VARIANTS = {"plain": "run_compress", "pos": "run_compress_pos"}
#: compress_ind's kernels (variant -> kernel)
COMPRESS_IND_VARIANTS = {"arange": "run_compress_ind", "no_arange": "run_compress_ind_no_arange"}

WRAPS = {
    "run_compress": "op compress, variant=plain",
    "run_compress_pos": "op compress, variant=pos",
    "run_compress_ind": "op compress_ind, variant=arange",
    "run_compress_ind_no_arange": "op compress_ind, variant=no_arange",
    "run_split": "op split",
    "run_split_ind": "op split_ind",
}

NOT_WRAPPED = {
    "run_filter_greater_eq": "x[x >= pivot] (pivot rounded to fp16; fp16 only): a comparison fused "
                             "with compress; no registry op or stage takes a pivot (its compress "
                             "half is run_compress, wrapped)",
    "run_filter_less_eq": "x[x <= pivot]: a torch comparison on the host followed by run_compress "
                          "(wrapped as compress); no registry op or stage takes a pivot",
    "run_where": "int32 positions where x >= pivot (fp16 only): argwhere against a scalar pivot is no "
                 "registry op or stage",
    "run_count_if": "how many x_i compare true against a pivot (fp16 only; counts its alignment padding "
                    "for GT / GE / NE): a predicate count is no registry op or stage",
}


class MovesMixin:
    #: value dtypes accepted per op / stage, in every variant (the conformance suite draws only these)
    OP_DTYPES = {
        "compress": _WORDS,
        "compress_ind": _WORDS,
        "split": _2B,
        "split_ind": _2B,
    }
    #: op -> the kernel variants its ``variant=`` picks, each with the value dtypes it takes
    OP_VARIANTS = {
        "compress": {v: _WORDS for v in COMPRESS_VARIANTS},
        "compress_ind": {v: _WORDS for v in COMPRESS_IND_VARIANTS},
    }

    @staticmethod
    def _pick(op, variant, table):
        variant = variant or next(iter(table))
        if variant not in table:
            raise ValueError(f"{op}: variant must be one of {tuple(table)}, got {variant!r}")
        return variant, table[variant]

    def compress(self, x, mask, *, variant=None):
        """x[mask == 1]: run_compress (``variant="plain"``, the default) or run_compress_pos
        (``"pos"``, passed sum(mask) as its output length); float16, int16, float32, int32."""
        variant, kernel = self._pick("compress", variant, COMPRESS_VARIANTS)
        x = as_values(x, "x")
        self._refuse(kernel, x, _WORDS)
        m = self._flags_i8(mask, len(x), "mask")
        if len(x) == 0:
            return x.copy()
        if variant == "pos":
            z = self.module.run_compress_pos(self._t(x), self._t(m), int(m.sum(dtype=np.int64)), self.s)
        else:
            z = self.module.run_compress(self._t(x), self._t(m), self.s)
        return self._np(z)

    def compress_ind(self, x, mask, *, variant=None):
        """(x[mask == 1], int64 positions of the kept elements): run_compress_ind
        (``variant="arange"``, the default, indices_in = arange(n) as int32) or
        run_compress_ind_no_arange (``"no_arange"``); float16, int16, float32, int32."""
        variant, kernel = self._pick("compress_ind", variant, COMPRESS_IND_VARIANTS)
        x = as_values(x, "x")
        self._refuse(kernel, x, _WORDS)
        m = self._flags_i8(mask, len(x), "mask")
        if len(x) == 0:
            return x.copy(), np.zeros(0, np.int64)
        if len(x) > np.iinfo(np.int32).max:
            raise ValueError(f"{kernel}: {len(x)} elements exceed its int32 positions")
        if variant == "no_arange":
            v, i = self.module.run_compress_ind_no_arange(self._t(x), self._t(m), self.s)
        else:
            v, i = self.module.run_compress_ind(self._t(x), self._t(np.arange(len(x), dtype=np.int32)),
                                                self._t(m), self.s)
        return self._np(v), self._np(i).astype(np.int64)

    def split_ind(self, x, mask):
        x = as_values(x, "x")
        self._refuse("run_split_ind", x, _2B)
        m = self._flags_i8(mask, len(x), "mask")
        if len(x) == 0:
            return x.copy(), np.zeros(0, np.int64)
        v, i = self.module.run_split_ind(self._t(x), self._t(m), self._t(np.arange(len(x), dtype=np.int32)),
                                         self.s)
        return self._np(v), self._np(i).astype(np.int64)

    def split(self, x, mask):
        x = as_values(x, "x")
        self._refuse("run_split", x, _2B)
        m = self._flags_i8(mask, len(x), "mask")
        if len(x) == 0:
            return x.copy()
        return self._np(self.module.run_split(self._t(x), self._t(m), self.s))
