"""Port of upstream's tests/test_seg_sum_multi_core.py (run_seg_sum_multi_core: the row sums A @ 1 of
a random CSR matrix of density 0.01, its values fp16 (from fp32 in [-0.25, 0.25), fp32 sums within
atol 1e-2) or int8 (from int32 in {-2, .., 1}, int32 sums exactly), indptr the full int32 offsets,
with or without segm_offsets = searchsorted(indptr, per-block starts) as upstream's tiling_function
computes them for 20 AI cores), and the same cases through
TcuscanBackend.segment_sum_csr(variant="multi_core").

Scale and data: the sums depend only on the row lengths and values, so the matrix is drawn without its
column indices: nnz = round(density * rows * cols) entries (scipy's sparse.random draws that many)
fall in uniformly random rows; above CAP = 2^17 nnz goes through ``scaled(nnz, 20 * s * s)`` (keeps
nnz mod cores * S^2), so the rows keep their number and get shorter. Values and rows from a torch
generator seeded 42 per case (upstream: scipy with numpy's global RNG seeded 42)."""
from math import ceil

import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 180

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
        values = 0.5 * torch.rand(nnz, generator=g) - 0.25
    rows = torch.repeat_interleave(torch.arange(num_rows), counts)
    acc = torch.int64 if integer else torch.float64
    expected = torch.zeros(num_rows, dtype=acc).index_add_(0, rows, values.to(acc)).to(values.dtype)
    return indptr, values, expected


def tiling_function(nnz, s, max_aic_cores=NUM_AI_CORES):
    """The kernel's tiling: (block_len, num_blocks)."""
    matmul_tile_len = s * s
    num_tiles = ceil(nnz / matmul_tile_len)
    num_blocks = min(max_aic_cores, num_tiles)
    return ceil(num_tiles / num_blocks) * matmul_tile_len, num_blocks


def _check(num_rows, num_cols, s, density, dtype, use_segm_offsets):
    indptr, values, expected = random_csr(num_rows, num_cols, density, dtype == torch.int8,
                                          NUM_AI_CORES * s * s)
    nnz = len(values)
    assert int(indptr[0]) == 0, "First entry must be zero."
    assert int(indptr[-1]) == nnz, "Last entry equals to the nnzs."
    x, indices = values.to(dtype), indptr.to(torch.int32)
    if use_segm_offsets:
        block_len, num_blocks = tiling_function(nnz, s)
        sstart = torch.clamp(torch.arange(0, num_blocks + 1, dtype=torch.int32) * block_len, max=nnz)
        segm_offsets = torch.searchsorted(indices, sstart, out_int32=True)
        actual = ops().run_seg_sum_multi_core(x, indices, s, segm_offsets)
    else:
        actual = ops().run_seg_sum_multi_core(x, indices, s)
    assert actual.shape == expected.shape, f"Output shape mismatch. Got {actual.shape}. Expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"Output dtype mismatch. Got {actual.dtype}. Expected {expected.dtype}"
    if dtype == torch.int8:
        assert torch.equal(actual, expected), f"Error seg_sum. s={s}, num_cols={num_cols}"
    else:
        assert torch.allclose(actual, expected, atol=1e-2), f"Error seg_sum. s={s}, num_cols={num_cols}"
    got = torch.from_numpy(backend(s).segment_sum_csr(x.numpy(), indptr.numpy(), variant="multi_core"))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert torch.equal(got, expected) if dtype == torch.int8 else torch.allclose(got, expected, atol=1e-2)


@pytest.mark.parametrize("num_segments", _NUM_SEGMENTS, ids=lambda x: f"num_segms:({x})")
@pytest.mark.parametrize("num_cols", _NUM_COLUMNS, ids=lambda x: f"num_cols:({x})")
@pytest.mark.parametrize("s", [32, 64, 128], ids=lambda s: f"s:({s})")
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16], ids=str)
@pytest.mark.parametrize("use_segm_offsets", [False, True],
                         ids=lambda x: "with_segm_offsets" if x else "no_segm_offsets")
def test_seg_sum_multi_core(num_segments, num_cols, s, dtype, use_segm_offsets):
    _check(num_segments, num_cols, s, 0.01, dtype, use_segm_offsets)
