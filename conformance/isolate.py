"""Run a backend in a worker process, so that its crash or hang costs one op, not the run.

``IsolatedBackend(name, s, call_timeout=...)`` looks like the backend named
``name`` (the same names as ``--backend``): its op methods, ``dtypes``,
``overflow``, ``topk_ties``, ``s`` and version are those the worker reports,
and each op call is sent to the worker (a ``spawn``-started process, so
nothing of the runner's threads or Numba state is inherited) and waited for at
most ``call_timeout`` seconds.

- Starting: the worker resolves the backend and describes it (``backends.describe``); what
  fails there is raised by the constructor here (a BackendFailure naming the backend's method
  that raised, or a ValueError / ImportError / AttributeError for a name that resolves to nothing).
- The backend raises: the exception comes back and is raised in the runner
  (NotImplementedError and OverflowError keep their meaning to the runner). One
  that cannot be pickled comes back as a RuntimeError naming its type.
- The worker dies (a segfault, ``os._exit``, the OOM killer): ``BackendCrash``
  naming the exit code or signal.
- No answer within ``call_timeout``: the worker is killed and ``BackendTimeout``
  raised.
After either, the next call starts a fresh worker. Results travel by pickle
(numpy arrays and whatever else the backend returns, so the runner's protocol
check still sees a torch tensor as one).
"""
from __future__ import annotations

import multiprocessing as mp
import signal

__all__ = ["IsolatedBackend", "BackendCrash", "BackendTimeout", "DEFAULT_CALL_TIMEOUT"]

#: seconds one backend call may take before it counts as hung
DEFAULT_CALL_TIMEOUT = 120.0
#: seconds a fresh worker may take to import and resolve the backend
START_TIMEOUT = 300.0


class BackendCrash(RuntimeError):
    """The backend's worker process died during a call."""


class BackendTimeout(RuntimeError):
    """A backend call did not return within the call timeout."""


def _describe_exit(code):
    if code is None:
        return "exit code unknown"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _worker(conn, name, s):
    """The worker: resolve the backend, describe it (``backends.describe``: a method that raises
    there comes back as a BackendFailure naming it), then answer calls until told to stop."""
    try:
        from .backends import describe
        from .faults import resolve

        backend = resolve(name, s)
        conn.send(("ready", describe(backend, name, s=s)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("failed", _portable(exc)))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        op, args, kwargs = msg
        try:
            result = getattr(backend, op)(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001
            conn.send(("raise", _portable(exc)))
            continue
        try:
            conn.send(("ok", result))
        except Exception as exc:  # noqa: BLE001 - a result that cannot be sent
            conn.send(("raise", RuntimeError(f"the backend's result of type {type(result).__name__} "
                                             f"could not be sent from its worker: {exc}")))


def _portable(exc):
    """``exc`` if it survives pickling, else a RuntimeError naming it."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class IsolatedBackend:
    """The backend ``name`` behind a worker process (see the module docstring)."""

    def __init__(self, name, s=8, *, call_timeout=DEFAULT_CALL_TIMEOUT):
        if not call_timeout or call_timeout <= 0:
            raise ValueError(f"call_timeout must be > 0 seconds, got {call_timeout!r}")
        self._name = name
        self._s = s
        self.call_timeout = float(call_timeout)
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        info = self._start()
        self._ops = frozenset(info["ops"])
        self._dtypes = info["dtypes"]
        for k, v in info["attrs"].items():
            if k != "name":
                object.__setattr__(self, k, v)
        self.backend_name = info["attrs"].get("name", name)
        if self._dtypes is not None:
            self.dtypes = self._declared_dtypes
        if info["regimes"] is not None:
            declared = dict(info["regimes"])
            self.regimes = lambda: declared
        if info.get("variants") is not None:
            declared_variants = dict(info["variants"])
            self.variants = lambda op: declared_variants.get(op, ())
        self._models = info["models"]
        if self._models is not None:
            self.error_model = self._declared_model

    def __repr__(self):
        return f"IsolatedBackend({self._name!r}, call_timeout={self.call_timeout})"

    # ------------------------------------------------------------------ worker

    def _start(self):
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child, self._name, self._s), daemon=True,
                                 name=f"conformance-backend[{self._name}]")
        proc.start()
        child.close()
        if not parent.poll(START_TIMEOUT):
            proc.kill()
            proc.join()
            raise BackendTimeout(f"the worker for backend {self._name} did not start within {START_TIMEOUT:.0f} s")
        try:
            kind, payload = parent.recv()
        except EOFError:
            proc.join()
            raise BackendCrash(f"the worker for backend {self._name} died while starting "
                               f"({_describe_exit(proc.exitcode)})") from None
        if kind == "failed":
            proc.join()
            raise payload
        self._proc, self._conn = proc, parent
        return payload

    def _stop(self, kill=False):
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        try:
            if kill:
                proc.kill()
            else:
                conn.send(None)
        except (OSError, EOFError):
            pass
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        conn.close()

    def close(self):
        """Stop the worker (a later call starts a fresh one)."""
        self._stop()

    def __del__(self):
        try:
            self._stop(kill=True)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _call(self, op, args, kwargs):
        if self._proc is None:
            self._start()
        conn, proc = self._conn, self._proc
        try:
            conn.send((op, args, kwargs))
        except (OSError, EOFError):
            proc.join(5)
            self._stop(kill=True)
            raise BackendCrash(f"the backend's worker died ({_describe_exit(proc.exitcode)})") from None
        if not conn.poll(self.call_timeout):
            self._stop(kill=True)
            raise BackendTimeout(f"{op} did not return within {self.call_timeout:g} s (the worker was killed)")
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            proc.join(5)
            code = proc.exitcode
            self._stop(kill=True)
            raise BackendCrash(f"the backend's worker died during {op} ({_describe_exit(code)})") from None
        if kind == "raise":
            raise payload
        return payload

    # ------------------------------------------------------------------ the backend's face

    def _declared_model(self, op):
        m = self._models.get(op)
        if m is None:
            raise NotImplementedError(f"the backend declares no error model for {op}")
        return m

    def _declared_dtypes(self, op):
        if op not in self._dtypes:
            raise NotImplementedError(f"the backend was not asked for the dtypes of {op}")
        return self._dtypes[op]  # None: declared none for this op

    def __getattr__(self, op):
        if op.startswith("_") or op not in self.__dict__.get("_ops", ()):
            raise AttributeError(f"backend {self.__dict__.get('_name')!r} has no op {op!r}")

        def call(*args, **kwargs):
            return self._call(op, args, kwargs)

        call.__name__ = op
        return call
