"""TcuscanBackend and the triangular-inverse kernels (torch_linalg.h): none is wrapped.

The inverse of a triangular matrix is no MMV-RAM op of the registry (mmvref/registry.py) nor a
conformance stage (conformance/stages.py), so there is no backend method for these kernels to
implement; they are reachable on the kernel module (``TcuscanBackend.module``) and checked against
upstream's own references in tests/upstream/test_upstream_tri_inv_*.py and
test_upstream_triu_inv_rec_unroll.py.
"""
from __future__ import annotations

WRAPS: dict[str, str] = {}

_WHY = "a triangular matrix inverse is not an op of the registry nor a conformance stage"
NOT_WRAPPED = {
    "run_tri_inv_col_sweep": _WHY,
    "run_tri_inv_cube_col_sweep": _WHY,
    "run_triu_inv_rec_unroll": _WHY,
}
