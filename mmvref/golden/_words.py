"""Loading user arrays into machine words and finishing results.

A golden op validates its inputs, loads them into MMV-RAM words
(``mmvref._dtypes.word_dtype``), runs stages that are compositions of
``mmvref.mmv`` instructions, and finishes: casts the words to the result dtype
under the overflow contract of DEVELOPERS.md.
"""
from __future__ import annotations

import numpy as np

from .._dtypes import is_integer, result_dtype, word_dtype
from .._validate import check_overflow

DEFAULT_S = 128  # the tiling parameter of the authors' kernels (32, 64 or 128)

_I64 = np.iinfo(np.int64)


def to_words(x):
    """x as MMV-RAM words: int64 for integers and flags, fp32 for fp16, else as is."""
    x = np.asarray(x)
    return np.ascontiguousarray(x, dtype=word_dtype(x.dtype))


def flag_words(f):
    """0/1 flags (bool/int8/uint8) as int64 words."""
    return np.ascontiguousarray(f, dtype=np.int64)


def max_abs_int(x) -> int:
    """max |x| as a Python int (0 for empty); exact for int64 extremes."""
    x = np.asarray(x)
    if x.size == 0:
        return 0
    return max(abs(int(x.min())), abs(int(x.max())))


def finish(words, in_dtype, overflow, *, bound_magnitude=None, exact=None, op="golden op", out_dtype=None):
    """Cast result words to the result dtype of ``in_dtype`` under ``overflow``.

    Integer words are exact when ``bound_magnitude`` (the largest magnitude any
    intermediate can reach, from ``mmvref.bounds``) fits in int64; otherwise
    they are exact modulo 2**64 (ring arithmetic), which is all that
    ``overflow="wrap"`` needs, and ``overflow="raise"`` asks ``exact()`` (a
    Python-int computation of the results) whether the true results fit.
    """
    check_overflow(overflow)
    rdt = np.dtype(out_dtype) if out_dtype is not None else result_dtype(in_dtype)
    words = np.asarray(words)
    if not is_integer(rdt):
        return words.astype(rdt, copy=False)
    info = np.iinfo(rdt)
    if overflow == "wrap":
        return words.astype(rdt)  # two's complement truncation of the exact mod-2**64 value
    if bound_magnitude is None or bound_magnitude <= _I64.max:
        vals = words
        lo, hi = (int(vals.min()), int(vals.max())) if vals.size else (0, 0)
    else:
        vals = exact()
        lo, hi = (min(vals), max(vals)) if len(vals) else (0, 0)
    if lo < info.min or hi > info.max:
        bad = hi if hi > info.max else lo
        raise OverflowError(
            f"{op}: a result ({bad}) overflows {rdt}; pass overflow='wrap' for "
            f"two's-complement wrap-around, or use int64 input"
        )
    return words.astype(rdt)
