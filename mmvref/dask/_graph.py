"""Graph plumbing shared by the Dask ops: the boundary checks of dask inputs, the tree scan of
the chunk carries, and the output array built from a task dict."""
from __future__ import annotations

import functools
import math
import operator

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from .._validate import to_numpy
from .._validate import as_flags
from ..registry import REGISTRY

__all__ = ["as_dask", "aligned", "check_known", "carry_tree", "new_array", "first_nonempty", "token", "FANIN",
           "result_dtypes", "narrowed"]

#: children per node of the carry tree: C chunks need 2 ceil(log_FANIN C) task levels between the
#: summaries and the completions (C <= 32: 2 levels; C = 1000: 4; C = 1e6: 8). Each level is a
#: round trip through the scheduler (milliseconds), so a wide node is cheaper than a deep tree.
FANIN = 32


def result_dtypes(x, dtype, op):
    """(compute dtype, result dtype) of ``op`` by the single-machine ops' one rule
    (``mmvref._fast._policy.result_dtypes``: int8 ... float64 may be asked for): the graph computes at
    the first and ``narrowed`` gives the second, as the single-machine op does."""
    from .._fast._policy import result_dtypes as dtypes

    return dtypes(np.empty(0, x.dtype), dtype, op)


def _finish_block(block, cdt, fin, overflow, op):
    from .._fast._policy import finish

    return finish(block, None, cdt, fin, overflow, op)


def narrowed(arr, cdt, fin, overflow, op):
    """``arr`` (computed in cdt) as the result dtype ``fin``, block by block: an integer that does not
    fit raises OverflowError at compute time (or wraps with overflow="wrap"); floats are rounded."""
    if fin == cdt:
        return arr
    return arr.map_blocks(_finish_block, cdt, fin, overflow, op, dtype=fin, meta=np.empty((0,) * arr.ndim, fin))


def token(op, *args):
    return f"mmvref-{op}-{tokenize(*args)}"


def as_dask(x, name, op, ndim=1):
    """``x`` as a dask array of ``ndim`` dimensions whose dtype ``op`` accepts (numpy and array-likes
    become one chunk); TypeError / ValueError naming ``name`` otherwise."""
    if not isinstance(x, da.Array):
        if type(x).__module__.split(".")[0] == "torch":
            raise TypeError(f"{op}: {name} must be a dask array or a numpy array, got a torch tensor "
                            f"(pass {name}.numpy(), or the single-machine mmvref.{op})")
        x = np.asarray(x)
        x = da.from_array(x, chunks=x.shape or ())  # one chunk; rechunk first for parallelism
    if x.ndim != ndim:
        raise ValueError(f"{op}: {name} must be {ndim}-D, got shape {x.shape}")
    if x.dtype.byteorder not in "=|":  # the boundary normalises byte order once (lazily, per chunk)
        x = x.astype(x.dtype.newbyteorder("="))
    if x.dtype not in REGISTRY[op].dtypes:
        raise TypeError(f"{op}: {name} has dtype {x.dtype}; accepted: {', '.join(map(str, REGISTRY[op].dtypes))}")
    check_known(x, name, op)
    return x


def check_known(x, name, op):
    if any(math.isnan(c) for cs in x.chunks for c in cs):
        raise ValueError(f"{op}: {name} has chunks of unknown size; call {name}.compute_chunk_sizes() first")


def aligned(f, x, name, op):
    """1-D flags ``f`` (bool / int8 / uint8) as a dask array chunked like ``x``. Anything but a dask array
    passes the single-machine ops' boundary (``_validate.as_flags``: lists and tuples of 0/1 as uint8,
    ``[]`` as no flags, torch CPU tensors, any byte order; the same errors), its 0/1 values are checked
    by the ops' passes over the chunks as for a dask array."""
    if not isinstance(f, da.Array):
        f = as_flags(to_numpy(f, name), x.shape[0], name, check_values=False)
        return da.from_array(f, chunks=x.chunks)
    if f.ndim != 1 or f.shape[0] != x.shape[0]:
        raise ValueError(f"{op}: {name} must be 1-D with len(x) = {x.shape[0]} entries, got shape {f.shape}")
    if f.dtype not in (np.bool_, np.int8, np.uint8):
        raise TypeError(f"{op}: {name} must be bool, int8 or uint8 holding 0/1, got {f.dtype}")
    check_known(f, name, op)
    if f.chunks != x.chunks:
        f = f.rechunk(x.chunks)
        if f.chunks != x.chunks:  # dask keeps an empty array's chunks: the tasks would read missing keys
            f = da.from_array(np.zeros(0, f.dtype), chunks=x.chunks)
    return f


def _fold(combine, values):
    return functools.reduce(combine, values)


def _child_prefixes(combine, prefix, values):
    """The exclusive prefixes of a node's children, given the node's own exclusive prefix."""
    out = [prefix]
    for v in values[:-1]:
        out.append(combine(out[-1], v))
    return out


def _const(v):
    return v


def carry_tree(name, leaves, combine, identity, fanin=FANIN):
    """(tasks, prefixes): the exclusive scan of the values of ``leaves`` (task arguments, in order: keys,
    or inline tasks such as ``(getitem, key, 2)``) under the associative ``combine``, as a tree of fan-in
    ``fanin``. Up-sweep: each node folds up to ``fanin`` children; down-sweep: each node hands its
    exclusive prefix, combined with its children's values, to them. prefixes[i] is a task argument (an
    inline item of a down-sweep node's list, so no task of its own) holding leaf i's exclusive prefix
    (``identity`` for the first). Only the leaves' values (O(1) each) travel; no task reads more than
    ``fanin`` of them; C leaves take 2 ceil(log_fanin C) levels of tasks."""
    dsk = {}
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        prev, lvl = levels[-1], len(levels)
        nxt = []
        for j in range(0, len(prev), fanin):
            k = (name + "-up", lvl, j // fanin)
            dsk[k] = (_fold, combine, prev[j:j + fanin])
            nxt.append(k)
        levels.append(nxt)
    top = len(levels) - 1
    dsk[(name + "-root",)] = (_const, identity)
    prefix = {(top, 0): (name + "-root",)}
    for lvl in range(top, 0, -1):
        children = levels[lvl - 1]
        for j in range(len(levels[lvl])):
            kids = children[j * fanin:(j + 1) * fanin]
            down = (name + "-down", lvl, j)
            dsk[down] = (_child_prefixes, combine, prefix[(lvl, j)], kids)
            for i in range(len(kids)):
                prefix[(lvl - 1, j * fanin + i)] = (operator.getitem, down, i)
    return dsk, [prefix[(0, i)] for i in range(len(leaves))]


def new_array(name, dsk, deps, chunks, dtype):
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=deps)
    return da.Array(graph, name, chunks, dtype=dtype, meta=np.empty((0,) * len(chunks), dtype))


def first_nonempty(sizes):
    """Index of the first non-empty chunk (where global position 0, a segment start, lies), or None."""
    for i, s in enumerate(sizes):
        if s:
            return i
    return None
