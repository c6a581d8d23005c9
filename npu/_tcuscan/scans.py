"""TcuscanBackend's scans: run_scan_single_core / _multi_core / _multi_cube, and the MCScan stages."""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_csr_matrix, as_flags, as_indptr, as_values, check_bool, check_int  # noqa: F401

from ._base import VARIANTS  # noqa: F401

_F16 = ("float16",)


class ScansMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "scan": ("int8", "float16"),
        "stage:row_scan": ("int8", "float16"),
        "stage:block_scan": ("int8", "float16"),
        "stage:complete_rows": ("int8", "float32"),
        "stage:reduce_tiles": ("int8", "float16"),
    }
    #: op -> the kernel variants its ``variant=`` picks (the conformance suite checks each)
    OP_VARIANTS = {"scan": VARIANTS}

    def scan(self, x, *, exclusive=False, variant=None):
        """Inclusive (or exclusive: shifted right, zero first) scan; ``variant``
        picks run_scan_single_core / run_scan_multi_core / run_scan_multi_cube."""
        x = as_values(x, "x")
        exclusive = check_bool(exclusive, "exclusive")
        variant = variant or self.variant
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if variant == "single_core":
            self._refuse("run_scan_single_core", x, ("int8", "float16", "float32"))
            z = self.module.run_scan_single_core(self._t(x), self.s)
        elif variant == "multi_core":
            # the kernel routes every non-fp16 dtype to its int8 kernel (fp32 silently wrong)
            self._refuse("run_scan_multi_core", x, ("int8", "float16"))
            z = self.module.run_scan_multi_core(self._t(x), self.s)
        else:
            self._refuse("run_scan_multi_cube", x, ("int8", "float16"))
            up, lo = self._constants(self.s, self._t(x[:0]).dtype)
            z = self.module.run_scan_multi_cube(self._t(x), up, lo)
        z = self._np(z)
        if exclusive and len(z):
            z = np.concatenate([np.zeros(1, z.dtype), z[:-1]])
        return z

    def row_scan(self, x):
        """Stage: run_row_scan, trimmed to len(x); words out (int64 / fp32)."""
        x = as_values(x, "x")
        self._refuse("run_row_scan", x, ("int8", "float16"))
        if len(x) == 0:
            return np.zeros(0, np.float32 if x.dtype == np.float16 else np.int64)
        z = self._np(self.module.run_row_scan(self._t(x), self.s))[: len(x)]
        return z.astype(np.int64) if z.dtype.kind == "i" else z

    def block_scan(self, x):
        """Stage: run_block_scan (every S^2-block on its own, Eq. 1); words out."""
        x = as_values(x, "x")
        self._refuse("run_block_scan", x, ("int8", "float16"))
        if len(x) == 0:
            return np.zeros(0, np.float32 if x.dtype == np.float16 else np.int64)
        up, lo = self._constants(self.s, self._t(x[:0]).dtype)
        z = self._np(self.module.run_block_scan(self._t(x), up, lo))
        return z.astype(np.int64) if z.dtype.kind == "i" else z

    def complete_rows(self, y, r, blocks):
        """Stage: run_complete_rows. The kernel wants len(y) = blocks * rows * S
        exactly: y is zero-padded to ``blocks`` blocks of ceil(tiles / blocks)
        S-tiles each (the blocks of reduce_tiles), and trimmed after."""
        y = np.asarray(y)
        if y.dtype not in (np.int64, np.float32):
            raise TypeError(f"run_complete_rows mishandles {y.dtype} words (it takes int64 or float32)")
        n, s, blocks = len(y), self.s, int(blocks)
        if n == 0:
            return y.copy()
        tiles = -(-n // s)
        per = -(-tiles // blocks)  # tiles per block
        padded = np.zeros(blocks * per * s, y.dtype)
        padded[:n] = y
        z = self._np(self.module.run_complete_rows(self._t(padded), self._t(np.asarray(r, y.dtype)), s, per))
        return z[:n].astype(np.int64) if z.dtype.kind == "i" else z[:n]

    def reduce_tiles(self, x, blocks):
        """Stage: run_reduce_tiles (blocks of whole S-tiles); words out."""
        x = as_values(x, "x")
        self._refuse("run_reduce_tiles", x, ("int8", "float16"))
        if len(x) == 0:
            return np.zeros(int(blocks), np.float32 if x.dtype == np.float16 else np.int64)
        r = self._np(self.module.run_reduce_tiles(self._t(x), self.s, int(blocks)))
        return r.astype(np.int64) if r.dtype.kind == "i" else r
