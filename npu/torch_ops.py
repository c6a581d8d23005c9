"""torch.library custom ops ``torch.ops.mmv.<op>`` for the main registry ops.

Importing this module registers them (``import npu.torch_ops``):

  torch.ops.mmv.scan(x, exclusive=False)
  torch.ops.mmv.segmented_scan(x, flags, exclusive=False)
  torch.ops.mmv.segmented_sum(x, flags)
  torch.ops.mmv.segment_sum_csr(x, indptr)
  torch.ops.mmv.compress(x, mask)
  torch.ops.mmv.spmv(indptr, indices, data, x)

CPU implementation: the fast ops of ``mmvref``. PrivateUse1 (the NPU through
torch_npu) implementation: ``npu.TcuscanBackend``, registered only where
``npu.is_available()``. Fake (meta) implementations give the result dtype of
the project's rule (int8/16/32 -> int32, int64 -> int64, fp16 -> fp32, fp32 and
fp64 kept) and the output size (data-dependent for segmented_sum and compress),
so the ops trace under torch.compile. Integer overflow raises (the default of
the mmvref ops); no autograd formula is registered (the ops are not
differentiable here). Arguments are checked by torch's dispatcher against the
schema first: ``exclusive`` is a ``bool`` there, and torch's argument parser
converts a number (``exclusive=1``, ``2.5``) to a bool, and None to the
default, before the op runs (a string is refused with a RuntimeError naming
``exclusive``); a
tensor of a dtype the ops do not take (bfloat16, ...) raises TypeError naming
the argument.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

import mmvref
from mmvref._dtypes import result_dtype

__all__ = ["OPS"]

_NP = {torch.int8: np.int8, torch.int16: np.int16, torch.int32: np.int32, torch.int64: np.int64,
       torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}
_TORCH = {np.dtype(v): k for k, v in _NP.items()}


def _result(dtype: torch.dtype, name: str = "x") -> torch.dtype:
    if dtype not in _NP:
        raise TypeError(f"{name} has unsupported dtype {dtype}; supported: "
                        + ", ".join(str(d) for d in _NP))
    return _TORCH[result_dtype(np.dtype(_NP[dtype]))]


def _spmv_result(data: torch.dtype, x: torch.dtype) -> torch.dtype:
    """The CPU kernel's result dtype: numpy's promotion (int32 with float32 gives
    float64, where torch.promote_types would say float32), then the project rule."""
    _result(data, "data")
    _result(x, "x")
    return _TORCH[result_dtype(np.result_type(_NP[data], _NP[x]))]


def _np(t: Tensor, name: str = "x") -> np.ndarray:
    from mmvref._validate import to_numpy  # the public ops' boundary: dtype checks name the argument

    return to_numpy(t.detach().contiguous(), name)


def _rows(indptr: Tensor) -> int:
    if indptr.dim() != 1 or indptr.shape[0] < 1:
        raise ValueError(f"indptr must be 1-D with at least one entry (indptr[0] = 0), "
                         f"got shape {tuple(indptr.shape)}")
    return indptr.shape[0] - 1


def _out(a) -> Tensor:
    return torch.from_numpy(np.array(a, copy=True))  # own memory: never aliases an input


@torch.library.custom_op("mmv::scan", mutates_args=(), device_types="cpu")
def scan(x: Tensor, exclusive: bool = False) -> Tensor:
    return _out(mmvref.scan(_np(x), exclusive=exclusive))


@scan.register_fake
def _(x, exclusive=False):
    return x.new_empty(x.shape, dtype=_result(x.dtype))


@torch.library.custom_op("mmv::segmented_scan", mutates_args=(), device_types="cpu")
def segmented_scan(x: Tensor, flags: Tensor, exclusive: bool = False) -> Tensor:
    return _out(mmvref.segmented_scan(_np(x), _np(flags, "flags"), exclusive=exclusive))


@segmented_scan.register_fake
def _(x, flags, exclusive=False):
    torch._check(flags.shape == x.shape, lambda: "flags must have the shape of x")
    return x.new_empty(x.shape, dtype=_result(x.dtype))


@torch.library.custom_op("mmv::segmented_sum", mutates_args=(), device_types="cpu")
def segmented_sum(x: Tensor, flags: Tensor) -> Tensor:
    return _out(mmvref.segmented_sum(_np(x), _np(flags, "flags")))


@segmented_sum.register_fake
def _(x, flags):
    n = torch.library.get_ctx().new_dynamic_size()  # the number of segments
    return x.new_empty((n,), dtype=_result(x.dtype))


@torch.library.custom_op("mmv::segment_sum_csr", mutates_args=(), device_types="cpu")
def segment_sum_csr(x: Tensor, indptr: Tensor) -> Tensor:
    return _out(mmvref.segment_sum_csr(_np(x), _np(indptr, "indptr")))


@segment_sum_csr.register_fake
def _(x, indptr):
    return x.new_empty((_rows(indptr),), dtype=_result(x.dtype))


@torch.library.custom_op("mmv::compress", mutates_args=(), device_types="cpu")
def compress(x: Tensor, mask: Tensor) -> Tensor:
    return _out(mmvref.compress(_np(x), _np(mask, "mask")))


@compress.register_fake
def _(x, mask):
    n = torch.library.get_ctx().new_dynamic_size()  # the number of kept elements
    return x.new_empty((n,), dtype=x.dtype)


@torch.library.custom_op("mmv::spmv", mutates_args=(), device_types="cpu")
def spmv(indptr: Tensor, indices: Tensor, data: Tensor, x: Tensor) -> Tensor:
    shape = (_rows(indptr), x.shape[0] if x.dim() == 1 else -1)
    if shape[1] < 0:
        raise ValueError(f"x must be 1-D, got shape {tuple(x.shape)}")
    return _out(mmvref.spmv((_np(indptr, "indptr"), _np(indices, "indices"), _np(data, "data"), shape),
                            _np(x)))


@spmv.register_fake
def _(indptr, indices, data, x):
    return x.new_empty((_rows(indptr),), dtype=_spmv_result(data.dtype, x.dtype))


OPS = {"scan": scan, "segmented_scan": segmented_scan, "segmented_sum": segmented_sum,
       "segment_sum_csr": segment_sum_csr, "compress": compress, "spmv": spmv}


def _register_npu():
    """The PrivateUse1 kernels, through the tcuscan backend (only with torch_npu + tcuscan)."""
    from . import is_available

    if not is_available():
        return False
    from . import TcuscanBackend

    backend = TcuscanBackend()

    def via(name, unpack=lambda *a: a):
        def impl(*args):
            device = args[0].device
            arrays = [a.cpu().numpy() if isinstance(a, Tensor) else a for a in unpack(*args)]
            return torch.from_numpy(np.asarray(getattr(backend, name)(*arrays))).to(device)
        return impl

    for name in ("scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "compress"):
        torch.library.register_kernel(f"mmv::{name}", "PrivateUse1", via(name))
    torch.library.register_kernel(
        "mmv::spmv", "PrivateUse1",
        via("spmv", lambda indptr, indices, data, x: (
            (indptr.cpu().numpy(), indices.cpu().numpy(), data.cpu().numpy(),
             (indptr.shape[0] - 1, x.shape[0])), x)))
    return True


NPU_REGISTERED = _register_npu()
