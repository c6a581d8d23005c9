"""Port of upstream's tests/test_filter_greater_equal.py: run_filter_greater_eq(x, 13.0, s) on integer-
valued fp16 (S = 32, 64, 128) and fp32 (the same S, lengths shifted by each of _OFFSETS), exact against
torch.masked_select(x, x >= pivot); the 115 fp32 cases cannot hold (below). Stand-in only:
TcuscanBackend does not wrap the kernel (no registry op takes a pivot; npu/_tcuscan/moves.py
NOT_WRAPPED).

Upstream selects with ``mask.to(torch.uint8)``; torch on the CPU no longer takes uint8 masks in
masked_select, so the port passes ``mask.to(torch.bool)`` (the same elements).
Scale: lengths above CAP = 2^17 go through ``scaled(n, S * S)`` (keeps n mod S^2, the kernel's tile)."""
import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, cannot_hold, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 138

_OFFSETS = [-127, -13, 13, 65, 129]


def get_lengths(s: int, max_iters: int):
    for multiplier in range(1, max_iters):
        yield multiplier * NUM_AI_CORES * s * s


_NO_FP32_MASK = cannot_hold(
    "run_greater_equal has only an fp16 kernel (greater_equal_fp16): for fp32 x the mask run_compress "
    "reads is uninitialised memory, so the result is undefined (the stand-in raises TypeError)")


def _test_filter_greater_equal(vec_len: int, s: int, dtype):
    n = scaled(vec_len, s * s)
    x = torch.randint(0, 2**7 - 1, (n,), dtype=dtype, generator=gen())
    pivot = 13.0
    mask = (x >= pivot).to(torch.uint8)

    expected = torch.masked_select(x, mask.to(torch.bool))
    actual = ops().run_filter_greater_eq(x, float(pivot), s)

    assert len(expected) == len(actual)
    assert torch.equal(expected, actual)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=32, max_iters=12)))
def test_tcuscan_filter_ge_fp16_s_32(vec_len: int):
    _test_filter_greater_equal(vec_len, 32, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=64, max_iters=8)))
def test_tcuscan_filter_ge_fp16_s_64(vec_len: int):
    _test_filter_greater_equal(vec_len, 64, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=6)))
def test_tcuscan_filter_ge_fp16_s_128(vec_len: int):
    _test_filter_greater_equal(vec_len, 128, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=32, max_iters=12)))
@pytest.mark.parametrize("offset", _OFFSETS)
@_NO_FP32_MASK
def test_tcuscan_filter_ge_fp32_s_16(vec_len: int, offset: int):
    _test_filter_greater_equal(vec_len - offset, 32, torch.float32)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=64, max_iters=8)))
@pytest.mark.parametrize("offset", _OFFSETS)
@_NO_FP32_MASK
def test_tcuscan_filter_ge_fp32_s_64(vec_len: int, offset: int):
    _test_filter_greater_equal(vec_len - offset, 64, torch.float32)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=6)))
@pytest.mark.parametrize("offset", _OFFSETS)
@_NO_FP32_MASK
def test_tcuscan_filter_ge_fp32_s_128(vec_len: int, offset: int):
    _test_filter_greater_equal(vec_len - offset, 128, torch.float32)
