"""Port of upstream's tests/test_topk.py: run_topk_fp16(x, k, min(x), max(x), 128) on torch.rand fp16
for k = 1, 2, 5 and sqrt(len) at the four lengths 5 * 1024, 10 * 1024, 10 * 2^20 - 1 and
20 * 2^20 - 10: k values and k indices, compared after sorting (torch.allclose, as upstream) with
torch.topk's. The same cases through TcuscanBackend.topk (values exact and largest first, the same
index set, x[indices] == values). Beyond upstream: the int16 branch of upstream's _test_topk (which
its file never parametrizes) at the same lengths, k = 5 and sqrt(len), through run_topk_int16.

Scale: the two lengths above CAP = 2^17 go through ``scaled(n, 128 * 128)`` (keeps n mod S^2: the
partial last tile stays partial); k = int(sqrt(length)) is taken of the length that runs."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 16

_VEC_LENS = [5 * 1024, 10 * 1024, 10 * 1024 * 1024 - 1, 20 * 1024 * 1024 - 10]
S = 128


def _test_topk(size: int, k, dtype) -> None:
    n = scaled(size, S * S)
    k = int(np.sqrt(n)) if k == "sqrt" else k
    g = gen(42)
    if dtype == torch.int16:
        x = torch.randint(torch.iinfo(dtype).min, torch.iinfo(dtype).max, (n,), generator=g).to(dtype)
    else:
        x = torch.rand(n, generator=g).to(torch.half)
    min_x, max_x = torch.min(x), torch.max(x)
    if dtype == torch.int16:
        actual_topk, actual_indices = ops().run_topk_int16(x, k, min_x, max_x, S)
    else:
        actual_topk, actual_indices = ops().run_topk_fp16(x, k, min_x, max_x, S)
    expected_topk, expected_indices = torch.topk(x, k, largest=True)

    actual_topk, _ = torch.sort(actual_topk, dim=-1)
    expected_topk, _ = torch.sort(expected_topk, dim=-1)
    assert len(actual_topk) == k
    assert torch.allclose(actual_topk.float(), expected_topk.float())
    actual_indices, _ = torch.sort(actual_indices, dim=-1)
    expected_indices, _ = torch.sort(expected_indices, dim=-1)
    assert len(actual_indices) == k, f"Output indices must have size K. K={len(actual_indices)}"
    assert torch.allclose(expected_indices.float(), actual_indices.float())

    xn = x.numpy()
    v, i = backend(S).topk(xn, k)
    assert v.dtype == xn.dtype and np.array_equal(v, np.sort(expected_topk.numpy())[::-1])
    assert np.array_equal(np.sort(i), expected_indices.numpy()) and np.array_equal(xn[i], v)


dtype = torch.float16


@pytest.mark.parametrize("vec_len", _VEC_LENS)
def test_topk_K_1(vec_len):
    _test_topk(vec_len, 1, dtype)


@pytest.mark.parametrize("vec_len", _VEC_LENS)
def test_topk_K_2(vec_len):
    _test_topk(vec_len, 2, dtype)


@pytest.mark.parametrize("vec_len", _VEC_LENS)
def test_topk_K_5(vec_len):
    _test_topk(vec_len, 5, dtype)


@pytest.mark.parametrize("vec_len", _VEC_LENS)
def test_topk_K_SQRT(vec_len):
    _test_topk(vec_len, "sqrt", dtype)


@pytest.mark.parametrize("k", [5, "sqrt"])
@pytest.mark.parametrize("vec_len", _VEC_LENS)
def test_topk_int16_beyond_upstream(vec_len, k):
    _test_topk(vec_len, k, torch.int16)
