"""Port of upstream's tests/test_spmv.py (run_spmv: y = B @ x for a random square CSR matrix B of
nrow - 1 rows, density 0.01 / 0.001 / 0.0001; int16 values in {-6, .., 5} and x in {1, .., 8} (int32
rows), or fp16 values from fp32 in [-1, 1) and x from fp32 in [1, 9) (fp32 rows); indptr uint32,
cols int32; rows within atol 1e-1 of B @ x computed from the fp32 / int32 values before the cast),
and the same cases through TcuscanBackend.spmv(variant="v1"), which refuses int16 (run_spmv narrows
int16 products to int8).

Scale and data: nnz = round(density * (nrow - 1)^2) (what scipy's sparse.random draws) above
CAP = 2^17 goes through ``scaled(nnz, s)`` (keeps nnz mod s: 2,684,027 becomes 131,067 at s = 32);
the rows and columns keep their number, so the rows get shorter. Entries fall in uniformly random rows and columns (duplicates allowed; B @ x sums
them), values and x from a torch generator seeded 42 per case (upstream: scipy with numpy's global,
unseeded RNG); the expected rows are summed in float64 and rounded to the result dtype (upstream:
scipy's fp32 / int32 product).

``random_csr``, ``expected_rows`` and ``through_backend`` are shared with the ports of test_spmv_v2, test_spmv_multi_cube and
test_spmv_v2_multi_cube."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 180

_NROW = [1024 * k for k in (1, 2, 3, 4, 5, 6, 7, 8, 9, 16)]


def random_csr(rows, density, keep_mod, integer=False, scale=2):
    """(indptr int64, cols int64, values fp32 / int32, x fp32 / int32) of a rows x rows matrix."""
    g = gen()
    nnz = scaled(int(round(density * rows * rows)), keep_mod)
    counts = torch.bincount(torch.randint(rows, (nnz,), generator=g), minlength=rows)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(counts, 0)])
    cols = torch.randint(rows, (nnz,), generator=g)
    if integer:
        values = torch.randint(-scale, scale, (nnz,), generator=g, dtype=torch.int32)
        x = torch.randint(1, 9, (rows,), generator=g, dtype=torch.int32)
    else:
        values = scale * torch.rand(nnz, generator=g) - scale // 2
        x = 1 + 8 * torch.rand(rows, generator=g)
    return indptr, cols, values, x


def expected_rows(indptr, cols, values, x):
    """B @ x, summed in float64 (int64) and rounded to values' dtype."""
    acc = torch.float64 if values.dtype.is_floating_point else torch.int64
    r = torch.repeat_interleave(torch.arange(len(indptr) - 1), torch.diff(indptr))
    out = torch.zeros(len(indptr) - 1, dtype=acc).index_add_(0, r, values.to(acc) * x.to(acc)[cols])
    return out.to(torch.float32 if values.dtype.is_floating_point else torch.int32)


def through_backend(s, variant, indptr, cols, values, x):
    """The same case through TcuscanBackend.spmv (numpy in, fp32 rows out)."""
    rows = len(indptr) - 1
    A = (indptr.numpy(), cols.numpy(), values.numpy(), (rows, rows))
    got = backend(s).spmv(A, x.numpy(), variant=variant)
    assert got.dtype == np.float32 and got.shape == (rows,)
    return torch.from_numpy(got)


def _check(nnr, s, density, dtype, scale_factor):
    integer = dtype == torch.int16
    indptr, cols, values, x = random_csr(nnr - 1, density, s, integer, scale_factor)
    expected = expected_rows(indptr, cols, values, x)
    t_values, t_x = values.to(dtype), x.to(dtype)
    actual = ops().run_spmv(t_values, indptr.to(torch.uint32), cols.to(torch.int32), t_x, s)
    assert actual.shape == expected.shape
    assert actual.dtype == (torch.float32 if dtype == torch.float16 else torch.int32)
    assert torch.allclose(actual, expected, atol=1e-01), f"Error spmv ({expected.dtype}). s={s}"
    if integer:
        with pytest.raises(TypeError, match="run_spmv"):
            through_backend(s, "v1", indptr, cols, t_values, t_x)
        return
    got = through_backend(s, "v1", indptr, cols, t_values, t_x)
    assert torch.allclose(got, expected, atol=1e-01)


@pytest.mark.parametrize("s", [32, 64, 128])
@pytest.mark.parametrize("density", [0.01, 0.001, 0.0001])
@pytest.mark.parametrize("nrow", _NROW)
@pytest.mark.parametrize(("dtype", "scale_factor"), [
    pytest.param(torch.int16, 6, id="torch.int16"),
    pytest.param(torch.float16, 2, id="torch.float16"),
])
def test_tcuscan_spmv(s, density, nrow, dtype, scale_factor):
    _check(nrow, s, density, dtype, scale_factor)
