"""Port of upstream's tests/test_cube_reduce.py: run_cube_reduce(x, 20) on n = multiplier * 20 * 128^2
elements (int8 values -3..2 -> int32; fp16 0.1 * randn -> fp32) against x.reshape(20, -1).sum(dim=1)
in the output dtype within atol 1, rtol 1e-2. Not wrapped by TcuscanBackend (NOT_WRAPPED).

Scale: lengths above CAP keep n mod 20 * 128^2, which leaves every case at 20 * 128^2 (327,680)."""
import pytest
from _upstream import PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 30

NUM_BLOCKS = 20


def get_lengths(s, max_iters):
    for multiplier in range(1, max_iters):
        yield multiplier * NUM_BLOCKS * s * s


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=16)))
@pytest.mark.parametrize("offset", [0])
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16], ids=str)
def test_cube_reduce(vec_len, offset, dtype):
    n = scaled(vec_len + offset, NUM_BLOCKS * 128 * 128)
    if dtype == torch.float16:
        x, out_dtype = (0.1 * torch.randn(n, generator=gen())).to(dtype), torch.float32
    else:
        x, out_dtype = torch.randint(-3, 3, size=(n,), dtype=torch.int8, generator=gen()), torch.int32
    expected = x.reshape(NUM_BLOCKS, -1).sum(dim=1, dtype=out_dtype).flatten()
    actual = ops().run_cube_reduce(x, NUM_BLOCKS)
    assert expected.dtype == actual.dtype and expected.shape == actual.shape
    assert torch.allclose(actual, expected, atol=1e-0, rtol=1e-2), f"Expected : {expected}. Actual: {actual}"
