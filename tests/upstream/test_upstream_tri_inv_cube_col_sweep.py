"""Port of upstream's tests/test_tri_inv_cube_col_sweep.py (run_tri_inv_cube_col_sweep, fp16 in,
fp32 out): against upstream's matrix-formulated column sweep ``triu_inv_cs`` (fp32 products, rounded
to fp16 after each factor), atol = rtol = 0.1 for random matrices, exact for identity and ones.

Scale (CAP override 2^15 for this module: the reference does n fp32 n x n products per matrix):
batch * n^2 above 2^15 becomes the largest batch with batch * n^2 <= 2^15 (2 matrices at n = 128,
8 at n = 64, 32 at n = 32). Random matrices from numpy's default_rng(42).
Not wrapped by TcuscanBackend (a triangular inverse is no registry op): stand-in only."""
import numpy as np
import pytest
from _upstream import FULL, PYTESTMARK, ops, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 72
CAP = 1 << 15


def _batch(batch_size, n):
    return batch_size if FULL else max(1, min(batch_size, CAP // (n * n)))


def triu_inv_cs(input_x, dtype=np.float16):
    output = np.zeros_like(input_x)
    batch_dim, n, _ = input_x.shape
    eye = np.eye(n, dtype=np.float32)
    for idx in range(batch_dim):
        u = 2 * eye - input_x[idx]
        inv = eye.copy()
        for k in reversed(range(n)):
            m = eye.copy()
            m[:, k] = u[:, k]
            inv = (m.astype(np.float32) @ inv.astype(np.float32)).astype(dtype)  # FIXPIPE fp32 -> fp16
        output[idx] = inv
    return output.astype(dtype)


def rand_triu_tensor(batch_size, n, dtype, scale=0.05):
    a = np.triu(scale * np.random.default_rng(42).random((batch_size, n, n)))
    for k in range(batch_size):
        np.fill_diagonal(a[k], 1.0)
    return a.astype(dtype)


def identity_tensor(batch_size, n, dtype):
    return np.tril(np.triu(np.ones((batch_size, n, n)))).astype(dtype)


def ones_tensor(batch_size, n, dtype):
    return np.triu(np.ones((batch_size, n, n))).astype(dtype)


def _run(x, atol, rtol):
    expected = torch.from_numpy(triu_inv_cs(x)).half()
    actual = ops().run_tri_inv_cube_col_sweep(torch.from_numpy(x.transpose(0, 2, 1).copy()).half())
    assert actual.shape == expected.shape
    assert torch.allclose(actual.float(), expected.float(), atol=atol, rtol=rtol)


_B = [1, 2, 3, 4, 40, 256]
_N = [16, 32, 64, 128]


@pytest.mark.parametrize("batch_size", _B)
@pytest.mark.parametrize("matrix_size", _N)
def test_tri_inv_cube_col_sweep_random(batch_size, matrix_size):
    _run(rand_triu_tensor(_batch(batch_size, matrix_size), matrix_size, np.float16), 1e-1, 1e-1)


@pytest.mark.parametrize("batch_size", _B)
@pytest.mark.parametrize("matrix_size", _N)
def test_tri_inv_cube_col_sweep_identity(batch_size, matrix_size):
    _run(identity_tensor(_batch(batch_size, matrix_size), matrix_size, np.float16), 0, 0)


@pytest.mark.parametrize("batch_size", _B)
@pytest.mark.parametrize("matrix_size", _N)
def test_tri_inv_cube_col_sweep_ones_tensor(batch_size, matrix_size):
    _run(ones_tensor(_batch(batch_size, matrix_size), matrix_size, np.float16), 0, 0)
