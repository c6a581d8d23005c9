"""Stand-in scan kernels (torch_scan.h, torch_scan_cpu.h, torch_reduce.h; kernel_scan_*.h,
kernel_row_scan.h, kernel_block_scan.h, kernel_reduce_tiles.h, kernel_cube_reduce.h,
kernel_complete_rows.h, kernel_complete_blocks.h).

Every wrapper allocates its output with ``at::empty`` and launches a kernel only for the dtypes it
has a branch for; any other dtype returns that uninitialised output (here filled with GARBAGE),
except run_cube_reduce (``at::zeros``: zeros) and run_scan_cpu (a cast copy, see below). Float
results: the cube units multiply fp16 exactly and accumulate in fp32; modelled as the exact sum
rounded once to fp32.

- run_scan_single_core(x, S, starting_sum=0): inclusive scan + starting_sum on one core; int8 ->
  int32 (wraps), fp16 / fp32 -> fp32; other dtypes GARBAGE int32.
- run_scan_multi_core(x, S), run_scan_multi_core_no_l2(x, S) (MCScan with / without the L2
  split): fp16 -> fp32; EVERY other dtype goes to the int8 kernel, which reads the first n bytes
  of x's buffer (fp32 / int32 input silently wrong) -> int32 (wraps).
- run_row_scan(x, S): x of shape (M, ...): the kernel reads M * S fp16 elements as M rows of S and
  returns the flat (M * S,) fp32 row-wise scans; fp16 only (other dtypes: GARBAGE int32). Fewer
  than M * S elements would be read out of bounds: refused (ValueError).
- run_block_scan(x, upper, lower_strict): the scan of every S^2-block (S = upper's size) on its
  own, fp16 -> fp32; other dtypes GARBAGE int32. upper / lower_strict: U_S and L_S^-, fp16.
- run_scan_multi_cube(x, upper, lower_strict): the inclusive scan on the cube units; fp16 -> fp32
  only (an int8 x gets GARBAGE int32).
- run_scan_batch(x, S): the scan of every row of x viewed as (numel / x.size(-1), x.size(-1)):
  fp16 / fp32 -> fp32 of that 2-D shape; other dtypes GARBAGE int32.
- run_scan_cpu(x) (OpenMP, CPU tensors only): x cast to fp32 (fp16, fp32) or int32 (any other
  dtype), then fp16 / fp32 / int8 scanned in ``threads`` contiguous blocks (sequential fp32 / int32
  sums in each, then each block's offset added: the fp32 result depends on the thread count, here
  torch.get_num_threads()). Quirk: any other dtype (int16, int32, int64, ...) comes back cast to
  int32 and NOT scanned.
- run_reduce_tiles(x, tile_len, num_blocks): num_blocks sums; block b sums x over
  [b L, (b + 1) L), L = tile_len * ceil(ceil(n / tile_len) / num_blocks); int8 -> int32, fp16 ->
  fp32; other dtypes GARBAGE int32.
- run_cube_reduce(x, num_blocks): the same block sums with tile S'^2, S' = 128 when n >= 128^2
  num_blocks, 64 when n >= 64^2 num_blocks, else 32 (heuristics_cube_reduce.h); int8 -> int32,
  fp16 -> fp32; other dtypes: zeros (int32).
- run_complete_rows(x, sums, tile_width, tile_height) (MCScan's second phase): len(sums) cores;
  core b adds sum(sums[:b]) to the first row (tile_width elements) of its range and each later
  row gets the previous row's last (completed) element added, so rows that hold row scans become
  one scan. Core b's range: [b T m, (b + 1) T m), T = tile_width * min(tile_height, ceil(8192 /
  tile_width)), m = ceil(ceil(n / T) / len(sums)). 8192 % tile_width must be 0 (kernel assert:
  refused). fp32 -> fp32 (sums fp32). Quirk: int64 x goes to the int32 kernel, which reads x's
  and sums' buffers as int32 WORDS (the first n, resp. len(sums), words: low and high halves
  interleaved) -> int32; any other dtype (int32 included) GARBAGE int32.
- run_complete_blocks(x, sums, tile_length): block b of len(x) / len(sums) elements gets
  sum(sums[:b]) added; fp32 / int32 -> same; other dtypes GARBAGE (empty_like). The kernel asserts
  len(x) % len(sums) == 0 and (len(x) / len(sums)) % tile_length == 0: refused (ValueError).
"""
from __future__ import annotations

import numpy as np
import torch

from ._common import GARBAGE, as_int8_bytes, check_s, cpu, f16, f32, i8, i32

DTYPES = {
    "run_scan_single_core": "int8 -> int32; fp16 / fp32 -> fp32; other dtypes -> int32 GARBAGE",
    "run_scan_multi_core": "fp16 -> fp32; any other dtype read as int8 bytes -> int32",
    "run_scan_multi_core_no_l2": "fp16 -> fp32; any other dtype read as int8 bytes -> int32",
    "run_row_scan": "fp16 (M, S) -> fp32 (M * S,); other dtypes -> int32 GARBAGE",
    "run_block_scan": "fp16 -> fp32 (constants fp16); other dtypes -> int32 GARBAGE",
    "run_scan_multi_cube": "fp16 -> fp32 (constants fp16); other dtypes -> int32 GARBAGE",
    "run_scan_batch": "fp16 / fp32 (..., L) -> fp32 (batch, L); other dtypes -> int32 GARBAGE",
    "run_scan_cpu": "fp16 / fp32 -> fp32; int8 -> int32; other dtypes -> int32, NOT scanned (CPU tensors)",
    "run_reduce_tiles": "int8 -> int32; fp16 -> fp32; other dtypes -> int32 GARBAGE",
    "run_cube_reduce": "int8 -> int32; fp16 -> fp32; other dtypes -> int32 zeros",
    "run_complete_rows": "fp32 -> fp32; int64 read as int32 words -> int32; other dtypes -> int32 GARBAGE",
    "run_complete_blocks": "fp32 / int32 -> same; other dtypes -> same dtype GARBAGE",
}

#: KernelCompleteRows' largest tile (elements)
MAX_COMPLETE_ROWS_TILE = 8192


def _garbage(shape, dtype=i32):
    return torch.full(shape, GARBAGE, dtype=dtype)


def _cumsum_f32(x, dim=0):
    """The exact prefix sums of fp16 / fp32 values rounded once to fp32 (cube accumulation)."""
    return torch.cumsum(x.to(torch.float64), dim).to(f32)


def _wrap_i32(t):
    """int64 values as int32 with two's-complement wrap-around (the kernels' int32 accumulators)."""
    return torch.from_numpy(t.numpy().astype(np.int64).astype(np.int32))


def _check_constants(name, upper, lower_strict):
    S = check_s(name, upper.shape[0])
    for what, m, want in (("upper", upper, torch.triu(torch.ones(S, S, dtype=f16))),
                          ("lower_strict", lower_strict, torch.tril(torch.ones(S, S, dtype=f16), -1))):
        if m.dtype != f16 or tuple(m.shape) != (S, S):
            raise TypeError(f"{name}: {what} must be {S}x{S} float16, got {tuple(m.shape)} {m.dtype}")
        if not torch.equal(m, want):
            raise ValueError(f"{name}: {what} is not {'U_S' if what == 'upper' else 'L_S^-'}")
    return S


def run_scan_single_core(x, S, starting_sum=0):
    check_s("run_scan_single_core", S)
    cpu("run_scan_single_core", x)
    x = x.reshape(-1)
    if x.dtype in (f16, f32):
        return (torch.cumsum(x.to(torch.float64), 0) + float(np.float32(starting_sum))).to(f32)
    if x.dtype == i8:
        return _wrap_i32(torch.cumsum(x.to(torch.int64), 0) + int(np.int32(int(starting_sum))))
    return _garbage((x.numel(),))


def run_scan_multi_core(x, S):
    check_s("run_scan_multi_core", S)
    cpu("run_scan_multi_core", x)
    x = x.reshape(-1)
    if x.dtype == f16:
        return _cumsum_f32(x)
    return _wrap_i32(torch.cumsum(as_int8_bytes(x).to(torch.int64), 0))  # the int8 routing quirk


def run_scan_multi_core_no_l2(x, S):
    check_s("run_scan_multi_core_no_l2", S)
    return run_scan_multi_core(x, S)


def run_row_scan(x, S):
    S = check_s("run_row_scan", S)
    cpu("run_row_scan", x)
    M = x.shape[0] if x.dim() else 1
    if x.dtype != f16:
        return _garbage((M * S,))
    if x.numel() < M * S:
        raise ValueError(f"run_row_scan: x of shape {tuple(x.shape)} holds {x.numel()} elements; the kernel reads "
                         f"x.size(0) * S = {M * S} (pass x as (rows, S))")
    return _cumsum_f32(x.reshape(-1)[: M * S].view(M, S), 1).reshape(-1)


def run_block_scan(x, upper, lower_strict):
    cpu("run_block_scan", x, upper, lower_strict)
    x = x.reshape(-1)
    if x.dtype != f16:
        return _garbage((x.numel(),))
    S = _check_constants("run_block_scan", upper, lower_strict)
    n, L = x.numel(), S * S
    m = -(-n // L)
    words = torch.zeros(m * L, dtype=torch.float64)
    words[:n] = x.to(torch.float64)
    return torch.cumsum(words.view(m, L), 1).reshape(-1)[:n].to(f32)


def run_scan_multi_cube(x, upper, lower_strict):
    cpu("run_scan_multi_cube", x, upper, lower_strict)
    x = x.reshape(-1)
    if x.dtype != f16:
        return _garbage((x.numel(),))
    _check_constants("run_scan_multi_cube", upper, lower_strict)
    return _cumsum_f32(x)


def run_scan_batch(x, S):
    check_s("run_scan_batch", S)
    cpu("run_scan_batch", x)
    L = x.shape[-1] if x.dim() else 1
    rows = x.numel() // L if L else 0
    if x.dtype not in (f16, f32):
        return _garbage((rows, L))
    return _cumsum_f32(x.reshape(rows, L), 1)


def run_scan_cpu(x):
    cpu("run_scan_cpu", x)
    x = x.reshape(-1)
    n = x.numel()
    if x.dtype not in (f16, f32, i8):
        return x.to(i32)  # cast, never scanned (no branch)
    a = x.numpy().astype(np.float32 if x.dtype != i8 else np.int32)
    if n == 0:
        return torch.from_numpy(a)
    blocks = min(max(1, torch.get_num_threads()), n)
    size = -(-n // blocks)
    out = np.empty_like(a)
    totals = np.zeros(blocks, a.dtype)
    for b in range(blocks):
        lo, hi = b * size, min((b + 1) * size, n)
        if lo < hi:
            out[lo:hi] = np.add.accumulate(a[lo:hi], dtype=a.dtype)  # sequential, in fp32 / int32
            totals[b] = out[hi - 1]
    with np.errstate(over="ignore"):
        offsets = np.concatenate([np.zeros(1, a.dtype), np.add.accumulate(totals, dtype=a.dtype)[:-1]])
        for b in range(1, blocks):
            lo, hi = b * size, min((b + 1) * size, n)
            if offsets[b] != 0:
                out[lo:hi] += offsets[b]
    return torch.from_numpy(out)


def _block_sums(x, tile_len, num_blocks):
    n, nb = x.numel(), int(num_blocks)
    tiles = -(-n // int(tile_len))
    block_len = int(tile_len) * (-(-tiles // nb))
    words = x.to(torch.float64 if x.dtype == f16 else torch.int64)
    c = torch.cat([torch.zeros(1, dtype=words.dtype), torch.cumsum(words, 0)])
    ends = torch.clamp(torch.arange(nb + 1, dtype=torch.int64) * block_len, max=n)
    s = c[ends[1:]] - c[ends[:-1]]
    return s.to(f32) if x.dtype == f16 else _wrap_i32(s)


def run_reduce_tiles(x, tile_len, num_blocks):
    cpu("run_reduce_tiles", x)
    x = x.reshape(-1)
    if int(tile_len) <= 0 or int(num_blocks) <= 0:
        raise ValueError("run_reduce_tiles: tile_len and num_blocks must be positive")
    if x.dtype not in (i8, f16):
        return _garbage((int(num_blocks),))
    return _block_sums(x, tile_len, num_blocks)


def run_cube_reduce(x, num_blocks):
    cpu("run_cube_reduce", x)
    x = x.reshape(-1)
    nb = int(num_blocks)
    if nb <= 0:
        raise ValueError("run_cube_reduce: num_blocks must be positive")
    if x.dtype not in (i8, f16):
        return torch.zeros(nb, dtype=i32)
    n = x.numel()
    s = 128 if n >= 128 * 128 * nb else 64 if n >= 64 * 64 * nb else 32
    return _block_sums(x, s * s, nb)


def run_complete_rows(x, sums, tile_width, tile_height):
    name = "run_complete_rows"
    cpu(name, x, sums)
    x, sums = x.reshape(-1), sums.reshape(-1)
    n, nb, w = x.numel(), sums.numel(), int(tile_width)
    if x.dtype not in (f32, torch.int64):
        return _garbage((n,))
    if w <= 0 or int(tile_height) <= 0 or MAX_COMPLETE_ROWS_TILE % w:
        raise ValueError(f"{name}: tile_width must divide {MAX_COMPLETE_ROWS_TILE} (kernel assert), "
                         f"and tile_height be positive; got {tile_width}, {tile_height}")
    if nb == 0:
        raise ValueError(f"{name}: sums is empty (the kernel launches len(sums) cores)")
    if x.dtype == torch.int64:  # the int32 kernel on int64 buffers: their first words
        a = x.numpy().view(np.int32)[:n].copy()
        sw = sums.to(torch.int64).numpy().view(np.int32)
        if sw.size < nb:
            raise ValueError(f"{name}: sums holds fewer than len(sums) int32 words")
        s = sw[:nb].copy()
    else:
        if sums.dtype != f32:
            raise TypeError(f"{name}: sums must be float32 like x, got {sums.dtype}")
        a, s = x.numpy().copy(), sums.numpy().copy()
    h = min(int(tile_height), -(-MAX_COMPLETE_ROWS_TILE // w))
    T = w * h
    tiles = -(-n // T)
    per = -(-tiles // nb) * T  # each core's range
    with np.errstate(over="ignore"):
        prev = np.concatenate([np.zeros(1, a.dtype), np.add.accumulate(s, dtype=a.dtype)[:-1]])
        out = np.empty_like(a)
        for b in range(nb):
            lo, hi = b * per, min((b + 1) * per, n)
            if lo >= hi:
                continue
            seg = a[lo:hi]
            full = (hi - lo) // w
            rows = seg[: full * w].reshape(full, w)
            # acc_0 = sum(sums[:b]); acc_r = acc_(r-1) + row (r-1)'s last element, sequential in x's dtype
            acc = np.add.accumulate(np.concatenate([prev[b:b + 1], rows[:-1, -1]]), dtype=a.dtype)
            out[lo: lo + full * w] = (rows + acc[:, None]).reshape(-1)
            if full * w < hi - lo:  # a partial last row
                last = prev[b] if not full else out[lo + full * w - 1]
                out[lo + full * w: hi] = seg[full * w:] + last
    return torch.from_numpy(out)


def run_complete_blocks(x, sums, tile_length):
    name = "run_complete_blocks"
    cpu(name, x, sums)
    x, sums = x.reshape(-1), sums.reshape(-1)
    n, nb, t = x.numel(), sums.numel(), int(tile_length)
    if x.dtype not in (f32, i32):
        return torch.full((n,), GARBAGE, dtype=x.dtype)  # empty_like(x), no kernel branch
    if nb == 0 or n % nb or t <= 0 or (n // nb) % t:
        raise ValueError(f"{name}: len(x) = {n} must be a multiple of len(sums) = {nb} and the block length a "
                         f"multiple of tile_length = {tile_length} (kernel asserts)")
    if sums.dtype != x.dtype:
        raise TypeError(f"{name}: sums must be {x.dtype} like x, got {sums.dtype}")
    a, s = x.numpy(), sums.numpy()
    with np.errstate(over="ignore"):
        prev = np.concatenate([np.zeros(1, a.dtype), np.add.accumulate(s, dtype=a.dtype)[:-1]])
        out = (a.reshape(nb, n // nb) + prev[:, None]).reshape(-1)
    return torch.from_numpy(np.ascontiguousarray(out))
