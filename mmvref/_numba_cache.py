"""Numba's on-disk cache, made safe for several processes compiling one of mmvref's kernels at once.

Numba keeps one index per function (signature -> data file). It saves a new signature by reading
the index, taking the first data file name no entry uses, writing the index back, then the data:
two processes that save two new signatures of one function at once can take the same name, and
the index then points one signature at the other's code. Seen in CI (two pytest-xdist workers on a
fresh cache): the integer SpMV kernel's entry for int64 values held the code compiled for int8
values, and every later int64 product, in every process, raised "can't unbox array from PyObject
into native value" (Numba checks the arguments against the code's own types, so no product ran on
the wrong code). The same can happen to Dask workers or a multiprocessing pool sharing a cache.

So, for the dispatchers of mmvref's kernels (``guard``, called by ``_compile_thread`` before each
compilation of one): a save holds an exclusive lock on a file beside the index (``fcntl.flock``;
where there is no fcntl, or the file cannot be made, no lock), which makes the read-pick-write of
the index one step across processes; and an entry whose code was compiled for other array types
than the ones asked for is a miss: the entry is dropped and the kernel compiled again is saved under
a data file of its own (a cache broken before this guard, or by a process without it, heals).
"""
from __future__ import annotations

import contextlib
import os

from numba.core import sigutils, types

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None

__all__ = ["guard"]


@contextlib.contextmanager
def _locked(path):
    """An exclusive lock on ``path`` (made if missing) for the block; none where that fails."""
    f = None
    if fcntl is not None:
        try:
            f = open(path, "a")
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError:  # an unwritable cache directory: Numba's own save reports or skips
            if f is not None:
                f.close()
            f = None
    try:
        yield
    finally:
        if f is not None:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()


def _compiled_for(cres, sig) -> bool:
    """Whether a loaded entry's code takes the array types asked for (the other argument kinds, e.g.
    literals, are left to Numba)."""
    want = sigutils.normalize_signature(sig)[0]
    got = cres.signature.args
    if len(want) != len(got):
        return False
    return all(w == g for w, g in zip(want, got) if isinstance(w, types.Array) or isinstance(g, types.Array))


def guard(disp) -> None:
    """Lock the saves of ``disp``'s cache and refuse its entries compiled for other array types
    (idempotent; nothing for a dispatcher without a disk cache)."""
    cache = getattr(disp, "_cache", None)
    cache_file = getattr(cache, "_cache_file", None)
    if cache_file is None or getattr(cache, "mmvref_guarded", False):
        return
    load_overload = cache.load_overload
    save = cache_file.save
    lock_path = cache_file._index_path + ".lock"

    def checked_load_overload(sig, target_context):
        cres = load_overload(sig, target_context)
        if cres is not None and not _compiled_for(cres, sig):
            # another signature's code under this one's entry (whose file that signature may still
            # name): the entry is dropped, so the kernel compiled again is saved under a file of its own
            key = cache._index_key(sig, target_context.codegen())
            with _locked(lock_path):
                overloads = cache_file._load_index()
                if overloads.pop(key, None) is not None:
                    cache_file._save_index(overloads)
            return None
        return cres

    def locked_save(key, data):
        with _locked(lock_path):
            save(key, data)

    cache.load_overload = checked_load_overload
    cache_file.save = locked_save
    cache.mmvref_guarded = True
