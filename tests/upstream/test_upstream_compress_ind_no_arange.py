"""Port of upstream's tests/test_compress_ind_no_arange.py: run_compress_ind_no_arange(x, mask, s) on
fp16 (S = 32, 64, 128) and fp32 (the same S, lengths shifted by each of _OFFSETS), values and the
kernel's int32 indices exact against torch.masked_select; and the same cases through
TcuscanBackend.compress_ind (variant="no_arange": values in x's dtype, indices int64).

Upstream selects with ``mask.to(torch.uint8)``; torch on the CPU no longer takes uint8 masks in
masked_select, so the port passes ``mask.to(torch.bool)`` (the same elements).
Scale: lengths above CAP = 2^17 go through ``scaled(n, S * S)`` (keeps n mod S^2, the kernel's tile)."""
import numpy as np
import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 138

_OFFSETS = [-127, -13, 13, 65, 129]


def get_lengths(s: int, max_iters: int):
    for multiplier in range(1, max_iters):
        yield multiplier * NUM_AI_CORES * s * s


def _test_compress_ind_no_arange(vec_len: int, s: int, dtype):
    n = scaled(vec_len, s * s)
    g = gen()
    x = torch.randint(0, 2**7 - 1, (n,), dtype=dtype, generator=g)
    indices_in = torch.arange(0, len(x), 1, dtype=torch.int32)
    mask = (torch.randn(n, generator=g) > 0).to(torch.int8)

    expected = torch.masked_select(x, mask.to(torch.bool))
    expected_indices = torch.masked_select(indices_in, mask.to(torch.bool))
    actual, actual_indices = ops().run_compress_ind_no_arange(x, mask, s)

    assert len(expected) == len(actual)
    assert torch.equal(expected, actual)
    assert len(expected_indices) == len(actual_indices)
    assert torch.equal(expected_indices, actual_indices)
    assert actual_indices.dtype == torch.int32

    got, got_indices = backend(s).compress_ind(x.numpy(), mask.numpy(), variant="no_arange")
    assert got.dtype == expected.numpy().dtype and np.array_equal(got, expected.numpy())
    assert got_indices.dtype == np.int64 and np.array_equal(got_indices, expected_indices.numpy())


@pytest.mark.parametrize("vec_len", list(get_lengths(s=32, max_iters=12)))
def test_tcuscan_compress_ind_no_arange_fp16_s_32(vec_len: int):
    _test_compress_ind_no_arange(vec_len, 32, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=64, max_iters=8)))
def test_tcuscan_compress_ind_no_arange_fp16_s_64(vec_len: int):
    _test_compress_ind_no_arange(vec_len, 64, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=6)))
def test_tcuscan_compress__ind_no_arange_fp16_s_128(vec_len: int):
    _test_compress_ind_no_arange(vec_len, 128, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=32, max_iters=12)))
@pytest.mark.parametrize("offset", _OFFSETS)
def test_tcuscan_compress_ind_no_arange_fp32_s_16(vec_len: int, offset: int):
    _test_compress_ind_no_arange(vec_len - offset, 32, torch.float32)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=64, max_iters=8)))
@pytest.mark.parametrize("offset", _OFFSETS)
def test_tcuscan_compress_ind_no_arange_fp32_s_64(vec_len: int, offset: int):
    _test_compress_ind_no_arange(vec_len - offset, 64, torch.float32)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=6)))
@pytest.mark.parametrize("offset", _OFFSETS)
def test_tcuscan_compress_ind_no_arange_fp32_s_128(vec_len: int, offset: int):
    _test_compress_ind_no_arange(vec_len - offset, 128, torch.float32)
