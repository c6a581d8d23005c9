"""The project's dtype rules, stated once.

Values:   int8/int16/int32 -> int32 result, int64 -> int64,
          float16 -> float32 (accumulated in float32, as the cube unit does),
          float32 -> float32, float64 -> float64.
Flags:    bool, int8 or uint8 holding 0/1; they mark segment STARTS.
Indices:  any signed or unsigned integer dtype (indptr, column indices).
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "VALUE_DTYPES",
    "INT_VALUE_DTYPES",
    "FLOAT_VALUE_DTYPES",
    "FLAG_DTYPES",
    "result_dtype",
    "word_dtype",
    "is_integer",
]

INT_VALUE_DTYPES = tuple(np.dtype(t) for t in ("int8", "int16", "int32", "int64"))
FLOAT_VALUE_DTYPES = tuple(np.dtype(t) for t in ("float16", "float32", "float64"))
VALUE_DTYPES = INT_VALUE_DTYPES + FLOAT_VALUE_DTYPES
FLAG_DTYPES = tuple(np.dtype(t) for t in ("bool", "int8", "uint8"))

_RESULT = {
    np.dtype("int8"): np.dtype("int32"),
    np.dtype("int16"): np.dtype("int32"),
    np.dtype("int32"): np.dtype("int32"),
    np.dtype("int64"): np.dtype("int64"),
    np.dtype("float16"): np.dtype("float32"),
    np.dtype("float32"): np.dtype("float32"),
    np.dtype("float64"): np.dtype("float64"),
}


def result_dtype(dtype) -> np.dtype:
    """Result dtype of a sum/scan of values of ``dtype`` (the project rule)."""
    dtype = np.dtype(dtype)
    try:
        return _RESULT[dtype]
    except KeyError:
        raise TypeError(
            f"unsupported value dtype {dtype}; supported: "
            + ", ".join(str(d) for d in VALUE_DTYPES)
        ) from None


def word_dtype(dtype) -> np.dtype:
    """Machine word of the golden model for values of ``dtype``.

    Integers are held in int64 words (exact for every input the bounds admit);
    floats in their result dtype (fp16 accumulates in fp32).
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        return np.dtype("int64")
    return result_dtype(dtype)


def is_integer(dtype) -> bool:
    return np.dtype(dtype).kind in "iub"
