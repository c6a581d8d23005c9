"""Port of upstream's tests/test_mc_gather.py (run_mc_gather: z = values[idx], fp32 values uniform in
[1, 100), idx_len = s^2 - offset uint32 indices uniform in [0, nnz) sorted, nnz = multiplier * 40 *
s^2, tile_len s; compared exactly, dtype fp32). The backend does not wrap run_mc_gather (a plain
gather: no registry op or stage; npu/_tcuscan/sparse.py NOT_WRAPPED), so the stand-in only.

Scale: nnz and idx_len above CAP = 2^17 go through ``scaled(n, s)`` (keeps n mod the tile s): every
nnz (a multiple of 40 s^2, at least 163840) becomes 2^17; idx_len = s^2 - offset at s = 512 becomes
2^17 - offset, keeping its last partial tile of s - offset. Data from numpy's default_rng(42) per case, as upstream."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 220

_MULTIPLIER = [1, 2, 4, 5, 10, 15, 20, 25, 30, 45, 60]



def _check(tile_len, nnz, idx_len):
    nnz, idx_len = scaled(nnz, tile_len), scaled(idx_len, tile_len)
    rng = np.random.default_rng(seed=42)
    input_values = rng.uniform(1, 100, nnz).astype(np.float32)
    input_cols = rng.uniform(0, nnz, idx_len)
    input_cols.sort()
    input_cols = input_cols.astype(np.uint32)
    expected = torch.from_numpy(input_values[input_cols.astype(np.int64)]).to(torch.float32)
    actual = ops().run_mc_gather(torch.from_numpy(input_values), torch.from_numpy(input_cols), tile_len)
    assert actual.shape == expected.shape, f"Output shape mismatch. Got {actual.shape}. Expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"Output dtype mismatch. Got {actual.dtype}. Expected {expected.dtype}"
    assert torch.equal(actual, expected), f"Error gather mc ({expected.dtype}).tile_len={tile_len}"


@pytest.mark.parametrize("offset", [0, 1, 7, 11, 17])
@pytest.mark.parametrize("multiplier", _MULTIPLIER)
@pytest.mark.parametrize("s", [64, 128, 256, 512])
def test_tcuscan_mc_gather(offset, multiplier, s):
    nnz = multiplier * 40 * s * s
    idx_len = s * s - offset
    _check(s, nnz, idx_len)
