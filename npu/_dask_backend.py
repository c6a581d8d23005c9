"""DaskBackend: ``mmvref.dask`` behind the backend protocol (numpy in, numpy out), so that the
conformance suite checks the Dask ops like any backend. Its regimes are its chunk sizes."""
from __future__ import annotations

import numpy as np

from mmvref.registry import REGISTRY

__all__ = ["DaskBackend", "chunking"]

#: the chunk sizes each input starts with, in this order (0: an empty chunk; 1: a chunk of one
#: element), before the rest of it is cut into the same sizes, scaled so that an input has at most
#: ``max_chunks`` chunks
PATTERN = (1, 0, 2, 3, 7, 1, 64, 0, 4096)


def chunking(n, pattern=PATTERN, max_chunks=48):
    """Chunk sizes summing to ``n``: ``pattern`` once (each size clipped to what is left), then the
    pattern's non-zero sizes cycled, times the smallest integer factor that keeps the count within
    ``max_chunks``. Deterministic, so a failing example replays with the same chunks."""
    sizes, rest = [], int(n)
    for p in pattern:
        take = min(p, rest)
        sizes.append(take)
        rest -= take
    cyc = [p for p in pattern if p] or [1]
    if rest:
        left = max(1, max_chunks - len(sizes))
        scale = max(1, -(-rest // (left * (sum(cyc) // len(cyc) or 1))))
        i = 0
        while rest:
            take = min(cyc[i % len(cyc)] * scale, rest)
            sizes.append(take)
            rest -= take
            i += 1
    return tuple(sizes)


class DaskBackend:
    """The registry ops that have a Dask form (``OpSpec.dask_ref``), each input cut into the chunks of
    ``chunking(n, pattern, max_chunks)`` and computed on ``scheduler`` ("sync" by default; "threads",
    "processes", or a ``distributed.Client`` address). The carries between chunks, the counting passes
    and the overflow verdicts across chunk borders are what it checks."""

    name = "dask"
    overflow = "raise"

    def __init__(self, pattern=PATTERN, max_chunks=48, scheduler="sync"):
        import dask  # noqa: F401  (fails here, with its message, without the [dask] extra)

        self.pattern, self.max_chunks, self.scheduler = tuple(int(p) for p in pattern), int(max_chunks), scheduler

    def regimes(self):
        """Lengths at the chunk sizes' seams: every pattern size of 2 or more is a tile, and 1 or 2 as
        lanes (inputs that end inside the first chunks)."""
        return {"tiles": tuple(sorted({p for p in self.pattern if p >= 2})) or (2,), "lanes": (1, 2),
                "cores": (len(self.pattern), self.max_chunks)}

    def error_model(self, op):
        """The single-machine op's model: every output still sums its own terms only (a carry holds
        earlier terms of the same segment or row)."""
        return REGISTRY[op].fast_float_model

    # ------------------------------------------------------------------ the ops
    def _arr(self, a, axis_sizes=None):
        import dask.array as da

        a = np.asarray(a)
        chunks = axis_sizes or tuple(chunking(s, self.pattern, self.max_chunks) for s in a.shape)
        return da.from_array(a, chunks=chunks)

    def _compute(self, op, *args, **kw):
        import dask

        with dask.config.set(scheduler=self.scheduler):
            return REGISTRY[op].dask(*args, **kw).compute()

    def scan(self, x, **kw):
        return self._compute("scan", self._arr(x), **kw)

    def segmented_scan(self, x, flags, **kw):
        return self._compute("segmented_scan", self._arr(x), self._arr(flags), **kw)

    def segmented_sum(self, x, flags, **kw):
        return self._compute("segmented_sum", self._arr(x), self._arr(flags), **kw)

    def segment_sum_csr(self, x, indptr, **kw):
        return self._compute("segment_sum_csr", self._arr(x), np.asarray(indptr), **kw)

    def compress(self, x, mask):
        return self._compute("compress", self._arr(x), self._arr(mask))

    def batched_scan(self, x, **kw):
        return self._compute("batched_scan", self._arr(x), **kw)

    def spmv(self, A, x, **kw):
        m = A[3][0] if isinstance(A, tuple) else A.shape[0]
        return self._compute("spmv", A, self._arr(x), row_chunks=chunking(m, self.pattern, self.max_chunks), **kw)

    def __repr__(self):
        return f"DaskBackend(pattern={self.pattern}, max_chunks={self.max_chunks}, scheduler={self.scheduler!r})"
