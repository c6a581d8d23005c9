"""Comparators: integers exactly (dtype included); floats within a bound
derived from the accumulation: the golden SCD/SpMV paths subtract global
prefix sums, so |err| <= 4 * n * u * sum|terms| over the whole input."""
from __future__ import annotations

import numpy as np

_MOVES_VALUES = ("compress", "split", "split_ind", "radix_sort", "argsort", "topk")


def _terms_abs_sum(op, args):
    if op == "spmv":
        (ptr, ind, data, shape), x = args
        return float(np.sum(np.abs(data.astype(np.float64) * x.astype(np.float64)[ind]))), len(data)
    x = np.asarray(args[0], dtype=np.float64)
    return float(np.sum(np.abs(x))), len(x)


def check(op, args, expected, actual):
    """Return None when ``actual`` conforms to ``expected``, else a message.
    Tuples (values, indices) are compared part by part."""
    if isinstance(expected, tuple):
        if not isinstance(actual, tuple) or len(actual) != len(expected):
            return f"expected a tuple of {len(expected)} arrays, got {type(actual).__name__}"
        for k, (e, a) in enumerate(zip(expected, actual)):
            msg = check(op, args, e, a)
            if msg:
                return f"part {k}: {msg}"
        return None
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if op in _MOVES_VALUES:  # values are moved, never combined: bit-for-bit
        if not np.array_equal(actual.view(np.uint8), expected.view(np.uint8)):
            i = int(np.flatnonzero(actual.ravel().view(np.uint8) != expected.ravel().view(np.uint8))[0])
            i //= expected.dtype.itemsize
            return f"index {i}: expected {expected.ravel()[i]!r}, actual {actual.ravel()[i]!r} (values must move bit-for-bit)"
        return None
    if expected.dtype.kind != "f":
        if not np.array_equal(actual, expected):
            i = int(np.flatnonzero(actual.ravel() != expected.ravel())[0])
            return (f"index {i}: expected {expected.ravel()[i]}, actual {actual.ravel()[i]} "
                    "(integers must be exact)")
        return None
    total, n = _terms_abs_sum(op, args)
    u = np.finfo(expected.dtype).eps / 2
    bound = 4 * max(n, 1) * u * total + np.finfo(expected.dtype).tiny
    err = np.abs(actual.astype(np.float64) - expected.astype(np.float64)).ravel()
    expected, actual = expected.ravel(), actual.ravel()
    if err.size and not (err <= bound).all():
        i = int(np.argmax(err))
        return f"index {i}: expected {expected[i]}, actual {actual[i]}, error {err[i]:.3g} > bound {bound:.3g}"
    return None
