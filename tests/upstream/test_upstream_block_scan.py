"""Port of upstream's tests/test_block_scan.py: run_block_scan(x, U_s, L_s^-) on m blocks of s^2 fp16
values (0.1 * randn), fp32 out against every block scanned (upstream: A.float() @ triu(ones(s^2, s^2));
here the same product as a float64 cumsum per block, rounded to fp32, since the s^2 x s^2 matrix is
1 GiB at s = 128) within atol 1e-2, rtol 1e-3; and the same case through TcuscanBackend.block_scan.

Scale: m * s^2 above CAP is cut to the largest whole number of blocks within CAP."""
import numpy as np
import pytest
from _upstream import CAP, FULL, PYTESTMARK, backend, gen, ops, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 38


def _check(m, s, dtype):
    tile = s * s
    if not FULL:
        m = max(1, min(m, CAP // tile))
    A = 0.1 * torch.randn(m, tile, generator=gen()).to(dtype)
    ones = torch.ones((s, s), dtype=dtype)
    upper, lower_strict = torch.triu(ones), torch.tril(ones, -1)
    actual = ops().run_block_scan(A.flatten(), upper, lower_strict)
    expected = torch.cumsum(A.double(), dim=1).float().flatten()
    assert actual.dtype == expected.dtype
    assert torch.allclose(actual, expected, atol=1e-2, rtol=1e-3), f"Block scan ({dtype}) s={s}, m={m}"
    got = backend(s).block_scan(A.flatten().numpy())
    assert got.dtype == np.float32 and torch.allclose(torch.from_numpy(got), expected, atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("m", range(10, 21))
@pytest.mark.parametrize("s", [16, 32, 64])
def test_tcuscan_block_scan_fp16(m, s):
    _check(m, s, torch.float16)


@pytest.mark.parametrize("m", range(20, 25))
def test_tcuscan_block_scan_fp16_s_128(m):
    _check(m, 128, torch.float16)
