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

OPS = ["scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "compress", "split", "split_ind",
       "radix_sort", "argsort", "spmv", "spmm", "topk"]


@pytest.mark.parametrize("op", OPS)
@given(data=st.data(), s=st.sampled_from([32, 64]))
def test_every_op_equals_the_golden_model(op, data, s):
    """Inputs from the conformance strategies (empty segments and rows, n not a
    multiple of s, n < s, all/no flags), restricted to the dtypes each kernel takes."""
    backend = CpuTcuscanBackend(s=s)
    args, kwargs = data.draw(strategies.op_inputs(op, s, backend.dtypes(op)))
    if op in ("radix_sort", "argsort"):
        kwargs = {}
        x = args[0]
        if x.dtype == np.float16:
            args = (np.where(np.isnan(x), np.float16(0), x),)
    assert runner.one_example(backend, op, args, kwargs, s=s) is None


@pytest.mark.parametrize("variant", ["single_core", "multi_core", "multi_cube"])
@given(n=st.sampled_from([0, 1, 31, 32, 33, 1023, 1024, 1025, 5000]), seed=st.integers(0, 2**32 - 1),
       exclusive=st.booleans())
def test_scan_variants(variant, n, seed, exclusive):
    backend = CpuTcuscanBackend(s=32, variant=variant)
    x = np.random.default_rng(seed).integers(-128, 128, n).astype(np.int8)
    expected = golden.scan(x, 32, exclusive=exclusive)
    got = backend.scan(x, exclusive=exclusive)
    assert got.dtype == np.int32 and np.array_equal(got, expected)


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
    x = np.random.default_rng(1).integers(-128, 128, 1000).astype(np.int8)
    assert np.array_equal(b.row_scan(x), golden.row_scan(x.astype(np.int64), 32))
    w = x.astype(np.int64)
    assert np.array_equal(b.block_scan(x), golden.block_scan(w, 32))
    for blocks in (1, 3, 20):
        r = golden.reduce_tiles(w, 32, blocks)
        assert np.array_equal(b.reduce_tiles(x, blocks), r)
        y = golden.row_scan(w, 32)
        assert np.array_equal(b.complete_rows(y, r, blocks), golden.complete_rows(y, r, 32, blocks))
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
        b.compress(np.ones(4, np.float32), np.ones(4, np.uint8))
    with pytest.raises(NotImplementedError, match="ascending"):
        b.radix_sort(np.ones(4, np.int16), descending=True)
    with pytest.raises(ValueError, match="16, 32, 64 or 128"):
        npu.TcuscanBackend(module=fake_tcuscan_ops(), device="cpu", s=8)


def test_topk_pads_to_whole_tiles_and_keeps_real_positions():
    b = CpuTcuscanBackend(s=32)
    x = np.full(10, np.iinfo(np.int16).min, np.int16)  # every value ties with the padding
    x[3] = 7
    v, i = b.topk(x, 4)
    assert v.tolist() == [7] + [int(np.iinfo(np.int16).min)] * 3
    assert i[0] == 3 and len(set(i.tolist())) == 4 and (i < 10).all()
    with pytest.raises(NotImplementedError, match="largest"):
        b.topk(x, 2, largest=False)


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
    assert k.run_row_scan(torch.ones(5, dtype=torch.int8), 32).numel() == 32  # padded to a whole tile
    big = torch.tensor([100, 100], dtype=torch.int16)
    assert k.run_spmv(big, torch.tensor([0, 1], dtype=torch.uint32), torch.tensor([0], dtype=torch.int32),
                      big, 32).tolist() != [10000]  # int16 products narrowed to int8
    with pytest.raises(TypeError, match="run_compress"):
        k.run_compress(torch.ones(3, dtype=torch.float16), torch.ones(3, dtype=torch.bool), 32)


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
