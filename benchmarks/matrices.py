"""Deterministic sparse-matrix generators for the SpMV benchmarks (and for tests of
other packages). Each returns a ``scipy.sparse.csr_matrix`` in canonical form
(sorted, unique column indices; int32 index arrays) with float64 values in
[-1, 1); convert with ``.astype(np.float32)`` for single precision.

- :func:`sparse_attention`: the blocked sparse-attention pattern of §5.2.3 of
  the MMV-RAM paper (BigBird-style): ``n`` = 65,536 rows and columns in blocks of
  ``b``; ``n_global`` = 2 global blocks (the first block rows attend to every
  column, every block row attends to the first block columns), ``n_window`` = 3
  window blocks (block columns i-1, i, i+1, clipped at the edges) and ``r``
  random blocks per non-global block row, drawn without replacement from the
  block columns not already present. b = 64, r = 2 gives 37,683,200 nonzeros.
- :func:`power_law`: 1M x 1M, row lengths from a discrete power law (Pareto
  tail exponent 1.5, most rows 1-5 long), capped at 20,000, plus one very long
  row (71,277 nonzeros); about 4.9M nonzeros.
- :func:`uniform_random`: 1M x 1M, Poisson(5) row lengths (so about 0.67% of
  the rows are empty), uniform columns; about 5.0M nonzeros.

Seeds are fixed by default; the same arguments always give the same matrix.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["sparse_attention", "power_law", "uniform_random", "SPMV_MATRICES", "attention_name"]


def _values(rng, nnz):
    return rng.uniform(-1.0, 1.0, nnz)


def _from_row_lengths(rng, lens, n_cols):
    """CSR with the given row lengths (before de-duplication) and uniform random columns,
    sorted and made unique per row (duplicates dropped, so rows may come out shorter)."""
    lens = np.asarray(lens, dtype=np.int64)
    n_rows = lens.size
    nnz = int(lens.sum())
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), lens)
    cols = rng.integers(0, n_cols, nnz, dtype=np.int64)
    key = np.sort(rows * n_cols + cols)
    if key.size:
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    rows, cols = np.divmod(key, n_cols)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    data = _values(rng, key.size)
    return sp.csr_matrix((data, cols.astype(np.int32), indptr.astype(np.int32)), shape=(n_rows, n_cols))


def attention_name(b: int, r: int) -> str:
    """The paper's naming convention: ``b-64_r-2``."""
    return f"b-{b}_r-{r}"


def sparse_attention(b: int = 64, r: int = 2, *, n: int = 65_536, n_global: int = 2,
                     n_window: int = 3, seed: int = 0) -> sp.csr_matrix:
    """The blocked sparse-attention matrix of §5.2.3 (``attention_name(b, r)``).

    Parameters: b (block size, divides n), r (random blocks per block row), n
    (rows = columns), n_global (global blocks), n_window (window blocks, odd),
    seed. Values uniform in [-1, 1).
    """
    if n % b:
        raise ValueError(f"b must divide n, got b={b}, n={n}")
    if n_window % 2 != 1:
        raise ValueError(f"n_window must be odd, got {n_window}")
    nb = n // b
    rng = np.random.default_rng([seed, b, r])
    half = n_window // 2
    offs = np.arange(b, dtype=np.int64)
    all_cols = np.arange(n, dtype=np.int64)
    row_cols = []  # column pattern of each block row (shared by its b rows)
    for i in range(nb):
        if i < n_global:
            row_cols.append(all_cols)
            continue
        used = set(range(n_global))
        used.update(range(max(0, i - half), min(nb, i + half + 1)))
        free = nb - len(used)
        picks = set()
        while len(picks) < min(r, free):
            j = int(rng.integers(0, nb))
            if j not in used:
                picks.add(j)
        blocks = np.array(sorted(used | picks), dtype=np.int64)
        row_cols.append((blocks[:, None] * b + offs).ravel())
    lens = np.array([c.size for c in row_cols], dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.repeat(lens, b), out=indptr[1:])
    indices = np.concatenate([np.tile(c, b) for c in row_cols]).astype(np.int32)
    data = _values(rng, indices.size)
    return sp.csr_matrix((data, indices, indptr.astype(np.int32)), shape=(n, n))


def power_law(n: int = 1_000_000, *, alpha: float = 1.5, xmin: float = 1.8, cap: int = 20_000,
              long_row: int = 71_277, seed: int = 1) -> sp.csr_matrix:
    """n x n with power-law row lengths floor(xmin * U**(-1/alpha)) capped at ``cap``, and
    row n // 2 made ``long_row`` long (all distinct columns). Values uniform in [-1, 1)."""
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    lens = np.minimum(np.floor(xmin * u ** (-1.0 / alpha)), cap).astype(np.int64)
    long_at = n // 2
    lens[long_at] = 0
    A = _from_row_lengths(rng, lens, n)
    if long_row:
        cols = np.sort(rng.choice(n, size=min(long_row, n), replace=False)).astype(np.int32)
        indptr = A.indptr.astype(np.int64)
        pos = indptr[long_at]
        indices = np.concatenate([A.indices[:pos], cols, A.indices[pos:]])
        data = np.concatenate([A.data[:pos], _values(rng, cols.size), A.data[pos:]])
        indptr[long_at + 1:] += cols.size
        A = sp.csr_matrix((data, indices, indptr.astype(np.int32)), shape=(n, n))
    return A


def uniform_random(n: int = 1_000_000, *, mean: float = 5.0, seed: int = 2) -> sp.csr_matrix:
    """n x n with Poisson(``mean``) row lengths (some rows empty) and uniform random
    columns. Values uniform in [-1, 1)."""
    rng = np.random.default_rng(seed)
    return _from_row_lengths(rng, rng.poisson(mean, n), n)


#: name -> zero-argument generator of the three benchmark families' default members
SPMV_MATRICES = {
    "attention " + attention_name(64, 2): lambda: sparse_attention(64, 2),
    "power-law 1M": power_law,
    "uniform 1M": uniform_random,
}
