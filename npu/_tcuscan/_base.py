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

from mmvref._validate import as_flags

from .. import NpuUnavailableError, missing

__all__ = ["TcuscanBase", "VARIANTS"]

VARIANTS = ("single_core", "multi_core", "multi_cube")
#: the tiling parameter S the kernels' tilings are written for (upstream's tests use all four)
TILE_S = (16, 32, 64, 128)


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


class TcuscanBase:
    """The tcuscan kernels behind the backend protocol.

    ``module``: the kernels (default: import ``tcuscan_ops``, which needs
    torch_npu and CANN); ``device``: where tensors go (default: $NPU_DEVICE or
    "npu:0"); ``s``: the tiling parameter S (16, 32, 64 or 128); ``variant``: the
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
        if int(s) not in TILE_S:
            raise ValueError(f"s must be 16, 32, 64 or 128 (the kernels' tiling parameter S), got {s}")
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

    def _family_table(self, attr, op):
        """``op``'s entry in the family mixins' table ``attr`` (OP_DTYPES, OP_VARIANTS), or None."""
        for klass in type(self).__mro__:
            table = vars(klass).get(attr)
            if table and op in table:
                return table[op]
        return None

    def dtypes(self, op):
        """Value dtypes this backend accepts for ``op`` in every variant (the conformance suite draws
        only these)."""
        return self._family_table("OP_DTYPES", op)

    def variants(self, op):
        """The kernel variants ``op`` can run (its ``variant=`` values; the conformance suite checks
        each), or () when one kernel computes it."""
        return tuple(self._family_table("OP_VARIANTS", op) or ())

    @staticmethod
    def _flags_i8(f, n, name):
        f = np.array(as_flags(f, n, name), dtype=np.int8)
        return f
