"""Port of upstream's tests/test_split_ind.py: run_split_ind(x, mask, indices_in = 1..n as int32, s)
on int16 and fp16 (S = 32, 64, 128, lengths 2^k +- 1 and 2^20 + 1 / 13 / 27): both outputs as long as
x, x[mask == 1] and its 1-based positions (torch.allclose, as upstream) then x[mask == 0] and its
positions (torch.equal); and the same cases through TcuscanBackend.split_ind (which passes 0-based
arange indices: the expected positions minus 1, int64; values exact in x's dtype).

Scale: lengths above CAP = 2^17 (the 2^20 + k ones) go through ``scaled(n, 128 * 128)`` (keeps n mod
S^2 for every S here)."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, backend, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 84


VEC_LENS = [
    256 - 1,
    1024 - 1,
    2048 - 1,
    4096 - 1,
    8192 - 1,
    1024 * 1024 - 1,
    256 + 1,
    1024 + 1,
    2048 + 1,
    4096 + 1,
    8192 + 1,
    1024 * 1024 + 1,
    1024 * 1024 + 13,
    1024 * 1024 + 27,
]


def _test_split_ind(vec_len: int, s: int, dtype=torch.int16):
    "Split with indices (stand-in and backend) for given input length, s and dtype."
    n = scaled(vec_len, 128 * 128)
    g = gen()
    x = torch.randint(0, 2**7 - 1, (n,), generator=g).to(dtype)
    mask = (torch.randn(n, generator=g) > 0).to(torch.int8)
    indices_in = torch.cumsum(torch.ones(n), dim=-1).to(torch.int32)

    z, indices_out = ops().run_split_ind(x, mask, indices_in, s)

    assert len(z) == len(x), "Input and output vector dimensions must agree."
    assert len(z) == len(indices_out)

    expected_left_part = torch.masked_select(x, mask == 1)
    expected_left_indices = torch.nonzero(mask == 1, as_tuple=True)[0].to(torch.int32) + 1
    num_selected = len(expected_left_part)
    assert torch.allclose(expected_left_part, z[:num_selected])
    assert torch.allclose(expected_left_indices, indices_out[:num_selected])

    expected_right_part = torch.masked_select(x, mask == 0)
    expected_right_indices = torch.nonzero(mask == 0, as_tuple=True)[0].to(torch.int32) + 1
    num_tail = len(expected_right_part)
    assert torch.equal(expected_right_part, z[-num_tail:])
    assert torch.equal(expected_right_indices, indices_out[-num_tail:])

    got, got_indices = backend(s).split_ind(x.numpy(), mask.numpy())
    assert got.dtype == x.numpy().dtype
    assert np.array_equal(got, torch.cat([expected_left_part, expected_right_part]).numpy())
    positions = torch.cat([expected_left_indices, expected_right_indices]).to(torch.int64) - 1
    assert got_indices.dtype == np.int64 and np.array_equal(got_indices, positions.numpy())


@pytest.mark.parametrize("dtype", [torch.int16, torch.float16])
@pytest.mark.parametrize("s", [32, 64, 128])
@pytest.mark.parametrize("vec_len", VEC_LENS)
def test_tcuscan_split(dtype, s, vec_len):
    _test_split_ind(vec_len, s, dtype)
