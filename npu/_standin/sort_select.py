"""Stand-in sorting and selection kernels: radix sort and top-k.

Kernel facts and quirks: see ``npu.testing``."""
from __future__ import annotations

import torch

from ._common import GARBAGE, as_int8_bytes, check_s, cpu, f16, f32, i8, i16, i32, need  # noqa: F401


def run_radix_sort(x, S):
    check_s("run_radix_sort", S)
    need("run_radix_sort", x, f16, i16)
    v, i = torch.sort(x, stable=True)
    return v, i.to(i32)


def run_topk_int16(x, k, x_min, x_max, S):
    # the kernel tiles x into S^2-element tiles (num_tiles = n // S^2): n must be a multiple;
    # x_min / x_max must bound the values; output order and ties are the kernel's (here torch.topk's)
    S = check_s("run_topk_int16", S)
    need("run_topk_int16", x, i16)
    if x.numel() % (S * S):
        raise ValueError(f"run_topk_int16: len(x) = {x.numel()} must be a multiple of S^2 = {S * S}")
    if x.numel() and (int(x.min()) < int(x_min) or int(x.max()) > int(x_max)):
        raise ValueError("run_topk_int16: x_min / x_max do not bound x")
    v, i = torch.topk(x.to(torch.int32), int(k))
    return v.to(i16), i.to(i32)
