"""Compress: ``compress``, ``compress_ind`` (boundary ``ops``; kernels ``_portable``)."""
from .ops import compress, compress_ind  # noqa: F401
