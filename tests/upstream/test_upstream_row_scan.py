"""Port of upstream's tests/test_row_scan.py: run_row_scan on an (m, 128) fp16 matrix of ones, m =
20 * 128^2 * i - 13; the fp32 result cast to fp16 against F.linear(A, tril(ones)) (each row scanned)
within rtol 1e-3, atol 0; and the same case through TcuscanBackend.row_scan (the flat vector).

Scale: m * 128 above CAP keeps m mod 20 (the cores' share of rows) with at most CAP elements."""
import numpy as np
import pytest
import torch.nn.functional as F
from _upstream import NUM_AI_CORES, PYTESTMARK, backend, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 9

NUM_CORES = NUM_AI_CORES
S = 128
M_LIST = [NUM_CORES * S * S * i - 13 for i in range(1, 10)]


@pytest.mark.parametrize("m", M_LIST)
def test_tcuscan_row_scan_fp16(m):
    m = scaled(m * S, NUM_CORES * S) // S
    A = torch.ones(m, S, dtype=torch.float16)
    B = torch.tril(torch.ones((S, S), dtype=torch.float16))
    actual = ops().run_row_scan(A, S).half()
    expected = F.linear(A.float(), B.float()).half().flatten()
    assert actual.dtype == expected.dtype
    assert torch.allclose(actual, expected, atol=0, rtol=1e-3), f"Row scan: s={S}, m={m}"
    got = backend(S).row_scan(A.flatten().numpy())
    assert got.dtype == np.float32 and np.array_equal(got.astype(np.float16), expected.numpy())
