"""Stand-in data-movement kernels: compress and split (and their variants).

Kernel facts and quirks: see ``npu.testing``."""
from __future__ import annotations

import torch

from ._common import GARBAGE, as_int8_bytes, check_s, cpu, f16, f32, i8, i16, i32, need  # noqa: F401


def run_compress(x, mask, S):
    check_s("run_compress", S)
    need("run_compress", x, f16, i16)
    need("run_compress", mask, i8)
    return x[mask.to(torch.bool)].clone()


def run_split_ind(x, mask, indices_in, S):
    check_s("run_split_ind", S)
    need("run_split_ind", x, f16, i16)
    need("run_split_ind", mask, i8)
    need("run_split_ind", indices_in, i32)
    m = mask.to(torch.bool)
    return torch.cat([x[m], x[~m]]), torch.cat([indices_in[m], indices_in[~m]])


def run_split(x, mask, S):
    check_s("run_split", S)
    need("run_split", x, f16, i16)
    need("run_split", mask, i8)
    m = mask.to(torch.bool)
    return torch.cat([x[m], x[~m]])
