"""Stand-in sorting, selection, search and counting kernels (torch_sort.h, torch_topk.h,
torch_searchsorted.h, torch_histogram.h; kernels kernel_single_radix.h, kernel_radix_enc.h,
kernel_topk.h, kernel_topk_pivot.h, kernel_searchsorted.h, kernel_histogram.h).

- run_radix_sort(x, S) -> (values, int32 indices): LSB radix sort by splits, ascending and stable.
  int16 and fp16 launch their kernels; any other dtype launches nothing (both outputs uninitialised:
  refused here). fp16 is sorted by its 16-bit pattern with the magnitude bits of negative values
  inverted (kernel_radix_enc.h), so -0.0 sorts BEFORE +0.0, a NaN with the sign bit set first of all
  and a positive NaN after +inf. The wrapper computes num_tiles = n // S^2 and the kernel fails on a
  length that is not a multiple of S^2 (upstream's ISSUE-52; its irregular-length test is commented
  out): refused (ValueError).
- run_topk_int16(x, k, x_min, x_max, S) / run_topk_fp16(x, k, x_min, x_max, S) -> (k values of x's
  dtype, k int32 indices): the k largest, found by bisecting the value range [x_min, x_max] with
  less-or-equal masks and run_split_ind (kernel_topk.h); x_min / x_max must bound x (the bisection
  starts there; not bounding: refused). Any length (upstream's fp16 test runs 10 * 2^20 - 1 at
  S = 128). Which of equal values the kernel keeps and the order of its output are not documented
  (upstream's test compares sorted values and sorted indices, and notes randomized testing fails with
  top-k: its ISSUE-53); the twin returns torch.topk's (largest first). fp16 bounds are floats; a
  non-finite bound has no midpoint (pivot = (min + max) / 2): refused.
- run_topk_pivot_fp16(x, k, num_samples=32) -> fp16 estimates, one per block (block_dim =
  min(AIV cores, ceil(n / (num_samples * 1024)))): each block reads num_iters = 8 tiles of
  num_samples * 32 elements from offset b * tile * ceil(ceil(n / tile) / block_dim); in each tile,
  the k_inner = 8-th largest of every 32 consecutive values (Sort32), then the k_outer = 4-th largest
  of those num_samples values; the block's estimate is the largest over its 8 tiles. ``k`` is ignored
  (the wrapper's TODO: k_inner / k_outer are fixed). Elements past the end of x are read as garbage by
  the kernel; the twin leaves out a tile that does not lie wholly inside x. Estimates start at
  numeric_limits<half>::min() (6.1e-5, the smallest positive normal), so none is below it. fp16 only.
- run_searchsorted(sorted, values) -> int32, values' length: lower bound (torch.searchsorted(...,
  side='left', out_int32=True)); both int32 (the wrapper's TORCH_CHECK), sorted ascending.
- run_histogram(x, num_bins) -> int32 (num_bins,): counts over [min(x), max(x)] (the wrapper's
  aminmax). Only histogram_fp16 exists: any other dtype leaves the zeros the wrapper allocated.
  The kernel's bin edges are e_i = half(max - i * step), step = (max - min) / num_bins in float32,
  i = 1 .. num_bins - 1; bin num_bins - i counts e_i <= x < e_(i-1) (e_0 = +inf), bin 0 counts
  x < e_(num_bins - 1), so each element lands in exactly one bin.
"""
from __future__ import annotations

import math

import torch

from ._common import check_s, cpu, f16, i16, i32, need

#: vector (AIV) cores of the device the wrappers query (GetCoreNumAiv; two per AI core, 20 AI cores)
AIV_CORES = 40

DTYPES = {
    "run_radix_sort": "int16 / fp16 -> (same, int32 indices); fp16 ordered by bit pattern (-0.0 before "
                      "+0.0, negative NaN first, positive NaN last); other dtypes uninitialised (refused)",
    "run_topk_int16": "int16 (x_min, x_max: int16 bounds) -> (int16 values, int32 indices)",
    "run_topk_fp16": "fp16 (x_min, x_max: finite float bounds) -> (fp16 values, int32 indices)",
    "run_topk_pivot_fp16": "fp16 -> fp16 (block_dim,) estimates (k ignored)",
    "run_searchsorted": "sorted int32, values int32 -> int32 positions (lower bound)",
    "run_histogram": "fp16 -> int32 (num_bins,); any other dtype -> int32 zeros (no kernel branch)",
}


def _radix_keys(x):
    """The kernels' sort keys: int16 as it is; fp16 bit patterns with negatives' magnitude bits
    inverted (kernel_radix_enc.h)."""
    if x.dtype == i16:
        return x.to(torch.int32)
    b = x.contiguous().view(i16).to(torch.int32)
    return torch.where(b < 0, b ^ 0x7FFF, b)


def run_radix_sort(x, S):
    S = check_s("run_radix_sort", S)
    cpu("run_radix_sort", x)
    need("run_radix_sort", x, f16, i16)
    n = x.numel()
    if n % (S * S):
        raise ValueError(f"run_radix_sort: len(x) = {n} must be a multiple of S^2 = {S * S} (the kernel "
                         "fails on irregular lengths, upstream ISSUE-52)")
    xs = x.reshape(-1)
    _, order = torch.sort(_radix_keys(xs), stable=True)
    return xs[order], order.to(i32)


def _topk(name, x, k, x_min, x_max, S, dtype):
    check_s(name, S)
    cpu(name, x)
    need(name, x, dtype)
    xs = x.reshape(-1)
    k = int(k)
    if not 0 <= k <= xs.numel():
        raise ValueError(f"{name}: k = {k} must be in [0, {xs.numel()}] (the length of x)")
    lo, hi = float(x_min), float(x_max)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{name}: x_min / x_max must be finite (the bisection pivot is their midpoint), "
                         f"got {x_min}, {x_max}")
    if xs.numel() and (float(xs.min()) < lo or float(xs.max()) > hi):
        raise ValueError(f"{name}: x_min / x_max ({x_min}, {x_max}) do not bound x")
    if xs.numel() and torch.isnan(xs.float()).any():
        raise ValueError(f"{name}: x holds NaN, which no less-or-equal mask selects")
    v, i = torch.topk(xs.float() if dtype == f16 else xs.to(torch.int32), k)
    return v.to(dtype), i.to(i32)


def run_topk_int16(x, k, x_min, x_max, S):
    return _topk("run_topk_int16", x, k, x_min, x_max, S, i16)


def run_topk_fp16(x, k, x_min, x_max, S):
    return _topk("run_topk_fp16", x, k, x_min, x_max, S, f16)


def run_topk_pivot_fp16(x, k, num_samples=32):
    cpu("run_topk_pivot_fp16", x)
    need("run_topk_pivot_fp16", x, f16)
    ns = int(num_samples)
    if not 1 <= ns <= 32:  # the second Sort32 sorts the num_samples per-group values in one 32-wide sort
        raise ValueError(f"run_topk_pivot_fp16: num_samples must be in [1, 32], got {num_samples}")
    k_inner, k_outer, iters = 8, 4, 8
    xs = x.reshape(-1).float()
    n = xs.numel()
    tile = ns * 32
    block_dim = max(min(AIV_CORES, math.ceil(n / (tile * 32))), 1)
    per_block = math.ceil(math.ceil(n / tile) / block_dim)  # max_num_tiles_per_block_
    # the kernel starts each block at numeric_limits<half>::min() (the smallest positive normal)
    out = torch.full((block_dim,), float(torch.finfo(f16).tiny), dtype=torch.float32)
    for b in range(block_dim):
        for t in range(iters):
            lo = (b * per_block + t) * tile
            if lo + tile > n:
                break  # the kernel would read past x (garbage): left out here
            groups = xs[lo: lo + tile].reshape(ns, 32)
            inner = torch.sort(groups, dim=1, descending=True).values[:, k_inner - 1]
            est = torch.sort(inner, descending=True).values[min(k_outer, ns) - 1]
            out[b] = torch.maximum(out[b], est)
    return out.to(f16)


def run_searchsorted(sorted, values):  # noqa: A002 (upstream's argument name)
    cpu("run_searchsorted", sorted, values)
    need("run_searchsorted", sorted, i32)
    need("run_searchsorted", values, i32)
    s = sorted.reshape(-1)
    if s.numel() > 1 and bool((s[1:] < s[:-1]).any()):
        raise ValueError("run_searchsorted: sorted must be ascending")
    return torch.searchsorted(s, values.reshape(-1), side="left", out_int32=True)


def run_histogram(x, num_bins):
    cpu("run_histogram", x)
    bins = int(num_bins)
    if bins < 1:
        raise ValueError(f"run_histogram: num_bins must be positive, got {num_bins}")
    z = torch.zeros(bins, dtype=i32)
    xs = x.reshape(-1)
    if x.dtype != f16 or xs.numel() == 0:
        return z  # no kernel branch: the zeros the wrapper allocated
    xs = xs.float()  # exact; fp16 edges compare the same in fp32
    lo, hi = xs.min(), xs.max()  # float32, as the wrapper's aminmax(...).item<float>()
    step = (hi - lo) / bins
    below = xs.numel()  # elements below e_0 = +inf
    for i in range(1, bins):
        edge = (hi - i * step).to(f16).float()
        less = int((xs < edge).sum())
        z[bins - i] = below - less
        below = less
    z[0] = below
    return z

