"""Port of upstream's tests/test_copy.py (run_copy, fp32, tile length 128).

Scale: lengths above CAP = 2^17 go through ``scaled(n, 128 * 128)`` (keeps n mod S^2, S = 128).
Not wrapped by TcuscanBackend (a memory copy is no registry op): stand-in only."""
from math import ceil

import pytest
from _upstream import PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 8

_COPY_SIZES = [10 * 1024, 20 * 1024, 30 * 1024, 40 * 1024, 80 * 1024, 1024 * 1024, 80 * 1024 - 10]


def get_profiling_lengths():
    num_cores, s, max_size = 1, 128, 1e8
    max_iters = ceil(max_size / (num_cores * s * s))
    return [i * num_cores * s * s for i in range(1, max_iters, s * s)]


def _check(length, dtype, s):
    x = torch.rand(scaled(length, 128 * 128), generator=gen(), dtype=dtype)
    out = ops().run_copy(x, s)
    expected = torch.clone(x)
    assert out.shape == expected.shape
    assert torch.equal(out, expected)


@pytest.mark.parametrize("length", _COPY_SIZES)
def test_tcuscan_copy_fp32(length):
    _check(length, torch.float32, 128)


@pytest.mark.parametrize("length", get_profiling_lengths())
def test_tcuscan_copy_fp32_profiling_lens(length):
    _check(length, torch.float32, 128)
