"""Port of upstream's tests/test_histogram.py: run_histogram(x, bins) on fp16 integers in
[-127, 126) (torch.randint), 10 lengths x bins 5, 8, 16, 32, 24: counts sum to the length, and
equal torch.histogram(x.float(), bins) exactly (shape, int32 dtype, values). Stand-in only:
TcuscanBackend does not wrap the kernel (npu/_tcuscan/sort_select.py NOT_WRAPPED).

Scale: lengths above CAP = 2^17 go through ``scaled(n, 1024)`` (keeps n mod 1024, so the ragged
tails of 80 * 1024 + 13 and the like stay ragged)."""
import pytest
from _upstream import PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 50

_SIZES = [10 * 1024, 20 * 1024, 30 * 1024, 40 * 1024, 80 * 1024 + 13, 80 * 1024 - 10, 1024 * 1024 + 13,
          2 * 1024 * 1024 - 113, 3 * 1024 * 1024 + 123, 4 * 1024 * 1024]


def _test_tcuscan_histogram(length: int, hist_bins: int, dtype):
    n = scaled(length, 1024)
    x = torch.randint(-(2**7) + 1, 2**7 - 1, (n,), generator=gen(42)).to(dtype)
    actual = ops().run_histogram(x, hist_bins)
    total_counts = torch.sum(actual, dtype=torch.int32)
    expected = torch.histogram(x.to(torch.float), hist_bins).hist.to(torch.int32)

    assert total_counts == n, f"[actual] Sum of hist_counts must equal length. Expected: {n}. Got {total_counts}."
    assert expected.shape == actual.shape
    assert expected.dtype == actual.dtype
    assert torch.equal(expected, actual), f"Diff {expected - actual}"


@pytest.mark.parametrize("length", _SIZES, ids=lambda x: f"length:{x:,}")
@pytest.mark.parametrize("hist_bins", [5, 8, 16, 32, 24], ids=lambda x: f"hist_bins:{x}")
def test_tcuscan_histogram_fp16(length: int, hist_bins: int):
    _test_tcuscan_histogram(length, hist_bins, torch.float16)
