"""A CPU stand-in for the ``tcuscan_ops`` module (huawei-csl/pytorch-tcuscan),
so that ``TcuscanBackend``'s translation layer is tested for real on a CPU.

``fake_tcuscan_ops()`` returns an object with the ``run_*`` functions the
wrapper uses, taking and returning torch CPU tensors, computed with plain torch
(independently of mmvref), with the kernels' documented contract AND their
quirks, as read in the public sources (src/torch/*.h and tests/*.py):

- tiling parameter S must be 32, 64 or 128;
- run_scan_single_core(x, S, starting_sum=0): int8 -> int32; fp16, fp32 -> fp32;
  any other dtype has no kernel branch: the output stays uninitialised (here:
  filled with the garbage value -12345);
- run_scan_multi_core(_no_l2)(x, S): fp16 -> fp32; EVERY other dtype goes to the
  int8 kernel, which reads the first numel bytes of the buffer as int8 (so an
  fp32 or int32 input comes out silently wrong), -> int32;
- run_row_scan(x, S): every S-tile scanned; fp16 -> fp32 else int8 -> int32;
  the output is padded to whole tiles (length ceil(n/S)*S);
- run_scan_multi_cube(x, upper, lower_strict): needs U_S and L_S^- of x's
  dtype (fp16 or int8), S x S; fp16 -> fp32, int8 -> int32;
- run_seg_scan(x, f, S): x fp16, f int8 START flags -> fp32;
- run_seg_sum(x, f, S): segment END flags (its own tests pass cat(f[1:], [1])
  although the docstring says starts): the multi-core scan at the flagged
  positions, differenced -> fp32 (with the multi-core int8 routing);
- run_seg_sum_single_core(x, indptr, s): indptr uint32 (the full CSR offsets),
  fp16 -> fp32, int8 -> int32, one sum per segment, empty segments 0;
  run_seg_sum_multi_core(x, indptr, s, segm_offsets=None) the same on all
  cores; run_seg_sum_multi_cube(x, upper, lower_strict, indptr) fp16 only;
- run_compress(x, mask, S), run_split(x, mask, S), run_split_ind(x, mask,
  indices_in, S): 2-byte data (fp16, int16), mask int8, indices int32;
- run_radix_sort(x, S): fp16 or int16, ascending, stable -> (values, int32 indices);
- run_reduce_tiles(x, tile_len, num_blocks): block b = tiles of tile_len,
  ceil(tiles / num_blocks) per block; fp16 -> fp32, int8 -> int32;
- run_csr_gather(vals, cols, x): vals * x[cols], cols int32, fp16 -> fp32;
- run_block_scan(x, upper, lower_strict): every S^2-block scanned on its own;
- run_complete_rows(x, sums, tile_width, tile_height): MCScan phase II over
  len(sums) equal blocks of tile_height rows of tile_width (len(x) must be
  exactly that); int64 input runs the int32 kernel (int32 out), fp32 stays;
- run_spmv(vals, indptr, cols, x, s): App. Alg. 4 (products, one scan, the
  scan at the row ends, differences); indptr uint32; int16 products are
  narrowed to int8 before the scan (a quirk); fp16 -> fp32;
- run_diff(x, max_size=0): z = diff(cat([0], x)); fp16, else the fp32 kernel
  (an integer buffer is read as fp32: garbage);
- run_topk_int16(x, k, x_min, x_max, S): int16, len(x) a multiple of S^2,
  x_min <= x <= x_max; (values, int32 indices) of the k largest, in an order
  and with a tie choice of the kernel's own (undocumented);
- run_gather_spmv(values, idxs, tile_len): values[idxs - 1], 0 where idxs = 0
  (idxs: the row-end offsets indptr[1:], int32).

Wrong argument dtypes raise TypeError naming the kernel (a real launch would
read garbage; the stand-in refuses so that a translation bug fails loudly).
"""
from __future__ import annotations

import types

__all__ = ["fake_tcuscan_ops", "GARBAGE", "CpuTcuscanBackend"]  # noqa: F822 (lazy, see __getattr__)

GARBAGE = -12345


def _torch():
    import torch

    return torch


def _check_s(name, S):
    if int(S) not in (32, 64, 128):
        raise ValueError(f"{name}: tiling parameter S must be 32, 64 or 128, got {S}")
    return int(S)


def _need(name, t, *dtypes):
    if t.dtype not in dtypes:
        raise TypeError(f"{name}: unsupported dtype {t.dtype}; the kernel takes {', '.join(map(str, dtypes))}")


def _cpu(name, *ts):
    for t in ts:
        if t.device.type != "cpu":
            raise ValueError(f"{name}: the stand-in runs on the CPU, got a tensor on {t.device}")


def fake_tcuscan_ops():
    """A module-like object with the stand-in ``run_*`` functions."""
    torch = _torch()
    i8, i16, i32, f16, f32 = torch.int8, torch.int16, torch.int32, torch.float16, torch.float32

    def _as_int8_bytes(x):
        """What the int8 kernel reads: the first numel bytes of the buffer."""
        n = x.numel()
        return x.contiguous().view(torch.int8)[:n] if x.dtype != i8 else x

    def run_scan_single_core(x, S, starting_sum=0):
        _check_s("run_scan_single_core", S)
        _cpu("run_scan_single_core", x)
        if x.dtype in (f16, f32):
            return (torch.cumsum(x.to(torch.float64), 0) + starting_sum).to(f32)
        if x.dtype == i8:
            return (torch.cumsum(x.to(torch.int64), 0) + int(starting_sum)).to(i32)
        return torch.full((x.numel(),), GARBAGE, dtype=i32)  # no kernel branch: uninitialised output

    def run_scan_multi_core(x, S):
        _check_s("run_scan_multi_core", S)
        _cpu("run_scan_multi_core", x)
        if x.dtype == f16:
            return torch.cumsum(x.to(torch.float64), 0).to(f32)
        return torch.cumsum(_as_int8_bytes(x).to(torch.int64), 0).to(i32)  # int8 routing quirk

    def run_row_scan(x, S):
        S = _check_s("run_row_scan", S)
        n = x.numel()
        m = -(-n // S)
        pad = torch.zeros(m * S, dtype=x.dtype)
        pad[:n] = x
        words = pad.to(torch.float64) if x.dtype == f16 else _as_int8_bytes(pad).to(torch.int64)
        z = torch.cumsum(words.view(m, S), 1).reshape(-1)
        return z.to(f32 if x.dtype == f16 else i32)

    def run_scan_multi_cube(x, upper, lower_strict):
        S = upper.shape[0]
        _check_s("run_scan_multi_cube", S)
        _need("run_scan_multi_cube", x, f16, i8)
        for name, m in (("upper", upper), ("lower_strict", lower_strict)):
            if m.dtype != x.dtype or tuple(m.shape) != (S, S):
                raise TypeError(f"run_scan_multi_cube: {name} must be {S}x{S} of {x.dtype}, got "
                                f"{tuple(m.shape)} {m.dtype}")
        if not (torch.equal(upper, torch.triu(torch.ones_like(upper)))
                and torch.equal(lower_strict, torch.tril(torch.ones_like(lower_strict), -1))):
            raise ValueError("run_scan_multi_cube: upper / lower_strict are not U_S / L_S^-")
        words = x.to(torch.float64) if x.dtype == f16 else x.to(torch.int64)
        return torch.cumsum(words, 0).to(f32 if x.dtype == f16 else i32)

    def run_seg_scan(x, f, S):
        _check_s("run_seg_scan", S)
        _need("run_seg_scan", x, f16)
        _need("run_seg_scan", f, i8)
        out = torch.empty(x.numel(), dtype=torch.float64)
        acc = 0.0
        for i, (v, b) in enumerate(zip(x.tolist(), f.tolist())):
            acc = v if (b or i == 0) else acc + v
            out[i] = acc
        return out.to(f32)

    def run_seg_sum(x, f, S):
        _need("run_seg_sum", f, i8)
        scan_x = run_scan_multi_core(x, S)
        picked = scan_x[f.to(torch.bool)].to(f32)  # run_compress_pos: the scan at the END flags
        return torch.diff(torch.cat([torch.zeros(1, dtype=f32), picked]))

    def run_seg_sum_single_core(x, indptr, s):
        _check_s("run_seg_sum_single_core", s)
        _need("run_seg_sum_single_core", x, f16, i8)
        _need("run_seg_sum_single_core", indptr, torch.uint32)
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
        _check_s("run_seg_sum_multi_cube", S)
        _need("run_seg_sum_multi_cube", x, f16)  # "x must be fp16"
        if upper.dtype != f16 or lower_strict.dtype != f16:
            raise TypeError("run_seg_sum_multi_cube: upper / lower_strict must be float16")
        return run_seg_sum_single_core(x, indptr, S)

    def run_compress(x, mask, S):
        _check_s("run_compress", S)
        _need("run_compress", x, f16, i16)
        _need("run_compress", mask, i8)
        return x[mask.to(torch.bool)].clone()

    def run_split_ind(x, mask, indices_in, S):
        _check_s("run_split_ind", S)
        _need("run_split_ind", x, f16, i16)
        _need("run_split_ind", mask, i8)
        _need("run_split_ind", indices_in, i32)
        m = mask.to(torch.bool)
        return torch.cat([x[m], x[~m]]), torch.cat([indices_in[m], indices_in[~m]])

    def run_split(x, mask, S):
        _check_s("run_split", S)
        _need("run_split", x, f16, i16)
        _need("run_split", mask, i8)
        m = mask.to(torch.bool)
        return torch.cat([x[m], x[~m]])

    def run_radix_sort(x, S):
        _check_s("run_radix_sort", S)
        _need("run_radix_sort", x, f16, i16)
        v, i = torch.sort(x, stable=True)
        return v, i.to(i32)

    def run_reduce_tiles(x, tile_len, num_blocks):
        _need("run_reduce_tiles", x, f16, i8)
        n = x.numel()
        tiles = -(-n // int(tile_len))
        block_len = int(tile_len) * (-(-tiles // int(num_blocks)))
        words = x.to(torch.float64) if x.dtype == f16 else x.to(torch.int64)
        out = torch.zeros(int(num_blocks), dtype=words.dtype)
        for b in range(int(num_blocks)):
            out[b] = words[b * block_len: min((b + 1) * block_len, n)].sum()
        return out.to(f32 if x.dtype == f16 else i32)

    def run_csr_gather(vals, cols, x):
        _need("run_csr_gather", vals, f16)
        _need("run_csr_gather", x, f16)
        _need("run_csr_gather", cols, i32)
        return (vals.to(f32) * x.to(f32)[cols.to(torch.int64)])

    def run_block_scan(x, upper, lower_strict):
        S = upper.shape[0]
        _check_s("run_block_scan", S)
        _need("run_block_scan", x, f16, i8)
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
        _need("run_complete_rows", x, torch.int64, f32)
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

    def run_spmv(vals, indptr, cols, x, s):
        # int16 products are narrowed to int8 before the scan (a quirk): only fp16 is wrapped
        _check_s("run_spmv", s)
        _need("run_spmv", vals, f16, i16)
        _need("run_spmv", indptr, torch.uint32)
        _need("run_spmv", cols, i32)
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

    def run_diff(x, max_size=0):
        # fp16 kernel, or the fp32 kernel for every other dtype (an int buffer would be read as fp32)
        n = int(max_size) if max_size and max_size > 0 else x.numel()
        if x.dtype not in (f16, f32):
            return torch.diff(torch.cat([torch.zeros(1, dtype=i32), x.contiguous().view(i32)[:n]]).view(f32))
        xs = x[:n]
        return torch.diff(torch.cat([torch.zeros(1, dtype=x.dtype), xs]))

    def run_gather_spmv(values, idxs, tile_len):
        _need("run_gather_spmv", idxs, i32)
        k = idxs.to(torch.int64) - 1
        vals = values[k.clamp(min=0)] if values.numel() else torch.zeros(k.numel(), dtype=values.dtype)
        return torch.where(k >= 0, vals, torch.zeros((), dtype=values.dtype))

    def run_topk_int16(x, k, x_min, x_max, S):
        # the kernel tiles x into S^2-element tiles (num_tiles = n // S^2): n must be a multiple;
        # x_min / x_max must bound the values; output order and ties are the kernel's (here torch.topk's)
        S = _check_s("run_topk_int16", S)
        _need("run_topk_int16", x, i16)
        if x.numel() % (S * S):
            raise ValueError(f"run_topk_int16: len(x) = {x.numel()} must be a multiple of S^2 = {S * S}")
        if x.numel() and (int(x.min()) < int(x_min) or int(x.max()) > int(x_max)):
            raise ValueError("run_topk_int16: x_min / x_max do not bound x")
        v, i = torch.topk(x.to(torch.int32), int(k))
        return v.to(i16), i.to(i32)

    fns = {k: v for k, v in locals().items() if k.startswith("run_")}
    fns["run_scan_multi_core_no_l2"] = run_scan_multi_core
    return types.SimpleNamespace(__name__="npu.testing.fake_tcuscan_ops", **fns)


def _cpu_backend_class():
    from ._tcuscan import TcuscanBackend

    class CpuTcuscanBackend(TcuscanBackend):
        """``TcuscanBackend`` on the stand-in kernels, on the CPU (for the
        conformance runner: ``--backend npu.testing:CpuTcuscanBackend``)."""

        name = "tcuscan-standin"

        def __init__(self, s=32, variant="multi_core"):
            super().__init__(module=fake_tcuscan_ops(), device="cpu", s=s, variant=variant)

    return CpuTcuscanBackend


def __getattr__(name):  # lazy: TcuscanBackend imports torch
    if name == "CpuTcuscanBackend":
        return _cpu_backend_class()
    raise AttributeError(f"module 'npu.testing' has no attribute {name!r}")
