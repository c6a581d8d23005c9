"""The golden model: every algorithm composed only of ``mmvref.mmv``
instructions plus scalar control flow, stage by stage, as the papers list them.

Ops (validate, load words, run, finish to the project's result dtype):
``scan`` (Alg. 1), ``scd`` (Alg. 2), ``sscr`` (Alg. 3), ``compress``, ``compress_ind``,
``seg_scan`` (App. Alg. 1), ``int_mult`` (Lemma 4.4), ``mult`` (Cor. 4.5),
``matrix_product`` (Thm 4.6), ``spmv`` (App. Algs. 4-6), ``segment_sum_csr``
(App. Alg. 4 lines 3-5). From the Ascend scan paper (parallel-scan-ascend.txt):
``scan_u`` (Alg. 1 ScanU), ``scan_ul1`` (Alg. 2 ScanUL1), ``mc_scan`` (Alg. 3
MCScan), batched over rows and exclusive; ``split``, ``split_ind``,
``radix_sort``, ``argsort``, ``topk``, ``weighted_sample``, ``top_p_sample`` (§5).

Floats: the algorithms speculate across segment boundaries and subtract
(the paper's operators form a group), so an inf, a NaN or an overflow in one
segment spoils its neighbours (e.g. seg_scan of [inf, 1] with both flags set
gives [inf, nan]); the float results are meaningful for finite sums only.

Stages (machine words in, words out; see ``to_words``): ``scan_words``,
``compress_words``, ``compress_positions``, ``diff``, ``diff_mmu``, ``revert``, ``end_flags``,
``block_seg_scan``, ``recurse``, ``update_first_segment``, ``seg_scan_words``,
``revert_spec_simple``, ``revert_spec_vector``, ``mult_words``,
``csr_gather``, ``gather_spmv``, ``handle_leading_zeros``.
"""
from ._words import DEFAULT_S, finish, flag_words, to_words
from .arith import int_mult, matrix_product, mult, mult_words
from .ascend_scan import (
    block_scan,
    complete_rows,
    exclusive_shift,
    mc_scan,
    mc_scan_words,
    propagate,
    reduce_sum,
    reduce_tiles,
    row_scan,
    scan_u,
    scan_u_words,
    scan_ul1,
    scan_ul1_words,
    tile_scan_ul1,
)
from .scan import scan, scan_words
from .scan_operators import (
    argsort,
    inverse_transform,
    radix_pass,
    radix_sort,
    select_smallest,
    split,
    split_ind,
    split_positions,
    top_p_sample,
    topk,
    weighted_sample,
)
from .segment_nd import gather_csr, scatter, segment_coo, segment_csr
from .segmented import (
    compress,
    compress_ind,
    compress_positions,
    compress_words,
    diff,
    diff_mmu,
    end_flags,
    revert,
    scd,
    sscr,
)
from .segscan import (
    block_seg_scan,
    recurse,
    revert_spec_simple,
    revert_spec_vector,
    seg_scan,
    seg_scan_words,
    update_first_segment,
)
from .spgemm import ISM_POLICIES, spgemm_esc, spgemm_gustavson, spgemm_ism
from .spmm import column_segment_sums, gather_rows, spmm, spmm_tca, tca_fragment_product, tca_warps
from .spmv import csr_gather, gather_spmv, handle_leading_zeros, segment_sum_csr, spmv

# Segmented sum: SCD is the paper's segmented-sum algorithm (Alg. 2).
segmented_sum = scd

__all__ = [
    "DEFAULT_S", "to_words", "flag_words", "finish",
    "scan", "scan_words", "scd", "sscr", "segmented_sum", "compress", "compress_ind", "compress_words",
    "compress_positions", "diff", "diff_mmu",
    "revert", "end_flags", "seg_scan", "seg_scan_words", "block_seg_scan", "recurse",
    "update_first_segment", "revert_spec_simple", "revert_spec_vector", "int_mult", "mult", "mult_words",
    "matrix_product", "spmv", "segment_sum_csr", "csr_gather", "gather_spmv", "handle_leading_zeros",
    # parallel-scan-ascend §4-§5
    "scan_u", "scan_ul1", "mc_scan", "scan_u_words", "scan_ul1_words", "mc_scan_words", "row_scan",
    "propagate", "tile_scan_ul1", "block_scan", "reduce_sum", "reduce_tiles", "complete_rows", "exclusive_shift",
    "split", "split_ind", "radix_sort", "argsort", "topk", "weighted_sample", "top_p_sample",
    "split_positions", "radix_pass", "select_smallest", "inverse_transform",
    # SpMM / SpGEMM (tca-spmm-tensor-cores, sparse-workspaces-compilation)
    "spmm", "spmm_tca", "gather_rows", "column_segment_sums", "tca_warps", "tca_fragment_product",
    "spgemm_esc", "spgemm_gustavson", "spgemm_ism", "ISM_POLICIES",
    # N-d segment reductions (sum / mean)
    "segment_csr", "segment_coo", "scatter", "gather_csr",
]
