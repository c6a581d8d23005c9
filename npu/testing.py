"""A CPU stand-in for the ``tcuscan_ops`` module (huawei-csl/pytorch-tcuscan),
so that ``TcuscanBackend``'s translation layer is tested for real on a CPU.

``fake_tcuscan_ops()`` returns an object with the ``run_*`` functions the
wrapper uses, taking and returning torch CPU tensors, computed with plain torch
(independently of mmvref), with the kernels' documented contract AND their
quirks, as read in the public sources (src/torch/*.h and tests/*.py):

- tiling parameter S must be 16, 32, 64 or 128;
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

def fake_tcuscan_ops():
    """A module-like object with every stand-in ``run_*`` kernel (``npu._standin``)."""
    from ._standin import kernels

    return types.SimpleNamespace(__name__="npu.testing.fake_tcuscan_ops", **kernels())


def _cpu_backend_class():
    from ._tcuscan import TcuscanBackend

    class CpuTcuscanBackend(TcuscanBackend):
        """``TcuscanBackend`` on the stand-in kernels, on the CPU (for the
        conformance runner: ``--backend npu.testing:CpuTcuscanBackend``)."""

        name = "tcuscan-standin"

        def __init__(self, s=32, variant="multi_core"):
            super().__init__(module=fake_tcuscan_ops(), device="cpu", s=s, variant=variant)

    return CpuTcuscanBackend


def __getattr__(name):  # lazy: the stand-in and TcuscanBackend import torch
    if name == "CpuTcuscanBackend":
        return _cpu_backend_class()
    if name == "GARBAGE":
        from ._standin._common import GARBAGE

        return GARBAGE
    raise AttributeError(f"module 'npu.testing' has no attribute {name!r}")
