"""Port of upstream's tests/test_spmv_v2.py (run_spmv_v2, SpMV by the fused segmented-sum kernel:
y = B @ x for a random square CSR matrix B of nrow - 1 rows, density 0.01 / 0.001 / 0.0001; fp32
values from [-1, 1) and x from [1, 9), passed as fp32 or fp16; indptr uint32, cols int32, no
segm_offsets; fp32 rows within atol 1e-1 of B @ x computed from the fp32 values), and the same cases
through TcuscanBackend.spmv(variant="v2").

Scale and data as the port of test_spmv (``random_csr`` from there: nnz above CAP = 2^17
through ``scaled(nnz, s)``, keeping nnz mod s; entries in uniformly random rows and columns, torch generator
seeded 42 per case)."""
import pytest
from _upstream import PYTESTMARK, ops, torch
from test_upstream_spmv import expected_rows, random_csr, through_backend

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 180

_NROW = [1024 * k for k in (1, 2, 3, 4, 5, 6, 7, 8, 9, 16)]


def _check(nnr, s, density, dtype, scale_factor):
    indptr, cols, values, x = random_csr(nnr - 1, density, s, False, scale_factor)
    expected = expected_rows(indptr, cols, values, x)
    t_values, t_x = values.to(dtype), x.to(dtype)
    actual = ops().run_spmv_v2(t_values, indptr.to(torch.uint32), cols.to(torch.int32), t_x, s)
    assert actual.shape == expected.shape
    assert actual.dtype == torch.float32
    assert torch.allclose(actual, expected, atol=1e-01), f"Error spmv ({expected.dtype}). s={s}"
    got = through_backend(s, "v2", indptr, cols, t_values, t_x)
    assert torch.allclose(got, expected, atol=1e-01)


@pytest.mark.parametrize("s", [32, 64, 128])
@pytest.mark.parametrize("density", [0.01, 0.001, 0.0001])
@pytest.mark.parametrize("nrow", _NROW)
@pytest.mark.parametrize(("dtype", "scale_factor"), [
    pytest.param(torch.float32, 2, id="torch.float32"),
    pytest.param(torch.float16, 2, id="torch.float16"),
])
def test_tcuscan_spmv_v2(s, density, nrow, dtype, scale_factor):
    _check(nrow, s, density, dtype, scale_factor)
