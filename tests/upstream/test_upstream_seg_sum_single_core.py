"""Port of upstream's tests/test_seg_sum_single_core.py (run_seg_sum_single_core: the row sums A @ 1 of
a random CSR matrix of density 0.01, its values fp16 (from fp32 in (-1, 1), fp32 sums within atol
1e-2) or int8 (from int32 in {-2, .., 1}, int32 sums exactly), indptr the full uint32 offsets), and the
same cases through TcuscanBackend.segment_sum_csr(variant="single_core").

Scale and data: the sums depend only on the row lengths and values, so the matrix is drawn without its
column indices: nnz = round(density * rows * cols) entries (scipy's sparse.random draws that many)
fall in uniformly random rows; above CAP = 2^17 nnz goes through ``scaled(nnz, s * s)`` (keeps nnz
mod S^2), so the rows keep their number and get shorter. Values and rows from a torch generator seeded
42 per case (upstream: scipy with numpy's global RNG seeded 42)."""
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 90

_NUM_SEGMENTS = [513, 1025, 2011]  # upstream: "519, 2043 fails!"
_NUM_COLUMNS = [64 * 64 - 1, 128 * 128, 128 * 128 - 13, 128 * 128 + 13, 128 * 128 - 133]


def random_csr(num_rows, num_cols, density, integer, keep_mod):
    """(indptr int64, values fp32 / int32 in CSR order, expected A @ ones fp32 / int32)."""
    g = gen()
    nnz = scaled(int(round(density * num_rows * num_cols)), keep_mod)
    counts = torch.bincount(torch.randint(num_rows, (nnz,), generator=g), minlength=num_rows)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(counts, 0)])
    if integer:
        values = torch.randint(-2, 2, (nnz,), generator=g, dtype=torch.int32)
    else:
        values = 2 * torch.rand(nnz, generator=g) - 1
    rows = torch.repeat_interleave(torch.arange(num_rows), counts)
    acc = torch.int64 if integer else torch.float64
    expected = torch.zeros(num_rows, dtype=acc).index_add_(0, rows, values.to(acc)).to(values.dtype)
    return indptr, values, expected


def _check(num_segments, num_cols, s, density, dtype):
    indptr, values, expected = random_csr(num_segments, num_cols, density, dtype == torch.int8, s * s)
    nnz = len(values)
    indices = indptr.to(torch.uint32)
    assert int(indptr[0]) == 0, "First entry must be zero."
    assert int(indptr[-1]) == nnz, "Last entry equals to the nnzs."
    x = values.to(dtype)
    actual = ops().run_seg_sum_single_core(x, indices, s)
    assert actual.shape == expected.shape, f"Output shape mismatch. Got {actual.shape}. Expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"Output dtype mismatch. Got {actual.dtype}. Expected {expected.dtype}"
    if dtype == torch.int8:
        assert torch.equal(actual, expected), f"Error seg_sum. s={s}, num_cols={num_cols}"
    else:
        assert torch.allclose(actual, expected, atol=1e-2), f"Error seg_sum. s={s}, num_cols={num_cols}"
    got = torch.from_numpy(backend(s).segment_sum_csr(x.numpy(), indptr.numpy(), variant="single_core"))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert torch.equal(got, expected) if dtype == torch.int8 else torch.allclose(got, expected, atol=1e-2)


@pytest.mark.parametrize("num_segments", _NUM_SEGMENTS)
@pytest.mark.parametrize("num_cols", _NUM_COLUMNS)
@pytest.mark.parametrize("s", [32, 64, 128])
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16], ids=str)
def test_seg_sum_single_core(num_segments, num_cols, s, dtype):
    _check(num_segments, num_cols, s, 0.01, dtype)
