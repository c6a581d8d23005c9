"""Port of upstream's tests/test_seg_scan_mc_revert.py (run_seg_scan_mc_revert, the revert stage of the
multi-core segmented scan: x = the scan of fp32 values 0..9, f = the int32 scan of start flags (f(0) =
0, int(n * density) flags at distinct random positions), diff = x at the segment ends; fp32 out within
atol 1e-2 of the segmented scan), and the same cases through TcuscanBackend.revert (stage revert:
xhat, fhat, w), compared with the same expected values.

Scale: n = 40 cores * 2 * 1024 * multiplier (density 0.01) or 40 * 1024 * multiplier goes through
``scaled(n, 40 * 4096)`` (keeps n mod 40 blocks * the kernel's 4096-tile; n stays a multiple of 4096)
above CAP = 2^17. Data from numpy's default_rng(42) as upstream."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 24

_MULTIPLIER = [1, 2, 3, 5, 11, 23]
NUM_CORES, TILE = 40, 4 * 1024


def ref_segscan(x, f):
    """The segmented scan of x, segment k = where scan(f) == k (upstream's reference, vectorised)."""
    seg = torch.cumsum(f.to(torch.int64), 0)
    c = torch.cumsum(x.to(torch.float64), 0)
    starts = torch.ones(len(x), dtype=torch.bool)
    starts[1:] = seg[1:] != seg[:-1]
    pos = torch.arange(len(x))
    first = torch.cummax(torch.where(starts, pos, torch.zeros_like(pos)), 0).values
    return (c - torch.cat([torch.zeros(1, dtype=torch.float64), c])[first]).to(torch.float32)


def _check(n, segm_density):
    assert 0 <= segm_density <= 1.0, "Segment density must be in [0,1]"
    n = scaled(n, NUM_CORES * TILE)
    rng = np.random.default_rng(seed=42)
    input_x = rng.integers(0, 10, n).astype(np.float32)
    input_f = np.zeros((n,), dtype=np.int32)
    input_f[rng.choice(n, int(n * segm_density), replace=False)] = 1
    input_f[0] = 0
    x, f = torch.from_numpy(input_x), torch.from_numpy(input_f)
    scan_x = torch.cumsum(x, 0)
    scan_f = torch.cumsum(f, 0, dtype=torch.int32)
    diff = scan_x[torch.cat([f[1:], torch.ones(1, dtype=torch.int32)]).to(torch.bool)]
    assert scan_x.dtype == torch.float32 and scan_f.dtype == torch.int32 and diff.dtype == torch.float32
    actual = ops().run_seg_scan_mc_revert(scan_x, scan_f, diff)
    golden = ref_segscan(x, f)
    assert actual.shape == golden.shape, "Output shape does not match expected shape."
    assert torch.allclose(actual, golden, atol=1e-02), f"segmented scan revertion vec_len={n}"
    got = backend(32).revert(scan_x.numpy(), scan_f.numpy().astype(np.int64), diff.numpy())
    assert got.dtype == np.float32 and got.shape == (n,)
    assert torch.allclose(torch.from_numpy(got), golden, atol=1e-02)


@pytest.mark.parametrize("multiplier", _MULTIPLIER)
def test_tcuscan_segscan_mc_revert_density_0_01(multiplier):
    _check(NUM_CORES * 2 * 1024 * multiplier, 0.01)


@pytest.mark.parametrize("multiplier", _MULTIPLIER)
def test_tcuscan_segscan_mc_revert_density_0_1(multiplier):
    _check(NUM_CORES * 1024 * multiplier, 0.1)


@pytest.mark.parametrize("multiplier", _MULTIPLIER)
def test_tcuscan_segscan_mc_revert__density_0_001(multiplier):
    _check(NUM_CORES * 1024 * multiplier, 0.001)


@pytest.mark.parametrize("multiplier", _MULTIPLIER)
def test_tcuscan_segscan_mc_revert_density_0_003(multiplier):
    _check(NUM_CORES * 1024 * multiplier, 0.003)
