"""Port of upstream's tests/test_searchsorted.py: run_searchsorted(sorted, values) on int32, exact
against torch.searchsorted(side='left', out_int32=True): random sorted haystacks with duplicates
(lengths 1, 8, 127, 1024, 65537) and needles (1, 3, 21, 64), the edge case (below min, above max,
ties, interior boundaries) and a CSR-indptr-like haystack with block-boundary needles. Stand-in only:
TcuscanBackend does not wrap the kernel (npu/_tcuscan/sort_select.py NOT_WRAPPED).

Scale: none (upstream's sizes are small)."""
import pytest
from _upstream import PYTESTMARK, gen, ops, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 22


def _run_and_check(sorted_cpu, values_cpu):
    sorted_i32, values_i32 = sorted_cpu.to(torch.int32), values_cpu.to(torch.int32)
    output = ops().run_searchsorted(sorted_i32, values_i32)
    reference = torch.searchsorted(sorted_i32, values_i32, out_int32=True)
    assert output.dtype == torch.int32
    assert output.shape == values_i32.shape
    assert torch.equal(output, reference), f"mismatch\n got: {output}\n exp: {reference}"


@pytest.mark.parametrize("data_len", [1, 8, 127, 1024, 65537])
@pytest.mark.parametrize("num_values", [1, 3, 21, 64])
def test_tcuscan_searchsorted_random(data_len, num_values):
    g = gen(42)
    sorted_cpu = torch.sort(torch.randint(-50, 50, (data_len,), dtype=torch.int32, generator=g)).values
    values_cpu = torch.randint(-60, 60, (num_values,), dtype=torch.int32, generator=g)
    _run_and_check(sorted_cpu, values_cpu)


def test_tcuscan_searchsorted_edges():
    sorted_cpu = torch.tensor([0, 0, 2, 2, 2, 5, 9, 9, 10], dtype=torch.int32)
    values_cpu = torch.tensor([-1, 0, 1, 2, 3, 5, 8, 9, 10, 11], dtype=torch.int32)
    _run_and_check(sorted_cpu, values_cpu)
    assert ops().run_searchsorted(sorted_cpu, values_cpu).tolist() == [0, 0, 2, 2, 5, 5, 6, 6, 8, 9]


def test_tcuscan_searchsorted_csr_indptr_like():
    nnz, num_segments = 100000, 4000
    indptr = torch.sort(torch.randint(0, nnz, (num_segments,), dtype=torch.int32, generator=gen(42))).values
    indptr = torch.cat([torch.zeros(1, dtype=torch.int32), indptr])
    sstart = torch.tensor([0, nnz // 4, nnz // 2, (3 * nnz) // 4, nnz], dtype=torch.int32)
    _run_and_check(indptr, sstart)
