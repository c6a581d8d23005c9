"""Port of upstream's tests/test_triu_inv_rec_unroll.py (run_triu_inv_rec_unroll: (I + U)^-1 of
strictly upper triangular fp16 U, fp32 out): allclose and relative Frobenius error against numpy's
float64 inverse, with upstream's tolerances (exact for ones, block ones, zeros and the arithmetic
progression).

Scale: block_dim * n^2 above CAP = 2^17 goes through ``scaled(block_dim * n^2, n^2)``: block_dim
256 runs as 8 matrices at n = 128, 32 at n = 64; 128 as 8 / 32 likewise (the rest as upstream).
Random matrices from numpy's default_rng(42) instead of the global seed.
Not wrapped by TcuscanBackend (a triangular inverse is no registry op): stand-in only."""
import numpy as np
import pytest
from _upstream import PYTESTMARK, ops, scaled, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 189


def _b(block_dim, n):
    return scaled(block_dim * n * n, n * n) // (n * n)


def arithmetic_prog_matrix(n, block_dim):
    row = np.zeros((n, n))
    for i in range(n):
        row[i, i:] = range(1, n - i + 1)
    u = np.linalg.inv(np.broadcast_to(row, (block_dim, n, n)))
    return torch.from_numpy(np.triu(u, k=1))


def block_ones_matrix(n, block_dim):
    u = np.zeros((block_dim, n, n))
    for i in range(n // 16):
        u[:, i * 16:i * 16 + 16, i * 16:i * 16 + 16] = 1.0
    return torch.from_numpy(u - np.tril(u))


def block_random_matrix(n, block_dim, scale=0.1):
    blk = np.triu(scale * np.random.default_rng(42).random((16, 16)), k=1)
    u = np.zeros((block_dim, n, n))
    for i in range(0, n, 16):
        u[:, i:i + 16, i:i + 16] = blk
    return torch.from_numpy(u)


def zeros_matrix(n, block_dim):
    return torch.zeros((block_dim, n, n))


def ones_matrix(n, block_dim):
    return torch.from_numpy(np.triu(np.ones((block_dim, n, n)), k=1))


def big_bad_matrix(n, block_dim):
    z = np.broadcast_to(0.5 * np.identity(n), (block_dim, n, n))
    return torch.from_numpy(np.triu(0.5 * np.ones((block_dim, n, n))) - z)


def random_matrix(n, block_dim=2, scale=0.1):
    u = scale * np.random.default_rng(42).random((block_dim, n, n))
    return torch.from_numpy(u - np.tril(u))


def _check(u, atol, rtol, ftol):
    n = u.shape[-1]
    u = u.to(torch.half)
    assert u.stride() == (n * n, n, 1)
    golden = torch.from_numpy(np.linalg.inv(np.eye(n) + u.numpy().astype(np.float64)))
    actual = ops().run_triu_inv_rec_unroll(u)
    assert actual.dtype == torch.float32
    actual = actual.to(torch.float64)
    frob = torch.sqrt(torch.sum((golden - actual) ** 2) / torch.sum(golden * golden))
    assert np.allclose(actual.numpy(), golden.numpy(), atol=atol, rtol=rtol)
    assert frob <= ftol, f"frob_error: {frob}"


_N = [32, 64, 128]
_BD = [1, 2, 4, 6, 20, 32, 64, 128, 256]


def _case(gen, n, block_dim, atol, rtol, ftol):
    _check(gen(n, _b(block_dim, n)), atol, rtol, ftol)


@pytest.mark.parametrize("n", _N)
@pytest.mark.parametrize("block_dim", _BD)
def test_triu_inv_rec_unroll_random(n, block_dim):
    _case(random_matrix, n, block_dim, 3e-5, min([0.5, 1e-2 * (n + block_dim)]), 1e-4)


@pytest.mark.parametrize("n", _N)
@pytest.mark.parametrize("block_dim", _BD)
def test_triu_inv_rec_unroll_block_random(n, block_dim):
    _case(block_random_matrix, n, block_dim, 1e-5, min([0.5, 1e-2 * (n + block_dim)]), 1e-4)


@pytest.mark.parametrize("n", _N)
@pytest.mark.parametrize("block_dim", _BD)
def test_triu_inv_rec_unroll_ones(n, block_dim):
    _case(ones_matrix, n, block_dim, 0, 0, 0)


@pytest.mark.parametrize("n", _N)
@pytest.mark.parametrize("block_dim", _BD)
def test_triu_inv_rec_unroll_block_ones(n, block_dim):
    _case(block_ones_matrix, n, block_dim, 0, 0, 0)


@pytest.mark.parametrize("n", _N)
@pytest.mark.parametrize("block_dim", _BD)
def test_triu_inv_rec_unroll_big_bad_matrix(n, block_dim):
    _case(big_bad_matrix, n, block_dim, 1e-7, 1e-4, 1e-7)


@pytest.mark.parametrize("n", _N)
@pytest.mark.parametrize("block_dim", _BD)
def test_triu_inv_rec_unroll_zeros(n, block_dim):
    _case(zeros_matrix, n, block_dim, 0, 0, 0)


@pytest.mark.parametrize("n", _N)
@pytest.mark.parametrize("block_dim", _BD)
def test_triu_inv_rec_unroll_ar_prog(n, block_dim):
    _case(arithmetic_prog_matrix, n, block_dim, 0, 0, 0)
