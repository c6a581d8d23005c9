"""The torch/numpy boundary of the public ops: torch CPU tensors in, torch out.

torch is never imported here; a tensor is recognised by its type's module.
"""
from __future__ import annotations

import numpy as np

from .._validate import native_order


def is_tensor(a) -> bool:
    return type(a).__module__.split(".")[0] == "torch" and hasattr(a, "detach")


#: torch dtypes numpy can hold (anything else, e.g. bfloat16 or the float8 types, is refused here)
_TORCH_NUMPY = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "complex64", "complex128")


def to_numpy(a, name: str):
    """The one boundary of the public ops: a torch CPU tensor as a numpy array
    (shared memory, no copy); a numpy array in native byte order (a non-native
    one is converted once, here); anything else unchanged.

    A tensor of a dtype numpy cannot hold (bfloat16, float8, ...) raises
    TypeError naming the argument; the op then checks its own dtypes."""
    if not is_tensor(a):
        return native_order(a)
    if a.device.type != "cpu":
        raise ValueError(f"{name} is a torch tensor on {a.device}; the CPU ops take CPU tensors "
                         f"(use {name}.cpu(), or the npu backends for device tensors)")
    dt = str(a.dtype).replace("torch.", "")
    if dt not in _TORCH_NUMPY:
        raise TypeError(f"{name} has unsupported dtype torch.{dt}; supported values: torch.int8, int16, int32, "
                        f"int64, float16, float32, float64 (flags and masks: torch.bool, int8, uint8)"
                        + ("; bfloat16 is not supported yet (convert with .float())" if dt == "bfloat16" else ""))
    return a.detach().resolve_conj().resolve_neg().numpy()


def needs_torch_op(*arrays) -> bool:
    """Whether a public op must run as its torch custom op (``mmvref._torch_ops``): a torch
    tensor among ``arrays`` that requires grad under grad mode (the result must carry the
    autograd graph, never come back silently detached), that is being traced by
    torch.compile, or that is not a real CPU tensor (fake/meta tensors hold no data)."""
    for a in arrays:
        if not is_tensor(a):
            continue
        import torch

        if torch.compiler.is_compiling() or (a.requires_grad and torch.is_grad_enabled()):
            return True
        if a.device.type == "meta" or "Fake" in type(a).__name__ or "Functional" in type(a).__name__:
            return True
        if a.dtype == torch.bfloat16:  # numpy has no bfloat16: the torch ops accumulate it in float32
            return True
    return False


def like_input(result, template):
    """Return ``result`` as a torch tensor when ``template`` was one."""
    if not is_tensor(template):
        return result
    import torch

    return torch.from_numpy(np.ascontiguousarray(result))
