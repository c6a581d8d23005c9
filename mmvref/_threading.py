"""Threads and processes: which Numba threading layer the fast ops run on, and
the guard around each public op (docs/cpus.md, "Threads and processes").

Numba picks its threading layer once per process, at the first parallel launch.
Its default order (tbb, omp, workqueue) lands on GNU OpenMP ("omp") wherever TBB
is not on the loader path, and omp kills any forked child that launches a
parallel region ("Terminating: fork() called from a process already using GNU
OpenMP"), which is what multiprocessing's default start method and torch
DataLoader workers do. The policy, installed by ``install()`` when ``mmvref`` is
imported:

* **omp on torch's OpenMP threads** where mmvref's torch-facing modules
  (``mmvref.pyg``, ``mmvref.torch_scatter``, the autograd ops) are imported when
  the layer launches, and torch's OpenMP runtime (the pip wheels' GNU libgomp)
  is in the process's global symbol scope: Numba's omp layer then binds to that very
  runtime, so mmvref's parallel regions run on torch's own thread team. Under
  any other layer the two pools share the cores: torch's OpenMP workers spin
  for milliseconds after each torch op, and a kernel launched in that window
  ran at half speed (gspmm max on 20k nodes x 128 features after a torch op:
  10.8 ms under tbb or workqueue, 5.5 ms on torch's threads; a PyG SAGE-max
  training step 51 -> 34 ms). The launch keeps torch's thread count (Numba's
  launch sets the OpenMP default of the launching thread; it is put back).
  A forked child re-arms Numba's fork check and runs its ops on one thread:
  GNU OpenMP's thread pool does not survive a fork (a child using two threads
  hangs, torch's own ops too), a team of one thread never touches it.
* **tbb** where libtbb (``pip install tbb``, or ``mmvref[tbb]``) is found: it is
  fork-safe and thread-safe. ``libtbb.so.12`` lies in ``<env>/lib``, which is
  not on the loader path of a venv, so it is preloaded here (``RTLD_GLOBAL``)
  and Numba's ``dlopen`` of its TBB pool resolves it by soname: no
  ``LD_LIBRARY_PATH`` needed. Fork-safe only if TBB can shut its pool down
  before the fork, which it refuses while another thread that ran parallel
  code is alive (it holds TBB's per-thread state until it exits; Numba then
  prints "Unable to join threads to shut down before fork()" and the child
  inherits a pool whose threads it does not have: most children work, some
  hang). So an op on any thread but the one that launched the layer gives
  that state back as it ends (``_release_tbb_thread``; about 20 us on the
  next parallel op of that thread, measured on a 2-vCPU Zen 3).
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
  was already launched before ``mmvref`` was imported: it is kept. Under omp a
  child forked after the layer started runs its ops on one thread, as above
  (where Numba's omp library cannot be re-armed, the guard raises a
  RuntimeError naming the fixes instead of letting Numba kill the child);
  under workqueue the ops run one at a time.

The choice is made when Numba launches its layer (the first parallel kernel
compiled or loaded from the cache, whichever thread does it): ``install()``
wraps Numba's ``_launch_threads`` to look at the process then.

``describe()`` reports the layer, the policy in force, the thread count and the
preloaded libtbb (``mmvref.show_config()`` prints it).
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading

__all__ = ["install", "guarded", "describe", "find_libtbb", "competes_with_torch"]

#: Numba's TBB pool needs TBB_INTERFACE_VERSION >= 12060 (oneTBB 2021.6)
TBB_MIN_INTERFACE = 12060
_NUMBA_DEFAULT_PRIORITY = ["tbb", "omp", "workqueue"]
_PRIORITY = ["tbb", "workqueue", "omp"]
_TORCH_PRIORITY = ["omp", "tbb", "workqueue"]
_LIBTBB = {"linux": "libtbb.so.12", "darwin": "libtbb.12.dylib"}

_origin = None  # "mmvref" | "user" | "prelaunched": who chose the layer
_libtbb = None  # path preloaded, or None
_libtbb_version = None  # TBB_runtime_interface_version() of the preloaded library
_mode = None  # None: layer not seen launched yet; "shared" | "exclusive" | "omp-forked"
_torch_omp = False  # the layer was launched as omp on torch's OpenMP runtime (mmvref's choice)
_forked = False  # this process is a forked child (of a process that imported mmvref)
_child_one_thread = False  # a forked child under omp: ops run on one thread (Numba's fork check re-armed)
#: the gate: ops in flight (outermost calls only), and a fork waiting for them to end
_gate_lock = threading.Lock()
_gate = threading.Condition(_gate_lock)
_active = 0
_forking = False
_waiting = 0  # ops waiting at the gate (exclusive mode): ``_leave`` wakes them
#: tbb layer: the thread that launched it (Numba shuts TBB down for a fork only from that thread), and
#: the function that gives TBB's per-thread state of the calling thread back (None: not tbb)
_tbb_launcher = None
_tbb_release = None
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


def _global_openmp():
    """ctypes handle of the process's global symbol scope when it holds an OpenMP runtime's entry
    points (``GOMP_parallel``: GNU libgomp, or a runtime compatible with it), else None."""
    try:
        g = ctypes.CDLL(None)
        g.GOMP_parallel  # noqa: B018 - the lookup is the test
        g.omp_get_max_threads.restype = ctypes.c_int
        g.omp_set_num_threads.argtypes = [ctypes.c_int]
        return g
    except (OSError, AttributeError):
        return None


#: mmvref's modules that run its kernels between torch ops (autograd functions, PyG's layers)
TORCH_FACING = ("mmvref.pyg", "mmvref.torch_scatter", "mmvref._fast.segment._torch")


def _torch_openmp() -> bool:
    """One of mmvref's torch-facing modules (``TORCH_FACING``) is imported, torch runs its intra-op
    parallelism on OpenMP, and an OpenMP runtime is in the global symbol scope (torch loads its
    libgomp there): Numba's omp layer would run on torch's own threads. Never in a forked child
    (torch's thread pool is gone there). torch merely imported is not enough: GNU OpenMP's workers
    spin for milliseconds after each region, which helps the torch op that follows but slows other
    thread pools that follow (numpy's OpenBLAS in scipy's ``cg``: 300 iterations on the 2-D
    Poisson matrix of 1e6 rows with the prepared operator took 2.66-2.77 s on GNU OpenMP threads
    against 1.70 s under tbb; with scipy's own matrix 1.91-2.41 s)."""
    torch = sys.modules.get("torch")
    if (torch is None or _forked or not any(m in sys.modules for m in TORCH_FACING)
            or _global_openmp() is None):
        return False
    try:
        info = torch.__config__.parallel_info()
    except Exception:  # a partly imported or unusual torch
        return False
    return "ATen parallel backend: OpenMP" in info


def _launch_with_policy(launch):
    """Numba's ``_launch_threads``, deciding first (mmvref's own choice only) whether the layer runs
    on torch's OpenMP threads, and keeping the launching thread's OpenMP thread count (torch's)."""

    @functools.wraps(launch)
    def _launch_threads():
        global _torch_omp
        par = _parallel()
        if par._is_initialized:
            return launch()
        from numba.core import config

        ours = (_origin == "mmvref" and str(config.THREADING_LAYER).lower() == "default"
                and list(config.THREADING_LAYER_PRIORITY) in (_PRIORITY, _TORCH_PRIORITY))
        if ours:
            config.THREADING_LAYER_PRIORITY = list(_TORCH_PRIORITY if _torch_openmp() else _PRIORITY)
        omp = _global_openmp()
        before = omp.omp_get_max_threads() if omp is not None else None
        try:
            return launch()
        finally:
            if par._is_initialized and par._threading_layer == "tbb":
                # (two threads launching at once: both get here; the first to do so is taken, most
                # likely the launching one; a wrong pick only costs the other one's releases)
                _watch_tbb(threading.get_ident())
            if par._is_initialized and par._threading_layer == "omp":
                _torch_omp = ours and config.THREADING_LAYER_PRIORITY[0] == "omp"
                if before is not None:
                    omp.omp_set_num_threads(before)

    _launch_threads.__wrapped_by_mmvref__ = True
    return _launch_threads


def competes_with_torch() -> bool:
    """The layer was launched (by mmvref's policy) as a pool of its own before a torch-facing module
    was imported, and torch runs on OpenMP: the two pools share the cores (``mmvref.pyg.enable()``
    warns)."""
    par = _parallel()
    return (_origin == "mmvref" and par._is_initialized and not _torch_omp and not _forked
            and _torch_openmp())


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
    if not par._is_initialized and not getattr(par._launch_threads, "__wrapped_by_mmvref__", False):
        par._launch_threads = _launch_with_policy(par._launch_threads)
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


#: oneTBB's exported functions behind ``task_scheduler_handle(tbb::attach{})`` and ``tbb::finalize``
#: (``tbb/global_control.h``; the handle is one pointer), and finalize's mode that neither throws
#: nor waits when other handles remain (Numba's own stays attached)
_TBB_GET = "_ZN3tbb6detail2r13getERNS0_2d121task_scheduler_handleE"
_TBB_FINALIZE = "_ZN3tbb6detail2r18finalizeERNS0_2d121task_scheduler_handleEl"
_TBB_FINALIZE_NOTHROWING = 1


def _watch_tbb(launcher):
    """The tbb layer runs: ``launcher`` is the thread that launched it; the other threads give TBB's
    per-thread state back after each op (``_release_tbb_thread``)."""
    global _tbb_launcher, _tbb_release
    if _tbb_launcher is None:
        _tbb_launcher = launcher
        _tbb_release = _release_tbb_thread()


def _release_tbb_thread():
    """A function that gives the calling thread's TBB state back (TBB's ``finalize`` on a handle of
    its own: it ends the calling thread's external-thread state, outside any parallel region, and
    leaves the pool to the handle Numba keeps), or None where the process's libtbb lacks the entry
    points. While a thread that ran parallel code holds that state, TBB refuses to shut its pool
    down for a fork (Numba's prepare-fork hook: "Unable to join threads to shut down before
    fork()"), and the child inherits a pool without its threads. On a 2-vCPU Zen 3 with two busy
    processes beside it, 2 of 60 runs of a scenario that forks twice while two other threads call
    ops did not come back "ok"; in a full test run, a child of that scenario never finished its
    ops (the test's 60 s limit: "hang")."""
    name = _LIBTBB.get(sys.platform)
    try:
        lib = ctypes.CDLL(_libtbb or name)  # the copy Numba's pool runs on (loaded by soname)
        get, finalize = getattr(lib, _TBB_GET), getattr(lib, _TBB_FINALIZE)
    except (OSError, AttributeError, TypeError):
        return None
    get.argtypes, get.restype = [ctypes.c_void_p], None
    finalize.argtypes, finalize.restype = [ctypes.c_void_p, ctypes.c_ssize_t], ctypes.c_bool

    def release():
        handle = ctypes.c_void_p()
        get(ctypes.byref(handle))
        finalize(ctypes.byref(handle), _TBB_FINALIZE_NOTHROWING)

    return release


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
    global _forked, _child_one_thread, _tbb_launcher
    _forked = True
    if _tbb_launcher is not None:  # Numba's after-fork hook made this thread TBB's launching thread
        _tbb_launcher = threading.get_ident()
    par = _parallel()
    if par._is_initialized and par._threading_layer == "omp":
        _child_one_thread = _rearm_omp_one_thread()
        if not _child_one_thread:
            _mode = "omp-forked"


def _rearm_omp_one_thread() -> bool:
    """In a child forked under the omp layer: make Numba's omp library take this process as its
    own (its ``launch_threads`` records the pid that its fork check compares with) with one thread
    as the default, and this thread on one thread. The launching thread's OpenMP thread count is
    put back. False where Numba's library offers no such entry point."""
    try:
        import numba
        from numba.np.ufunc import omppool

        launch = ctypes.CFUNCTYPE(None, ctypes.c_int)(omppool.launch_threads)
    except (ImportError, AttributeError, TypeError):
        return False
    omp = _global_openmp()
    before = omp.omp_get_max_threads() if omp is not None else None
    launch(1)
    if before is not None:
        omp.omp_set_num_threads(before)
    numba.set_num_threads(1)
    return True


def _settle():
    """Launch the layer (with the policy in force) and set the guard's mode."""
    global _mode
    par = _parallel()
    par._launch_threads()
    if par._threading_layer == "tbb" and _tbb_launcher is None:  # launched before mmvref wrapped the launch
        _watch_tbb(threading.main_thread().ident)  # (taken to be the main thread)
    mode = "exclusive" if par._threading_layer == "workqueue" else "shared"
    if _mode is None:
        _mode = mode
    return _mode


def hold_one_thread() -> int:
    """In a child forked under the omp layer (``_child_one_thread``): Numba's thread count of this
    thread, which is set to 1 for the op, or 0 when it is 1 already. GNU OpenMP's pool does not
    survive the fork: a region of two threads hangs the child (measured: a scan of 2e7 values after
    ``numba.set_num_threads(2)`` in a forked child never returned), so the op runs on one thread
    whatever the count, and the first such op warns. The caller puts the count back after the op
    (``numba.set_num_threads(n)``, n > 0)."""
    import numba

    n = numba.get_num_threads()
    if n == 1:
        return 0
    global _warned_child_threads
    if not _warned_child_threads:
        _warned_child_threads = True
        import warnings

        warnings.warn(f"mmvref runs its ops on one thread in this process, not the {n} set by "
                      f"numba.set_num_threads: it was forked after Numba's GNU OpenMP layer ('omp') started, "
                      f"and that layer's threads do not survive a fork (two would hang the process). "
                      f"Start workers with the 'spawn' or 'forkserver' method, or install TBB "
                      f"(mmvref[tbb]), for parallel ops in child processes.", RuntimeWarning, stacklevel=3)
    numba.set_num_threads(1)
    return n


_warned_child_threads = False


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
    ops in flight. In a child forked after the omp layer started: one thread for
    the op whatever Numba's count (``hold_one_thread``), or a RuntimeError where
    Numba's omp library could not be re-armed. A public op may call another (it
    passes straight through). Under tbb, a thread other than the layer's launching one gives its
    TBB state back as its op ends (``_release_tbb_thread``), so that a later fork can shut the
    pool down."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if getattr(_tls, "depth", 0) or _tracing():
            return fn(*args, **kwargs)
        mode = _mode if _mode is not None else _settle()
        if mode == "omp-forked":
            raise _forked_omp_error(fn.__name__)
        _enter(mode == "exclusive")
        _tls.depth = 1
        threads = hold_one_thread() if _child_one_thread else 0
        try:
            return fn(*args, **kwargs)
        finally:
            if threads:
                _set_threads(threads)
            _tls.depth = 0
            if _tbb_release is not None and threading.get_ident() != _tbb_launcher:
                _tbb_release()  # before the gate opens: a fork waiting there finds the state given back
            _leave()

    return op


def _set_threads(n):
    import numba

    numba.set_num_threads(n)


def _policy(layer, torch_threads):
    guard = {"workqueue": "+lock", "omp": "+fork-one-thread"}.get(layer, "")  # all: ops end before a fork
    if layer == "omp" and torch_threads:
        guard = "-on-torch-threads" + guard
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
        torch_threads = _torch_omp
        info["layer"] = layer
        info["threads"] = numba.get_num_threads()
    else:
        req = str(config.THREADING_LAYER).lower()
        priority = list(config.THREADING_LAYER_PRIORITY)
        torch_threads = (req == "default" and _origin == "mmvref" and priority in (_PRIORITY, _TORCH_PRIORITY)
                         and _torch_openmp())
        if torch_threads:
            layer = "omp"
        elif req == "default":
            tbb_ok = _libtbb is not None and (_libtbb_version or 0) >= TBB_MIN_INTERFACE
            # Numba takes the first of its priority list that loads (omp and workqueue always do here)
            layer = next(p for p in priority if p != "tbb" or tbb_ok)
        else:
            layer = req
        info["layer"] = f"{layer} (not launched yet)"
        info["threads"] = config.NUMBA_NUM_THREADS
    info["policy"] = _policy(layer, torch_threads) + (" (forked child: parallel ops refused)" if _mode == "omp-forked" else
                                       " (forked child: one thread)" if _child_one_thread else "")
    info["libtbb"] = (f"{_libtbb} (preloaded, interface {_libtbb_version})" if _libtbb else None)
    return info
install()
