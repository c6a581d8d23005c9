"""Port of upstream's tests/test_gen_lower.py (run_gen_lower(matrix_size, device, dtype) for int8 and
fp16, exact against torch.tril of ones), at upstream's sizes (at most 1024^2 elements).
Not wrapped by TcuscanBackend (a constant matrix, no registry op): stand-in only."""
import pytest
from _upstream import PYTESTMARK, ops, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 12


@pytest.mark.parametrize("matrix_size", [32, 64, 128, 256, 512, 1024])
@pytest.mark.parametrize("dtype", [torch.int8, torch.half], ids=str)
def test_tcuscan_gen_lower(matrix_size, dtype):
    x = torch.tril(torch.ones((matrix_size, matrix_size), dtype=dtype))
    out = ops().run_gen_lower(matrix_size, x.device, dtype)
    assert out.shape == x.shape
    assert torch.equal(out, x)
