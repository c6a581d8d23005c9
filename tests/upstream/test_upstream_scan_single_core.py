"""Port of upstream's tests/test_scan_single_core.py: run_scan_single_core on n = multiplier * s^2
-/+ offset elements (int8 values 0..1 -> int32; fp16 / fp32 values 0..5 -> fp32), against
torch.cumsum in the output dtype (upstream first checks that this reference equals the float64
scan), within rtol 1e-2; and the same case through TcuscanBackend.scan(variant="single_core").

Scale: lengths above CAP keep n mod s^2 (``scaled(n, s * s)``): the partial last tile stays."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 1728


def _check(vec_len, s, dtype):
    n = scaled(vec_len, s * s)
    hi = 2 if dtype == torch.int8 else 6
    x = torch.randint(0, hi, size=(n,), dtype=torch.int8, generator=gen()).to(dtype)
    out_dtype = torch.int32 if dtype == torch.int8 else torch.float32
    expected = torch.cumsum(x, dim=-1, dtype=out_dtype)
    assert torch.equal(torch.cumsum(x.double(), dim=-1), expected.double())
    actual = ops().run_scan_single_core(x, s)
    assert actual.dtype == expected.dtype
    assert torch.allclose(expected, actual, atol=0, rtol=1e-2), f"single-core scan ({dtype}) s={s}, n={n}"
    got = backend(s).scan(x.numpy(), variant="single_core")
    assert got.dtype == expected.numpy().dtype and np.array_equal(got, expected.numpy())


@pytest.mark.parametrize("multiplier", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
@pytest.mark.parametrize("s", [32, 64, 128])
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("offset", [1, 3, 7, 17, 23, 33, 53, 113])
def test_single_core_scan_minus(offset, multiplier, s, dtype):
    _check(multiplier * s * s - offset, s, dtype)


@pytest.mark.parametrize("multiplier", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
@pytest.mark.parametrize("s", [32, 64, 128])
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("offset", [1, 3, 7, 17, 23, 33, 53, 113])
def test_single_core_scan_plus(offset, multiplier, s, dtype):
    _check(multiplier * s * s + offset, s, dtype)
