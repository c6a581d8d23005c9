"""Sparse products: ``spmv``, ``spmm``, ``spgemm`` (boundary ``ops``; kernels by target:
``_portable_spmv``, ``_avx2`` (its AVX2 gathers), ``_portable_spmm``, ``_portable_spgemm``)."""
from .ops import spgemm, spmm, spmv  # noqa: F401
