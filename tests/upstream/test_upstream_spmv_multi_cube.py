"""Port of upstream's tests/test_spmv_multi_cube.py (run_spmv_multi_cube: y = B @ x for a random
square CSR matrix B of nrow - 1 rows, density 0.01 / 0.001 / 0.0001, values fp16 from fp32 in
[-1, 1), x fp16 from [1, 9); indptr uint32, cols int32, U_s / L_s^- fp16; fp32 rows within atol 1e0
of B @ x computed from the fp32 values and the fp16 x), and the same cases through
TcuscanBackend.spmv(variant="multi_cube").

Scale and data as the port of test_spmv (``random_csr`` from there: nnz above CAP = 2^17
through ``scaled(nnz, s)``, keeping nnz mod s; entries in uniformly random rows and columns, torch generator
seeded 42 per case)."""
import pytest
from _upstream import PYTESTMARK, ops, torch
from test_upstream_spmv import expected_rows, random_csr, through_backend

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 90

_NROW = [1024 * k for k in (1, 2, 3, 4, 5, 6, 7, 8, 9, 16)]


def _check(nnr, s, density):
    indptr, cols, values, x = random_csr(nnr - 1, density, s)
    x = x.to(torch.float16)  # upstream's vector is fp16 in the expected product too
    expected = expected_rows(indptr, cols, values, x.to(torch.float32))
    ones = torch.ones((s, s), dtype=torch.float16)
    upper, lower_strict = torch.triu(ones), torch.tril(ones, -1)
    t_values = values.to(torch.float16)
    actual = ops().run_spmv_multi_cube(t_values, indptr.to(torch.uint32), cols.to(torch.int32), x, upper,
                                       lower_strict)
    assert actual.shape == expected.shape, f"Output shape mismatch. Got {actual.shape}. Expected {expected.shape}"
    assert torch.allclose(actual, expected, atol=1e-0), f"Error spmv_multi_cube  ({expected.dtype}). s={s}"
    got = through_backend(s, "multi_cube", indptr, cols, t_values, x)
    assert torch.allclose(got, expected, atol=1e-0)


@pytest.mark.parametrize("s", [32, 64, 128])
@pytest.mark.parametrize("density", [0.01, 0.001, 0.0001])
@pytest.mark.parametrize("nrow", _NROW)
def test_tcuscan_spmv_multi_cube(s, density, nrow):
    _check(nrow, s, density)
