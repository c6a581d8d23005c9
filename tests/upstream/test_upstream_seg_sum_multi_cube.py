"""Port of upstream's tests/test_seg_sum_multi_cube.py (run_seg_sum_multi_cube: the row sums A @ 1 of
a random CSR matrix of density 0.1 / 0.05 / 0.01, fp16 values from fp32 in [-0.25, 0.25), fp32 sums
within atol 1e-2, U_s / L_s^- fp16, indptr the full int32 offsets, with or without segm_offsets =
searchsorted(indptr, per-block starts) as upstream's tiling_function computes them for 20 AI cores),
and the same cases through TcuscanBackend.segment_sum_csr(variant="multi_cube").

Scale and data: the sums depend only on the row lengths and values, so the matrix is drawn without its
column indices: nnz = round(density * rows * cols) entries (scipy's sparse.random draws that many)
fall in uniformly random rows; above CAP = 2^17 (upstream's cases reach 3.4e6 entries) nnz goes
through ``scaled(nnz, 20 * s * s)`` (keeps nnz mod cores * S^2), so the rows keep their number and
get shorter. Values and rows from a torch generator seeded 42 per case (upstream: scipy
with numpy's global RNG seeded 42)."""
from math import ceil

import pytest
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 450

_NUM_SEGMENTS = [513, 519, 1025, 2011, 2043]
_NUM_COLUMNS = [64 * 64 - 1, 128 * 128, 128 * 128 - 13, 128 * 128 + 13, 128 * 128 - 133]


def random_csr(num_rows, num_cols, density, keep_mod):
    """(indptr int64, values fp32 in CSR order, expected A @ ones fp32)."""
    g = gen()
    nnz = scaled(int(round(density * num_rows * num_cols)), keep_mod)
    counts = torch.bincount(torch.randint(num_rows, (nnz,), generator=g), minlength=num_rows)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(counts, 0)])
    values = 0.5 * torch.rand(nnz, generator=g) - 0.25
    rows = torch.repeat_interleave(torch.arange(num_rows), counts)
    expected = torch.zeros(num_rows, dtype=torch.float64).index_add_(0, rows, values.double()).float()
    return indptr, values, expected


def tiling_function(nnz, s, max_aic_cores=NUM_AI_CORES):
    """The kernel's tiling: (block_len, num_blocks)."""
    matmul_tile_len = s * s
    num_tiles = ceil(nnz / matmul_tile_len)
    num_blocks = min(max_aic_cores, num_tiles)
    return ceil(num_tiles / num_blocks) * matmul_tile_len, num_blocks


def _check(num_rows, num_cols, s, density, dtype, use_segm_offsets):
    indptr, values, expected = random_csr(num_rows, num_cols, density, NUM_AI_CORES * s * s)
    nnz = len(values)
    ones = torch.ones((s, s), dtype=dtype)
    upper, lower_strict = torch.triu(ones), torch.tril(ones, -1)
    assert int(indptr[0]) == 0, "First entry must be zero."
    assert int(indptr[-1]) == nnz, "Last entry equals to the nnzs."
    x, indices = values.to(dtype), indptr.to(torch.int32)
    if use_segm_offsets:
        block_len, num_blocks = tiling_function(nnz, s)
        sstart = torch.clamp(torch.arange(0, num_blocks + 1, dtype=torch.int32) * block_len, max=nnz)
        segm_offsets = torch.searchsorted(indices, sstart, out_int32=True)
        actual = ops().run_seg_sum_multi_cube(x, upper, lower_strict, indices, segm_offsets)
    else:
        actual = ops().run_seg_sum_multi_cube(x, upper, lower_strict, indices)
    assert actual.shape == expected.shape, f"Output shape mismatch. Got {actual.shape}. Expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"Output dtype mismatch. Got {actual.dtype}. Expected {expected.dtype}"
    assert torch.allclose(actual, expected, atol=1e-2), f"Error seg_sum. s={s}, num_cols={num_cols}"
    got = torch.from_numpy(backend(s).segment_sum_csr(x.numpy(), indptr.numpy(), variant="multi_cube"))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-2)


@pytest.mark.parametrize("num_segments", _NUM_SEGMENTS, ids=lambda x: f"num_segms:({x})")
@pytest.mark.parametrize("num_cols", _NUM_COLUMNS, ids=lambda x: f"num_cols:({x})")
@pytest.mark.parametrize("s", [32, 64, 128], ids=lambda s: f"s:({s})")
@pytest.mark.parametrize("dtype", [torch.float16], ids=str)
@pytest.mark.parametrize("density", [0.1, 0.05, 0.01], ids=lambda x: f"density:({x})")
@pytest.mark.parametrize("use_segm_offsets", [False, True],
                         ids=lambda x: "with_segm_offsets" if x else "no_segm_offsets")
def test_seg_sum_multi_cube(num_segments, num_cols, s, density, dtype, use_segm_offsets):
    _check(num_segments, num_cols, s, density, dtype, use_segm_offsets)
