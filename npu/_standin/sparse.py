"""Stand-in sparse kernels: SpMV (and its stages csr_gather, gather_spmv).

Kernel facts and quirks: see ``npu.testing``."""
from __future__ import annotations

import torch

from ._common import GARBAGE, as_int8_bytes, check_s, cpu, f16, f32, i8, i16, i32, need  # noqa: F401


def run_csr_gather(vals, cols, x):
    need("run_csr_gather", vals, f16)
    need("run_csr_gather", x, f16)
    need("run_csr_gather", cols, i32)
    return (vals.to(f32) * x.to(f32)[cols.to(torch.int64)])


def run_spmv(vals, indptr, cols, x, s):
    # int16 products are narrowed to int8 before the scan (a quirk): only fp16 is wrapped
    check_s("run_spmv", s)
    need("run_spmv", vals, f16, i16)
    need("run_spmv", indptr, torch.uint32)
    need("run_spmv", cols, i32)
    if vals.dtype == i16:
        prod = (vals.to(torch.int64) * x.to(torch.int64)[cols.to(torch.int64)]).to(i8).to(torch.int64)
        scanned = torch.cumsum(prod, 0)
    else:
        prod = run_csr_gather(vals, cols, x)
        scanned = torch.cumsum(prod.to(torch.float64), 0).to(f32)  # the multi-core scan, fp32 out
    ends = indptr.to(torch.int64)[1:] - 1
    gathered = torch.where(ends >= 0, scanned[ends.clamp(min=0)] if scanned.numel() else
                           torch.zeros(ends.numel(), dtype=scanned.dtype), torch.zeros((), dtype=scanned.dtype))
    z = torch.diff(torch.cat([torch.zeros(1, dtype=scanned.dtype), gathered]))  # prefix differences
    return z.to(f32 if vals.dtype == f16 else i32)


def run_gather_spmv(values, idxs, tile_len):
    need("run_gather_spmv", idxs, i32)
    k = idxs.to(torch.int64) - 1
    vals = values[k.clamp(min=0)] if values.numel() else torch.zeros(k.numel(), dtype=values.dtype)
    return torch.where(k >= 0, vals, torch.zeros((), dtype=values.dtype))
