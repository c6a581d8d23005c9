"""Port of upstream's tests/test_seg_scan_vec_single_core.py (run_seg_scan_vec, the vector-only
segmented scan: fp16 values 0..9, int8 start flags of density 0.01 / 0.05, n = multiplier * s * s,
fp32 out within atol 1e-2 of the segmented scan), and the same cases through
TcuscanBackend.segmented_scan(variant="vec_single_core").

Scale: every length here is at most 24 * 32^2, 16 * 64^2 or 5 * 128^2 elements (<= CAP = 2^17), so no
case is scaled (``scaled(n, s * s)`` would keep n mod s^2). x from numpy's default_rng(42) as upstream;
the flags from a torch generator seeded 42 per case (upstream draws them from the global torch RNG)."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 42

_MULTIPLIER = [1, 2, 3, 5, 8, 9, 12, 16, 20, 24]
KERNEL, VARIANT = "run_seg_scan_vec", "vec_single_core"


def ref_segscan(x, f):
    """The segmented scan of x, a new segment at every flag (upstream's reference, vectorised)."""
    seg = torch.cumsum(f.to(torch.int64), 0)
    c = torch.cumsum(x.to(torch.float64), 0)
    starts = torch.ones(len(x), dtype=torch.bool)
    starts[1:] = seg[1:] != seg[:-1]
    pos = torch.arange(len(x))
    first = torch.cummax(torch.where(starts, pos, torch.zeros_like(pos)), 0).values
    return (c - torch.cat([torch.zeros(1, dtype=torch.float64), c])[first]).to(torch.float32)


def _check(n, s, segm_density):
    n = scaled(n, s * s)
    x = torch.from_numpy(np.random.default_rng(seed=42).integers(0, 10, n).astype(np.float16))
    f = (torch.empty(n).uniform_(0, 1, generator=gen()) < segm_density).to(torch.int8)
    actual = getattr(ops(), KERNEL)(x, f, s)
    expected = ref_segscan(x.float(), f)
    assert actual.shape == expected.shape, "Output shape does not match expected shape."
    assert torch.allclose(actual, expected, atol=1e-02), f"segmented scan wrong. s={s}, vec_len={n}"
    got = backend(s).segmented_scan(x.numpy(), f.numpy(), variant=VARIANT)
    assert got.dtype == np.float32 and got.shape == (n,)
    assert torch.allclose(torch.from_numpy(got), expected, atol=1e-02)


@pytest.mark.parametrize("multiplier", _MULTIPLIER)
def test_tcuscan_seg_scan_vec_single_score_s_32_density_0_01(multiplier):
    _check(multiplier * 32 * 32, 32, 0.01)


@pytest.mark.parametrize("multiplier", _MULTIPLIER[:-3])
def test_tcuscan_segscan_vec_single_score_s_64_density_0_01(multiplier):
    _check(multiplier * 64 * 64, 64, 0.01)


@pytest.mark.parametrize("multiplier", _MULTIPLIER[:-6])
def test_tcuscan_segscan_vec_single_score_s_128_density_0_01(multiplier):
    _check(multiplier * 128 * 128, 128, 0.01)


@pytest.mark.parametrize("multiplier", _MULTIPLIER)
def test_tcuscan_segscan_vec_single_score_s_32_density_0_05(multiplier):
    _check(multiplier * 32 * 32, 32, 0.05)


@pytest.mark.parametrize("multiplier", _MULTIPLIER[:-3])
def test_tcuscan_segscan_vec_single_score_s_64_density_0_05(multiplier):
    _check(multiplier * 64 * 64, 64, 0.05)


@pytest.mark.parametrize("multiplier", _MULTIPLIER[:-6])
def test_tcuscan_segscan_vec_single_score_s_128_density_0_05(multiplier):
    _check(multiplier * 128 * 128, 128, 0.05)
