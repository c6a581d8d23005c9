"""Port of upstream's tests/test_scan_cpu.py: run_scan_cpu (OpenMP, host tensors) on int8 values 0..9
(-> int32) and fp16 / fp32 0.1 * randn (-> fp32), against torch.cumsum in the output dtype within
atol 1e-3, rtol 1e-7. Not wrapped by TcuscanBackend (NOT_WRAPPED: a CPU kernel).

Scale: the 1,000,000-element cases run at CAP (``scaled(n)``)."""
import pytest
from _upstream import PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 12


@pytest.mark.parametrize("vec_len", [1024, 10 * 1024, 30 * 1024, 1_000_000])
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32], ids=str)
def test_scan_cpu(vec_len, dtype):
    n = scaled(vec_len)
    if dtype in {torch.float16, torch.float32}:
        x, out_dtype = (0.1 * torch.randn(n, generator=gen())).to(dtype), torch.float32
    else:
        x, out_dtype = torch.randint(0, 10, size=(n,), dtype=dtype, generator=gen()), torch.int32
    expected = torch.cumsum(x, dim=-1, dtype=out_dtype)
    actual = ops().run_scan_cpu(x)
    assert actual.dtype == expected.dtype
    assert torch.allclose(actual, expected, atol=1e-3, rtol=1e-7), f"Scan (CPU) ({dtype}) n={n}"
