"""Port of upstream's tests/test_matmul_cce.py (run_matmul_cce(A, B) = A B^T, fp16, N = K = 512,
mean absolute error < 1e-3 against F.linear).

Scale: A's m * 512 elements above CAP = 2^17 go through ``scaled(m * 512, 128 * 512)`` (m stays a
multiple of 128 rows): every case runs with m = 256 rows. The expected F.linear is taken in fp32 and
rounded to fp16 (upstream's runs on the NPU, fp16 with fp32 accumulation; CPU fp16 linear is slow).
Not wrapped by TcuscanBackend (dense MATMUL is an instruction, no registry op): stand-in only."""
import pytest
import torch.nn.functional as F
from _upstream import NUM_AI_CORES, PYTESTMARK, gen, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 9

NUM_CORES = NUM_AI_CORES
M_LIST = [NUM_CORES * 128 * i for i in range(1, 10)]


@pytest.mark.parametrize("m", M_LIST)
def test_tcuscan_matmul_cce_fp16(m):
    N, K = 512, 512
    m = scaled(m * K, 128 * K) // K
    g = gen()
    A = torch.randn(m, K, generator=g, dtype=torch.float16)
    B = torch.randn(N, K, generator=g, dtype=torch.float16)
    actual = ops().run_matmul_cce(A, B)
    expected = F.linear(A.float(), B.float()).half()
    assert actual.shape == expected.shape and actual.dtype == torch.float16
    avg_diff = torch.mean(torch.abs(actual.float() - expected.float()))
    assert avg_diff < 1e-3, f"average error {avg_diff}"
