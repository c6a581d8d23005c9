"""The worked example of §2 of the paper, through every algorithm that computes it."""
from __future__ import annotations

import numpy as np
import pytest

import mmvref
from mmvref import golden

X = [2, 2, 3, 3, 1, 3, 1, 2]
F = [1, 0, 1, 0, 0, 1, 0, 0]
SEG_SCAN = [2, 4, 3, 6, 7, 3, 4, 6]
SEG_SUM = [4, 7, 6]
COMPRESS = [2, 3, 3]
COMPRESS_IND = [0, 2, 5]  # the positions of the kept entries


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("s", [2, 3, 4, 8, 128])
def test_golden_algorithms_give_the_papers_example(dtype, s):
    x = np.array(X, dtype=dtype)
    f = np.array(F, dtype=np.uint8)
    for alg in (golden.seg_scan, golden.sscr):
        np.testing.assert_array_equal(alg(x, f, s), SEG_SCAN)
    np.testing.assert_array_equal(golden.scd(x, f, s), SEG_SUM)
    np.testing.assert_array_equal(golden.segmented_sum(x, f, s), SEG_SUM)
    np.testing.assert_array_equal(golden.compress(x, f, s), np.array(COMPRESS, dtype=dtype))
    v, i = golden.compress_ind(x, f, s)
    np.testing.assert_array_equal(v, np.array(COMPRESS, dtype=dtype))
    assert i.dtype == np.int64 and i.tolist() == COMPRESS_IND
    np.testing.assert_array_equal(golden.segment_sum_csr(x, [0, 2, 5, 8], s), SEG_SUM)


@pytest.mark.parametrize("dtype", ["int8", "int32", "float32"])
def test_fast_ops_give_the_papers_example(dtype):
    x = np.array(X, dtype=dtype)
    f = np.array(F, dtype=np.uint8)
    np.testing.assert_array_equal(mmvref.segmented_scan(x, f), SEG_SCAN)
    np.testing.assert_array_equal(mmvref.segmented_sum(x, f), SEG_SUM)
    np.testing.assert_array_equal(mmvref.segment_sum_csr(x, np.array([0, 2, 5, 8])), SEG_SUM)
    np.testing.assert_array_equal(mmvref.compress(x, f), np.array(COMPRESS, dtype=dtype))
    v, i = mmvref.compress_ind(x, f)
    np.testing.assert_array_equal(v, np.array(COMPRESS, dtype=dtype))
    assert i.dtype == np.int64 and i.tolist() == COMPRESS_IND


def test_flag_at_position_zero_is_optional():
    x = np.array(X, dtype=np.int32)
    f = np.array(F, dtype=np.uint8)
    f[0] = 0  # position 0 always starts a segment
    for s in (2, 5):
        np.testing.assert_array_equal(golden.seg_scan(x, f, s), SEG_SCAN)
        np.testing.assert_array_equal(golden.sscr(x, f, s), SEG_SCAN)
        np.testing.assert_array_equal(golden.scd(x, f, s), SEG_SUM)
