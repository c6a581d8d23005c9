"""compress on dask arrays: no carries at all, only the output chunk sizes, from one counting pass."""
from __future__ import annotations

import dask
import numpy as np

from .._fast.compress import ops as compress_ops
from . import _chunk as C
from . import _graph as G

__all__ = ["compress"]


def _count(m):
    m = np.asarray(m)
    C.check_flags(m, "mask")
    return np.array([np.count_nonzero(m)], np.int64)


def compress(x, mask):
    """The entries of a 1-D dask array where ``mask`` (bool / int8 / uint8 holding 0/1) is 1, in order,
    ``mmvref.compress`` per chunk. The call counts the mask's ones per chunk at once (one pass over the
    mask, which also checks it), so the lazy result has known chunks: chunk i holds x chunk i's
    survivors. The dtype of ``x`` is kept."""
    x = G.as_dask(x, "x", "compress")
    m = G.aligned(mask, x, "mask", "compress")
    nb = x.numblocks[0]
    name = G.token("compress", x, m)
    counts = G.new_array(name + "-count", {(name + "-count", i): (_count, (m.name, i)) for i in range(nb)}, [m],
                         ((1,) * nb,), np.int64)
    k = np.asarray(dask.compute(counts)[0], np.int64)
    dsk = {(name, i): (compress_ops.compress, (x.name, i), (m.name, i)) for i in range(nb)}
    return G.new_array(name, dsk, [x, m], (tuple(int(v) for v in k),), x.dtype)
