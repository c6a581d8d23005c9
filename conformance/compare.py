"""Comparators: integers exactly (dtype included); floats within a bound
derived from the accumulation: the golden SCD/SpMV paths subtract global
prefix sums, so |err| <= 4 * n * u * sum|terms| over the whole input."""
from __future__ import annotations

import numpy as np


def _terms_abs_sum(op, args):
    if op == "spmv":
        (ptr, ind, data, shape), x = args
        return float(np.sum(np.abs(data.astype(np.float64) * x.astype(np.float64)[ind]))), len(data)
    x = np.asarray(args[0], dtype=np.float64)
    return float(np.sum(np.abs(x))), len(x)


def check(op, args, expected, actual):
    """Return None when ``actual`` conforms to ``expected``, else a message."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if expected.dtype.kind != "f":
        if not np.array_equal(actual, expected):
            i = int(np.flatnonzero(actual != expected)[0])
            return f"index {i}: expected {expected[i]}, actual {actual[i]} (integers must be exact)"
        return None
    total, n = _terms_abs_sum(op, args)
    u = np.finfo(expected.dtype).eps / 2
    bound = 4 * max(n, 1) * u * total + np.finfo(expected.dtype).tiny
    err = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    if err.size and not (err <= bound).all():
        i = int(np.argmax(err))
        return f"index {i}: expected {expected[i]}, actual {actual[i]}, error {err[i]:.3g} > bound {bound:.3g}"
    return None
