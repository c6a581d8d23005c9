"""Port of upstream's tests/test_vadd.py (run_add on fp16 vectors, exact against torch.add).

No length exceeds CAP (largest 2^20 > CAP: ``scaled(n, 256)`` keeps n mod 2 * tile_len = 256).
Not wrapped by TcuscanBackend (vector add is no registry op): stand-in only."""
import pytest
from _upstream import PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 14

VEC_LENS = [256, 1024, 2048, 4096, 8192, 1024 * 1024, 256, 1024, 2048, 4096, 8192,
            1024 * 1024, 1024 * 1024, 1024 * 1024]


@pytest.mark.parametrize("vec_len", VEC_LENS)
def test_vadd(vec_len):
    g = gen()
    n = scaled(vec_len, 256)
    x = torch.rand(n, generator=g, dtype=torch.float16)
    y = torch.rand(n, generator=g, dtype=torch.float16)
    actual = ops().run_add(x, y)
    expected = torch.add(x, y)
    assert actual.shape == expected.shape
    assert torch.equal(actual, expected)
