"""The scan family of the Ascend scan paper: ``batched_scan``, ``split``, ``split_ind``,
``radix_sort``, ``argsort``, ``topk``, ``weighted_sample``, ``top_p_sample`` (boundary ``ops``;
kernels ``_portable``: plain loops, lowered for any target; rows are scanned by the segment
family's row kernels)."""
from .ops import (  # noqa: F401
    argsort,
    batched_scan,
    radix_sort,
    split,
    split_ind,
    top_p_sample,
    topk,
    weighted_sample,
)
