"""Random inputs per op, biased to the edges the kernels get wrong:
lengths 0, 1, s-1, s, s+1, s^2-1, s^2, s^2+1; flag densities 0, 1 and between;
empty segments and rows; values at the dtype's extremes."""
from __future__ import annotations

import numpy as np

DTYPES = ("int8", "int16", "int32", "int64", "float16", "float32", "float64")


def lengths(s: int):
    return [0, 1, s - 1, s, s + 1, s * s - 1, s * s, s * s + 1]


def values(rng, n, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "i":
        info = np.iinfo(dt)
        lo, hi = (info.min, info.max) if dt.itemsize <= 2 else (-1000, 1000)
        x = rng.integers(lo, hi, n, endpoint=True).astype(dt)
        if n and dt.itemsize <= 2:
            x[rng.random(n) < 0.1] = info.max
        return x
    return rng.standard_normal(n).astype(dt)


def flags(rng, n):
    d = rng.choice([0.0, 1.0, 0.01, 0.3, 0.7])
    return (rng.random(n) < d).astype(np.uint8)


def offsets(rng, n):
    k = int(rng.integers(0, max(n, 1) + 3))
    cuts = np.sort(rng.integers(0, n + 1, k))
    return np.concatenate([[0], cuts, [n]]).astype(np.int64)


def csr(rng, n_rows, n_cols, dtype):
    lens = rng.integers(0, 4, n_rows)
    lens[rng.random(n_rows) < 0.3] = 0
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    nnz = int(indptr[-1])
    indices = rng.integers(0, max(n_cols, 1), nnz).astype(np.int32)
    data = values(rng, nnz, dtype)
    return indptr, indices, data


def _with_specials(rng, x):
    """Floats get -0.0, +-inf and NaN sprinkled in (the sort order's edge cases)."""
    if x.dtype.kind == "f" and x.size:
        pick = rng.random(x.size) < 0.2
        x = x.copy()
        x[pick] = rng.choice(np.array([-0.0, 0.0, np.inf, -np.inf, np.nan]), int(pick.sum()))
    return x


def cases(op: str, rng, s: int, count: int):
    """Yield (args, kwargs) tuples for ``op``."""
    ls = lengths(s)
    for i in range(count):
        n = ls[i % len(ls)] if i < 2 * len(ls) else int(rng.integers(0, 4 * s * s))
        dt = DTYPES[i % len(DTYPES)]
        x = values(rng, n, dt)
        if op == "scan":
            yield (x,), {}
        elif op in ("segmented_scan", "segmented_sum"):
            yield (x, flags(rng, n)), {}
        elif op == "segment_sum_csr":
            yield (x, offsets(rng, n)), {}
        elif op == "compress":
            yield (x, flags(rng, n)), {}
        elif op == "batched_scan":
            rows = int(rng.integers(0, 4))
            yield (np.stack([values(rng, n, dt) for _ in range(rows)]).reshape(rows, n),), {}
        elif op in ("split", "split_ind"):
            yield (x, flags(rng, n)), {}
        elif op in ("radix_sort", "argsort"):
            yield (_with_specials(rng, x),), {}
        elif op == "topk":
            yield (_with_specials(rng, x), int(rng.integers(0, n + 1))), {}
        elif op == "weighted_sample":
            # integer or dyadic weights: every summation order gives the same sums,
            # so golden (blocked MCScan) and any backend must pick the same index
            w = rng.integers(0, 5, max(n, 1)).astype(dt) if dt.startswith("int") else \
                (rng.integers(0, 65, max(n, 1)) / 64).astype(dt)
            w[int(rng.integers(0, len(w)))] = 1
            yield (w, float(rng.choice([0.0, rng.random()]))), {}
        elif op == "top_p_sample":
            if not dt.startswith("float"):
                continue
            rows = int(rng.integers(1, 4))
            probs = (rng.integers(0, 65, (rows, max(n, 1))) / 64).astype(dt)
            probs[:, 0] = 1 / 64
            yield (probs, float(rng.choice([0.0, 0.5, 0.9, 1.0])), rng.random(rows)), {}
        elif op == "spmv":
            n_rows, n_cols = int(rng.integers(0, 2 * s)), int(rng.integers(1, 2 * s))
            ptr, ind, data = csr(rng, n_rows, n_cols, dt)
            xv = values(rng, n_cols, dt)
            yield ((ptr, ind, data, (n_rows, n_cols)), xv), {}
        else:
            return
