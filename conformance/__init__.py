"""Conformance suite: inputs through the golden model and any backend.

``python -m conformance --backend mmvref`` runs every registry op the backend
implements against ``mmvref.golden`` and exits 0 only when all conform.
"""
