"""TcuscanBackend: the authors' AscendC kernels (``tcuscan_ops``) in the
project's conventions.

Numpy in, numpy out; device tensors stay inside. Each method translates to the
kernel's own convention (start -> end flags for run_seg_sum, int8 masks and
flags, int32 / uint32 indices, padding and trimming), refuses with a TypeError
naming the kernel any dtype that kernel would mishandle, and gives results in
the project's dtypes (int8 -> int32, fp16 -> fp32; other integer widths have no
kernel). The kernel facts and quirks are listed in ``npu.testing`` (the CPU
stand-in that implements them).

What only runs with an NPU (importing torch_npu and the kernels, moving arrays
to the device, synchronising before reading results back, the U_s / L_s^-
constants per device) is ``npu._device``; ``_t``, ``_np`` and ``_constants``
here delegate to its ``Device`` (``self.dev``).

Integer results come from int32 hardware accumulators: ``overflow = "wrap"``.
"""
from __future__ import annotations

import numpy as np

from mmvref._validate import as_flags

from .._device import Device, import_kernels

__all__ = ["TcuscanBase", "VARIANTS"]

VARIANTS = ("single_core", "multi_core", "multi_cube")
#: the tiling parameter S the kernels' tilings are written for (upstream's tests use all four)
TILE_S = (16, 32, 64, 128)


class TcuscanBase:
    """The tcuscan kernels behind the backend protocol.

    ``module``: the kernels (default: import ``tcuscan_ops``, which needs
    torch_npu and CANN); ``device``: where tensors go (a name, a ``torch.device``
    or an ``npu._device.Device``; default: $NPU_DEVICE or "npu:0"); ``s``: the tiling parameter S (16, 32, 64 or 128); ``variant``: the
    default scan kernel ("single_core", "multi_core" or "multi_cube").

    topk wraps run_topk_int16 / run_topk_fp16 (largest only); the kernels do
    not document which of equal values they keep or their output order, so the
    values are sorted here and ``topk_ties = "kernel"`` tells the conformance
    suite to hold the indices only to x[indices] == values (distinct, in range).

    Which kernel each method wraps, and why the others are not wrapped: the
    family modules' ``WRAPS`` and ``NOT_WRAPPED`` (npu/_tcuscan/<family>.py),
    tabulated with dtypes, stand-in, tests and conformance by ``python -m npu
    --coverage``. An op the backend lacks is reported skipped by the
    conformance suite. Device handling: ``self.dev`` (``npu._device.Device``)."""

    topk_ties = "kernel"

    name = "tcuscan"
    overflow = "wrap"  # int32 accumulators on the device wrap around

    def __init__(self, module=None, device=None, s=128, variant="multi_core"):
        self.module = module if module is not None else import_kernels()
        #: the device: moves, synchronisation and the scan constants (npu/_device.py)
        self.dev = device if isinstance(device, Device) else Device(device)
        self._torch = self.dev.torch
        self.device = self.dev.device
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
        """A host array as a tensor on the device (``dtype``: a torch dtype to convert to there)."""
        return self.dev.to_device(a, dtype)

    def _np(self, t):
        """A device tensor as a numpy array, read after the device has synchronised."""
        return self.dev.to_host(t)

    def _constants(self, s, dtype):
        """U_s and L_s^- on the device, cached per (device, s, dtype)."""
        return self.dev.constants(s, dtype)

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

    def error_model(self, op):
        """The float error model of ``op`` (``conformance.compare.ERROR_MODELS``): the family's
        OP_ERROR_MODELS entry, else "prefix" (the kernels take speculative prefix differences)."""
        return self._family_table("OP_ERROR_MODELS", op) or "prefix"

    def variants(self, op):
        """The kernel variants ``op`` can run (its ``variant=`` values; the conformance suite checks
        each), or () when one kernel computes it."""
        table = self._family_table("OP_VARIANTS", op)
        if isinstance(table, dict):  # variant -> the value dtypes its kernel takes (None: all)
            return dict(table)
        return tuple(table or ())

    @staticmethod
    def _flags_i8(f, n, name):
        f = np.array(as_flags(f, n, name), dtype=np.int8)
        return f
