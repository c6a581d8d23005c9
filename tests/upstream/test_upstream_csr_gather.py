"""Port of upstream's tests/test_csr_gather.py (run_csr_gather: z = values * x[cols], int16 or fp16
values and x from randn, cols int32 uniform in [0, x_len); z of values' dtype (the wrapper's
empty_like(values)), compared exactly with the product torch computes in that dtype), and the same
cases through TcuscanBackend.csr_gather (stage csr_gather: fp16 products as fp32 words, equal to the
fp16 products widened; int16 refused).

Scale: col_len above CAP = 2^17 goes through ``scaled(col_len, 1024)`` (keeps col_len mod the
kernel's tile of 1024): every profiling length (multiples of 20 * 128^2) becomes 131072,
1024 * 1024 - 31 becomes 131041. x_len as upstream (up to 70000: the whole of x sits in the vector core's Unified Buffer).
Data: torch has no CPU randn for int16, so int16 values are randn (fp32) rounded to the nearest
integer (|v| <= 5 or so; upstream calls randn with dtype int16 on the NPU); a torch generator seeded
42 per case (upstream: the global generator, unseeded)."""
from math import ceil

import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 340

_TILE = 1024

_CSR_GATHER_SIZES = [
    16 * 1024, 20 * 1024, 30 * 1024, 40 * 1024, 60 * 1024, 61 * 1024, 61 * 1024 - 13, 62 * 1024 - 123,
    63 * 1024 - 7, 66 * 1024, 67 * 1024, 68 * 1024 - 33, 80 * 1024 - 63, 1024 * 1024 - 31,
]
_X_LENS = [256, 512, 1024, 2048, 70000]


def get_profiling_lengths():
    num_cores, s = 20, 128
    max_size = 1e8
    max_iters = ceil(max_size / (num_cores * s * s))
    return [i * num_cores * s * s for i in range(1, max_iters, 16 * 128 // s)]



def ref_csr_gather(values, cols, input_x):
    return values * input_x[cols.long()]


def _randn(n, dtype, g):
    v = torch.randn(n, generator=g)
    return v.round().to(dtype) if dtype == torch.int16 else v.to(dtype)


def _check(col_len, x_len, in_dtype):
    g = gen()
    col_len = scaled(col_len, _TILE)
    input_values = _randn(col_len, in_dtype, g)
    input_cols = torch.randint(low=0, high=x_len, size=(col_len,), dtype=torch.int32, generator=g)
    input_x = _randn(x_len, in_dtype, g)
    expected = ref_csr_gather(input_values, input_cols, input_x)
    actual = ops().run_csr_gather(input_values, input_cols, input_x)
    assert actual.shape == expected.shape, "Output shape does not match expected shape."
    assert actual.dtype == in_dtype  # the wrapper's empty_like(values)
    assert torch.equal(actual.float(), expected.float())
    args = (input_values.numpy(), input_cols.numpy(), input_x.numpy())
    if in_dtype == torch.int16:
        with pytest.raises(TypeError, match="run_csr_gather"):
            backend().csr_gather(*args)
        return
    got = backend().csr_gather(*args)
    assert got.dtype == np.float32 and np.array_equal(got, expected.float().numpy())


@pytest.mark.parametrize("col_len", _CSR_GATHER_SIZES)
@pytest.mark.parametrize("x_len", _X_LENS)
@pytest.mark.parametrize("dtype", [torch.int16, torch.float16], ids=str)
def test_tcuscan_csr_gather(col_len, x_len, dtype):
    _check(col_len, x_len, dtype)


@pytest.mark.parametrize("col_len", get_profiling_lengths())
@pytest.mark.parametrize("x_len", _X_LENS)
@pytest.mark.parametrize("dtype", [torch.int16, torch.float16], ids=str)
def test_tcuscan_csr_gather_profiling_lens(col_len, x_len, dtype):
    _check(col_len, x_len, dtype)
