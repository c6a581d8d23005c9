"""TcuscanBackend: the authors' AscendC kernels (``tcuscan_ops``) in the
project's conventions.

Numpy in, numpy out; device tensors stay inside. Each method translates to the
kernel's own convention (start -> end flags for run_seg_sum, int8 masks and
flags, int32 / uint32 indices, padding and trimming), refuses with a TypeError
naming the kernel any dtype that kernel would mishandle, and gives results in
the project's dtypes (int8 -> int32, fp16 -> fp32; other integer widths have no
kernel). The kernel facts and quirks are listed in ``npu.testing`` (the CPU
stand-in that implements them).

Integer results come from int32 hardware accumulators: ``overflow = "wrap"``.
"""
from __future__ import annotations

import functools
import importlib
import os

import numpy as np

from mmvref._validate import as_csr_matrix, as_flags, as_indptr, as_values, check_bool, check_int

from . import NpuUnavailableError, missing

__all__ = ["TcuscanBackend"]

VARIANTS = ("single_core", "multi_core", "multi_cube")


def _import_kernels():
    lack = missing()
    if lack:
        raise NpuUnavailableError(
            "the tcuscan NPU backend needs " + "; ".join(lack) + ". Install the CANN toolkit and torch_npu, "
            "build tcuscan from https://github.com/huawei-csl/pytorch-tcuscan, or pass module= (e.g. "
            "npu.testing.fake_tcuscan_ops()) and device='cpu' to run the translation layer on the CPU.")
    try:
        import torch_npu  # noqa: F401
    except Exception as exc:  # pragma: no cover - needs an NPU stack
        raise NpuUnavailableError(f"torch_npu is installed but does not import: {exc}") from exc
    for name in ("tcuscan_ops", "tcuscan.tcuscan_ops"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise NpuUnavailableError("tcuscan is installed but neither tcuscan_ops nor tcuscan.tcuscan_ops imports")


class TcuscanBackend:
    """The tcuscan kernels behind the backend protocol.

    ``module``: the kernels (default: import ``tcuscan_ops``, which needs
    torch_npu and CANN); ``device``: where tensors go (default: $NPU_DEVICE or
    "npu:0"); ``s``: the tiling parameter S (32, 64 or 128); ``variant``: the
    default scan kernel ("single_core", "multi_core" or "multi_cube").

    topk wraps run_topk_int16 (int16, largest only); the kernel does not
    document which of equal values it keeps or its output order, so the values
    are sorted here and ``topk_ties = "kernel"`` tells the conformance suite
    to hold the indices only to x[indices] == values (distinct, in range).
    Not wrapped (the op is absent, so conformance reports it skipped):
    batched_scan, weighted and top-p sampling, and the revert stage
    (run_seg_scan_mc_revert is undocumented)."""

    topk_ties = "kernel"

    name = "tcuscan"
    overflow = "wrap"  # int32 accumulators on the device wrap around

    def __init__(self, module=None, device=None, s=128, variant="multi_core"):
        import torch

        self._torch = torch
        self.module = module if module is not None else _import_kernels()
        self.device = torch.device(device or os.environ.get("NPU_DEVICE", "npu:0"))
        if int(s) not in (32, 64, 128):
            raise ValueError(f"s must be 32, 64 or 128 (the kernels' tiling parameter S), got {s}")
        self.s = int(s)
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self.variant = variant

    def regimes(self):
        """Where the kernels change regime (``conformance.regimes``): the kernels' tile S."""
        return {"tiles": (self.s,)}

    def __repr__(self):
        return f"TcuscanBackend(module={getattr(self.module, '__name__', self.module)!r}, device={str(self.device)!r})"

    # ------------------------------------------------------------------ helpers

    def _t(self, a, dtype=None):
        a = np.ascontiguousarray(a)
        if not a.flags.writeable or any(st < 0 for st in a.strides):
            a = a.copy()  # torch takes no negative strides (a reversed 1-element view) nor read-only memory
        t = self._torch.from_numpy(a)
        return t.to(self.device, dtype) if dtype is not None else t.to(self.device)

    def _np(self, t):
        return t.detach().cpu().numpy()

    @functools.lru_cache(maxsize=None)  # noqa: B019 - a few (s, dtype) per backend
    def _constants(self, s, dtype):
        """U_s and L_s^- on the device, cached per (s, dtype, device)."""
        torch = self._torch
        ones = torch.ones(s, s, dtype=dtype, device=self.device)
        return torch.triu(ones), torch.tril(ones, -1)

    def _refuse(self, kernel, x, accepted):
        if x.dtype.name not in accepted:
            raise TypeError(f"{kernel} mishandles {x.dtype} input (it takes {', '.join(accepted)}); "
                            "use another backend for this dtype")

    def dtypes(self, op):
        """Value dtypes this backend accepts for ``op`` (the conformance suite draws only these)."""
        return _DTYPES.get(op)

    @staticmethod
    def _flags_i8(f, n, name):
        f = np.array(as_flags(f, n, name), dtype=np.int8)
        return f

    # ------------------------------------------------------------------ scans

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

    # ------------------------------------------------------------------ moves

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

    # ------------------------------------------------------------------ stages

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

    def spmv(self, A, x):
        """run_spmv (App. Alg. 4 on the device): fp16 data and x, fp32 out;
        int16 is refused (the kernel narrows the products to int8)."""
        indptr, indices, data, (m, n) = as_csr_matrix(A, "A")  # rows and columns from A's shape
        x = as_values(x, "x")
        if len(x) != n:
            raise ValueError(f"x has length {len(x)} but A has {n} columns (shape {(m, n)})")
        self._refuse("run_spmv", data, ("float16",))
        self._refuse("run_spmv", x, ("float16",))
        rows = len(indptr) - 1
        if rows <= 0 or len(data) == 0:
            return np.zeros(max(rows, 0), np.float32)
        t_ptr = self._t(indptr.astype(np.int64)).to(self._torch.uint32)
        return self._np(self.module.run_spmv(self._t(data), t_ptr, self._t(indices.astype(np.int32)),
                                             self._t(x), self.s))

    def spmm(self, A, D):
        """O = A D as one run_spmv per column of D (tcuscan has no SpMM kernel, so
        this costs k launches and k passes over A): fp16 data and D, fp32 out."""
        indptr, indices, data, shape = as_csr_matrix(A, "A")  # rows and columns from A's shape
        D = as_values(D, "D", ndim=2)
        if D.shape[0] != shape[1]:
            raise ValueError(f"D must have {shape[1]} rows (A has {shape[1]} columns), got shape {D.shape}")
        self._refuse("run_spmv", data, ("float16",))
        self._refuse("run_spmv", D, ("float16",))
        rows, k = len(indptr) - 1, D.shape[1]
        if rows <= 0 or k == 0 or len(data) == 0:
            return np.zeros((max(rows, 0), k), np.float32)
        return np.stack([self.spmv((indptr, indices, data, shape), np.ascontiguousarray(D[:, j]))
                         for j in range(k)], axis=1)

    def diff(self, z):
        """Stage: run_diff (z(i) - z(i-1)); fp32 words only (the kernel would read
        integer words as fp32)."""
        z = np.asarray(z)
        if z.dtype != np.float32:
            raise TypeError(f"run_diff mishandles {z.dtype} words (it takes float16 or float32)")
        return self._np(self.module.run_diff(self._t(z), len(z))) if len(z) else z.copy()

    def gather_spmv(self, yhat, indptr):
        """Stage: run_gather_spmv with the row ends indptr[1:] (int32): the scan at
        every row end, 0 for leading empty rows; fp32 words."""
        yhat = np.asarray(yhat)
        if yhat.dtype != np.float32:
            raise TypeError(f"run_gather_spmv mishandles {yhat.dtype} words (it takes float32)")
        ends = np.asarray(indptr, dtype=np.int64)[1:].astype(np.int32)
        if len(ends) == 0:
            return np.zeros(0, np.float32)
        return self._np(self.module.run_gather_spmv(self._t(yhat), self._t(ends), self.s))

    def reduce_tiles(self, x, blocks):
        """Stage: run_reduce_tiles (blocks of whole S-tiles); words out."""
        x = as_values(x, "x")
        self._refuse("run_reduce_tiles", x, ("int8", "float16"))
        if len(x) == 0:
            return np.zeros(int(blocks), np.float32 if x.dtype == np.float16 else np.int64)
        r = self._np(self.module.run_reduce_tiles(self._t(x), self.s, int(blocks)))
        return r.astype(np.int64) if r.dtype.kind == "i" else r

    def csr_gather(self, data, indices, x):
        """Stage: run_csr_gather (fp16 values, int32 columns) -> fp32 products."""
        data, x = as_values(data, "data"), as_values(x, "x")
        self._refuse("run_csr_gather", data, ("float16",))
        self._refuse("run_csr_gather", x, ("float16",))
        idx = np.asarray(indices)
        if idx.size and (idx.min() < 0 or idx.max() >= len(x)):
            raise ValueError("indices out of range for x")
        if len(data) == 0:
            return np.zeros(0, np.float32)
        return self._np(self.module.run_csr_gather(self._t(data), self._t(idx.astype(np.int32)), self._t(x)))


_F16 = ("float16",)
_DTYPES = {
    "scan": ("int8", "float16"),
    "segmented_scan": _F16,
    "segmented_sum": _F16,
    "segment_sum_csr": ("int8", "float16"),
    "compress": ("int16", "float16"),
    "split": ("int16", "float16"),
    "split_ind": ("int16", "float16"),
    "radix_sort": ("int16", "float16"),
    "argsort": ("int16", "float16"),
    "topk": ("int16",),
    "spmv": _F16,
    "spmm": _F16,
    "stage:row_scan": ("int8", "float16"),
    "stage:block_scan": ("int8", "float16"),
    "stage:complete_rows": ("int8", "float32"),
    "stage:diff": ("float16", "float32"),
    "stage:gather_spmv": ("float32",),
    "stage:reduce_tiles": ("int8", "float16"),
    "stage:csr_gather": _F16,
}
