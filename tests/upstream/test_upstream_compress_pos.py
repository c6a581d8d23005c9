"""Port of upstream's tests/test_compress_pos.py: run_compress_pos(x, mask, sum(mask) as a 0-dim int32
tensor, s) on fp16 and fp32 (S = 32, 64, 128; x integer-valued, made as int64 then converted as
upstream does), exact against torch.masked_select; and the same cases through
TcuscanBackend.compress (variant="pos", values in x's dtype). Upstream's lengths are all multiples
of cores * S^2; the wrapper's floor division (num_tiles = n // S^2) only picks the launch width.

Upstream selects with ``mask.to(torch.uint8)``; torch on the CPU no longer takes uint8 masks in
masked_select, so the port passes ``mask.to(torch.bool)`` (the same elements).
Scale: lengths above CAP = 2^17 go through ``scaled(n, S * S)`` (keeps n mod S^2, the kernel's tile)."""
import numpy as np
import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 46

_OFFSETS = [-127, -13, 13, 65, 129]


def get_lengths(s: int, max_iters: int):
    for multiplier in range(1, max_iters):
        yield multiplier * NUM_AI_CORES * s * s


def _test_compress_pos(vec_len: int, s: int, dtype):
    n = scaled(vec_len, s * s)
    g = gen()
    x = torch.randint(0, 2**7 - 1, (n,), generator=g).to(dtype)
    mask = (torch.randn(n, generator=g) > 0).to(torch.int8)
    pos = torch.sum(mask).to(torch.int32)

    expected = torch.masked_select(x, mask.to(torch.bool))
    actual = ops().run_compress_pos(x, mask, pos, s)
    assert len(expected) == len(actual)
    assert torch.equal(expected, actual)

    got = backend(s).compress(x.numpy(), mask.numpy(), variant="pos")
    assert got.dtype == expected.numpy().dtype
    assert np.array_equal(got, expected.numpy())


@pytest.mark.parametrize("vec_len", list(get_lengths(s=32, max_iters=12)))
def test_tcuscan_compress_fp16_s_32(vec_len: int):
    _test_compress_pos(vec_len, 32, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=64, max_iters=8)))
def test_tcuscan_compress_fp16_s_64(vec_len: int):
    _test_compress_pos(vec_len, 64, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=6)))
def test_tcuscan_compress_fp16_s_128(vec_len: int):
    _test_compress_pos(vec_len, 128, torch.float16)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=32, max_iters=12)))
def test_tcuscan_compress_fp32_s_32(vec_len: int):
    _test_compress_pos(vec_len, 32, torch.float32)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=64, max_iters=8)))
def test_tcuscan_compress_fp32_s_64(vec_len: int):
    _test_compress_pos(vec_len, 64, torch.float32)


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=6)))
def test_tcuscan_compress_fp32_s_128(vec_len: int):
    _test_compress_pos(vec_len, 128, torch.float32)
