"""Stand-in segmented kernels: segmented scans and segmented sums (flags and CSR offsets).

Kernel facts and quirks: see ``npu.testing``."""
from __future__ import annotations

import torch

from ._common import GARBAGE, as_int8_bytes, check_s, cpu, f16, f32, i8, i16, i32, need  # noqa: F401
from .scans import run_scan_multi_core


def run_seg_scan(x, f, S):
    check_s("run_seg_scan", S)
    need("run_seg_scan", x, f16)
    need("run_seg_scan", f, i8)
    out = torch.empty(x.numel(), dtype=torch.float64)
    acc = 0.0
    for i, (v, b) in enumerate(zip(x.tolist(), f.tolist())):
        acc = v if (b or i == 0) else acc + v
        out[i] = acc
    return out.to(f32)


def run_seg_sum(x, f, S):
    need("run_seg_sum", f, i8)
    scan_x = run_scan_multi_core(x, S)
    picked = scan_x[f.to(torch.bool)].to(f32)  # run_compress_pos: the scan at the END flags
    return torch.diff(torch.cat([torch.zeros(1, dtype=f32), picked]))


def run_seg_sum_single_core(x, indptr, s):
    check_s("run_seg_sum_single_core", s)
    need("run_seg_sum_single_core", x, f16, i8)
    need("run_seg_sum_single_core", indptr, torch.uint32)
    ptr = indptr.to(torch.int64)
    if ptr.numel() < 1 or int(ptr[0]) != 0 or int(ptr[-1]) != x.numel():
        raise ValueError("run_seg_sum_single_core: indptr must run from 0 to len(x)")
    words = x.to(torch.float64) if x.dtype == f16 else x.to(torch.int64)
    c = torch.cat([torch.zeros(1, dtype=words.dtype), torch.cumsum(words, 0)])
    return (c[ptr[1:]] - c[ptr[:-1]]).to(f32 if x.dtype == f16 else i32)


def run_seg_sum_multi_core(x, indptr, s, segm_offsets=None):
    # same contract as the single-core kernel (fp16 / int8, the full offsets); segm_offsets is an
    # optional precomputed per-block search of indptr, recomputed when absent
    return run_seg_sum_single_core(x, indptr, s)


def run_seg_sum_multi_cube(x, upper, lower_strict, indptr, segm_offsets=None):
    S = upper.shape[0]
    check_s("run_seg_sum_multi_cube", S)
    need("run_seg_sum_multi_cube", x, f16)  # "x must be fp16"
    if upper.dtype != f16 or lower_strict.dtype != f16:
        raise TypeError("run_seg_sum_multi_cube: upper / lower_strict must be float16")
    return run_seg_sum_single_core(x, indptr, S)
