"""What every stand-in kernel shares: the argument checks a launch would need,
the garbage value of an uninitialised output, and the dtypes by short name."""
from __future__ import annotations

import torch

GARBAGE = -12345

i8, i16, i32, f16, f32 = torch.int8, torch.int16, torch.int32, torch.float16, torch.float32

#: the tiling parameter S the kernels' tilings are written for (upstream's tests use all four)
TILE_S = (16, 32, 64, 128)


def check_s(name, S):
    if int(S) not in TILE_S:
        raise ValueError(f"{name}: tiling parameter S must be one of {', '.join(map(str, TILE_S))}, got {S}")
    return int(S)


def need(name, t, *dtypes):
    if t.dtype not in dtypes:
        raise TypeError(f"{name}: unsupported dtype {t.dtype}; the kernel takes {', '.join(map(str, dtypes))}")


def cpu(name, *ts):
    for t in ts:
        if t.device.type != "cpu":
            raise ValueError(f"{name}: the stand-in runs on the CPU, got a tensor on {t.device}")


def as_int8_bytes(x):
    """What the int8 kernel reads: the first numel bytes of the buffer."""
    n = x.numel()
    return x.contiguous().view(torch.int8)[:n] if x.dtype != i8 else x
