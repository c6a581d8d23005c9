"""Stand-in scan kernels: single-core, multi-core (with and without L2), row, block and
multi-cube scans, and the MCScan phases (reduce_tiles, complete_rows).

Kernel facts and quirks: see ``npu.testing``."""
from __future__ import annotations

import torch

from ._common import GARBAGE, as_int8_bytes, check_s, cpu, f16, f32, i8, i16, i32, need  # noqa: F401


def run_scan_single_core(x, S, starting_sum=0):
    check_s("run_scan_single_core", S)
    cpu("run_scan_single_core", x)
    if x.dtype in (f16, f32):
        return (torch.cumsum(x.to(torch.float64), 0) + starting_sum).to(f32)
    if x.dtype == i8:
        return (torch.cumsum(x.to(torch.int64), 0) + int(starting_sum)).to(i32)
    return torch.full((x.numel(),), GARBAGE, dtype=i32)  # no kernel branch: uninitialised output


def run_scan_multi_core(x, S):
    check_s("run_scan_multi_core", S)
    cpu("run_scan_multi_core", x)
    if x.dtype == f16:
        return torch.cumsum(x.to(torch.float64), 0).to(f32)
    return torch.cumsum(as_int8_bytes(x).to(torch.int64), 0).to(i32)  # int8 routing quirk


def run_row_scan(x, S):
    S = check_s("run_row_scan", S)
    n = x.numel()
    m = -(-n // S)
    pad = torch.zeros(m * S, dtype=x.dtype)
    pad[:n] = x
    words = pad.to(torch.float64) if x.dtype == f16 else as_int8_bytes(pad).to(torch.int64)
    z = torch.cumsum(words.view(m, S), 1).reshape(-1)
    return z.to(f32 if x.dtype == f16 else i32)


def run_scan_multi_cube(x, upper, lower_strict):
    S = upper.shape[0]
    check_s("run_scan_multi_cube", S)
    need("run_scan_multi_cube", x, f16, i8)
    for name, m in (("upper", upper), ("lower_strict", lower_strict)):
        if m.dtype != x.dtype or tuple(m.shape) != (S, S):
            raise TypeError(f"run_scan_multi_cube: {name} must be {S}x{S} of {x.dtype}, got "
                            f"{tuple(m.shape)} {m.dtype}")
    if not (torch.equal(upper, torch.triu(torch.ones_like(upper)))
            and torch.equal(lower_strict, torch.tril(torch.ones_like(lower_strict), -1))):
        raise ValueError("run_scan_multi_cube: upper / lower_strict are not U_S / L_S^-")
    words = x.to(torch.float64) if x.dtype == f16 else x.to(torch.int64)
    return torch.cumsum(words, 0).to(f32 if x.dtype == f16 else i32)


def run_block_scan(x, upper, lower_strict):
    S = upper.shape[0]
    check_s("run_block_scan", S)
    need("run_block_scan", x, f16, i8)
    if upper.dtype != x.dtype or lower_strict.dtype != x.dtype:
        raise TypeError(f"run_block_scan: upper / lower_strict must be {x.dtype}")
    n = x.numel()
    L = S * S
    m = -(-n // L)
    words = torch.zeros(m * L, dtype=torch.float64 if x.dtype == f16 else torch.int64)
    words[:n] = x.to(words.dtype)
    z = torch.cumsum(words.view(m, L), 1).reshape(-1)[:n]
    return z.to(f32 if x.dtype == f16 else i32)


def run_complete_rows(x, sums, tile_width, tile_height):
    # int64 input goes to the int32 kernel (int32 out); fp32 stays fp32
    need("run_complete_rows", x, torch.int64, f32)
    n, blocks, w, h = x.numel(), sums.numel(), int(tile_width), int(tile_height)
    if n != blocks * w * h:
        raise ValueError(f"run_complete_rows: len(x) = {n} must be len(sums) * tile_width * tile_height "
                         f"= {blocks * w * h}")
    words = x.to(torch.float64 if x.dtype == f32 else torch.int64)
    out = words.clone()
    prefix = torch.cat([torch.zeros(1, dtype=words.dtype), torch.cumsum(sums.to(words.dtype), 0)[:-1]])
    for b in range(blocks):
        acc = prefix[b]
        for r in range(h):
            lo = (b * h + r) * w
            out[lo:lo + w] = words[lo:lo + w] + acc
            acc = out[lo + w - 1]
    return out.to(f32 if x.dtype == f32 else i32)


def run_reduce_tiles(x, tile_len, num_blocks):
    need("run_reduce_tiles", x, f16, i8)
    n = x.numel()
    tiles = -(-n // int(tile_len))
    block_len = int(tile_len) * (-(-tiles // int(num_blocks)))
    words = x.to(torch.float64) if x.dtype == f16 else x.to(torch.int64)
    out = torch.zeros(int(num_blocks), dtype=words.dtype)
    for b in range(int(num_blocks)):
        out[b] = words[b * block_len: min((b + 1) * block_len, n)].sum()
    return out.to(f32 if x.dtype == f16 else i32)


run_scan_multi_core_no_l2 = run_scan_multi_core
