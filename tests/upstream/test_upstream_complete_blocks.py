"""Port of upstream's tests/test_complete_blocks.py: run_complete_blocks(x, sums, s^2 / tile_ratio) on
x of num_blocks * s^2 * multiplier elements (fp32 0.1 * randn; int32 values 0..2), sums the per-block
sums, against upstream's reference (block b gets sum(sums[:b]) added) within atol 1, rtol 1e-5. Not
wrapped by TcuscanBackend (NOT_WRAPPED).

Scale: above CAP each block keeps a whole number of tiles (at least one, at most upstream's
multiplier * tile_ratio), the block boundaries where upstream has them."""
import pytest
from _upstream import CAP, FULL, PYTESTMARK, gen, ops, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 450


def ref_complete_blocks(x, sums, num_blocks):
    prefix_sums = torch.cumsum(torch.concat([torch.zeros(1, dtype=x.dtype), sums[:-1]]), dim=-1)
    assert sums.numel() == num_blocks and prefix_sums.numel() == num_blocks
    assert len(x) % num_blocks == 0, "Input vector length must be divisible by the number of blocks."
    block_len = len(x) // num_blocks
    expected = torch.clone(x)
    for b in range(num_blocks):
        expected[b * block_len: (b + 1) * block_len] += prefix_sums[b]
    return expected.flatten()


@pytest.mark.parametrize("num_blocks", [2, 10, 20, 40, 80])
@pytest.mark.parametrize("multiplier", [3, 5, 7])
@pytest.mark.parametrize("tile_ratio", [32, 16, 8, 4, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=str)
@pytest.mark.parametrize("s", [32, 64, 128])
def test_tcuscan_complete_blocks_fp32(num_blocks, s, multiplier, tile_ratio, dtype):
    tile_len = s * s // tile_ratio
    tiles = multiplier * tile_ratio  # per block
    if not FULL:
        tiles = max(1, min(tiles, CAP // (num_blocks * tile_len)))
    vec_len = num_blocks * tile_len * tiles
    if dtype == torch.float32:
        x = 0.1 * torch.randn(vec_len, generator=gen()).float()
    else:
        x = torch.randint(0, 3, size=(vec_len,), dtype=torch.int32, generator=gen())
    sums = torch.sum(x.reshape(num_blocks, -1), dim=1, dtype=dtype).flatten()
    expected = ref_complete_blocks(x, sums, num_blocks)
    actual = ops().run_complete_blocks(x, sums, tile_len)
    assert expected.dtype == actual.dtype and expected.shape == actual.shape
    assert torch.allclose(actual, expected, atol=1e-0, rtol=1e-5), "Returned tensor does not match expected tensor."
