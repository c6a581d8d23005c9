"""Stand-in data-movement and comparison kernels (torch_compress.h, torch_split.h, torch_compare.h;
kernel_compress.h, kernel_compress_ind.h, kernel_split.h, kernel_where.h, kernel_greater_equal.h,
kernel_count_if.h).

Masks are int8 (the wrappers count the ones with run_reduce_tiles, which has int8 and fp16 branches
only; the kernels read the mask as bytes and keep an element where its byte equals 1). The output
length is the SUM of the mask, the kept elements those whose byte is 1, so a mask holding anything
but 0 and 1 gives a misplaced, partly uninitialised result: the twins refuse it (ValueError).

Word width: the compress wrappers launch the 2-byte kernel (*_fp16) for float16 and int16 and the
4-byte kernel (*_fp32) for EVERY other dtype; the kernels move words without looking at them, so
a 4-byte dtype (fp32, int32, uint32) is compressed exactly. An 8-byte dtype (int64, fp64) has its
first n 4-byte words (the first half of its buffer) compressed into the first half of the output's
bytes; the rest of the output stays uninitialised (GARBAGE words): modelled. A 1-byte dtype or a
2-byte one other than fp16 / int16 (bf16) would be read and written out of bounds: refused
(TypeError).

- run_compress(x, mask, S): x[mask == 1] (output length sum(mask)). compress_with_sums_fp16 /
  _fp32 after run_reduce_tiles counted the ones per block (blocks of S^2/2).
- run_compress_pos(x, mask, output_len, S): the same kernels without the host-side count
  (compress_fp16 / _fp32 count in-kernel); z = empty(output_len): output_len > sum(mask) leaves the
  tail uninitialised (GARBAGE), output_len < sum(mask) would write past z (refused, ValueError).
  Its wrapper takes num_tiles = n // S^2 (floor, run_compress: ceil) only to choose how many cores
  to launch (block_dim: the largest divisor of num_tiles up to the core count; n < S^2 gives
  num_tiles 0, which every block_dim divides, so all cores are launched). The kernel distributes
  its S^2/2-tiles over however many cores run and counts the ones with the same distribution, so the
  result does not depend on it: any length compresses correctly (modelled: no effect). Its
  workspace holds block_dim counts, the kernel writes 2 * block_dim (one per vector core): an
  overrun inside the allocator's granularity, no effect on the result.
- run_compress_ind(x, indices_in, mask, S): (x[mask == 1], indices_in[mask == 1]); the indices are
  moved as 4-byte words whatever their dtype and come back in indices_in's dtype (the same width
  rules as x, against a 4-byte kernel: int32 / uint32 / fp32 exact, 8-byte words quirk, narrower
  refused).
- run_compress_ind_no_arange(x, mask, S): (x[mask == 1], int32 positions of the kept elements,
  0-based), the positions generated in the kernel (KernelWhere).
- run_split(x, mask, S): x[mask == 1] then x[mask == 0] (stable), length n; only split_uint16
  exists (fp16, int16): any other dtype leaves the output uninitialised (GARBAGE).
  run_split_ind(x, mask, indices_in, S): the same, and indices_in (int32) moved alongside (int32
  out, GARBAGE for a dtype without the kernel branch).
- run_filter_greater_eq(x, pivot, S): mask = run_greater_equal(x, pivot) (greater_equal_fp16 only:
  x >= fp16(fp32(pivot)) compared in fp16), then run_compress. Any other dtype leaves the mask
  uninitialised memory, so the result's length and content are undefined: refused (TypeError).
- run_filter_less_eq(x, pivot, S): mask = (x <= pivot).to(int8) computed by torch with pivot as a
  C++ float (fp32), then run_compress: every dtype run_compress takes.
- run_where(x, pivot, S): int32 positions (0-based) where x >= fp16(fp32(pivot)); fp16 only (the
  mask comes from run_greater_equal; other dtypes: uninitialised mask, refused).
- run_count_if(x, pivot, tile_len, compare_mode): int32 tensor of shape (1,): how many x_i compare
  true against fp16(fp32(pivot)) under AscendC's CMPMODE (0 LT, 1 GT, 2 EQ, 3 LE, 4 GE, 5 NE; others
  index past the kernel's table: refused). fp16 only; the output is allocated with zeros, so any other
  dtype returns [0]. Quirk: a tile of m elements (the partial last one; every one when tile_len is not a
  multiple of 16) is loaded padded to a multiple of 16 with a "boundary" value meant to compare false,
  and the padding IS counted where it compares true: the boundary is 64512.0 for LT / LE (the constant
  0xfc00 written as a float, not -inf), 65504 for GT / GE and NaN for EQ / NE, so GT / GE (pivot below
  65504), NE and LT / LE (pivot above 64512) count (-m) mod 16 extra elements.
"""
from __future__ import annotations

import torch

from ._common import GARBAGE, check_s, cpu, f16, f32, i8, i16, i32, need

DTYPES = {
    "run_compress": "fp16 / int16 -> same (2-byte kernel); fp32 / int32 / uint32 -> same (4-byte "
                    "kernel); int64 / fp64 -> same, first half of the words compressed, rest GARBAGE; "
                    "1-byte, bf16 refused; mask int8",
    "run_compress_pos": "as run_compress; output_len -> output length",
    "run_compress_ind": "x as run_compress; indices_in 4-byte (int32) -> same dtype, moved as 4-byte words",
    "run_compress_ind_no_arange": "x as run_compress -> (same, int32 positions)",
    "run_split": "fp16 / int16 -> same; any other dtype -> same, GARBAGE (no kernel branch); mask int8",
    "run_split_ind": "fp16 / int16, indices int32 -> (same, int32); other x dtypes: GARBAGE outputs",
    "run_filter_greater_eq": "fp16 -> fp16 (pivot: a float); other dtypes refused (uninitialised mask)",
    "run_filter_less_eq": "as run_compress (pivot: a float, the mask computed by torch)",
    "run_where": "fp16 -> int32 positions (pivot: a float); other dtypes refused (uninitialised mask)",
    "run_count_if": "fp16 -> int32 (1,); any other dtype -> int32 [0] (zeros, no kernel branch)",
}

#: AscendC CMPMODE: LT, GT, EQ, LE, GE, NE
_CMP = (torch.lt, torch.gt, torch.eq, torch.le, torch.ge, torch.ne)
#: kernel_count_if.h's padding value per CMPMODE (meant to compare false; see the module docstring)
_BOUNDARY = (64512.0, 65504.0, float("nan"), 64512.0, 65504.0, float("nan"))


def _pivot16(pivot):
    """The kernels' pivot: a C++ float (fp32), cast to half in the kernel."""
    return torch.tensor(float(pivot), dtype=f32).to(f16)


def _keep(name, mask, n):
    need(name, mask, i8)
    if mask.numel() != n:
        raise ValueError(f"{name}: mask has {mask.numel()} elements, x has {n}")
    m = mask.reshape(-1)
    keep = m == 1
    if bool(((m != 0) & ~keep).any()):
        raise ValueError(f"{name}: the mask must hold 0 and 1 only (the kernel's output length is "
                         "sum(mask) but it keeps the elements whose byte is 1)")
    return keep


def _move(name, t, keep, width, out_len=None):
    """What a compress kernel of ``width``-byte words leaves in an output of t's dtype: the kept
    words, then (out_len above the count, or a wider dtype) GARBAGE words."""
    t = t.contiguous().reshape(-1)
    k = int(keep.sum())
    out_len = k if out_len is None else int(out_len)
    size = t.element_size()
    if size == width:
        out = torch.empty(out_len, dtype=t.dtype)
        out[:k] = t[keep]
        if out_len > k:
            out[k:] = _garbage(t.dtype, out_len - k)
        return out
    if size < width or size % width:
        raise TypeError(f"{name}: unsupported dtype {t.dtype}; the wrapper sends it to the {width}-byte "
                        f"kernel, which would read and write its {size}-byte buffers out of bounds")
    wdt = i16 if width == 2 else i32
    words = t.view(torch.uint8).view(wdt)[: t.numel()]  # the first n words of the buffer
    out = torch.full((out_len * size // width,), GARBAGE, dtype=wdt)
    out[:k] = words[keep]
    return out.view(torch.uint8).view(t.dtype)


def _garbage(dtype, n):
    return torch.full((n,), GARBAGE, dtype=i32).to(dtype)


def _width(x):
    return 2 if x.dtype in (f16, i16) else 4


def run_compress(x, mask, S):
    check_s("run_compress", S)
    cpu("run_compress", x, mask)
    keep = _keep("run_compress", mask, x.numel())
    return _move("run_compress", x, keep, _width(x))


def run_compress_pos(x, mask, output_len, S):
    check_s("run_compress_pos", S)
    cpu("run_compress_pos", x, mask)
    keep = _keep("run_compress_pos", mask, x.numel())
    out_len = int(output_len)
    if out_len < 0:
        raise ValueError(f"run_compress_pos: output_len must be >= 0, got {out_len}")
    if out_len < int(keep.sum()):
        raise ValueError(f"run_compress_pos: output_len {out_len} is below sum(mask) = {int(keep.sum())}: "
                         "the kernel would write past its output")
    return _move("run_compress_pos", x, keep, _width(x), out_len)


def run_compress_ind(x, indices_in, mask, S):
    check_s("run_compress_ind", S)
    cpu("run_compress_ind", x, indices_in, mask)
    keep = _keep("run_compress_ind", mask, x.numel())
    if indices_in.numel() < x.numel():
        raise ValueError(f"run_compress_ind: indices_in has {indices_in.numel()} elements, x has {x.numel()}")
    ind = indices_in.contiguous().reshape(-1)[: x.numel()]
    return _move("run_compress_ind", x, keep, _width(x)), _move("run_compress_ind", ind, keep, 4)


def run_compress_ind_no_arange(x, mask, S):
    check_s("run_compress_ind_no_arange", S)
    cpu("run_compress_ind_no_arange", x, mask)
    keep = _keep("run_compress_ind_no_arange", mask, x.numel())
    return (_move("run_compress_ind_no_arange", x, keep, _width(x)),
            torch.nonzero(keep).reshape(-1).to(i32))


def run_split(x, mask, S):
    check_s("run_split", S)
    cpu("run_split", x, mask)
    keep = _keep("run_split", mask, x.numel())
    if x.dtype not in (f16, i16):
        return _garbage(x.dtype, x.numel())  # no kernel branch: uninitialised output
    xs = x.reshape(-1)
    return torch.cat([xs[keep], xs[~keep]])


def run_split_ind(x, mask, indices_in, S):
    check_s("run_split_ind", S)
    cpu("run_split_ind", x, mask, indices_in)
    keep = _keep("run_split_ind", mask, x.numel())
    need("run_split_ind", indices_in, i32)
    n = x.numel()
    if x.dtype not in (f16, i16):
        return _garbage(x.dtype, n), _garbage(i32, n)  # no kernel branch: uninitialised outputs
    xs, ind = x.reshape(-1), indices_in.reshape(-1)[:n]
    return torch.cat([xs[keep], xs[~keep]]), torch.cat([ind[keep], ind[~keep]])


def _greater_equal(name, x, pivot):
    if x.dtype != f16:
        raise TypeError(f"{name}: unsupported dtype {x.dtype}; run_greater_equal has only an fp16 kernel "
                        "(any other dtype leaves the mask uninitialised, the result undefined)")
    return (x.reshape(-1) >= _pivot16(pivot)).to(i8)


def run_filter_greater_eq(x, pivot, S):
    check_s("run_filter_greater_eq", S)
    cpu("run_filter_greater_eq", x)
    return run_compress(x, _greater_equal("run_filter_greater_eq", x, pivot), S)


def run_filter_less_eq(x, pivot, S):
    check_s("run_filter_less_eq", S)
    cpu("run_filter_less_eq", x)
    mask = (x.reshape(-1) <= float(torch.tensor(float(pivot), dtype=f32))).to(i8)
    return run_compress(x, mask, S)


def run_where(x, pivot, S):
    check_s("run_where", S)
    cpu("run_where", x)
    mask = _greater_equal("run_where", x, pivot)
    return torch.nonzero(mask).reshape(-1).to(i32)


def run_count_if(x, pivot, tile_len, compare_mode):
    cpu("run_count_if", x)
    mode, tile = int(compare_mode), int(tile_len)
    if not 0 <= mode < len(_CMP):
        raise ValueError(f"run_count_if: compare_mode must be a CMPMODE 0..5, got {compare_mode}")
    if tile <= 0:
        raise ValueError(f"run_count_if: tile_len must be positive, got {tile_len}")
    if x.dtype != f16:
        return torch.zeros(1, dtype=i32)  # no kernel branch: the zero-filled output is returned
    p = _pivot16(pivot)
    n = x.numel()
    count = int(_CMP[mode](x.reshape(-1), p).sum())
    # a tile of m elements is loaded padded to a multiple of 16 with the boundary value, counted too
    pad = torch.tensor(_BOUNDARY[mode], dtype=f16)
    if bool(_CMP[mode](pad, p)):
        last = n % tile
        count += (n // tile) * ((-tile) % 16) + ((-last) % 16 if last else 0)
    return torch.tensor([count], dtype=i32)
