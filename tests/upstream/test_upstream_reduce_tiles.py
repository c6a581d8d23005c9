"""Port of upstream's tests/test_reduce_tiles.py: run_reduce_tiles(x, s^2 / 2, 40) on n = multiplier
* 40 * 128^2 + offset elements (int8 values -3..2 -> int32; fp16 0.1 * randn -> fp32) against the
40 block sums (block b: [b L, (b + 1) L), L = tile_len * ceil(ceil(n / tile_len) / 40)) within atol 1,
rtol 1e-3; and the same x through TcuscanBackend.reduce_tiles(x, 40) (its tile is s) against the
same reference with tile s.

Scale: lengths above CAP keep n mod 40 * tile_len (the blocks' share of whole tiles)."""
from math import ceil

import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 1080

NUM_BLOCKS = 40


def get_lengths(s, max_iters):
    for multiplier in range(1, max_iters):
        yield multiplier * NUM_BLOCKS * s * s


def ref_reduce_tiles(x, dtype, tile_len, num_blocks):
    n = len(x)
    block_len = tile_len * ceil(ceil(n / tile_len) / num_blocks)
    sums = torch.zeros(num_blocks, dtype=dtype)
    for i in range(num_blocks):
        sums[i] = torch.sum(x[i * block_len: min((i + 1) * block_len, n)], dtype=dtype)
    return sums


@pytest.mark.parametrize("vec_len", list(get_lengths(s=128, max_iters=16)))
@pytest.mark.parametrize("s", [16, 32, 64, 128])
@pytest.mark.parametrize("offset", [-127, -34, -11, -1, 0, 1, 11, 17, 34])
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16], ids=str)
def test_reduce_tiles(vec_len, s, offset, dtype):
    tile_len = s * s // 2
    n = scaled(vec_len + offset, NUM_BLOCKS * tile_len)
    if dtype == torch.float16:
        x, out_dtype = (0.1 * torch.randn(n, generator=gen())).to(dtype), torch.float32
    else:
        x, out_dtype = torch.randint(-3, 3, size=(n,), dtype=torch.int8, generator=gen()), torch.int32
    expected = ref_reduce_tiles(x, out_dtype, tile_len, NUM_BLOCKS)
    actual = ops().run_reduce_tiles(x, tile_len, NUM_BLOCKS)
    assert expected.dtype == actual.dtype and expected.shape == actual.shape
    assert torch.allclose(actual, expected, atol=1e-0, rtol=1e-3), f"Expected : {expected}. Actual: {actual}"
    got = backend(s).reduce_tiles(x.numpy(), NUM_BLOCKS)
    ref = ref_reduce_tiles(x, out_dtype, s, NUM_BLOCKS)
    assert got.dtype == (np.float32 if dtype == torch.float16 else np.int64)
    assert torch.allclose(torch.from_numpy(got).to(out_dtype), ref, atol=1e-0, rtol=1e-3)
