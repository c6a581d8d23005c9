"""npu.TorchEmulationBackend (MM+V algorithms in torch) against the golden model
on the CPU; npu.MmvrefBackend's protocol; torch.ops.mmv.* under opcheck."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import npu  # noqa: E402
from mmvref import golden  # noqa: E402

# the torch emulation runs torch's kernels, not mmvref's: no code depends on Numba's compile target
pytestmark = pytest.mark.native_only

INT_DTYPES = ["int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]


@st.composite
def case(draw, dtypes=INT_DTYPES + FLOAT_DTYPES):
    s = draw(st.sampled_from([2, 4, 8, 128]))
    n = draw(st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1, s * s - 1, s * s, s * s + 1]),
                       st.integers(0, 3 * s * s)))
    dt = np.dtype(draw(st.sampled_from(dtypes)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dt.kind == "i":
        info = np.iinfo(dt)
        lim = draw(st.sampled_from([5, int(min(info.max, 2**40))]))
        x = rng.integers(max(info.min, -lim), lim, n, endpoint=True).astype(dt)
    else:
        x = (rng.standard_normal(n) * 8).astype(dt)
    density = draw(st.sampled_from([0.0, 1.0, 0.05, 0.5]))
    f = (rng.random(n) < density).astype(draw(st.sampled_from([np.uint8, np.int8, np.bool_])))
    return s, x, f, rng


def close(actual, expected, x):
    """Floats: both sides sum each output over at most n terms of x; 4 n u sum|x|."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(actual, expected)
        return
    u = np.finfo(expected.dtype).eps / 2
    bound = 4 * max(len(x), 1) * u * float(np.abs(x.astype(np.float64)).sum()) + np.finfo(expected.dtype).tiny
    assert np.all(np.abs(actual.astype(np.float64) - expected.astype(np.float64)) <= bound)


@given(c=case(), exclusive=st.booleans(), int_words=st.sampled_from(["int64", "float64"]))
def test_scan_and_segmented_scan(c, exclusive, int_words):
    """int_words="float64" is the path of devices without integer matmul (CUDA)."""
    s, x, f, _ = c
    B = npu.TorchEmulationBackend(s=s, int_words=int_words)
    if int_words == "float64" and x.dtype.kind == "i" and len(x) and \
            len(x) * max(abs(int(x.min())), abs(int(x.max()))) >= 2**53:
        with pytest.raises(OverflowError, match="2\\*\\*53"):
            B.scan(x)
        return
    wrap = "wrap"
    close(B.scan(x, exclusive=exclusive, overflow=wrap),
          golden.mc_scan(x, s, 3, exclusive=exclusive, overflow=wrap), x)
    z = golden.seg_scan(x, f, s, overflow=wrap)
    if exclusive and len(x):
        fs = f.astype(np.int64)
        fs[0] = 1
        z = (z.astype(np.float64 if z.dtype.kind == "f" else np.int64)
             - x.astype(np.float64 if z.dtype.kind == "f" else np.int64)).astype(z.dtype)
    close(B.segmented_scan(x, f, exclusive=exclusive, overflow=wrap), z, x)


@given(c=case())
def test_segmented_sums_and_compress(c):
    s, x, f, rng = c
    B = npu.TorchEmulationBackend(s=s, int_words="float64" if len(x) % 2 else "int64")
    if x.dtype.kind == "i":
        x = (x.astype(np.int64) % 10000).astype(x.dtype)  # inside the float64 words' exact window
    close(B.segmented_sum(x, f, overflow="wrap"), golden.scd(x, f, s, overflow="wrap"), x)
    cuts = np.sort(rng.integers(0, len(x) + 1, int(rng.integers(0, len(x) + 3))))
    ptr = np.concatenate([[0], cuts, [len(x)]]).astype(np.int64)  # empty rows included
    close(B.segment_sum_csr(x, ptr, overflow="wrap"), golden.segment_sum_csr(x, ptr, s, overflow="wrap"), x)
    got = B.compress(x, f)
    assert got.dtype == x.dtype and np.array_equal(got.view(np.uint8), golden.compress(x, f, s).view(np.uint8))
    v, i = B.compress_ind(x, f)
    gv, gi = golden.compress_ind(x, f, s)
    assert v.dtype == x.dtype and i.dtype == np.int64 and np.array_equal(i, gi)
    assert np.array_equal(v.view(np.uint8), gv.view(np.uint8)) and np.array_equal(i, np.flatnonzero(f))
    v, i = B.split_ind(x, f)
    gv, gi = golden.split_ind(x, f, s, 3)
    assert np.array_equal(i, gi) and np.array_equal(v.view(np.uint8), gv.view(np.uint8))


@given(c=case(INT_DTYPES + FLOAT_DTYPES), largest=st.booleans(), data=st.data())
def test_sort_and_topk(c, largest, data):
    s, x, _, _ = c
    x = x[:200]
    B = npu.TorchEmulationBackend(s=s)
    v, i = B.radix_sort(x, descending=largest)
    gv, gi = golden.radix_sort(x, s, 2, descending=largest)
    assert np.array_equal(i, gi) and np.array_equal(v.view(np.uint8), gv.view(np.uint8))
    k = data.draw(st.integers(0, len(x)))
    tv, ti = B.topk(x, k, largest=largest)
    gtv, gti = golden.topk(x, k, s, 2, largest=largest)
    assert np.array_equal(ti, gti) and np.array_equal(tv.view(np.uint8), gtv.view(np.uint8))


@given(c=case())
def test_spmv_and_stages(c):
    s, x, _, rng = c
    B = npu.TorchEmulationBackend(s=s)
    n_rows, n_cols = int(rng.integers(0, 2 * s)), max(1, len(x) % (2 * s + 1))
    lens = rng.integers(0, 5, n_rows) * (rng.random(n_rows) < 0.7)
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    ind = rng.integers(0, n_cols, int(ptr[-1])).astype(np.int32)
    data = np.resize(x, int(ptr[-1])) if len(x) else np.zeros(int(ptr[-1]), x.dtype)
    xv = np.resize(x, n_cols) if len(x) else np.zeros(n_cols, x.dtype)
    if x.dtype.kind == "i":
        data, xv = data.astype(np.int64) % 1000, xv.astype(np.int64) % 1000
    got = B.spmv((ptr, ind, data, (n_rows, n_cols)), xv)
    close(got, golden.spmv(ptr, ind, data, xv, s), np.abs(data.astype(np.float64)) * np.abs(xv[ind]))
    if x.dtype.kind == "i":
        got = B.row_scan(x)  # a stage: machine words out (int64)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, golden.row_scan(x.astype(np.int64), s))


@pytest.mark.parametrize("op", ["spmm", "spgemm"])
@given(data=st.data(), s=st.sampled_from([2, 4, 8]))
def test_spmm_and_spgemm_equal_the_golden_model(op, data, s):
    """spmm (columns end to end, one segment_sum_csr) and spgemm (ESC on the
    emulated split, segmented sum and compress) on the conformance strategies'
    inputs (empty rows, nnz = 0, diagonal operands), judged by the suite."""
    from conformance import runner, strategies

    args, kwargs = data.draw(strategies.op_inputs(op, s, None))
    assert runner.one_example(npu.TorchEmulationBackend(s=s), op, args, kwargs, s=s) is None


def test_spgemm_result_form_and_zeros():
    A = (np.array([0, 2, 3]), np.array([0, 1, 0]), np.array([1.0, 1.0, 2.0]), (2, 2))
    B = (np.array([0, 1, 2]), np.array([0, 0]), np.array([1.0, -1.0]), (2, 1))
    indptr, indices, data, shape = npu.TorchEmulationBackend(s=2).spgemm(A, B)
    assert shape == (2, 1) and indptr.tolist() == [0, 0, 1]  # row 0 cancels to 0: dropped
    assert indices.tolist() == [0] and data.tolist() == [2.0]
    with pytest.raises(ValueError, match="do not multiply"):
        npu.TorchEmulationBackend().spgemm(B, B)


def test_emulation_overflow_contract():
    B = npu.TorchEmulationBackend(s=4)
    x = np.full(3, 2**30, np.int32)
    with pytest.raises(OverflowError):
        B.scan(x)
    assert B.scan(x, overflow="wrap").tolist() == [2**30, -2**31, -2**30]


def test_mmvref_backend_protocol():
    B = npu.MmvrefBackend()
    assert hasattr(B, "scan") and not hasattr(B, "mult") and not hasattr(B, "no_such_op")
    assert B.segmented_sum(np.array([1, 2, 3], np.int8), np.array([1, 0, 1], np.uint8)).tolist() == [3, 3]
    assert "segmented_sum" in dir(B)


def test_import_npu_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, npu; npu.is_available(); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


OPCHECK = [
    ("scan", lambda: (torch.tensor([1, -2, 3], dtype=torch.int8),)),
    ("scan", lambda: (torch.randn(17, dtype=torch.float16), True)),
    ("segmented_scan", lambda: (torch.arange(9, dtype=torch.int32), torch.tensor([1, 0, 0, 1, 1, 0, 0, 0, 1],
                                                                                  dtype=torch.uint8))),
    ("segmented_sum", lambda: (torch.randn(6, dtype=torch.float64), torch.tensor([1, 0, 1, 1, 0, 0],
                                                                                dtype=torch.bool))),
    ("segment_sum_csr", lambda: (torch.arange(5, dtype=torch.int64), torch.tensor([0, 0, 2, 2, 5]))),
    ("compress", lambda: (torch.arange(5, dtype=torch.int16), torch.tensor([0, 1, 1, 0, 1], dtype=torch.int8))),
    ("spmv", lambda: (torch.tensor([0, 2, 2, 3]), torch.tensor([0, 2, 1], dtype=torch.int32),
                      torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, -1.0, 0.5]))),
]


@pytest.mark.parametrize("name,args", OPCHECK, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPCHECK)])
def test_torch_ops_opcheck(name, args):
    import npu.torch_ops  # noqa: F401  (registers torch.ops.mmv.*)

    op = getattr(torch.ops.mmv, name).default
    result = torch.library.opcheck(op, args())
    assert result and all(v == "SUCCESS" for v in result.values()), result


def test_torch_ops_values():
    import npu.torch_ops  # noqa: F401

    x = torch.tensor([1, 2, 3, 4], dtype=torch.int8)
    f = torch.tensor([1, 0, 1, 0], dtype=torch.uint8)
    assert torch.ops.mmv.scan(x).tolist() == [1, 3, 6, 10]
    assert torch.ops.mmv.scan(x).dtype == torch.int32
    assert torch.ops.mmv.segmented_sum(x, f).tolist() == [3, 7]
    assert torch.ops.mmv.segment_sum_csr(x, torch.tensor([0, 0, 4])).tolist() == [0, 10]
    assert torch.ops.mmv.compress(x, f).tolist() == [1, 3]
