"""mmvref on Dask: the segmented operations on ``dask.array`` inputs, for data beyond one machine's
memory or cores (``pip install mmvref[dask]``; with ``distributed`` for a cluster).

``scan``, ``segmented_scan``, ``segmented_sum``, ``segment_sum_csr``, ``compress``, ``spmv`` and
``batched_scan`` take dask arrays (numpy arrays become one chunk) and return lazy dask arrays; they run
on whatever scheduler is active (the threaded default, ``dask.config.set(scheduler="sync")``, or a
``distributed.Client``, e.g. ``Client("tcp://scheduler:8786")`` for an existing cluster).

Design (the MCScan structure of the Ascend scan paper, one level up): every chunk runs the
single-machine fast ops; between chunks only O(1) values per chunk travel, each chunk's carry
(whether it holds a segment start, and the exact sum of its open segment), combined by an exclusive
scan that is a tree of fan-in ``_graph.FANIN`` (32; ``_graph.carry_tree``), not a sequential loop. Integer carries are
Python ints, so integer results are exact and an overflow is decided on the true values across chunk
borders: OverflowError when the result is computed, or two's-complement wrap-around with
``overflow="wrap"``, exactly as the single-machine ops. Outputs whose length depends on the data
(``segmented_sum``, ``compress``) get their chunk sizes from one counting pass over the flags or mask,
run when the op is called, so downstream operations see known chunks. Float results: every output is
a sum of its own terms only (the "sequential" error model of ``conformance.compare``).

Semantics, dtypes and errors are those of the single-machine op of the same name (the registry entry).
"""
from __future__ import annotations

try:
    import dask.array  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("mmvref.dask needs dask[array]: pip install 'mmvref[dask]'") from exc

from ._compress import compress
from ._reduce import segment_sum_csr, segmented_sum
from ._scan import batched_scan, scan, segmented_scan
from ._spmv import spmv

__all__ = ["scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "compress", "spmv", "batched_scan"]
