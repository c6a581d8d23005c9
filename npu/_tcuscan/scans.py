"""TcuscanBackend's scans: scan (run_scan_single_core / _multi_core / _multi_core_no_l2 /
_multi_cube), batched_scan (run_scan_batch) and the MCScan / ScanUL1 stages (run_row_scan,
run_block_scan, run_reduce_tiles, run_complete_rows).

- ``scan(x, *, exclusive=False, variant=None)``: ``variant`` (default: the backend's) picks
  "single_core" (int8, float16, float32), "multi_core" / "multi_core_no_l2" (int8, float16: the
  kernel routes every other dtype to its int8 kernel, which reads the buffer's bytes) or
  "multi_cube" (float16 only: any other dtype returns an uninitialised output). Refused dtypes raise
  TypeError naming the kernel. int8 -> int32 (the kernels' int32 accumulators wrap: ``overflow =
  "wrap"``), float -> float32. exclusive: the inclusive result shifted right, 0 first.
- ``batched_scan(x, *, exclusive=False)``: every row of 2-D x, float16 / float32 -> float32.
- Stages (words out: int64 for integers, float32 for floats): ``row_scan(x)`` (float16; x padded
  to whole S-rows, passed as (rows, S), trimmed), ``block_scan(x)`` (float16), ``reduce_tiles(x,
  blocks)`` (int8, float16), ``complete_rows(y, r, blocks)`` (float32 words: the int32 kernel is
  launched for int64 tensors and reads their buffers as int32 words, so integer words are refused).

Not wrapped (NOT_WRAPPED says why): run_scan_cpu, run_cube_reduce, run_complete_blocks.
"""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_values, check_bool

#: scan's kernels: variant -> (kernel, the value dtypes it computes)
SCAN_KERNELS = {
    "single_core": ("run_scan_single_core", ("int8", "float16", "float32")),
    "multi_core": ("run_scan_multi_core", ("int8", "float16")),
    "multi_core_no_l2": ("run_scan_multi_core_no_l2", ("int8", "float16")),
    "multi_cube": ("run_scan_multi_cube", ("float16",)),
}
_F16 = ("float16",)
_FLOATS = ("float16", "float32")

WRAPS = {
    "run_scan_single_core": "op scan, variant=single_core",
    "run_scan_multi_core": "op scan, variant=multi_core",
    "run_scan_multi_core_no_l2": "op scan, variant=multi_core_no_l2",
    "run_scan_multi_cube": "op scan, variant=multi_cube",
    "run_scan_batch": "op batched_scan",
    "run_row_scan": "stage row_scan",
    "run_block_scan": "stage block_scan",
    "run_reduce_tiles": "stage reduce_tiles",
    "run_complete_rows": "stage complete_rows",
}

NOT_WRAPPED = {
    "run_scan_cpu": "an OpenMP scan of host (CPU) tensors, not an NPU kernel; mmvref's own scan is the CPU path",
    "run_cube_reduce": "the reduce_tiles stage with a tile the kernel chooses (S'^2, S' by length); the backend's "
                       "reduce_tiles stage runs run_reduce_tiles with the golden model's s-tiles",
    "run_complete_blocks": "ScanUL1's block completion (sum(sums[:b]) added to block b): no golden stage of its "
                           "own (the golden complete_rows is MCScan's phase II, run_complete_rows)",
}


class ScansMixin:
    #: value dtypes accepted per op / stage (the conformance suite draws only these)
    OP_DTYPES = {
        "scan": ("int8", "float16", "float32"),
        "batched_scan": _FLOATS,
        "stage:row_scan": _F16,
        "stage:block_scan": _F16,
        "stage:reduce_tiles": ("int8", "float16"),
        "stage:complete_rows": _F16,  # x float16: float32 row-scan words
    }
    #: op -> the kernel variants its ``variant=`` picks and the value dtypes each takes
    OP_VARIANTS = {"scan": {v: dts for v, (_, dts) in SCAN_KERNELS.items()}}

    def scan(self, x, *, exclusive=False, variant=None):
        """Inclusive (or exclusive) scan on the kernel ``variant`` picks (module docstring)."""
        x = as_values(x, "x")
        exclusive = check_bool(exclusive, "exclusive")
        variant = variant or self.variant
        if variant not in SCAN_KERNELS:
            raise ValueError(f"variant must be one of {tuple(SCAN_KERNELS)}, got {variant!r}")
        kernel, dts = SCAN_KERNELS[variant]
        self._refuse(kernel, x, dts)
        if len(x) == 0:
            return np.zeros(0, np.int32 if x.dtype.kind == "i" else np.float32)
        m = self.module
        if variant == "multi_cube":
            up, lo = self._constants(self.s, self._torch.float16)
            z = m.run_scan_multi_cube(self._t(x), up, lo)
        else:
            z = getattr(m, kernel)(self._t(x), self.s)
        z = self._np(z)
        if exclusive:
            z = np.concatenate([np.zeros(1, z.dtype), z[:-1]])
        return z

    def batched_scan(self, x, *, exclusive=False):
        """Every row of 2-D x scanned by run_scan_batch (float16 / float32 -> float32)."""
        x = as_values(x, "x", ndim=2)
        exclusive = check_bool(exclusive, "exclusive")
        self._refuse("run_scan_batch", x, _FLOATS)
        rows, n = x.shape
        if rows == 0 or n == 0:
            return np.zeros((rows, n), np.float32)
        z = self._np(self.module.run_scan_batch(self._t(np.ascontiguousarray(x)), self.s)).reshape(rows, n)
        if exclusive:
            z = np.concatenate([np.zeros((rows, 1), z.dtype), z[:, :-1]], axis=1)
        return z

    def row_scan(self, x):
        """Stage: run_row_scan on x zero-padded to whole S-rows, as (rows, S); trimmed to len(x)."""
        x = as_values(x, "x")
        self._refuse("run_row_scan", x, _F16)
        n, s = len(x), self.s
        if n == 0:
            return np.zeros(0, np.float32)
        rows = -(-n // s)
        padded = np.zeros((rows, s), x.dtype)
        padded.reshape(-1)[:n] = x
        return self._np(self.module.run_row_scan(self._t(padded), s))[:n]

    def block_scan(self, x):
        """Stage: run_block_scan (every S^2-block on its own, Eq. 1); float32 words."""
        x = as_values(x, "x")
        self._refuse("run_block_scan", x, _F16)
        if len(x) == 0:
            return np.zeros(0, np.float32)
        up, lo = self._constants(self.s, self._torch.float16)
        return self._np(self.module.run_block_scan(self._t(x), up, lo))

    def reduce_tiles(self, x, blocks):
        """Stage: run_reduce_tiles with S-tiles: ``blocks`` sums; words out (int64 / float32)."""
        x = as_values(x, "x")
        self._refuse("run_reduce_tiles", x, ("int8", "float16"))
        blocks = int(blocks)
        if blocks <= 0:
            raise ValueError(f"blocks must be positive, got {blocks}")
        if len(x) == 0:
            return np.zeros(blocks, np.float32 if x.dtype == np.float16 else np.int64)
        r = self._np(self.module.run_reduce_tiles(self._t(x), self.s, blocks))
        return r.astype(np.int64) if r.dtype.kind == "i" else r

    def complete_rows(self, y, r, blocks):
        """Stage: run_complete_rows on float32 row-scan words y and block sums r. The kernel's cores
        own ranges of whole tiles of tile_height S-rows (tile_height capped at 8192 / S), so each of
        the ``blocks`` blocks of ceil(tiles / blocks) S-rows is zero-padded to a whole number of
        tiles, and trimmed after."""
        y = np.asarray(y)
        if y.dtype != np.float32:
            raise TypeError(f"run_complete_rows mishandles {y.dtype} words (it takes float32; int64 tensors "
                            "go to its int32 kernel, which reads them as int32 words)")
        n, s, blocks = len(y), self.s, int(blocks)
        if blocks <= 0:
            raise ValueError(f"blocks must be positive, got {blocks}")
        if n == 0:
            return y.copy()
        tiles = -(-n // s)
        per = -(-tiles // blocks)  # S-rows per block (the golden blocks)
        h = min(per, -(-8192 // s))
        rows = -(-per // h) * h  # per block, a whole number of kernel tiles
        padded = np.zeros((blocks, rows * s), np.float32)
        src = np.zeros(blocks * per * s, np.float32)
        src[:n] = y
        padded[:, : per * s] = src.reshape(blocks, per * s)
        z = self._np(self.module.run_complete_rows(self._t(padded.reshape(-1)),
                                                   self._t(np.asarray(r, np.float32)), s, h))
        return z.reshape(blocks, rows * s)[:, : per * s].reshape(-1)[:n]
