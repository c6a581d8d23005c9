"""A graph's edges prepared once for fused message passing, and the cache that keeps them per graph.

``Graph`` holds the CSR by destination (the forward product), and builds on first use the CSR by
source (the features' gradient: the transposed product) and the source of each edge (the max/min
backward's routing). Both CSR forms keep each entry's original edge id, so edge weights and their
gradients stay in the caller's edge order; the sort is a stable counting sort (``csr_by_key``:
O(E + N), one pass to count and one to place), cheaper than the one E x F gather it saves.

``GraphCache`` serves a prepared graph for an edge index tensor (or a torch sparse adjacency) it
has seen, never a stale one: a hit needs the same tensor object with the same version counter and
data pointer (an in-place change bumps the version; the cache holds a reference, so the memory is
not reused by another tensor while cached), or else a tensor of the same shape and the same
content (``torch.equal``: a pass over 2E integers, which is what lets the graphs that PyG rebuilds
on every call, e.g. GCN's normalisation or GAT's self-loops, hit). Entries are evicted least
recently used beyond ``max_bytes`` (their arrays plus the index tensors they hold).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numba
import numpy as np
import torch

from .._fast.sparse import _portable_gspmm as kernels

__all__ = ["Graph", "GraphCache"]

_I32_MAX = np.iinfo(np.int32).max


class Csr:
    """Edges as CSR by one endpoint: ``indptr`` (int64, n_rows + 1), ``col`` (the other endpoint per
    entry, int32), ``perm`` (the edge id per entry, int32); row tasks per thread count."""

    __slots__ = ("n_rows", "n_cols", "indptr", "col", "perm", "_tasks", "_torch_order", "_ones")

    def __init__(self, n_rows, n_cols, indptr, col, perm):
        self.n_rows, self.n_cols = n_rows, n_cols
        self.indptr, self.col, self.perm = indptr, col, perm
        self._tasks = {}
        self._torch_order = None
        self._ones = {}

    def ones(self, dtype: np.dtype) -> np.ndarray:
        """A value of 1 per entry in ``dtype`` (the unweighted sum's SpMM values), made once."""
        v = self._ones.get(dtype)
        if v is None:
            v = self._ones[dtype] = np.ones(self.col.shape[0], dtype)
        return v

    def torch_order(self):
        """(edge ids in CSR order as an int64 tensor, the row offsets as a tensor, a bool mask of
        the empty rows or None): what torch's ``index_select`` and ``segment_reduce`` take."""
        t = self._torch_order
        if t is None:
            counts = np.diff(self.indptr)
            empty = torch.from_numpy(counts == 0) if self.n_rows and not counts.all() else None
            t = self._torch_order = (torch.from_numpy(self.perm.astype(np.int64)), torch.from_numpy(self.indptr), empty)
        return t

    @property
    def nbytes(self) -> int:
        n = self.indptr.nbytes + self.col.nbytes + self.perm.nbytes + sum(v.nbytes for v in self._ones.values())
        if self._torch_order is not None:
            n += self._torch_order[0].numel() * 8 + (0 if self._torch_order[2] is None else self.n_rows)
        return n

    def tasks(self) -> np.ndarray:
        """Row boundaries of about equal work, four tasks per Numba thread (recomputed when the
        thread count changes)."""
        threads = numba.get_num_threads()
        t = self._tasks.get(threads)
        if t is None:
            n_tasks = max(1, min(4 * threads, self.n_rows)) if threads > 1 else 1
            t = self._tasks[threads] = kernels.row_tasks(self.indptr, n_tasks)
        return t


def _sorted_by(key: np.ndarray, other: np.ndarray, n_rows: int, n_other: int):
    indptr, col, perm, ok = kernels.csr_by_key(key, other, n_rows, n_other)
    return Csr(n_rows, n_other, indptr, col, perm) if ok else None


class Graph:
    """A graph's edges for the fused products: ``forward`` (CSR by destination), ``backward`` (CSR
    by source, built on first use), ``src_of_edge`` (int32 per edge, on first use), and the
    destination degrees per dtype (the mean's divisor, at least 1)."""

    def __init__(self, forward: Csr, dst=None, src=None):
        self.forward = forward
        self._dst, self._src = dst, src  # int64 endpoint arrays in edge order, where known
        self._backward = None
        self._src_of_edge = None
        self._deg = {}
        self._mean_weights = {}
        self._lock = threading.Lock()

    @classmethod
    def from_edges(cls, dst: np.ndarray, src: np.ndarray, n_dst: int, n_src: int):
        """From endpoint arrays (int64, edge order); None when an index leaves its range."""
        fwd = _sorted_by(dst, src, n_dst, n_src)
        return None if fwd is None else cls(fwd, dst, src)

    @classmethod
    def from_csr(cls, indptr: np.ndarray, col: np.ndarray, n_cols: int):
        """From a CSR by destination (edge ids are the entries' positions); None when a column
        leaves [0, n_cols) or the offsets are not a valid CSR."""
        n_rows = indptr.shape[0] - 1
        E = col.shape[0]
        if indptr[0] != 0 or indptr[-1] != E or (n_rows and np.any(np.diff(indptr) < 0)):
            return None
        if E and (col.min() < 0 or col.max() >= n_cols):
            return None
        fwd = Csr(n_rows, n_cols, indptr.astype(np.int64, copy=False), col.astype(np.int32),
                  np.arange(E, dtype=np.int32))
        return cls(fwd)

    @property
    def nbytes(self) -> int:
        n = self.forward.nbytes
        if self._backward is not None:
            n += self._backward.nbytes
        if self._src_of_edge is not None:
            n += self._src_of_edge.nbytes
        return n + sum(v.nbytes for v in self._mean_weights.values())

    def _endpoints(self):
        if self._dst is None:
            f = self.forward
            self._dst = np.repeat(np.arange(f.n_rows, dtype=np.int64), np.diff(f.indptr))
            self._src = f.col.astype(np.int64)  # edge ids are CSR positions here
        return self._dst, self._src

    @property
    def backward(self) -> Csr:
        b = self._backward
        if b is None:
            with self._lock:
                if self._backward is None:
                    dst, src = self._endpoints()
                    f = self.forward
                    self._backward = _sorted_by(src, dst, f.n_cols, f.n_rows)
                b = self._backward
        return b

    @property
    def src_of_edge(self) -> np.ndarray:
        s = self._src_of_edge
        if s is None:
            _, src = self._endpoints()
            s = self._src_of_edge = src.astype(np.int32)
        return s

    def degree(self, dtype: torch.dtype) -> torch.Tensor:
        """(n_dst, 1) entry counts of the destination rows, at least 1, in ``dtype``."""
        d = self._deg.get(dtype)
        if d is None:
            cnt = torch.from_numpy(np.diff(self.forward.indptr))
            d = self._deg[dtype] = cnt.clamp_(min=1).to(dtype).view(-1, 1)
        return d

    def mean_backward_weights(self, dtype: np.dtype) -> np.ndarray:
        """1 / (the entry's destination degree) per entry of ``backward``, in ``dtype`` (made once):
        the values of an unweighted mean's transposed product, which then needs no (n_dst, F)
        quotient of the gradient (a fresh tensor a step: 2 ms of page faults of a 21 ms SAGE-mean
        step at 20k nodes x 128 features)."""
        v = self._mean_weights.get(dtype)
        if v is None:
            f, b = self.forward, self.backward
            inverse = np.ones(1, dtype) / np.maximum(np.diff(f.indptr), 1).astype(dtype)
            v = self._mean_weights[dtype] = inverse[b.col]
        return v


class _Entry:
    __slots__ = ("key", "tensors", "versions", "ptrs", "params", "graph")

    def __init__(self, tensors, params, graph, key=None):
        self.key = tensors[0] if key is None else key
        self.tensors = tensors
        self.versions = tuple(t._version for t in tensors)
        self.ptrs = tuple(t.data_ptr() for t in tensors)
        self.params = params
        self.graph = graph

    @property
    def nbytes(self) -> int:
        return self.graph.nbytes + sum(t.numel() * t.element_size() for t in self.tensors)

    def unchanged(self) -> bool:
        return all(t._version == v and t.data_ptr() == p for t, v, p in zip(self.tensors, self.versions, self.ptrs))

    def same(self, key, params) -> bool:
        """The same key object (an edge index, an adjacency), its tensors unchanged since
        preparation (a sparse tensor's index views share its version counter)."""
        return key is self.key and params == self.params and self.unchanged()

    def equal(self, tensors, params) -> bool:
        """Other tensors with this entry's content (the entry itself unchanged)."""
        return (params == self.params and self.unchanged() and all(
            a.shape == b.shape and a.dtype == b.dtype for a, b in zip(tensors, self.tensors))
            and all(torch.equal(a, b) for a, b in zip(tensors, self.tensors)))


class GraphCache:
    """Prepared graphs keyed by their index tensors, least recently used evicted beyond
    ``max_bytes``; thread-safe. ``hits``/``misses`` count lookups."""

    def __init__(self, max_bytes: int = 1 << 30):
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._next = 0
        self.hits = self.misses = self.content_hits = 0

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(e.nbytes for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def _find(self, tensors, params, key):
        for k, e in self._entries.items():
            if e.same(key, params):
                self._entries.move_to_end(k)
                self.hits += 1
                return e.graph
        for k, e in list(self._entries.items()):
            if not e.unchanged():  # a held tensor changed in place: its graph is gone
                del self._entries[k]
        for k, e in self._entries.items():
            if e.equal(tensors, params):
                # the newest object with this content becomes the key (the old may be freed)
                self._entries[k] = _Entry(tensors, params, e.graph, key)
                self._entries.move_to_end(k)
                self.content_hits += 1
                return e.graph
        return None

    def get(self, tensors: tuple, params: tuple, build, key=None):
        """The graph prepared for ``tensors`` (index tensors, CPU) and ``params`` (hashable: sizes,
        orientation); ``build()`` makes it on a miss (None: not preparable, not cached). ``key``:
        the object whose identity makes a hit without comparing content (default tensors[0])."""
        key = tensors[0] if key is None else key
        with self._lock:
            g = self._find(tensors, params, key)
            if g is not None:
                return g
            self.misses += 1
        g = build()
        if g is None:
            return None
        entry = _Entry(tensors, params, g, key)
        with self._lock:
            self._next += 1
            self._entries[self._next] = entry
            self._evict()
        return g

    def _evict(self) -> None:
        total = sum(e.nbytes for e in self._entries.values())
        while total > self.max_bytes and len(self._entries) > 1:
            _, e = self._entries.popitem(last=False)
            total -= e.nbytes
        if total > self.max_bytes and self._entries:  # one graph over the bound is not kept either
            self._entries.clear()


def fits_int32(*sizes) -> bool:
    """Whether every size fits the kernels' int32 column and edge ids."""
    return all(s <= _I32_MAX for s in sizes)
