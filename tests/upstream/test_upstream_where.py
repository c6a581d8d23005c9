"""Port of upstream's tests/test_where.py: run_where(x, 13.0, s) on integer-valued fp16 (S = 32, 64,
128), exact against torch.argwhere(x >= pivot).flatten() (int64; the kernel's positions are int32 and
torch.equal compares the values). Stand-in only: TcuscanBackend does not wrap the kernel (argwhere
against a pivot is no registry op; npu/_tcuscan/moves.py NOT_WRAPPED). Upstream's commented-out
_OFFSETS define no case.

Scale: lengths above CAP = 2^17 go through ``scaled(n, S * S)`` (keeps n mod S^2, the kernel's tile)."""
import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 23

_OFFSETS = [-127, -13, 13, 65, 129]


def get_lengths(s: int, max_iters: int):
    for multiplier in range(1, max_iters):
        yield multiplier * NUM_AI_CORES * s * s


def _test_where(vec_len: int, s: int, dtype):
    n = scaled(vec_len, s * s)
    x = torch.randint(0, 2**7 - 1, (n,), dtype=dtype, generator=gen())
    pivot = 13.0

    expected = torch.argwhere(x >= pivot).flatten()
    actual = ops().run_where(x, float(pivot), s)
    assert actual.dtype == torch.int32
    assert len(expected) == len(actual)
    assert torch.equal(expected, actual)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=32, max_iters=12)))
def test_tcuscan_where_fp16_s_32(vec_len: int):
    _test_where(vec_len, 32, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=64, max_iters=8)))
def test_tcuscan_where_fp16_s_64(vec_len: int):
    _test_where(vec_len, 64, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=6)))
def test_tcuscan_where_fp16_s_128(vec_len: int):
    _test_where(vec_len, 128, torch.float16)
