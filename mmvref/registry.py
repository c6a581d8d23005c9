"""The op registry: every op declared once.

An :class:`OpSpec` names the op, its signature, the value dtypes it accepts
with the result dtype of each, its golden function (``mmvref.golden``), its
fast function (the public CPU op, or None when the op is golden-only), the
bit bound of its intermediates (``mmvref.bounds``) and its error model.
``npu`` backends implement these names; ``conformance`` attaches a strategy
and a comparator to each name; benchmarks and docs read the same entries.

Functions are referenced as "module:attribute" strings and resolved on first
use, so reading the registry imports nothing heavy.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ._dtypes import VALUE_DTYPES, result_dtype

__all__ = ["OpSpec", "REGISTRY", "get", "names"]

#: accepted value dtype -> result dtype, the project rule (DEVELOPERS.md)
VALUE_RULE = MappingProxyType({d: result_dtype(d) for d in VALUE_DTYPES})
INT_RULE = MappingProxyType({d: r for d, r in VALUE_RULE.items() if d.kind == "i"})
KEEP_DTYPE = MappingProxyType({d: d for d in VALUE_DTYPES})
TO_INDEX = MappingProxyType({d: np.dtype(np.int64) for d in VALUE_DTYPES})
FLOAT_TO_INDEX = MappingProxyType({d: np.dtype(np.int64) for d in VALUE_DTYPES if d.kind == "f"})

#: error models, by name
EXACT_INT = "integers exact (bit-identical); floats: see the op's float bound"
ORDERED_FP = ("integers exact; floats accumulated in the result dtype, in index order within "
              "chunks; |err_i| <= (len_i + chunks) * u * sum_{j in segment, j<=i} |x_j|")
PREFIX_DIFF_FP = ("integers exact; floats: golden = differences of global prefix sums, "
                  "|err_i| <= 2 * n * u * sum_{j<=end_i} |x_j| (scales with the prefix, not the row); "
                  "fast = each segment/row accumulated on its own, |err_i| <= (len_i + chunks) * u * "
                  "sum_{j in segment i} |x_j|")
SPMV_FP = ("integers exact; floats: golden = differences of global prefix sums of the products "
           "(App. Alg. 4), |err_i| <= 2 * nnz * u * sum_{k<=end_i} |a_k x_col(k)|; fast = per row, "
           "|err_i| <= gamma_{len_i} * sum_j |a_ij x_j|, gamma_k = k u / (1 - k u)")
COPY = "exact copy (values are moved, never combined)"
ROW_FP = ("integers exact; floats: fast = each row accumulated in index order, |err_i| <= i u sum_{j<=i} |x_j|; "
          "golden = ScanU tile scans plus carries, |err_i| <= (s + i/s) u sum_{j<=i} |x_j|")
SEGMENT_ND_FP = ("integers exact (an int64 mean too: it always fits, so a wrapped sum is redone exactly); "
                 "floats: fast = each (segment, feature) reduced in position order in the result "
                 "dtype (one column: 8 positions a vector step, lanes then a tree), |err| <= (len + parts) u "
                 "sum|x| for sum/mean (parts: pieces of a segment split among "
                 "threads, or of scatter's private copies), min/max exact (an element), prod |rel err| <= len u; "
                 "golden (sum/mean only) = prefix differences over every column laid end to end, as spmv")
SAMPLE_FP = ("an index, compared exactly; integer weights exact; float weights: the fast op's float64 sums are "
             "sequential (bit-equal to np.cumsum), the golden op's are blocked (MCScan), and the two can differ "
             "only where u*sum lies within 2 n u64 sum|w| of a cumulative sum (DEVELOPERS.md)")


def _resolve(ref):
    if ref is None or callable(ref):
        return ref
    mod, _, attr = ref.partition(":")
    return getattr(importlib.import_module(mod), attr)


@dataclass(frozen=True)
class OpSpec:
    name: str
    signature: str
    dtypes: "MappingProxyType[np.dtype, np.dtype]"
    golden_ref: str
    fast_ref: str | None
    bound_ref: str
    error_model: str
    paper: str
    variants: tuple = ()  # other golden algorithms computing the same op
    #: the fast function's float error model, by name (conformance.compare.ERROR_MODELS): "sequential",
    #: each output summed from its own terms only; the golden functions are all "prefix" (speculative
    #: prefix differences; error_model above says which magnitude)
    fast_float_model: str = "sequential"
    #: the op on dask arrays (``mmvref.dask``, the ``[dask]`` extra), or None
    dask_ref: str | None = None

    @property
    def golden(self):
        return _resolve(self.golden_ref)

    @property
    def fast(self):
        return _resolve(self.fast_ref)

    @property
    def dask(self):
        return _resolve(self.dask_ref)

    @property
    def bound(self):
        return _resolve(self.bound_ref)

    @property
    def golden_variants(self):
        return tuple(_resolve(v) for v in self.variants)

    def result_dtype(self, dtype) -> np.dtype:
        dtype = np.dtype(dtype)
        try:
            return self.dtypes[dtype]
        except KeyError:
            raise TypeError(f"{self.name} does not accept dtype {dtype}; accepted: "
                            + ", ".join(map(str, self.dtypes))) from None


_G = "mmvref.golden:"
_F = "mmvref._fast.segment.ops:"
_C = "mmvref._fast.compress.ops:"
_B = "mmvref.bounds:"
_S = "mmvref._fast.scanfamily.ops:"
_R = "mmvref._fast.segment.ops:"
_D = "mmvref.dask:"

_SPECS = (
    OpSpec("scan", "scan(x, *, exclusive=False, dtype=None, overflow='raise') -> z, z[i] = sum(x[:i+1])",
           VALUE_RULE, _G + "scan", _F + "scan", _B + "scan", ORDERED_FP, "Alg. 1 (Thm 4.1)",
           variants=(_G + "scan_u", _G + "scan_ul1", _G + "mc_scan"), dask_ref=_D + "scan"),
    OpSpec("segmented_scan",
           "segmented_scan(x, flags, *, exclusive=False, dtype=None, overflow='raise') -> z (Problem 2.1)",
           VALUE_RULE, _G + "seg_scan", _F + "segmented_scan", _B + "seg_scan", ORDERED_FP,
           "App. A.2 Alg. 1 (Thm 4.3)", variants=(_G + "sscr",), dask_ref=_D + "segmented_scan"),
    OpSpec("segmented_sum", "segmented_sum(x, flags, *, dtype=None, overflow='raise') -> one sum per segment",
           VALUE_RULE, _G + "scd", _F + "segmented_sum", _B + "scd", PREFIX_DIFF_FP, "Alg. 2 SCD (Thm 4.2)",
           dask_ref=_D + "segmented_sum"),
    OpSpec("segment_sum_csr",
           "segment_sum_csr(x, indptr, *, dtype=None, overflow='raise') -> sums of x[indptr[r]:indptr[r+1]]",
           VALUE_RULE, _G + "segment_sum_csr", _F + "segment_sum_csr", _B + "scd", PREFIX_DIFF_FP,
           "App. A.3.3 Alg. 4 lines 3-5", dask_ref=_D + "segment_sum_csr"),
    # N-d segment reductions (issue 17): any rank, reduced along ``axis``; golden = sum/mean
    OpSpec("segment_csr",
           "segment_csr(src, indptr, *, axis=0, reduce='sum', return_arg=False, dtype=None, overflow='raise', "
           "out=None) -> src reduced along axis over indptr[n]:indptr[n+1] (sum/mean/min/max/prod)",
           VALUE_RULE, _G + "segment_csr", _R + "segment_csr", _B + "scd", SEGMENT_ND_FP,
           "App. A.3.3 Alg. 4 lines 3-5, every column at once (as SpMM)"),
    OpSpec("segment_coo",
           "segment_coo(src, index, *, axis=0, dim_size=None, reduce='sum', return_arg=False, dtype=None, "
           "overflow='raise', out=None) -> src reduced along axis by a sorted segment id per position",
           VALUE_RULE, _G + "segment_coo", _R + "segment_coo", _B + "scd", SEGMENT_ND_FP,
           "offsets from the sorted ids, then segment_csr"),
    OpSpec("scatter",
           "scatter(src, index, *, axis=0, dim_size=None, reduce='sum', return_arg=False, dtype=None, "
           "overflow='raise', out=None) -> src reduced along axis by a segment id per position, any order",
           VALUE_RULE, _G + "scatter", _R + "scatter", _B + "scd", SEGMENT_ND_FP,
           "Ascend §5 radix sort of the ids (stable), GATHER, then segment_csr"),
    OpSpec("gather_csr", "gather_csr(src, indptr, *, axis=0, out=None) -> src[n] repeated over indptr[n]:indptr[n+1]",
           KEEP_DTYPE, _G + "gather_csr", _R + "gather_csr", _B + "compress", COPY,
           "Alg. 1 scan of the segment starts, then GATHER (segment_csr's sum backward)"),
    OpSpec("compress", "compress(x, mask) -> x[mask == 1]", KEEP_DTYPE, _G + "compress", _C + "compress",
           _B + "compress", COPY, "§2 COMPRESS (Thm 4.2 proof)", dask_ref=_D + "compress"),
    OpSpec("compress_ind", "compress_ind(x, mask) -> (x[mask == 1], their indices int64)", KEEP_DTYPE,
           _G + "compress_ind", _C + "compress_ind", _B + "compress", COPY,
           "§2 COMPRESS (Thm 4.2 proof) on values and positions; Ascend §5 Compress"),
    OpSpec("spmv", "spmv(A, x) -> A @ x for CSR A; empty rows give 0", VALUE_RULE, _G + "spmv",
           "mmvref._fast.sparse.ops:spmv", _B + "spmv", SPMV_FP, "§4.3.3 Alg. 4; App. A.3.3 Algs. 4-6",
           dask_ref=_D + "spmv"),
    # parallel-scan-ascend.txt §4-§5; semantics in DEVELOPERS.md, "Scan-based operators"
    OpSpec("batched_scan",
           "batched_scan(x, *, exclusive=False, dtype=None, overflow='raise') -> each row of 2-D x scanned",
           VALUE_RULE, _G + "scan_u", _S + "batched_scan", _B + "scan", ROW_FP,
           "Ascend Algs. 1-2, §4.2 (batched)", variants=(_G + "scan_ul1", _G + "mc_scan"),
           dask_ref=_D + "batched_scan"),
    OpSpec("split", "split(x, mask) -> x[mask == 1] then x[mask == 0], stable", KEEP_DTYPE, _G + "split",
           _S + "split", _B + "compress", COPY, "Ascend §5 Split"),
    OpSpec("split_ind", "split_ind(x, mask) -> (split values, their indices int64)", KEEP_DTYPE,
           _G + "split_ind", _S + "split_ind", _B + "compress", COPY, "Ascend §5 SplitInd"),
    OpSpec("radix_sort", "radix_sort(x, *, descending=False) -> (values, indices int64), stable",
           KEEP_DTYPE, _G + "radix_sort", _S + "radix_sort", _B + "compress", COPY, "Ascend §5 Radix sort"),
    OpSpec("argsort", "argsort(x, *, descending=False) -> indices int64 of the stable sort", TO_INDEX,
           _G + "argsort", _S + "argsort", _B + "compress", COPY, "Ascend §5 Radix sort"),
    OpSpec("topk", "topk(x, k, *, largest=True) -> (values, indices int64), sorted", KEEP_DTYPE,
           _G + "topk", _S + "topk", _B + "compress", COPY, "Ascend §5 Top-k"),
    OpSpec("weighted_sample", "weighted_sample(w, u) -> int64 index, smallest i with cumsum(w)[i] > u*sum(w)",
           TO_INDEX, _G + "weighted_sample", _S + "weighted_sample", _B + "scan", SAMPLE_FP,
           "Ascend §5 Weighted sampling"),
    OpSpec("top_p_sample", "top_p_sample(probs, p, u) -> int64 token per row (Llama 3 sample_top_p, given u)",
           FLOAT_TO_INDEX, _G + "top_p_sample", _S + "top_p_sample", _B + "scan", SAMPLE_FP,
           "Ascend §5 Top-p sampling"),
    # tca-spmm-tensor-cores.txt / sparse-workspaces-compilation.txt (issue 7: golden and fast so far)
    OpSpec("spmm", "spmm(A, D) -> A @ D for CSR A and dense D (n x k); empty rows give 0", VALUE_RULE,
           _G + "spmm", "mmvref._fast.sparse.ops:spmm", _B + "spmv", SPMV_FP,
           "App. Alg. 4 over k columns; TCA-SpMM §4", variants=(_G + "spmm_tca",)),
    OpSpec("spgemm", "spgemm(A, B) -> A @ B, CSR, sorted indices, duplicates summed, exact zeros dropped",
           VALUE_RULE, _G + "spgemm_esc", "mmvref._fast.sparse.ops:spgemm", _B + "spmv", SPMV_FP,
           "ESC / Gustavson / Insert-Sort-Merge (sparse workspaces)",
           variants=(_G + "spgemm_gustavson", _G + "spgemm_ism")),
    OpSpec("mult", "mult(x, y) -> x * y element-wise (integers)", INT_RULE, _G + "mult", None, _B + "mult",
           EXACT_INT, "Cor. 4.5"),
    OpSpec("matrix_product", "matrix_product(A, B) -> A @ B (integers)", INT_RULE, _G + "matrix_product", None,
           _B + "matrix_product", EXACT_INT, "Thm 4.6"),
)

REGISTRY = MappingProxyType({spec.name: spec for spec in _SPECS})


def get(name: str) -> OpSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(REGISTRY)}") from None


def names(*, fast_only: bool = False):
    return [n for n, s in REGISTRY.items() if not fast_only or s.fast_ref is not None]
