"""Everything of ``TcuscanBackend`` that only runs with an NPU, in one place.

- ``import_kernels()``: imports torch_npu and the kernels (``tcuscan_ops``, or
  ``tcuscan.tcuscan_ops`` as the pip-built wheel installs them); without them,
  ``npu.NpuUnavailableError`` saying what is missing and how to get it.
- ``Device``: one device. ``to_device(ndarray, dtype)`` moves host arrays there
  (any layout: non-contiguous, negative strides and read-only memory are copied
  first, since torch takes none of them); ``to_host(tensor)`` synchronises the
  device, then reads the result into numpy; ``constants(s, dtype)`` gives the
  scan constants U_s and L_s^- on the device, built once per (device, s, dtype).

Synchronisation: some of upstream's wrappers (src/torch/*.h) wait for the
launch stream (aclrtSynchronizeStream) and others do not, and a result may be
read from another stream than the one the kernel ran on, so ``to_host`` waits
for the whole device (``torch.npu.synchronize(device)``) before every host
read. On a CPU or CUDA device (the stand-in, tests) it needs no waiting:
``.cpu()`` is synchronous there.

Which device: the ``device`` argument, else ``$NPU_DEVICE``, else ``"npu:0"``.
``torch`` is injectable (tests pass a fake torch whose ``npu`` namespace counts
synchronisations and whose tensors record their moves), so every branch here
runs on a CPU before it runs on an NPU.
"""
from __future__ import annotations

import importlib
import os

import numpy as np

__all__ = ["Device", "import_kernels", "KERNEL_MODULES", "DEFAULT_DEVICE", "INSTALL_HINT"]

#: where the kernels are importable from: the shared object ``make build`` leaves, or the wheel's package
KERNEL_MODULES = ("tcuscan_ops", "tcuscan.tcuscan_ops")
#: the device when neither ``device=`` nor $NPU_DEVICE says one
DEFAULT_DEVICE = "npu:0"
INSTALL_HINT = ("Install the CANN toolkit and torch_npu, build tcuscan from "
                "https://github.com/huawei-csl/pytorch-tcuscan (steps: mmvref's docs/npu.md), "
                "or pass module= "
                "(e.g. npu.testing.fake_tcuscan_ops()) and device='cpu' to run the translation layer on the CPU.")


def import_kernels():
    """The tcuscan kernels module (after importing torch_npu, which registers the NPU with torch)."""
    from . import NpuUnavailableError, missing

    lack = missing()
    if lack:
        raise NpuUnavailableError("the tcuscan NPU backend needs " + "; ".join(lack) + ". " + INSTALL_HINT)
    try:
        importlib.import_module("torch_npu")
    except Exception as exc:  # an installed torch_npu that does not load (CANN environment not set)
        raise NpuUnavailableError(f"torch_npu is installed but does not import: {exc}. Source the CANN "
                                  "environment (set_env.sh / setenv.bash of the ascend-toolkit) first.") from exc
    errors = []
    for name in KERNEL_MODULES:
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
    raise NpuUnavailableError("tcuscan is installed but its kernels do not import (" + "; ".join(errors) + "). "
                              + INSTALL_HINT)


class Device:
    """One device: host arrays to it, results back (after synchronising), cached scan constants.

    ``spec``: a device name ("npu:1", "cpu"), a ``torch.device``, or None for
    $NPU_DEVICE or "npu:0". ``torch``: the torch module (injectable for tests)."""

    def __init__(self, spec=None, torch=None):
        if torch is None:
            import torch
        self.torch = torch
        if spec is None:
            spec = os.environ.get("NPU_DEVICE") or DEFAULT_DEVICE
        self.device = torch.device(spec)
        self._constants = {}
        self.syncs = 0  # how many times to_host waited for the device (tests, diagnostics)

    @property
    def type(self) -> str:
        return self.device.type

    @property
    def is_npu(self) -> bool:
        return self.device.type == "npu"

    def __str__(self):
        return str(self.device)

    def __repr__(self):
        return f"Device({str(self.device)!r})"

    def to_device(self, a, dtype=None):
        """A host array as a tensor on this device (``dtype``: a torch dtype to convert to there)."""
        a = np.ascontiguousarray(a)
        if not a.flags.writeable or any(st < 0 for st in a.strides):
            a = a.copy()  # torch takes no negative strides (a reversed 1-element view) nor read-only memory
        t = self.torch.from_numpy(a)
        return t.to(self.device, dtype) if dtype is not None else t.to(self.device)

    def synchronize(self):
        """Wait until every kernel launched on this device has finished (a no-op off the NPU)."""
        if self.is_npu:
            self.torch.npu.synchronize(self.device)
            self.syncs += 1

    def to_host(self, t):
        """A device tensor as a numpy array, read after the device has finished writing it."""
        self.synchronize()
        return t.detach().cpu().numpy()

    def constants(self, s, dtype):
        """(U_s, L_s^-): the s x s upper-triangular ones (diagonal included) and the strictly lower ones,
        on this device in ``dtype``, built once per (device, s, dtype)."""
        key = (str(self.device), int(s), dtype)
        got = self._constants.get(key)
        if got is None:
            torch = self.torch
            ones = torch.ones(int(s), int(s), dtype=dtype, device=self.device)
            got = self._constants[key] = (torch.triu(ones), torch.tril(ones, -1))
        return got
