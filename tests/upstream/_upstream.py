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
