"""Port of upstream's tests/test_segmented_sum.py (run_seg_sum, the SCD segmented sum: fp16 values in
{-2, -1, 0, 1}, start flags of density 0.01 with f(0) = 0, passed to the kernel as END flags
cat(f[1:], [1]); fp32 out of length #segments within atol 1e-2 of the per-segment sums), and the same
cases through TcuscanBackend.segmented_sum (start flags), compared with the same expected values.

Scale: n = multiplier * 20 * s * s (s = 32, 64) or multiplier * s * s (s = 128) goes through
``scaled(n, 20 * s * s)`` (keeps n mod cores * S^2) above CAP = 2^17. Data from a torch generator
seeded 42 per case (upstream uses the global torch RNG seeded 42)."""
import numpy as np
import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 16

_MULTIPLIER = [1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12]


def ref_segsum(x, f):
    """The sum of each segment (a new one at every flag), fp32 (upstream's reference, vectorised)."""
    seg = torch.cumsum(f.to(torch.int64), 0)
    sums = torch.zeros(int(seg[-1]) + 1, dtype=torch.float64).index_add_(0, seg, x.to(torch.float64))
    return sums.to(torch.float32)


def _check(n, s, segm_density):
    n = scaled(n, NUM_AI_CORES * s * s)
    g = gen()
    x = torch.randint(-2, 2, size=(n,), generator=g).half()
    f = (torch.rand(n, generator=g) < segm_density).to(torch.int8)
    f[0] = 0
    ends = torch.concat([f[1:], torch.ones(1, dtype=torch.int8)]).contiguous()
    actual = ops().run_seg_sum(x, ends, s)
    expected = ref_segsum(x, f)
    assert actual.shape == expected.shape, f"Output shape mismatch. Got {actual.shape}. Expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"Output dtype mismatch. Got {actual.dtype}. Expected {expected.dtype}"
    assert torch.allclose(actual, expected, atol=1e-02), f"Error seg_sum. s={s}, vec_len={n}"
    got = backend(s).segmented_sum(x.numpy(), f.numpy())
    assert got.dtype == np.float32 and got.shape == tuple(expected.shape)
    assert torch.allclose(torch.from_numpy(got), expected, atol=1e-02)


@pytest.mark.parametrize("multiplier", _MULTIPLIER)
def test_tcuscan_segmented_sum_s_32(multiplier):
    _check(multiplier * 20 * 32 * 32, 32, 0.01)


@pytest.mark.parametrize("multiplier", _MULTIPLIER[:3])
def test_tcuscan_segmented_sum_s_64(multiplier):
    _check(multiplier * 20 * 64 * 64, 64, 0.01)


@pytest.mark.parametrize("multiplier", _MULTIPLIER[:2])
def test_tcuscan_segmented_sum_s_128(multiplier):
    _check(multiplier * 128 * 128, 128, 0.01)
