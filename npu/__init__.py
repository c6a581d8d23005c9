"""npu: the authors' AscendC kernels (huawei-csl/pytorch-tcuscan, module
``tcuscan_ops``) behind the project's calling convention, and a torch
emulation of the same algorithms.

Backends (the protocol: an object whose methods are the registry's op names,
numpy arrays in and out; device tensors stay inside):

- ``TcuscanBackend(module=None, device=None)``: the real kernels; ``module``
  and ``device`` injectable (``npu.testing`` has a CPU stand-in module);
- ``TorchEmulationBackend(device="cpu")``: the MM+V algorithms in torch on
  CPU, CUDA or NPU, a second implementation that cross-checks the golden model;
- ``MmvrefBackend()``: the fast CPU ops of ``mmvref``;
- ``DaskBackend(pattern, max_chunks, scheduler="sync")``: ``mmvref.dask`` over irregular chunkings
  (needs the ``[dask]`` extra).

``import npu.torch_ops`` registers ``torch.ops.mmv.<op>``. ``import npu`` needs
neither torch_npu, CANN nor tcuscan (nor torch, until a backend is used);
using the NPU backend without them raises ``NpuUnavailableError`` saying what
is missing and how to get it.
"""
from __future__ import annotations

import importlib.util

__all__ = ["is_available", "missing", "NpuUnavailableError",
           "TcuscanBackend", "TorchEmulationBackend", "MmvrefBackend", "DaskBackend", "BACKENDS"]

#: backend names of the conformance runner -> "module:class"
BACKENDS = {
    "mmvref": "npu._mmvref_backend:MmvrefBackend",
    "mmvref-prepared": "npu._mmvref_backend:MmvrefPreparedBackend",
    "emulation": "npu._emulation:TorchEmulationBackend",
    "tcuscan": "npu._tcuscan:TcuscanBackend",
    "dask": "npu._dask_backend:DaskBackend",
}


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


def __getattr__(name):  # lazy: the backends import torch
    if name in ("TcuscanBackend", "TorchEmulationBackend", "MmvrefBackend", "DaskBackend"):
        key = {"TcuscanBackend": "tcuscan", "TorchEmulationBackend": "emulation", "MmvrefBackend": "mmvref",
               "DaskBackend": "dask"}[name]
        mod, _, attr = BACKENDS[key].partition(":")
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'npu' has no attribute {name!r}")
