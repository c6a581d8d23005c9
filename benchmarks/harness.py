"""Timing, the memory-copy yardstick and op lookup, shared by every benchmark."""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass, field

import numba
import numpy as np
from numba import njit, prange

__all__ = ["Result", "Missing", "Skip", "time_median", "time_interleaved", "copy_bandwidth", "_our", "free"]


class Skip(Exception):
    """A peer that cannot run here (not installed, unsupported dtype...); the message says why."""


class Missing(Exception):
    """Our op is not importable yet; reported as a "missing" row."""


@dataclass
class Result:
    op: str
    case: str
    impl: str
    ours: bool
    n: int                    # elements processed (x's length; nonzeros for spmv)
    nbytes: int               # the case's byte model (see benchmarks/ops.py)
    density: float | None = None
    ms: float | None = None   # median wall time
    runs: int = 0
    status: str = "ok"        # ok | missing | skipped | error
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def gbs(self):
        return self.nbytes / (self.ms * 1e-3) / 1e9 if self.ms else None

    @property
    def gelems(self):
        return self.n / (self.ms * 1e-3) / 1e9 if self.ms else None

    def as_dict(self):
        d = asdict(self)
        d["gb_per_s"] = self.gbs
        d["gelem_per_s"] = self.gelems
        return d


def time_median(fn, *, runs: int = 5, warmup: int = 1):
    """(median wall time of fn() in ms over max(runs, 5) calls after ``warmup``
    calls, number of timed calls, the first warm-up call's output)."""
    out = None
    for i in range(max(warmup, 1)):
        r = fn()
        if i == 0:
            out = r
    ts = []
    for _ in range(max(runs, 5)):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3, len(ts), out


def time_interleaved(thunks: dict, *, runs: int = 5, min_seconds: float = 0.3, max_runs: int = 51,
                     absorb_s: float = 0.01):
    """Median wall time (ms) and run count per implementation, timed in rounds.

    Each thunk is called once to warm up (its output is returned), then every
    round times each implementation once, so load from other processes hits
    all of them alike. Rounds continue until at least ``runs`` (>= 5) rounds
    and ``min_seconds`` of timed work, at most ``max_runs``. A thunk that
    raises is dropped; its exception is returned in place of the output.

    In each round an implementation is first called untimed for at least
    ``absorb_s`` (once at least), then timed once. Thread pools keep their
    workers spinning for milliseconds after a parallel call returns (torch's
    OpenMP pool, TBB), and that spinning takes cores from whichever
    implementation runs next; the untimed calls absorb it, so each is timed as
    when called in a loop on its own. (A pause instead does not work: a parked
    pool, or on a VM an idle virtual CPU, wakes slowly.) Measured on a 2-core
    VM, SpMV of uniform 1M float32 timed right after torch.mv: 20.4 ms; timed
    alone, back to back: 11.8 ms.
    """
    outputs, live = {}, {}
    for name, fn in thunks.items():
        try:
            outputs[name] = fn()
            live[name] = fn
        except Exception as exc:  # reported by the caller
            outputs[name] = exc
    ts = {name: [] for name in live}
    spent = 0.0
    rounds = 0
    while live and rounds < max_runs and (rounds < max(runs, 5) or spent < min_seconds):
        for name, fn in live.items():
            t_end = time.perf_counter() + absorb_s
            fn()  # absorbs the previous implementation's spinning workers
            while time.perf_counter() < t_end:
                fn()
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            ts[name].append(dt)
            spent += dt
        rounds += 1
    return {name: (statistics.median(v) * 1e3, len(v)) for name, v in ts.items()}, outputs


@njit(parallel=True, cache=True)
def _par_copy(src, dst, n_chunks):
    n = src.size
    for c in prange(n_chunks):
        lo = n * c // n_chunks
        hi = n * (c + 1) // n_chunks
        s = src[lo:hi]
        d = dst[lo:hi]
        for i in range(s.size):
            d[i] = s[i]


def copy_bandwidth(n: int, *, runs: int = 5) -> tuple[float, float]:
    """(GB/s, ms) of a parallel Numba copy of n int32 values; bytes = 8 n (read + write)."""
    src = np.arange(n, dtype=np.int32)
    dst = np.empty_like(src)
    C = 4 * numba.get_num_threads()
    ms, _, _ = time_median(lambda: _par_copy(src, dst, C), runs=runs, warmup=2)
    if not np.array_equal(src[:: max(1, n // 1000)], dst[:: max(1, n // 1000)]):  # pragma: no cover
        raise RuntimeError("copy benchmark produced a wrong copy")
    return 8 * n / (ms * 1e-3) / 1e9, ms


def _our(name: str):
    """The fast function of op ``name``: the registry entry's ``fast`` when the
    registry has it, else ``mmvref.<name>``. Raises Missing when neither exists."""
    try:
        from mmvref.registry import REGISTRY

        fn = REGISTRY[name].fast
        if fn is not None:
            return fn
    except Exception:  # registry absent, op unknown, or its fast_ref not importable yet
        pass
    try:
        import mmvref

        fn = getattr(mmvref, name)
    except Exception as exc:
        raise Missing(f"mmvref.{name} is not importable ({type(exc).__name__}: {exc})") from None
    if not callable(fn):
        raise Missing(f"mmvref.{name} is not callable")
    return fn


def free():
    gc.collect()
