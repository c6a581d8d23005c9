"""Port of upstream's tests/test_count_if.py: run_count_if(x, 0.1, tile_len, CMPMODE.LE) on
torch.randn fp16 for tile_len 128 and 1024, exact against torch.count_nonzero(x <= pivot) as an
int32 tensor of shape (1,). Stand-in only: TcuscanBackend does not wrap the kernel (a predicate count
is no registry op; npu/_tcuscan/moves.py NOT_WRAPPED).

Scale: the one length above CAP = 2^17 (1024 * 128 + 15) goes through ``scaled(n, 1024)`` (keeps n
mod 1024, so n mod each tile_len: 130063)."""
from enum import IntEnum

import pytest
from _upstream import PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 24


_SIZES = [
    1024 * 8,
    1024 * 16,
    2048 * 32,
    1024 * 128,
    1024 * 8 - 16,
    1024 * 16 - 16,
    2048 * 32 - 16,
    1024 * 128 - 16,
    1024 * 8 + 16,
    1024 * 16 + 16,
    2048 * 32 + 16,
    1024 * 128 + 15,
]


class CMPMODE(IntEnum):
    LT = 0
    GT = 1
    EQ = 2
    LE = 3
    GE = 4
    NE = 5


def _test_tcuscan_count_if(length: int, dtype, tile_len: int):
    x = torch.randn(scaled(length, 1024), dtype=dtype, generator=gen())

    pivot = 0.1
    actual = ops().run_count_if(x, pivot, tile_len, CMPMODE.LE)
    expected = torch.count_nonzero(x <= pivot).to(torch.int32).flatten()

    assert torch.equal(actual, expected), f"Expected {expected}. Got {actual}"


@pytest.mark.parametrize("length", _SIZES)
@pytest.mark.parametrize("tile_len", [128, 1024])
def test_tcuscan_count_if_fp16(length: int, tile_len: int):
    _test_tcuscan_count_if(length, torch.float16, tile_len)
