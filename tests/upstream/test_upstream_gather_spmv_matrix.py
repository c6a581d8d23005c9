"""Port of upstream's tests/test_gather_spmv_matrix.py (run_gather_spmv on a CSR matrix: values the
fp32 entries (uniform in [0, 1)) of a random (n - 1) x (n - 1) matrix of density 0.01 / 0.001 /
0.0001, idxs its FULL indptr (uint32, n entries, the first 0), tile_len s; z(0) = 0 and z(i) =
values(indptr(i) - 1) or 0 where indptr(i) = 0, compared exactly, dtype fp32), and the same cases
through TcuscanBackend.gather_spmv(values, indptr) (stage gather_spmv: z(1:)).

Scale and data: nnz = round(density * (n - 1)^2) (what scipy's sparse.random draws) above CAP = 2^17
goes through ``scaled(nnz, s)`` (keeps nnz mod the tile s: 2,684,027 at n = 16384, density 0.01,
becomes 131,067 at s = 128); the rows keep their number and get shorter. The entries
fall in uniformly random rows, values uniform in [0, 1), from a torch generator seeded 42 per case
(upstream: scipy with numpy's global RNG seeded 42 once per file)."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 42




def _check(n, s, density):
    g = gen()
    rows = n - 1
    nnz = scaled(int(round(density * rows * rows)), s)
    counts = torch.bincount(torch.randint(rows, (nnz,), generator=g), minlength=rows)
    indexes = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(counts, 0)])
    values = torch.rand(nnz, generator=g)
    expected = torch.zeros(n, dtype=torch.float32)
    mask = indexes != 0
    expected[mask] = values[indexes[mask] - 1]
    actual = ops().run_gather_spmv(values, indexes.to(torch.uint32), s)
    assert actual.shape == expected.shape, "Output shape does not match expected shape."
    assert actual.dtype == expected.dtype, "Output dtype does not match expected dtype"
    assert torch.equal(actual, expected)
    got = backend().gather_spmv(values.numpy(), indexes.numpy())
    assert got.dtype == np.float32 and np.array_equal(got, expected[1:].numpy())


@pytest.mark.parametrize("n", [256, 512, 1024, 2048, 4096, 8192, 16384])
@pytest.mark.parametrize("s", [128, 256])
@pytest.mark.parametrize("density", [0.01, 0.001, 0.0001])
def test_tcuscan_gather_spmv(n, s, density):
    _check(n, s, density)
