"""Threads and processes: which Numba threading layer the fast ops run on, and
the guard around each public op (docs/cpus.md, "Threads and processes").

Numba picks its threading layer once per process, at the first parallel launch.
Its default order (tbb, omp, workqueue) lands on GNU OpenMP ("omp") wherever TBB
is not on the loader path, and omp kills any forked child that launches a
parallel region ("Terminating: fork() called from a process already using GNU
OpenMP"), which is what multiprocessing's default start method and torch
DataLoader workers do. The policy, installed by ``install()`` when ``mmvref`` is
imported:

* **tbb** where libtbb (``pip install tbb``, or ``mmvref[tbb]``) is found: it is
  fork-safe and thread-safe. ``libtbb.so.12`` lies in ``<env>/lib``, which is
  not on the loader path of a venv, so it is preloaded here (``RTLD_GLOBAL``)
  and Numba's ``dlopen`` of its TBB pool resolves it by soname: no
  ``LD_LIBRARY_PATH`` needed.
* **workqueue + lock** otherwise (Numba's order becomes tbb, workqueue, omp):
  Numba re-creates the workqueue pool in a forked child, but the layer aborts
  the process when two threads launch parallel regions at once, so the public
  ops run one at a time (``guarded``) while the layer is workqueue.
* **fork gate**, whatever the layer: ``os.fork`` (multiprocessing, DataLoader
  workers) first waits for the public ops in flight in other threads and holds
  new ones back until it returns. TBB shuts its pool down for a fork only when
  no parallel region runs (otherwise the child can hang: measured), and no
  child starts inside a workqueue region. The gate is re-created in the child,
  so a fork made while another thread was inside an op cannot deadlock it.
* **the user's choice** when ``NUMBA_THREADING_LAYER`` (or
  ``numba.config.THREADING_LAYER``, or the priority) is set, or when the layer
  was already launched before ``mmvref`` was imported: it is kept. Under omp the
  guard raises a RuntimeError naming the cause and the fixes in a child forked
  after the layer started, instead of letting Numba kill the child; under
  workqueue the ops run one at a time.

``describe()`` reports the layer, the policy in force, the thread count and the
preloaded libtbb (``mmvref.show_config()`` prints it).
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading

__all__ = ["install", "guarded", "describe", "find_libtbb"]

#: Numba's TBB pool needs TBB_INTERFACE_VERSION >= 12060 (oneTBB 2021.6)
TBB_MIN_INTERFACE = 12060
_NUMBA_DEFAULT_PRIORITY = ["tbb", "omp", "workqueue"]
_PRIORITY = ["tbb", "workqueue", "omp"]
_LIBTBB = {"linux": "libtbb.so.12", "darwin": "libtbb.12.dylib"}

_origin = None  # "mmvref" | "user" | "prelaunched": who chose the layer
_libtbb = None  # path preloaded, or None
_libtbb_version = None  # TBB_runtime_interface_version() of the preloaded library
_mode = None  # None: layer not seen launched yet; "shared" | "exclusive" | "omp-forked"
#: the gate: ops in flight (outermost calls only), and a fork waiting for them to end
_gate_lock = threading.Lock()
_gate = threading.Condition(_gate_lock)
_active = 0
_forking = False
_waiting = 0  # ops waiting at the gate (exclusive mode): ``_leave`` wakes them
_tls = threading.local()  # .depth: 1 inside a public op (a nested op passes straight through)
#: how long a fork waits for the ops in flight before it goes ahead anyway
FORK_WAIT_S = 300.0


def _parallel():
    from numba.np.ufunc import parallel

    return parallel


def find_libtbb():
    """The path of the environment's libtbb (the ``tbb`` distribution's file,
    else ``<prefix>/lib`` of this interpreter, its base and its site-packages
    directories), or None."""
    name = _LIBTBB.get(sys.platform)
    if name is None:
        return None
    try:
        from importlib import metadata

        for f in metadata.distribution("tbb").files or ():
            if f.name == name:
                p = str(f.locate())
                if os.path.isfile(p):
                    return os.path.realpath(p)
    except Exception:  # no tbb distribution, or no RECORD
        pass
    dirs = [os.path.join(p, "lib") for p in (sys.prefix, sys.exec_prefix, sys.base_prefix)]
    try:
        import site

        sps = list(site.getsitepackages()) + [site.getusersitepackages()]
    except Exception:  # site trimmed (embedded interpreters)
        sps = []
    sps += [p for p in sys.path if p.endswith("site-packages")]
    dirs += [os.path.dirname(os.path.dirname(p)) for p in sps]  # <prefix>/lib/pythonX.Y/site-packages
    for d in dict.fromkeys(dirs):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return os.path.realpath(p)
    return None


def _preload_tbb():
    global _libtbb, _libtbb_version
    path = find_libtbb()
    if path is None:
        return
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        f = lib.TBB_runtime_interface_version
        f.restype = ctypes.c_int
        _libtbb_version = int(f())
        _libtbb = path
    except (OSError, AttributeError):  # a broken or foreign copy: Numba then falls back
        pass


def install():
    """Choose the layer (see the module docstring); idempotent. Called once by
    ``import mmvref``, before the fast ops are imported."""
    global _origin
    if _origin is not None:
        return
    from numba.core import config

    par = _parallel()
    if par._is_initialized:
        _origin = "prelaunched"
    elif str(config.THREADING_LAYER).lower() != "default":
        _origin = "user"
        if str(config.THREADING_LAYER).lower() in ("tbb", "safe", "threadsafe"):
            _preload_tbb()
    else:
        _preload_tbb()
        if ("NUMBA_THREADING_LAYER_PRIORITY" not in os.environ
                and list(config.THREADING_LAYER_PRIORITY) == _NUMBA_DEFAULT_PRIORITY):
            config.THREADING_LAYER_PRIORITY = list(_PRIORITY)
            _origin = "mmvref"
        else:
            _origin = "user"
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def _before_fork():
    """Hold new ops back and wait for those in flight: TBB can only shut its pool
    down for the fork when no parallel region runs (else the child may hang), and
    a workqueue child is cleanest forked between regions."""
    global _forking
    if getattr(_tls, "depth", 0):  # forking from inside an op (a callback): do not wait for ourselves
        return
    with _gate:
        _forking = True
        _gate.wait_for(lambda: _active == 0, timeout=FORK_WAIT_S)


def _after_fork_in_parent():
    global _forking
    with _gate:
        _forking = False
        _gate.notify_all()


def _after_fork_in_child():
    global _gate_lock, _gate, _active, _forking, _waiting, _mode
    # the threads that were running ops do not exist here; their lock may have been held
    _gate_lock = threading.Lock()
    _gate = threading.Condition(_gate_lock)
    _active, _forking, _waiting = (1 if getattr(_tls, "depth", 0) else 0), False, 0  # 1: forked from inside an op
    par = _parallel()
    if par._is_initialized and par._threading_layer == "omp":
        _mode = "omp-forked"


def _settle():
    """Launch the layer (with the policy in force) and set the guard's mode."""
    global _mode
    par = _parallel()
    par._launch_threads()
    mode = "exclusive" if par._threading_layer == "workqueue" else "shared"
    if _mode is None:
        _mode = mode
    return _mode


def _forked_omp_error(name):
    return RuntimeError(
        f"mmvref.{name}: this process was forked from one that had already started Numba's GNU OpenMP "
        f"threading layer ('omp'), which cannot run parallel code in a forked child (Numba would kill "
        f"this process with SIGTERM). Fix: install TBB (pip install tbb, or mmvref[tbb]), or set "
        f"NUMBA_THREADING_LAYER=workqueue or leave it unset (mmvref then picks tbb or workqueue), or "
        f"start worker processes with the 'spawn' or 'forkserver' method (multiprocessing.get_context"
        f"('spawn'); torch DataLoader(..., multiprocessing_context='spawn')).")


def _enter(exclusive):
    global _active, _waiting
    with _gate_lock:  # the Condition's own lock, taken directly: half the cost of ``with _gate`` (an op's overhead)
        if _forking or (exclusive and _active):
            _waiting += 1
            try:
                while _forking or (exclusive and _active):
                    _gate.wait()
            finally:
                _waiting -= 1
        _active += 1


def _leave():
    global _active
    with _gate_lock:
        _active -= 1
        if _waiting or _forking:  # someone waits for the gate (ops, or a fork for _active == 0)
            _gate.notify_all()


def _tracing() -> bool:
    """torch.compile is tracing the call: it runs as torch custom ops (no kernel launch here),
    and Dynamo cannot trace the gate's lock."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def guarded(fn):
    """Decorator for a public fast op. The outermost op call of a thread passes a
    gate: one op at a time while the layer is workqueue (it aborts the process on
    concurrent launches), any number otherwise; none while a fork waits for the
    ops in flight. Refuses (RuntimeError) in a child forked after the omp layer
    started. A public op may call another (it passes straight through)."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if getattr(_tls, "depth", 0) or _tracing():
            return fn(*args, **kwargs)
        mode = _mode if _mode is not None else _settle()
        if mode == "omp-forked":
            raise _forked_omp_error(fn.__name__)
        _enter(mode == "exclusive")
        _tls.depth = 1
        try:
            return fn(*args, **kwargs)
        finally:
            _tls.depth = 0
            _leave()

    return op


def _policy(layer):
    guard = {"workqueue": "+lock", "omp": "+fork-check"}.get(layer, "")  # all: ops end before a fork
    from numba.core import config

    origin = _origin
    if origin == "mmvref" and str(config.THREADING_LAYER).lower() != "default":
        origin = "user"  # set in Python after mmvref was imported, before the first launch
    prefix = "" if origin == "mmvref" else f"{origin}:"
    return f"{prefix}{layer}{guard}"


def describe() -> dict:
    """For a bug report: the layer (or the one that will be chosen), the policy
    in force, Numba's thread count, the preloaded libtbb. Launches nothing."""
    import numba
    from numba.core import config

    par = _parallel()
    info = {}
    if par._is_initialized:
        layer = par._threading_layer
        info["layer"] = layer
        info["threads"] = numba.get_num_threads()
    else:
        req = str(config.THREADING_LAYER).lower()
        if req == "default":
            tbb_ok = _libtbb is not None and (_libtbb_version or 0) >= TBB_MIN_INTERFACE
            # Numba takes the first of its priority list that loads (omp and workqueue always do here)
            layer = next(p for p in config.THREADING_LAYER_PRIORITY if p != "tbb" or tbb_ok)
        else:
            layer = req
        info["layer"] = f"{layer} (not launched yet)"
        info["threads"] = config.NUMBA_NUM_THREADS
    info["policy"] = _policy(layer) + (" (forked child: parallel ops refused)" if _mode == "omp-forked" else "")
    info["libtbb"] = (f"{_libtbb} (preloaded, interface {_libtbb_version})" if _libtbb else None)
    return info
install()
