"""Port of upstream's tests/test_simple_pad.py (run_simple_pad, fp16): the output has tile_len
elements and begins with the last (partial) tile of x. Where offset > tile_len both compared slices
are empty, as upstream's check has it.

Scale: vec_len = multiplier * tile_len^2 - offset above CAP = 2^17 goes through
``scaled(vec_len, tile_len)`` (keeps vec_len mod tile_len, i.e. the tail).
Not wrapped by TcuscanBackend (padding is no registry op): stand-in only."""
import pytest
from _upstream import PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 168

_ALIGN_SIZES = [128, 256, 512, 1024, 2048, 4096]
_OFFSET_SIZES = [7, 11, 23, 18, 1050, 2050, 4050]
_MULTIPLIER = [1, 2, 13, 17]


@pytest.mark.parametrize("multiplier", _MULTIPLIER)
@pytest.mark.parametrize("tile_len", _ALIGN_SIZES)
@pytest.mark.parametrize("offset", _OFFSET_SIZES)
def test_simple_pad_fp16(multiplier, tile_len, offset):
    vec_len = scaled(multiplier * tile_len * tile_len - offset, tile_len)
    x = torch.rand(vec_len, generator=gen(), dtype=torch.float16)
    out = ops().run_simple_pad(x, tile_len)
    last_tail = tile_len - offset
    last_tile = x[vec_len - last_tail:]
    got = out[:-offset]
    assert len(out) == tile_len
    assert last_tile.shape == got.shape
    assert torch.equal(last_tile, got)
