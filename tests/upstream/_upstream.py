"""What the ports of upstream's tests (huawei-csl/pytorch-tcuscan, tests/*.py) share.

Each ``test_upstream_<name>.py`` here ports upstream's ``tests/test_<name>.py``:
the same parametrisations (ids, dtypes, sizes, tiling parameters, tolerances),
the kernel called the way upstream calls it on the CPU stand-in
(``npu.testing.fake_tcuscan_ops()``), and, where ``TcuscanBackend`` wraps the
kernel, the same case through the backend. Each module states
``UPSTREAM_PARAMETRISATIONS`` (how many cases upstream's file has) so the counts
can be checked against the collection.

Scale: upstream sizes reach tens of millions of elements (sized for an NPU);
``scaled(n, keep_mod)`` keeps n up to ``CAP`` and above it takes the largest
length <= CAP congruent to n modulo ``keep_mod`` (e.g. S * S or cores * S * S),
so the tile and core boundaries a case exercises stay the same.
``MMVREF_UPSTREAM_FULL=1`` runs every case at upstream's own size.
"""
from __future__ import annotations

import functools
import os

import pytest

torch = pytest.importorskip("torch")

#: upstream's tests size inputs for this many AI cores (their NUM_AI_CORES / NUM_CORES)
NUM_AI_CORES = 20
#: the largest length a case runs at here, unless MMVREF_UPSTREAM_FULL=1
CAP = 1 << 17
FULL = os.environ.get("MMVREF_UPSTREAM_FULL") == "1"

#: upstream's test files (tests/test_<name>.py at huawei-csl/pytorch-tcuscan ddcd5ce) and how many cases
#: each collects (pytest --collect-only with torch_npu / tcuscan_ops stubbed: 8493 in all)
UPSTREAM_TESTS = {
    "block_scan": 38,
    "complete_blocks": 450,
    "complete_rows": 12,
    "compress": 138,
    "compress_ind": 138,
    "compress_ind_no_arange": 138,
    "compress_pos": 46,
    "copy": 8,
    "count_if": 24,
    "csr_gather": 340,
    "cube_reduce": 30,
    "diff": 54,
    "filter_greater_equal": 138,
    "filter_less_equal": 138,
    "gather_spmv": 176,
    "gather_spmv_matrix": 42,
    "gen_lower": 12,
    "histogram": 50,
    "matmul_cce": 9,
    "mc_gather": 220,
    "radix_sort": 46,
    "reduce_tiles": 1080,
    "row_scan": 9,
    "scan_batch": 900,
    "scan_cpu": 12,
    "scan_multi_core": 101,
    "scan_multi_core_no_l2": 101,
    "scan_multi_cube": 62,
    "scan_single_core": 1728,
    "searchsorted": 22,
    "seg_scan_mc_revert": 24,
    "seg_scan_single_core": 52,
    "seg_scan_vec_single_core": 42,
    "seg_sum_multi_core": 180,
    "seg_sum_multi_cube": 450,
    "seg_sum_single_core": 90,
    "seg_sum_single_cube": 60,
    "segmented_sum": 16,
    "simple_pad": 168,
    "split": 84,
    "split_ind": 84,
    "spmv": 180,
    "spmv_multi_cube": 90,
    "spmv_v2": 180,
    "spmv_v2_multi_cube": 45,
    "topk": 16,
    "topk_pivot": 4,
    "tri_inv_col_sweep": 168,
    "tri_inv_cube_col_sweep": 72,
    "triu_inv_rec_unroll": 189,
    "vadd": 14,
    "where": 23,
}

#: every port module: native_only (no Numba kernel is chosen by the compile target) and upstream
PYTESTMARK = [pytest.mark.native_only, pytest.mark.upstream]


def scaled(n: int, keep_mod: int = 1) -> int:
    """n, or (above CAP) the largest m <= CAP with m = n (mod keep_mod), m >= 1 when n >= 1."""
    n = int(n)
    if FULL or n <= CAP:
        return n
    keep_mod = max(int(keep_mod), 1)
    m = CAP - ((CAP - n) % keep_mod)
    m = m if m <= CAP else m - keep_mod
    while m <= 0:
        m += keep_mod
    return m


@functools.lru_cache(maxsize=None)
def ops():
    """The stand-in module (one per process)."""
    from npu.testing import fake_tcuscan_ops

    return fake_tcuscan_ops()


@functools.lru_cache(maxsize=None)
def backend(s: int = 32, variant: str = "multi_core"):
    """``TcuscanBackend`` over the stand-in, on the CPU (cached per s and variant)."""
    from npu.testing import CpuTcuscanBackend

    return CpuTcuscanBackend(s=s, variant=variant)


def cannot_hold(reason: str):
    """Marks an upstream case that cannot hold on the stand-in: strict, so it fails once it passes."""
    return pytest.mark.xfail(strict=True, reason=reason)


def gen(seed: int = 42) -> "torch.Generator":
    """A CPU generator (upstream seeds the global one with 42)."""
    return torch.Generator().manual_seed(seed)
