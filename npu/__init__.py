"""npu: the authors' AscendC kernels (huawei-csl/pytorch-tcuscan, module
``tcuscan_ops``) behind the project's calling convention.

So far this package only answers whether an NPU stack is present; the
backends (TcuscanBackend, TorchEmulationBackend, MmvrefBackend) are the work of
the npu issue. ``import npu`` never needs torch_npu, CANN or tcuscan.
"""
from __future__ import annotations

import importlib.util

__all__ = ["is_available", "missing", "NpuUnavailableError"]


class NpuUnavailableError(RuntimeError):
    """Raised when an NPU backend is used without torch_npu / CANN / tcuscan."""


def missing() -> list[str]:
    """Names of the missing pieces of the NPU stack (empty when all are importable)."""
    out = []
    if importlib.util.find_spec("torch_npu") is None:
        out.append("torch_npu (needs the CANN toolkit; pip install torch-npu)")
    if importlib.util.find_spec("tcuscan_ops") is None and importlib.util.find_spec("tcuscan") is None:
        out.append("tcuscan (build it from huawei-csl/pytorch-tcuscan)")
    return out


def is_available() -> bool:
    """True when torch_npu and the tcuscan kernels can be imported."""
    return not missing()
