"""Port of upstream's tests/test_diff.py (run_diff, fp16 and fp32, exact against torch.diff with a
leading zero), and the same cases through TcuscanBackend.diff (stage diff; fp16 results as fp32).

Scale: lengths above CAP = 2^17 go through ``scaled(n, 20 * 64 * 64)`` (keeps n mod cores * S^2);
every profiling length (multiples of 81920 up to 5e7) becomes 81920."""
from math import ceil

import numpy as np
import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 54

_DIFF_SIZES = [10 * 1024, 20 * 1024, 30 * 1024, 40 * 1024, 80 * 1024, 1024 * 1024, 80 * 1024 - 10]


def get_profiling_lengths():
    num_cores, s = NUM_AI_CORES, 64
    max_size = ceil(0.5 * 1e8)
    max_iters = ceil(max_size / (num_cores * s * s))
    return [i * num_cores * s * s for i in range(1, max_iters, 16 * 128 // s)]


def _check(length, dtype):
    x = torch.rand(scaled(length, NUM_AI_CORES * 64 * 64), generator=gen(), dtype=dtype)
    expected = torch.diff(torch.concat([torch.zeros(1, dtype=dtype), x]))
    out = ops().run_diff(x)
    assert out.shape == expected.shape
    assert torch.equal(out, expected)
    got = backend().diff(x.numpy())
    assert got.dtype == np.float32
    assert np.array_equal(got, expected.float().numpy())


@pytest.mark.parametrize("length", _DIFF_SIZES)
def test_tcuscan_diff_fp16(length):
    _check(length, torch.float16)


@pytest.mark.parametrize("length", _DIFF_SIZES)
def test_tcuscan_diff_fp32(length):
    _check(length, torch.float32)


@pytest.mark.parametrize("length", get_profiling_lengths())
def test_tcuscan_diff_fp16_profiling_lens(length):
    _check(length, torch.float16)


@pytest.mark.parametrize("length", get_profiling_lengths())
def test_tcuscan_diff_fp32_profiling_lens(length):
    _check(length, torch.float32)
