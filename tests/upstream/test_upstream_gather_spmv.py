"""Port of upstream's tests/test_gather_spmv.py (run_gather_spmv: z(i) = values(idx(i) - 1), 0 where
idx(i) = 0; fp32 values uniform in [1, 100), idx_len = s^2 - offset uint32 indices uniform in
[0, nnz) sorted, nnz = multiplier * 20 * s^2, tile_len s; compared exactly, dtype fp32), and the same
cases through TcuscanBackend.gather_spmv (stage gather_spmv: the indices as row ends, i.e. indptr =
[0, idx...]).

Scale: nnz and idx_len above CAP = 2^17 go through ``scaled(n, s)`` (keeps n mod the tile s): every
nnz (a multiple of 20 s^2) but 81920 (s = 64, multiplier 1) becomes 2^17; idx_len = s^2 - offset at
s = 512 becomes 2^17 - offset, keeping its last partial tile of s - offset. Data from numpy's default_rng(42) per case, as upstream."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 176

_MULTIPLIER = [1, 2, 4, 5, 10, 15, 20, 25, 30, 45, 60]



def _check(s, nnz, idx_len):
    nnz, idx_len = scaled(nnz, s), scaled(idx_len, s)
    rng = np.random.default_rng(seed=42)
    input_values = rng.uniform(1, 100, nnz).astype(np.float32)
    input_cols = rng.uniform(0, nnz, idx_len)
    input_cols.sort()
    input_cols = input_cols.astype(np.uint32)
    idx = input_cols.astype(np.int64) - 1
    expected = torch.from_numpy(np.where(idx < 0, np.float32(0), input_values[np.maximum(idx, 0)]))
    actual = ops().run_gather_spmv(torch.from_numpy(input_values), torch.from_numpy(input_cols), s)
    assert actual.shape == expected.shape, f"Output shape mismatch. Got {actual.shape}. Expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"Output dtype mismatch. Got {actual.dtype}. Expected {expected.dtype}"
    assert torch.equal(actual, expected), f"Error gather spmv ({expected.dtype}). s={s}"
    got = backend().gather_spmv(input_values, np.concatenate([[0], input_cols.astype(np.int64)]))
    assert got.dtype == np.float32 and np.array_equal(got, expected.numpy())


@pytest.mark.parametrize("offset", [0, 7, 11, 17])
@pytest.mark.parametrize("multiplier", _MULTIPLIER)
@pytest.mark.parametrize("s", [64, 128, 256, 512])
def test_tcuscan_gather_spmv(offset, multiplier, s):
    nnz = multiplier * 20 * s * s
    idx_len = s * s - offset
    _check(s, nnz, idx_len)
