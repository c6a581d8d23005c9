"""mmvref: segmented operations with matrix-multiply units.

Fast CPU ops (numpy in, numpy out; torch CPU tensors in, torch out):
``scan``, ``segmented_scan``, ``segmented_sum``, ``segment_sum_csr``,
``compress``, ``compress_ind``, ``spmv``; and the scan-based operators of the Ascend scan paper
``batched_scan``, ``split``, ``split_ind``, ``radix_sort``, ``argsort``,
``topk``, ``weighted_sample``, ``top_p_sample`` (semantics: DEVELOPERS.md);
``spmm`` and ``spgemm`` (sparse x dense, sparse x sparse).

Golden model of the MMV-RAM algorithms, stage by stage: ``mmvref.golden``,
built from the instructions of ``mmvref.mmv``; bit bounds in ``mmvref.bounds``;
every op declared once in ``mmvref.registry``.

``mmvref.show_config()`` (or ``python -m mmvref --info``) prints what a bug
report needs: versions, the CPU and the target Numba compiles for, the kernel
path of each op family, threading and the cache directory.
"""
from . import _threading, bounds, golden, mmv, registry  # noqa: F401  (_threading first: the layer policy)
from . import _compile_gc  # noqa: F401  (the collector paused while mmvref's kernels compile)
from . import _compile_thread  # noqa: F401  (mmvref's kernels compile on a thread with a fresh stack)
from ._config import show_config
from ._fast import _target
from ._fast.scanfamily import (
    argsort,
    batched_scan,
    radix_sort,
    split,
    split_ind,
    top_p_sample,
    topk,
    weighted_sample,
)
from ._fast.compress import compress, compress_ind
from ._fast.segment import (
    gather_csr,
    scan,
    scatter,
    segment_coo,
    segment_csr,
    segment_sum_csr,
    segmented_scan,
    segmented_sum,
)
from ._fast.sparse import PreparedMatrix, prepare, spgemm, spmm, spmv
from ._version import __version__
from .registry import REGISTRY

_target.level()  # a bad MMVREF_SIMD fails here, at import, with the reason


__all__ = [
    "scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "segment_csr", "segment_coo", "scatter",
    "gather_csr", "compress", "compress_ind", "spmv",
    "batched_scan", "split", "split_ind", "radix_sort", "argsort", "topk", "weighted_sample", "top_p_sample",
    "spmm", "spgemm", "prepare", "PreparedMatrix",
    "golden", "mmv", "bounds", "registry", "REGISTRY", "show_config", "__version__",
]
