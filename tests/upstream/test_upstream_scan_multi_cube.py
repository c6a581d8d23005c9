"""Port of upstream's tests/test_scan_multi_cube.py: run_scan_multi_cube(x, U_s, L_s^-) on fp16
torch.rand values, n = multiplier * 20 * s^2 (S = 128: minus an offset), fp32 out against torch.cumsum
in fp32 within rtol 1e-2; and the same case through TcuscanBackend.scan(variant="multi_cube").

Scale: lengths above CAP keep n mod s^2 (``scaled(n, s * s)``): the partial last tile stays."""
import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 62


def _check(vec_len, s, dtype):
    n = scaled(vec_len, s * s)
    ones = torch.ones((s, s), dtype=dtype)
    upper, lower_strict = torch.triu(ones), torch.tril(ones, -1)
    x = torch.rand(n, generator=gen()).to(dtype)
    expected = torch.cumsum(x, dim=-1, dtype=torch.float32)
    actual = ops().run_scan_multi_cube(x, upper, lower_strict)
    assert actual.dtype == expected.dtype
    assert torch.allclose(actual, expected, atol=0, rtol=1e-2), f"multi-cube scan: n={n}, s={s}"
    got = torch.from_numpy(backend(s).scan(x.numpy(), variant="multi_cube"))
    assert got.dtype == expected.dtype and torch.allclose(got, expected, atol=0, rtol=1e-2)


@pytest.mark.parametrize("multiplier", range(1, 11))
@pytest.mark.parametrize("s", [16])
@pytest.mark.parametrize("dtype", [torch.float16], ids=str)
def test_scan_multi_cube_s_16(multiplier, s, dtype):
    _check(multiplier * NUM_AI_CORES * s * s, s, dtype)


@pytest.mark.parametrize("multiplier", range(2, 10))
@pytest.mark.parametrize("s", [32])
@pytest.mark.parametrize("dtype", [torch.float16], ids=str)
def test_scan_multi_cube_s_32(multiplier, s, dtype):
    _check(multiplier * NUM_AI_CORES * s * s, s, dtype)


@pytest.mark.parametrize("multiplier", range(2, 10))
@pytest.mark.parametrize("s", [64])
@pytest.mark.parametrize("dtype", [torch.float16], ids=str)
def test_scan_multi_cube_s_64(multiplier, s, dtype):
    _check(multiplier * NUM_AI_CORES * s * s, s, dtype)


@pytest.mark.parametrize("multiplier", range(1, 10))
@pytest.mark.parametrize("s", [128])
@pytest.mark.parametrize("dtype", [torch.float16], ids=str)
@pytest.mark.parametrize("offset", [5, 13, 23, 33])
def test_scan_multi_cube_s_128(multiplier, s, dtype, offset):
    _check(multiplier * NUM_AI_CORES * s * s - offset, s, dtype)
