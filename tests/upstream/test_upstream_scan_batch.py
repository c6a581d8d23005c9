"""Port of upstream's tests/test_scan_batch.py: run_scan_batch on (batch_size, vec_len) torch.rand
matrices, fp16 and fp32 -> fp32, against torch.cumsum(dim=1) in fp32 within rtol 1e-3; and the same
case through TcuscanBackend.batched_scan.

Scale: batch_size * vec_len above CAP keeps batch_size (so rows < / > the 20 cores stay) and cuts
vec_len to the largest length within CAP // batch_size congruent to it mod s^2 (the partial last
tile stays), or mod s where no such length fits (batch_size 256 and s >= 32)."""
from typing import List

import numpy as np
import pytest
from _upstream import CAP, FULL, PYTESTMARK, backend, gen, ops, torch

pytestmark = PYTESTMARK
UPSTREAM_PARAMETRISATIONS = 900

_MULTIPLIERS = [1, 2, 3, 11, 63]
_BATCH_SIZES = [2, 16, 20, 32, 44, 256]
_S = [32, 64, 128]


def get_lengths_and_batch_sizes(matmul_sizes: List[int], multipliers: List[int], batch_sizes: List[int]):
    for s in matmul_sizes:
        for multiplier in multipliers:
            for batch_size in batch_sizes:
                yield (s, multiplier * s * s, batch_size)
                yield (s, multiplier * s * s // 2, batch_size)
                yield (s, multiplier * s * s // 4, batch_size)
                yield (s, multiplier * s * s - 1, batch_size)
                yield (s, multiplier * s * s + 1, batch_size)


def _row_length(vec_len, batch_size, s):
    budget = CAP // batch_size
    if FULL or vec_len <= budget:
        return vec_len
    for mod in (s * s, s):
        r = vec_len % mod
        if r == 0 and mod <= budget:
            return budget - budget % mod
        if r and r <= budget:
            return r + (budget - r) // mod * mod
    return vec_len % s or s


@pytest.mark.parametrize("s, vec_len, batch_size",
                         list(get_lengths_and_batch_sizes(matmul_sizes=_S, multipliers=_MULTIPLIERS,
                                                          batch_sizes=_BATCH_SIZES)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_scan_batch(s, vec_len, batch_size, dtype):
    vec_len = _row_length(vec_len, batch_size, s)
    x = torch.rand((batch_size, vec_len), generator=gen()).to(dtype)
    expected = torch.cumsum(x, dim=1, dtype=torch.float)
    actual = ops().run_scan_batch(x, s)
    assert actual.shape == expected.shape
    assert torch.allclose(actual, expected, rtol=1e-03), f"batch scan ({dtype}) s={s}, {batch_size} x {vec_len}"
    got = backend(s).batched_scan(x.numpy())
    assert got.dtype == np.float32 and torch.allclose(torch.from_numpy(got), expected, rtol=1e-03)
