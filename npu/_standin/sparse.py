"""Stand-in sparse kernels (torch_spmv.h, torch_gather.h): the SpMV pipelines and their stages.

- run_csr_gather(values, cols, x): z(i) = values(i) * x(cols(i)), z = empty_like(values): the product
  is computed and stored in values' dtype (fp16: the vector unit's half Mul, the exact product
  rounded once to fp16; int16: wraps modulo 2^16; fp32). values and x of one dtype (fp16, int16 or
  fp32), cols int32, all 1-D, len(cols) = len(values) (the wrapper's checks: TypeError / ValueError
  here). The kernel holds ALL of x in the vector core's Unified Buffer next to its tiles of 1024:
  x_len * itemsize + 1024 * (4 * itemsize + 12) must fit upstream's budget of 190 KiB
  (UB_SIZE_BYTES): x up to 87,040 fp16 / int16 or 41,472 fp32 elements (ValueError beyond).
- run_gather_spmv(values, idxs, tile_len): z(i) = values(idxs(i) - 1), 0 where idxs(i) = 0;
  z = empty(len(idxs)) of values' dtype. The kernel moves 4-byte (fp32) words, so values must be a
  4-byte dtype (fp32 as upstream passes; int32 / uint32 words are copied bit for bit); idxs 4-byte
  words read as uint32 (uint32 as upstream's tests pass, int32 the same). idxs must be non-decreasing
  (the kernel fetches the value range [first, last] of each tile) and <= len(values). A first tile
  of idxs that is all zeros (>= tile_len leading zeros, or every idx 0) runs the kernel's
  leading-zero loop past the tile (no bound: undefined): ValueError here. tile_len 1 .. 512
  (upstream: "values above 512 cause failures").
- run_mc_gather(values, idxs, tile_len): z = values[idxs] (a plain gather), z of values' dtype.
  fp16 runs the half kernel, every other dtype the fp32 one, so a dtype other than fp16 must have
  4-byte words; idxs 4-byte words (int32 / uint32), non-decreasing (the kernel's assumption), each <
  len(values). Its UB holds 32768 fetched values plus 8 tile buffers: 32768 * itemsize + tile_len *
  (itemsize + 28) <= 190 KiB.
- run_spmv(vals, indptr, cols, x, s): App. Alg. 4 as the wrapper chains it: products =
  run_csr_gather (fp16 products, rounded to fp16!; int16 products wrap to int16 and are then narrowed
  to int8 by .to(int8)), run_scan_multi_core(products, s) (fp16 -> fp32; every other dtype is read as
  int8 bytes: fp32 vals give garbage, as the scan's routing quirk), run_gather_spmv(scanned, indptr,
  128) with the FULL indptr (so the first entry, indptr(0) = 0, gathers 0), torch.diff. fp16 -> fp32,
  int16 -> int32 (products narrowed to int8), fp32 -> int32 (garbage). indptr int32 / uint32.
- run_spmv_multi_cube(vals, indptr, cols, x, upper, lower_strict): the same chain with
  run_scan_multi_cube (U_S / L_S^- of fp16, S = their size). The multi-cube scan has only an fp16
  branch: other products leave its output uninitialised (GARBAGE words, int32).
- run_spmv_v2(vals, indptr, cols, x, s, segm_offsets=None): one fused kernel (spmv_v2_fp16 /
  spmv_v2_fp32): the CSR products in vals' dtype (fp16 rounded), the cube row scan and the vector
  segmented-sum revert; z = zeros(rows) fp32, one sum per row (empty rows 0). vals and x both fp16 or
  both fp32, indptr int32 or uint32 (the wrapper's checks), the full offsets 0 .. nnz (the kernel skips
  indptr(0)). segm_offsets: the per-block search of indptr for up to 20 AI-core blocks of ceil(tiles /
  blocks) S^2-tiles, computed when absent; the kernel trusts a given one, so it must equal that search
  (ValueError here). nnz = 0 makes the wrapper divide by zero blocks (ValueError here). Its CSR
  gather's tile is min(1024, S^2) (the UB rule above).
- run_spmv_v2_multi_cube(vals, indptr, cols, x, upper, lower_strict): the fused multi-cube kernel
  (block scan + cube revert): fp16 vals and x only, indptr int32 only (the wrapper's checks), S =
  upper's size; otherwise as run_spmv_v2 (its CSR gather tile is the largest the UB holds next to x,
  at least 16).

Float sums: run_spmv / run_spmv_multi_cube scan as the scan twins model it (the exact prefix rounded
to fp32) and difference in fp32 (torch.diff); the fused v2 kernels' row sums are exact, rounded once
to fp32. The kernels' own fp32 accumulation order is not modelled (a few fp32 ulps of a row's prefix).
"""
from __future__ import annotations

import torch

from . import scans
from ._common import GARBAGE, check_s, cpu, f16, f32, i8, i16, i32, need

u32 = torch.uint32

#: upstream's Unified Buffer budget of a vector core (tcuscan_utils.h: UB_SIZE_BYTES)
UB_BYTES = 190 * 1024
#: run_csr_gather's tile (the wrapper's TILE_LEN)
CSR_GATHER_TILE = 1024
#: the gather_spmv tile run_spmv / run_spmv_multi_cube use ("values above 512 cause failures")
SPMV_GATHER_TILE = 128
MAX_GATHER_SPMV_TILE = 512
#: values the gather kernels fetch per sub-tile (VALUE_TILE_LEN / ValueTileSize)
VALUE_TILE = 32768
#: the AI (cube) cores the fused SpMV wrappers tile for (GetCoreNumAic on the 910B)
AIC_CORES = 20

DTYPES = {
    "run_csr_gather": "fp16 -> fp16 (products rounded to fp16); int16 -> int16 (wraps); fp32 -> fp32; "
                      "cols int32",
    "run_gather_spmv": "4-byte words (fp32; int32 / uint32 bit for bit) -> same; idxs int32 / uint32",
    "run_mc_gather": "fp16 -> fp16; 4-byte words (fp32, int32, uint32) -> same; idxs int32 / uint32",
    "run_spmv": "fp16 -> fp32 (fp16 products); int16 -> int32 (products narrowed to int8); "
                "fp32 -> int32 (read as int8 bytes: garbage)",
    "run_spmv_multi_cube": "fp16 -> fp32 (fp16 products); int16 / fp32 -> int32 (uninitialised)",
    "run_spmv_v2": "fp16 -> fp32 (fp16 products); fp32 -> fp32; indptr int32 / uint32",
    "run_spmv_v2_multi_cube": "fp16 -> fp32 (fp16 products); indptr int32",
}


def _fits_ub(name, x_len, itemsize, tile):
    used = x_len * itemsize + tile * (4 * itemsize + 12)
    if tile <= 0 or used > UB_BYTES:
        raise ValueError(f"{name}: x of {x_len} elements does not fit the vector core's Unified Buffer "
                         f"({used} bytes with a gather tile of {tile}; budget {UB_BYTES})")


def _products(name, values, cols, x, tile, col_dtypes=(i32,)):
    """run_csr_gather's kernel: values * x[cols] in values' dtype (checks as the wrapper)."""
    cpu(name, values, cols, x)
    need(name, values, f16, i16, f32)
    if x.dtype != values.dtype:
        raise TypeError(f"{name}: x dtype {x.dtype} must match values dtype {values.dtype}")
    need(name, cols, *col_dtypes)
    if values.dim() != 1 or cols.dim() != 1 or x.dim() != 1:
        raise ValueError(f"{name}: values, cols and x must be 1-D")
    if cols.numel() != values.numel():
        raise ValueError(f"{name}: cols length ({cols.numel()}) must match values length ({values.numel()})")
    _fits_ub(name, x.numel(), x.element_size(), tile)
    c = cols.to(torch.int64)
    if c.numel() and (int(c.min()) < 0 or int(c.max()) >= x.numel()):
        raise ValueError(f"{name}: cols out of range for x of length {x.numel()}")
    return values * x[c]  # fp16: the exact product (fits fp32) rounded once, as the half Mul


def run_csr_gather(values, cols, x):
    return _products("run_csr_gather", values, cols, x, CSR_GATHER_TILE)


def _sorted_idxs(name, idxs, hi, what):
    need(name, idxs, i32, u32)
    k = idxs.reshape(-1).to(torch.int64)
    if k.numel() and (int(k.min()) < 0 or int(k.max()) > hi or bool((k[1:] < k[:-1]).any())):
        raise ValueError(f"{name}: idxs must be non-decreasing {what}")
    return k


def run_gather_spmv(values, idxs, tile_len):
    name = "run_gather_spmv"
    cpu(name, values, idxs)
    if values.element_size() != 4:
        raise TypeError(f"{name}: unsupported dtype {values.dtype}; the kernel moves 4-byte (fp32) words")
    t = int(tile_len)
    if not 0 < t <= MAX_GATHER_SPMV_TILE:
        raise ValueError(f"{name}: tile_len must be 1 .. {MAX_GATHER_SPMV_TILE}, got {tile_len}")
    v = values.reshape(-1)
    k = _sorted_idxs(name, idxs, v.numel(), f"in [0, len(values) = {v.numel()}]")
    first = k[:t]
    if first.numel() and not bool(first.any()):
        raise ValueError(f"{name}: the first tile of idxs ({first.numel()} entries) is all zeros: the kernel's "
                         "leading-zero loop runs past the tile")
    out = torch.zeros(k.numel(), dtype=values.dtype)
    nz = k > 0
    out[nz] = v[k[nz] - 1]
    return out


def run_mc_gather(values, idxs, tile_len):
    name = "run_mc_gather"
    cpu(name, values, idxs)
    if values.dtype != f16 and values.element_size() != 4:
        raise TypeError(f"{name}: unsupported dtype {values.dtype}; the kernel takes fp16 (mc_gather_fp16) or "
                        "4-byte words (mc_gather_fp32)")
    t, size = int(tile_len), values.element_size()
    if t <= 0 or VALUE_TILE * size + t * (size + 28) > UB_BYTES:
        raise ValueError(f"{name}: tile_len {tile_len} does not fit the Unified Buffer next to {VALUE_TILE} "
                         "fetched values")
    v = values.reshape(-1)
    k = _sorted_idxs(name, idxs, v.numel() - 1, f"in [0, len(values) = {v.numel()})")
    return v[k]


def _chain(name, vals, indptr, cols, x, scan):
    """run_spmv's chain: products, a scan, the gather at the full indptr, torch.diff."""
    cpu(name, vals, indptr, cols, x)
    need(name, indptr, i32, u32)
    prod = _products(name, vals, cols, x, CSR_GATHER_TILE)
    gathered = run_gather_spmv(scan(prod), indptr, SPMV_GATHER_TILE)
    return torch.diff(gathered)


def run_spmv(vals, indptr, cols, x, s):
    S = check_s("run_spmv", s)

    def scan(prod):
        if prod.dtype == i16:
            prod = prod.to(i8)  # the wrapper narrows int16 products to int8
        return scans.run_scan_multi_core(prod, S)
    return _chain("run_spmv", vals, indptr, cols, x, scan)


def _check_constants(name, upper, lower_strict, dtype=f16):
    S = check_s(name, upper.shape[0])
    cpu(name, upper, lower_strict)
    for what, m, want in (("upper", upper, torch.triu(torch.ones(S, S, dtype=dtype))),
                          ("lower_strict", lower_strict, torch.tril(torch.ones(S, S, dtype=dtype), -1))):
        if m.dtype != dtype or tuple(m.shape) != (S, S):
            raise TypeError(f"{name}: {what} must be {S}x{S} of {dtype}, got {tuple(m.shape)} {m.dtype}")
        if not torch.equal(m, want):
            raise ValueError(f"{name}: {what} is not {'U_S' if what == 'upper' else 'L_S^-'}")
    return S


def run_spmv_multi_cube(vals, indptr, cols, x, upper, lower_strict):
    name = "run_spmv_multi_cube"

    def scan(prod):
        if prod.dtype != f16:  # run_scan_multi_cube launches only its fp16 kernel: z from at::empty
            return torch.full((prod.numel(),), GARBAGE, dtype=i32)
        _check_constants(name, upper, lower_strict)
        return scans.run_scan_multi_cube(prod, upper, lower_strict)
    return _chain(name, vals, indptr, cols, x, scan)


def _full_offsets(name, indptr, nnz):
    p = indptr.reshape(-1).to(torch.int64)
    if (p.numel() < 1 or int(p[0]) != 0 or int(p[-1]) != nnz or bool((p[1:] < p[:-1]).any())):
        raise ValueError(f"{name}: indptr must be non-decreasing offsets from 0 to nnz = {nnz} (the full CSR "
                         "offsets)")
    return p


def _segment_sums(prod, p):
    c = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(prod.to(torch.float64), 0)])
    return (c[p[1:]] - c[p[:-1]]).to(f32)


def _blocks(nnz, S):
    tiles = -(-nnz // (S * S))
    blocks = min(AIC_CORES, tiles)
    return blocks, (-(-tiles // blocks)) * S * S


def run_spmv_v2(vals, indptr, cols, x, s, segm_offsets=None):
    name = "run_spmv_v2"
    S = check_s(name, s)
    cpu(name, vals, indptr, cols, x)
    if not ((vals.dtype == f16 and x.dtype == f16) or (vals.dtype == f32 and x.dtype == f32)):
        raise TypeError(f"{name}: vals and x must both be fp16 or both be fp32, got vals={vals.dtype} "
                        f"x={x.dtype}")
    need(name, indptr, i32, u32)
    nnz = vals.numel()
    if nnz == 0:
        raise ValueError(f"{name}: nnz = 0 (the wrapper's tiling divides by zero blocks)")
    p = _full_offsets(name, indptr, nnz)
    if segm_offsets is not None:
        cpu(name, segm_offsets)
        blocks, block_len = _blocks(nnz, S)
        sstart = torch.clamp(torch.arange(blocks + 1, dtype=torch.int64) * block_len, max=nnz)
        want = torch.searchsorted(p, sstart)
        got = segm_offsets.reshape(-1).to(torch.int64)
        if not torch.equal(got, want):
            raise ValueError(f"{name}: segm_offsets {got.tolist()[:8]} differ from the per-block search of indptr "
                             f"{want.tolist()[:8]} ({blocks} blocks of {block_len}); the kernel trusts them")
    prod = _products(name, vals, cols, x, min(CSR_GATHER_TILE, S * S), (i32, u32))
    return _segment_sums(prod, p)


def run_spmv_v2_multi_cube(vals, indptr, cols, x, upper, lower_strict):
    name = "run_spmv_v2_multi_cube"
    cpu(name, vals, indptr, cols, x)
    if vals.dtype != f16 or x.dtype != f16:
        raise TypeError(f"{name}: vals and x must both be fp16, got vals={vals.dtype} x={x.dtype}")
    need(name, indptr, i32)
    S = _check_constants(name, upper, lower_strict)
    nnz = vals.numel()
    if nnz == 0:
        raise ValueError(f"{name}: nnz = 0 (the wrapper's tiling divides by zero blocks)")
    p = _full_offsets(name, indptr, nnz)
    padded = -(-nnz // (S * S)) * S * S
    xb = x.numel() * 2
    tile = min((UB_BYTES - xb) // 20 if xb < UB_BYTES else 0, padded) // 16 * 16
    prod = _products(name, vals, cols, x, tile, (i32, u32))
    return _segment_sums(prod, p)
