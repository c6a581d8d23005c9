"""Sparse products: ``spmv``, ``spmm``, ``spgemm`` (boundary ``ops``), and ``prepare`` /
``PreparedMatrix`` (boundary ``prepared``: a matrix prepared once for many products); kernels by
target: ``_portable_spmv``, ``_avx2`` (its AVX2 gathers), ``_portable_spmm``, ``_portable_spgemm``)."""
from .ops import spgemm, spmm, spmv  # noqa: F401
from .prepared import PreparedMatrix, prepare  # noqa: F401
