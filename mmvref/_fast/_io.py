"""The torch/numpy boundary of the public ops: torch CPU tensors in, torch out.

torch is never imported here; a tensor is recognised by its type's module.
"""
from __future__ import annotations

import numpy as np


def is_tensor(a) -> bool:
    return type(a).__module__.split(".")[0] == "torch" and hasattr(a, "detach")


def to_numpy(a, name: str):
    """A torch CPU tensor as a numpy array (shared memory, no copy); anything else unchanged."""
    if not is_tensor(a):
        return a
    if a.device.type != "cpu":
        raise ValueError(f"{name} is a torch tensor on {a.device}; the CPU ops take CPU tensors "
                         f"(use {name}.cpu(), or the npu backends for device tensors)")
    return a.detach().resolve_conj().resolve_neg().numpy()


def like_input(result, template):
    """Return ``result`` as a torch tensor when ``template`` was one."""
    if not is_tensor(template):
        return result
    import torch

    return torch.from_numpy(np.ascontiguousarray(result))
