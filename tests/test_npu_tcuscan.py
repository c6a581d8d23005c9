"""npu.TcuscanBackend on the CPU stand-in of the tcuscan kernels (npu.testing):
the translation layer against the golden model, the refusals, the kernels'
quirks as the stand-in reproduces them, and the behaviour without an NPU."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.native_only  # the golden model / stand-in: no kernel chosen by the compile target

torch = pytest.importorskip("torch")

import npu  # noqa: E402
from conformance import runner, strategies  # noqa: E402
from mmvref import golden  # noqa: E402
from npu.testing import GARBAGE, CpuTcuscanBackend, fake_tcuscan_ops  # noqa: E402

OPS = ["scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "compress", "compress_ind", "split", "split_ind",
       "radix_sort", "argsort", "spmv", "spmm", "topk"]


@pytest.mark.parametrize("op", OPS)
@given(data=st.data(), s=st.sampled_from([32, 64]))
def test_every_op_equals_the_golden_model(op, data, s):
    """Inputs from the conformance strategies (empty segments and rows, n not a
    multiple of s, n < s, all/no flags), restricted to the dtypes each kernel takes."""
    backend = CpuTcuscanBackend(s=s)
    args, kwargs = data.draw(strategies.op_inputs(op, s, backend.dtypes(op)))
    if op in ("radix_sort", "argsort"):
        kwargs = {}  # the kernel sorts ascending only (descending: NotImplementedError, tested below)
    assert runner.one_example(backend, op, args, kwargs, s=s) is None


@pytest.mark.parametrize("variant", ["single_core", "multi_core", "multi_core_no_l2", "multi_cube"])
@given(n=st.sampled_from([0, 1, 31, 32, 33, 1023, 1024, 1025, 5000]), seed=st.integers(0, 2**32 - 1),
       exclusive=st.booleans())
def test_scan_variants(variant, n, seed, exclusive):
    backend = CpuTcuscanBackend(s=32)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, n).astype(np.int8)
    if variant == "multi_cube":  # the fp16 kernel only: int8 would come back uninitialised
        with pytest.raises(TypeError, match="run_scan_multi_cube"):
            backend.scan(x, variant=variant)
    else:
        got = backend.scan(x, exclusive=exclusive, variant=variant)
        oracle = np.cumsum(x.astype(np.int64))
        oracle = np.concatenate([[0], oracle[:-1]]) if exclusive and n else oracle
        assert got.dtype == np.int32 and np.array_equal(got, oracle)
    h = (rng.integers(-64, 64, n) / 8).astype(np.float16)  # sums exact in fp32
    got = backend.scan(h, variant=variant)
    assert got.dtype == np.float32 and np.array_equal(got, np.cumsum(h.astype(np.float64)))


def test_batched_scan_rows():
    b = CpuTcuscanBackend(s=32)
    x = (np.random.default_rng(5).integers(-64, 64, (5, 77)) / 4).astype(np.float32)
    assert np.array_equal(b.batched_scan(x), np.cumsum(x.astype(np.float64), axis=1))
    ex = b.batched_scan(x, exclusive=True)
    assert (ex[:, 0] == 0).all() and np.array_equal(ex[:, 1:], np.cumsum(x.astype(np.float64), axis=1)[:, :-1])
    with pytest.raises(TypeError, match="run_scan_batch"):
        b.batched_scan(x.astype(np.int32))


@pytest.mark.parametrize("variant", ["single_core", "multi_core", "multi_cube"])
def test_segment_sum_csr_variants(variant):
    b = CpuTcuscanBackend(s=32, variant=variant)
    x = (np.random.default_rng(3).integers(-4, 5, 2000) / 4).astype(np.float16)
    ptr = np.array([0, 0, 5, 5, 1024, 1025, 2000, 2000])
    np.testing.assert_array_equal(b.segment_sum_csr(x, ptr), golden.segment_sum_csr(x, ptr, 32))
    if variant == "multi_cube":
        with pytest.raises(TypeError, match="run_seg_sum_multi_cube"):
            b.segment_sum_csr(np.ones(3, np.int8), [0, 3])


def test_stages_equal_golden_stages():
    b = CpuTcuscanBackend(s=32)
    x = (np.random.default_rng(1).integers(-128, 128, 1000) / 8).astype(np.float16)  # sums exact in fp32
    w = x.astype(np.float32)
    assert np.array_equal(b.row_scan(x), golden.row_scan(w, 32))
    assert np.array_equal(b.block_scan(x), golden.block_scan(w, 32))
    i8 = np.random.default_rng(1).integers(-128, 128, 1000).astype(np.int8)
    for blocks in (1, 3, 20, 40):
        r = golden.reduce_tiles(w, 32, blocks)
        assert np.array_equal(b.reduce_tiles(x, blocks), r)
        assert np.array_equal(b.reduce_tiles(i8, blocks), golden.reduce_tiles(i8.astype(np.int64), 32, blocks))
        y = golden.row_scan(w, 32)
        assert np.array_equal(b.complete_rows(y, r, blocks), golden.complete_rows(y, r, 32, blocks))
    for name, bad in (("run_row_scan", i8), ("run_block_scan", i8)):
        with pytest.raises(TypeError, match=name):
            getattr(b, name[4:])(bad)
    with pytest.raises(TypeError, match="run_complete_rows"):
        b.complete_rows(np.arange(64), np.zeros(2, np.int64), 2)
    z = np.cumsum(np.random.default_rng(2).random(50)).astype(np.float32)
    assert np.array_equal(b.diff(z), golden.diff(z))
    ptr = np.array([0, 0, 3, 3, 10, 50])
    assert np.array_equal(b.gather_spmv(z, ptr), golden.gather_spmv(z, ptr))
    with pytest.raises(TypeError, match="run_diff"):
        b.diff(np.arange(3))  # the kernel would read int64 words as fp32
    with pytest.raises(TypeError, match="run_spmv"):
        b.spmv((np.array([0, 1]), np.array([0]), np.array([1], np.int16), (1, 1)), np.array([1], np.int16))


def test_refusals_name_the_kernel():
    b = CpuTcuscanBackend(s=32)
    with pytest.raises(TypeError, match="run_scan_multi_core"):
        b.scan(np.ones(10, np.float32))  # the kernel would route fp32 to its int8 kernel
    with pytest.raises(TypeError, match="run_scan_single_core"):
        b.scan(np.ones(10, np.int32), variant="single_core")
    with pytest.raises(TypeError, match="run_seg_sum"):
        b.segmented_sum(np.ones(4, np.int8), np.array([1, 0, 1, 0], np.uint8))
    with pytest.raises(TypeError, match="run_compress"):
        b.compress(np.ones(4, np.int8), np.ones(4, np.uint8))  # a 1-byte dtype would be read out of bounds
    with pytest.raises(NotImplementedError, match="ascending"):
        b.radix_sort(np.ones(4, np.int16), descending=True)
    with pytest.raises(ValueError, match="16, 32, 64 or 128"):
        npu.TcuscanBackend(module=fake_tcuscan_ops(), device="cpu", s=8)


def test_topk_keeps_real_positions_among_ties():
    b = CpuTcuscanBackend(s=32)
    x = np.full(10, np.iinfo(np.int16).min, np.int16)  # every value but one ties
    x[3] = 7
    v, i = b.topk(x, 4)
    assert v.tolist() == [7] + [int(np.iinfo(np.int16).min)] * 3
    assert i[0] == 3 and len(set(i.tolist())) == 4 and (i < 10).all()
    with pytest.raises(NotImplementedError, match="largest"):
        b.topk(x, 2, largest=False)
    h = np.array([0.5, -0.0, 2.0, 0.0, 2.0, -1.0], np.float16)
    v, i = b.topk(h, 4)  # run_topk_fp16: values largest first, ties by lower index
    assert v.tolist() == [2.0, 2.0, 0.5, 0.0] and i[:3].tolist() == [2, 4, 0] and i[3] in (1, 3)
    assert np.array_equal(h[i].view(np.uint16), v.view(np.uint16))
    for bad in (np.inf, np.nan):
        with pytest.raises(NotImplementedError, match="run_topk_fp16"):
            b.topk(np.array([1.0, bad], np.float16), 1)


def test_radix_sort_pads_irregular_lengths_and_takes_the_project_s_order():
    """The kernel needs whole S^2 tiles (upstream ISSUE-52) and orders fp16 by bit pattern (-0.0 before
    +0.0, negative NaN first); the backend pads and sorts a canonical copy, so its result is the project's
    order (numpy's stable sort: -0.0 == +0.0 in input order, every NaN last) with values bit for bit."""
    ops = fake_tcuscan_ops()
    with pytest.raises(ValueError, match="multiple of S\\^2"):
        ops.run_radix_sort(torch.ones(1000, dtype=torch.int16), 32)
    keys = torch.tensor([0.0, -0.0, 1.0, -np.nan, np.nan, -np.inf] * 512, dtype=torch.float16)
    v, _ = ops.run_radix_sort(keys, 32)  # the kernel's own order
    bits = v.view(torch.int16).tolist()
    assert bits[0] < 0 and v[512] == -np.inf and v[1024].item() == 0.0 and bits[1024] == -32768
    assert bits[1536] == 0 and torch.isnan(v[-1])
    b = CpuTcuscanBackend(s=32)
    rng = np.random.default_rng(5)
    for n in (1, 5, 1023, 1025, 3000):
        x = rng.choice(np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan], np.float16), n)
        x[rng.random(n) < 0.1] = np.float16(-np.nan)
        v, i = b.radix_sort(x)
        order = np.argsort(x, kind="stable")
        assert np.array_equal(i, order) and np.array_equal(v.view(np.uint16), x[order].view(np.uint16))
        y = rng.integers(-2**15, 2**15, n).astype(np.int16)
        y[rng.random(n) < 0.2] = np.iinfo(np.int16).max  # ties with the padding
        assert np.array_equal(b.argsort(y), np.argsort(y, kind="stable"))


def test_constants_cached_per_s_dtype_device():
    b = CpuTcuscanBackend(s=64)
    u1, lo1 = b._constants(64, torch.int8)
    u2, _ = b._constants(64, torch.int8)
    assert u1 is u2 and u1.shape == (64, 64) and int(lo1.sum()) == 64 * 63 // 2


def test_stand_in_reproduces_the_kernel_quirks():
    k = fake_tcuscan_ops()
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float16)
    starts = torch.tensor([1, 0, 1, 0], dtype=torch.int8)
    ends = torch.tensor([0, 1, 0, 1], dtype=torch.int8)
    assert k.run_seg_sum(x, ends, 32).tolist() == [3.0, 7.0]  # END flags give the segment sums
    assert k.run_seg_sum(x, starts, 32).tolist() != [3.0, 7.0]  # START flags (the docstring) do not
    f32 = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float32)
    assert k.run_scan_multi_core(f32, 32).tolist() != [1.0, 3.0, 6.0]  # fp32 silently wrong
    assert k.run_scan_single_core(torch.ones(3, dtype=torch.int32), 32).tolist() == [GARBAGE] * 3
    assert k.run_row_scan(torch.ones(5, 32, dtype=torch.float16), 32).tolist()[31::32] == [32.0] * 5  # (rows, S)
    assert k.run_row_scan(torch.ones(5, 32, dtype=torch.int8), 32).tolist() == [GARBAGE] * 160  # fp16 only
    with pytest.raises(ValueError, match="out of bounds|reads"):
        k.run_row_scan(torch.ones(5, dtype=torch.float16), 32)  # 1-D: the kernel would read 5 * 32 elements
    assert k.run_scan_cpu(torch.ones(4, dtype=torch.int16)).tolist() == [1, 1, 1, 1]  # cast, never scanned
    big = torch.tensor([100], dtype=torch.int16)
    assert k.run_spmv(big, torch.tensor([0, 1], dtype=torch.uint32), torch.tensor([0], dtype=torch.int32),
                      big, 32).tolist() != [10000]  # int16 products narrowed to int8
    with pytest.raises(TypeError, match="run_compress"):
        k.run_compress(torch.ones(3, dtype=torch.float16), torch.ones(3, dtype=torch.bool), 32)


def test_fp16_spmv_products_are_rounded_and_the_error_model_says_so():
    """Four products rounded to fp16 leave the row 2.3e-5 off the exact sum (found by Hypothesis):
    beyond the plain prefix bound, within the declared model (one fp16 rounding per product)."""
    b = CpuTcuscanBackend(s=32)
    data = np.array([0.1257, -0.1321, 0.6406, 0.1049], np.float16)
    A = (np.array([0, 4]), np.zeros(4, np.int32), data, (1, 1))
    x = np.array([0.1257], np.float16)
    got = b.spmv(A, x)
    exact = float((data.astype(np.float64) * float(x[0])).sum())
    assert got.dtype == np.float32 and abs(float(got[0]) - exact) > 1e-5  # the fp16 rounding shows
    assert b.error_model("spmv") == b.error_model("spmm") == "prefix_input_products"
    assert runner.one_example(b, "spmv", (A, x), {}, s=32) is None

    class PlainPrefix(CpuTcuscanBackend):
        def error_model(self, op):
            return "prefix"

    assert "error model prefix" in runner.one_example(PlainPrefix(s=32), "spmv", (A, x), {}, s=32)


def test_fp16_products_beyond_fp16_are_refused():
    b = CpuTcuscanBackend(s=32)
    A = (np.array([0, 2]), np.array([0, 1], np.int32), np.array([300, 1], np.float16), (1, 2))
    with pytest.raises(NotImplementedError, match="65504"):
        b.spmv(A, np.array([300, 1], np.float16))
    with pytest.raises(NotImplementedError, match="65504"):
        b.spmm(A, np.array([[1, 300], [1, 1]], np.float16))
    assert b.spmv(A, np.array([1, 300], np.float16)).tolist() == [600.0]  # 300*1 + 1*300 fits


def test_a_translation_bug_is_caught():
    """A wrapper that forgets the start -> end flag conversion fails conformance."""

    class Buggy(CpuTcuscanBackend):
        def segmented_sum(self, x, flags):
            f = np.asarray(flags).astype(np.int8)
            return self._np(self.module.run_seg_sum(self._t(x), self._t(f), self.s))

    rep = runner.run_op(Buggy(s=32), "buggy", "segmented_sum", s=32, max_examples=30, derandomize=True, db=None)
    assert rep.status == "fail" and rep.counterexample


def test_without_an_npu_the_backend_says_what_is_missing():
    assert not npu.is_available()
    with pytest.raises(npu.NpuUnavailableError) as err:
        npu.TcuscanBackend()
    msg = str(err.value)
    assert "torch_npu" in msg and "CANN" in msg and "module=" in msg and "pytorch-tcuscan" in msg
