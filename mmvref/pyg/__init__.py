"""PyG on mmvref: ``mmvref.pyg.enable()`` and an existing PyG training script runs its CPU message
passing on mmvref's kernels (the extra ``mmvref[pyg]``: torch-geometric 2.8).

    import mmvref.pyg
    mmvref.pyg.enable()            # or: with mmvref.pyg.enable(): ...

What is routed (see ``_routes`` for the exact conditions; everything else runs PyG's own code):

- ``torch_geometric.utils.scatter`` and ``segment``, in every torch_geometric module that bound them
  by name: mmvref's reductions. With them ``Aggregation.reduce`` (sum, mean, min, max, mul), the
  aggregations built on it (var, std, powermean, softmax aggregation) and ``utils.softmax``.
- ``torch_geometric.utils.spmm`` with a torch sparse CSR/CSC adjacency (the ``message_and_aggregate``
  path of the convolutions): the fused product, the adjacency prepared once.
- ``propagate`` of SAGEConv, GINConv, GCNConv, GraphConv, GATConv with an edge index (plain or
  ``EdgeIndex``): message and aggregation fused, the E x F messages never built; the graph's CSR
  prepared once per edge index and reused every epoch (``GraphCache``: an edge index changed in
  place or a new one with other content is never served a stale graph).

CUDA tensors, torch.compile tracing, dtypes other than float32/float64 and anything the fused
kernels do not compute exactly as PyG go to PyG's code unchanged. ``disable()`` restores every
binding. Gradients: max/min route each output's gradient to the first extreme (torch_scatter's
convention) where torch's ``scatter_reduce`` splits a tie evenly.
"""
from __future__ import annotations

import sys
import threading
import warnings

try:
    import torch  # noqa: F401
    import torch_geometric
except ImportError as e:  # pragma: no cover - exercised without the extra
    raise ImportError("mmvref.pyg needs torch and torch-geometric: pip install 'mmvref[pyg]'") from e

from . import _routes

__all__ = ["enable", "disable", "is_enabled", "stats", "clear_cache", "TESTED_VERSIONS"]

#: the torch_geometric versions (major, minor) mmvref.pyg is tested with; others are left alone
TESTED_VERSIONS = ((2, 8),)

_lock = threading.RLock()
_saved: list = []  # (owner, attribute name, previous value or _ABSENT) in the order they were set
_ABSENT = object()
_warned = False
_enabled = False


def _version_ok() -> bool:
    global _warned
    try:
        major, minor = (int(p) for p in torch_geometric.__version__.split(".")[:2])
    except ValueError:
        major = minor = -1
    if (major, minor) in TESTED_VERSIONS:
        return True
    if not _warned:
        _warned = True
        warnings.warn(f"mmvref.pyg is tested with torch_geometric "
                      f"{', '.join('%d.%d' % v for v in TESTED_VERSIONS)}, not {torch_geometric.__version__}: "
                      f"enable() does nothing", RuntimeWarning, stacklevel=3)
    return False


def _set(owner, name, value) -> None:
    _saved.append((owner, name, owner.__dict__.get(name, _ABSENT) if isinstance(owner, type)
                   else getattr(owner, name, _ABSENT)))
    setattr(owner, name, value)


def _apply() -> None:
    # import the modules that bind the functions by name, so that their bindings exist to replace
    import torch_geometric.nn  # noqa: F401
    from torch_geometric.utils import _scatter, _segment, _spmm

    replacements = {}
    for name, original, make in (("scatter", _scatter.scatter, _routes.make_scatter),
                                 ("segment", _segment.segment, _routes.make_segment),
                                 ("spmm", _spmm.spmm, _routes.make_spmm)):
        replacements[id(original)] = (name, make(original))
    for modname, mod in list(sys.modules.items()):
        if not (modname == "torch_geometric" or modname.startswith("torch_geometric.")) or mod is None:
            continue
        d = getattr(mod, "__dict__", {})
        for attr, value in list(d.items()):
            hit = replacements.get(id(value))
            if hit is not None and attr == hit[0]:
                _set(mod, attr, hit[1])
    # the graph preprocessing the layers repeat on every forward, memoised per graph
    from torch_geometric.nn.conv import gat_conv, gcn_conv

    _set(gcn_conv, "gcn_norm", _routes.make_memo(gcn_conv.gcn_norm, "gcn_norm", "edge_index", ("edge_weight",)))
    _set(gat_conv, "remove_self_loops", _routes.make_memo(gat_conv.remove_self_loops, "remove_self_loops",
                                                          "edge_index", ("edge_attr",)))
    _set(gat_conv, "add_self_loops", _routes.make_memo(gat_conv.add_self_loops, "add_self_loops", "edge_index",
                                                       ("edge_attr",)))
    for cls, (message, weight_name, build) in _routes.fused_kinds().items():
        _routes.ensure_template(cls, build)
        original = cls.propagate
        _set(cls, "propagate", _routes.make_propagate(cls, original, message, weight_name))


def _restore() -> None:
    while _saved:
        owner, name, value = _saved.pop()
        if value is _ABSENT:
            try:
                delattr(owner, name)
            except AttributeError:
                pass
        else:
            setattr(owner, name, value)


_warned_threads = False


def _warn_if_threads_compete() -> None:
    global _warned_threads
    from .. import _threading

    if not _warned_threads and _threading.competes_with_torch():
        _warned_threads = True
        warnings.warn("mmvref's threading layer was launched before mmvref.pyg was imported, so mmvref's "
                      "kernels and torch's OpenMP threads compete for the cores (a training step up to 1.5x "
                      "slower); import mmvref.pyg before mmvref's first call to run them on torch's threads "
                      "(docs/cpus.md, 'Threads and processes')", RuntimeWarning, stacklevel=3)


class _Enabled:
    """What ``enable()`` returns: as a context manager, it restores the state before ``enable()``
    at exit."""

    def __init__(self, was_enabled: bool):
        self._was = was_enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self._was:
            disable()
        return False

    def __repr__(self):
        return f"<mmvref.pyg enabled={is_enabled()}>"


def enable(*, cache_bytes: int | None = None) -> _Enabled:
    """Route PyG's CPU aggregation and message passing to mmvref (idempotent). ``cache_bytes``:
    the bound on the prepared graphs kept (default 1 GiB; least recently used evicted).
    Returns a handle; ``with mmvref.pyg.enable(): ...`` disables again at exit if it was off."""
    global _enabled
    with _lock:
        was = _enabled
        if cache_bytes is not None:
            if not isinstance(cache_bytes, int) or isinstance(cache_bytes, bool) or cache_bytes < 0:
                raise ValueError(f"cache_bytes must be a non-negative int, got {cache_bytes!r}")
            _routes.cache.max_bytes = cache_bytes
        if not _enabled and _version_ok():
            _warn_if_threads_compete()
            try:
                _apply()
            except BaseException:
                _restore()
                raise
            _enabled = True
        return _Enabled(was)


def disable() -> None:
    """Restore every binding ``enable()`` replaced (idempotent). The prepared graphs stay cached
    (within the bound) for the next ``enable()``; ``clear_cache()`` drops them."""
    global _enabled
    with _lock:
        _restore()
        _enabled = False


def clear_cache() -> None:
    """Drop every prepared graph (and the references to the index tensors they were built from)."""
    _routes.cache.clear()


def is_enabled() -> bool:
    """Whether PyG currently runs on mmvref."""
    return _enabled


def stats() -> dict:
    """Counters since import: calls that ran ``fused`` (one fused product), ``unfused`` (mmvref's
    scatter/segment), ``fallback`` (PyG's code), and the graph cache's ``cache_hits`` (the same
    tensor), ``cache_content_hits`` (a new tensor with a cached graph's content), ``cache_misses``,
    ``cache_graphs`` and ``cache_bytes``."""
    c = _routes.cache
    with _routes._counts_lock:
        out = dict(_routes.counts)
    out.update(cache_hits=c.hits, cache_content_hits=c.content_hits, cache_misses=c.misses,
               cache_graphs=len(c), cache_bytes=c.nbytes)
    return out
