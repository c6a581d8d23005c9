"""Stand-in element-wise and utility kernels (diff, ...).

Kernel facts and quirks: see ``npu.testing``."""
from __future__ import annotations

import torch

from ._common import GARBAGE, as_int8_bytes, check_s, cpu, f16, f32, i8, i16, i32, need  # noqa: F401


def run_diff(x, max_size=0):
    # fp16 kernel, or the fp32 kernel for every other dtype (an int buffer would be read as fp32)
    n = int(max_size) if max_size and max_size > 0 else x.numel()
    if x.dtype not in (f16, f32):
        return torch.diff(torch.cat([torch.zeros(1, dtype=i32), x.contiguous().view(i32)[:n]]).view(f32))
    xs = x[:n]
    return torch.diff(torch.cat([torch.zeros(1, dtype=x.dtype), xs]))
