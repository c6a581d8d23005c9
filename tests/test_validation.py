"""Input validation of the golden ops: TypeError for a wrong kind of thing (dtype, type),
ValueError for a wrong value (shape, length, contents), and every message starts with
the name of the argument it is about."""
from __future__ import annotations

import re

import numpy as np
import pytest

from mmvref import golden

I32 = np.int32


def X(n=4, dtype=I32):
    return np.arange(1, n + 1, dtype=dtype)


def F(n=4):
    return np.array([1, 0, 1, 0][:n] + [0] * max(0, n - 4), dtype=np.uint8)


CSR = dict(indptr=np.array([0, 2, 2, 3]), indices=np.array([0, 2, 1]), data=X(3), x=X(3))


def spmv(**kw):
    args = {**CSR, **kw}
    return lambda: golden.spmv(args["indptr"], args["indices"], args["data"], args["x"], args.get("s", 2))


# Each op as: name -> (call with defaults, overridable keyword arguments)
def ops_x_f(x=None, f=None, s=2):
    x = X() if x is None else x
    f = F(len(x) if hasattr(x, "__len__") and np.ndim(x) == 1 else 4) if f is None else f
    return {
        "seg_scan": lambda: golden.seg_scan(x, f, s),
        "sscr": lambda: golden.sscr(x, f, s),
        "scd": lambda: golden.scd(x, f, s),
        "segmented_sum": lambda: golden.segmented_sum(x, f, s),
        "compress": lambda: golden.compress(x, f, s),
    }


def ops_x(x=None, s=2):
    x = X() if x is None else x
    return {**ops_x_f(x=x, s=s), "scan": lambda: golden.scan(x, s)}


def raises(exc, name, call):
    with pytest.raises(exc, match=rf"^{re.escape(name)}\b") as info:
        call()
    return str(info.value)


# --------------------------------------------------------------------------- shape

@pytest.mark.parametrize("bad", [np.ones((2, 2), I32), np.ones((1, 4), I32), np.int32(3)],
                         ids=["2d", "row", "scalar"])
def test_values_not_1d(bad):
    for name, call in ops_x(x=bad, s=2).items():
        msg = raises(ValueError, "x", call)
        assert "1-D" in msg, name
    raises(ValueError, "x", lambda: golden.mult(bad, X(), 2))
    raises(ValueError, "y", lambda: golden.mult(X(), bad, 2))
    raises(ValueError, "data", spmv(data=np.ones((3, 1), I32)))
    raises(ValueError, "x", spmv(x=np.ones((3, 1), I32)))


def test_flags_not_1d():
    for call in ops_x_f(f=np.zeros((2, 2), np.uint8)).values():
        raises(ValueError, "f", call)


def test_csr_arrays_not_1d():
    raises(ValueError, "indptr", spmv(indptr=np.array([[0, 2], [2, 3]])))
    raises(ValueError, "indices", spmv(indices=np.array([[0, 2, 1]])))


@pytest.mark.parametrize("A, B, name", [(X(4), np.ones((4, 2), I32), "A"),
                                        (np.ones((2, 4), I32), X(4), "B"),
                                        (np.ones((2, 2, 2), I32), np.ones((2, 2), I32), "A")])
def test_matrix_product_not_2d(A, B, name):
    msg = raises(ValueError, name, lambda: golden.matrix_product(A, B, 2))
    assert "2-D" in msg


# --------------------------------------------------------------------------- lengths

@pytest.mark.parametrize("m", [0, 3, 5])
def test_flag_length_mismatch(m):
    for call in ops_x_f(x=X(4), f=np.zeros(m, np.uint8)).values():
        msg = raises(ValueError, "f", call)
        assert "length" in msg


def test_other_length_mismatches():
    raises(ValueError, "y", lambda: golden.mult(X(4), X(3), 2))
    raises(ValueError, "A", lambda: golden.matrix_product(np.ones((2, 3), I32), np.ones((2, 2), I32), 2))
    raises(ValueError, "indices", spmv(indices=np.array([0, 1])))


# --------------------------------------------------------------------------- flag contents

@pytest.mark.parametrize("f", [np.array([0, 2, 0, 1], np.uint8), np.array([1, 0, 255, 0], np.uint8),
                               np.array([0, -1, 0, 1], np.int8), [0, 1, 2, 0], [0, -1, 0, 0]],
                         ids=["uint8-2", "uint8-255", "int8-minus1", "list-2", "list-minus1"])
def test_flags_outside_0_1(f):
    for call in ops_x_f(f=f).values():
        msg = raises(ValueError, "f", call)
        assert "0 and 1" in msg


@pytest.mark.parametrize("f", [np.zeros(4, np.float32), np.zeros(4, np.int32), np.zeros(4, np.uint16),
                               np.array(["0"] * 4)], ids=["float32", "int32", "uint16", "str"])
def test_flags_of_unsupported_dtype(f):
    for call in ops_x_f(f=f).values():
        raises(TypeError, "f", call)


def test_accepted_flag_forms():
    for f in (np.array([1, 1, 1, 1], bool), np.ones(4, np.int8), np.ones(4, np.uint8), [1, 1, 1, 1], (1, 1, 1, 1)):
        assert golden.seg_scan(X(), f, 2).tolist() == [1, 2, 3, 4]
    for f in (np.zeros(4, bool), np.zeros(4, np.int8), np.zeros(4, np.uint8), [0, 0, 0, 0]):
        assert golden.sscr(X(), f, 2).tolist() == [1, 3, 6, 10]


# --------------------------------------------------------------------------- s

@pytest.mark.parametrize("s", [1, 0, -2, True], ids=["1", "0", "-2", "True"])
def test_s_below_2(s):
    calls = {**ops_x(s=s), "spmv": spmv(s=s), "mult": lambda: golden.mult(X(), X(), s),
             "matrix_product": lambda: golden.matrix_product(np.ones((2, 2), I32), np.ones((2, 2), I32), s),
             "int_mult": lambda: golden.int_mult(3, 5, s)}
    for name, call in calls.items():
        msg = raises(ValueError, "s", call)
        assert ">= 2" in msg, name


@pytest.mark.parametrize("s", [2.0, 2.5, "4", None, np.float64(4)], ids=["2.0", "2.5", "str", "None", "np.float64"])
def test_s_not_an_integer(s):
    calls = {**ops_x(s=s), "spmv": spmv(s=s), "mult": lambda: golden.mult(X(), X(), s),
             "matrix_product": lambda: golden.matrix_product(np.ones((2, 2), I32), np.ones((2, 2), I32), s)}
    for name, call in calls.items():
        msg = raises(TypeError, "s", call)
        assert "integer" in msg, name


def test_numpy_integer_s_accepted():
    assert golden.scan(X(), np.int64(3)).tolist() == [1, 3, 6, 10]
    assert golden.seg_scan(X(), F(), np.uint8(2)).tolist() == [1, 3, 3, 7]


# --------------------------------------------------------------------------- CSR structure

@pytest.mark.parametrize("indptr, what", [
    (np.array([1, 2, 2, 3]), "indptr[0]"),
    (np.array([0, 2, 1, 3]), "non-decreasing"),
    (np.array([0, 2, 2, 2]), "indptr[-1]"),
    (np.array([0, 2, 3, 4]), "indptr[-1]"),
    (np.array([], dtype=np.int64), "at least one"),
], ids=["not-starting-at-0", "decreasing", "ends-below-nnz", "ends-above-nnz", "empty"])
def test_bad_indptr(indptr, what):
    msg = raises(ValueError, "indptr", spmv(indptr=indptr))
    assert what in msg
    if len(indptr):
        raises(ValueError, "indptr", lambda: golden.segment_sum_csr(X(3), indptr, 2))


def test_indptr_and_indices_of_non_integer_dtype():
    raises(TypeError, "indptr", spmv(indptr=np.array([0.0, 2.0, 2.0, 3.0])))
    raises(TypeError, "indices", spmv(indices=np.array([0.0, 2.0, 1.0])))


@pytest.mark.parametrize("indices", [np.array([0, 3, 1]), np.array([0, -1, 1]), np.array([0, 2, 100])],
                         ids=["n_cols", "negative", "far"])
def test_column_indices_out_of_range(indices):
    msg = raises(ValueError, "indices", spmv(indices=indices))
    assert "out of range" in msg


# --------------------------------------------------------------------------- value dtypes

BAD_VALUES = {
    "uint16": np.arange(4, dtype=np.uint16),
    "uint8": np.arange(4, dtype=np.uint8),
    "complex": np.arange(4, dtype=np.complex128),
    "object": np.array([1, 2, 3, 4], dtype=object),
    "bool": np.array([True, False, True, True]),
    "str": np.array(["1", "2", "3", "4"]),
}


@pytest.mark.parametrize("kind", list(BAD_VALUES))
def test_unsupported_value_dtypes(kind):
    bad = BAD_VALUES[kind]
    for call in ops_x(x=bad).values():
        raises(TypeError, "x", call)
    raises(TypeError, "x", lambda: golden.mult(bad, X(), 2))
    raises(TypeError, "y", lambda: golden.mult(X(), bad, 2))
    raises(TypeError, "A", lambda: golden.matrix_product(bad.reshape(2, 2), np.ones((2, 2), I32), 2))
    raises(TypeError, "B", lambda: golden.matrix_product(np.ones((2, 2), I32), bad.reshape(2, 2), 2))
    raises(TypeError, "data", spmv(data=bad[:3]))
    raises(TypeError, "x", spmv(x=bad[:3]))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_integer_only_ops_reject_floats(dtype):
    raises(TypeError, "x", lambda: golden.mult(X(dtype=dtype), X(), 2))
    raises(TypeError, "y", lambda: golden.mult(X(), X(dtype=dtype), 2))
    raises(TypeError, "A", lambda: golden.matrix_product(np.ones((2, 2), dtype), np.ones((2, 2), I32), 2))
    raises(TypeError, "B", lambda: golden.matrix_product(np.ones((2, 2), I32), np.ones((2, 2), dtype), 2))


def test_invalid_overflow_mode():
    for call in (lambda: golden.scan(X(), 2, overflow="clip"),
                 lambda: golden.seg_scan(X(), F(), 2, overflow="saturate"),
                 lambda: golden.sscr(X(), F(), 2, overflow=None),
                 lambda: golden.scd(X(), F(), 2, overflow="Wrap"),
                 lambda: golden.mult(X(), X(), 2, overflow="clip"),
                 lambda: golden.matrix_product(np.ones((2, 2), I32), np.ones((2, 2), I32), 2, overflow="clip"),
                 lambda: golden.spmv(CSR["indptr"], CSR["indices"], CSR["data"], CSR["x"], 2, overflow="clip")):
        raises(ValueError, "overflow", call)


def test_python_sequences_are_accepted():
    assert golden.scan([1, 2, 3], 2).tolist() == [1, 3, 6]
    assert golden.seg_scan([1, 2, 3], [0, 1, 0], 2).tolist() == [1, 2, 5]
    assert golden.spmv([0, 1, 1], [0], [5], [3], 2).tolist() == [15, 0]


def test_int_mult_names_its_argument():
    raises(TypeError, "a", lambda: golden.int_mult(2.5, 3, 2))
