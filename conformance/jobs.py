"""--jobs N: the ops of a conformance run spread over worker processes.

Each job is one op of ``suite.run`` in a spawned worker process, which imports the job
function by name from this module (``python -m conformance`` runs
``conformance/__main__.py`` as ``__main__``, which a spawned process cannot import back).

Ops of one family (the module of their fast function in the registry: the segment reductions,
the scan family, the sparse products, compress) share kernels, so they run one after another
in the same worker (``family_parts``): a kernel one of them compiled is already in that
process for the next, where two workers starting two ops of a family at once would each
compile it (measured: the README's main job's ``--profile ci --jobs auto`` on 2 CPUs and a fresh
Numba cache: 144 -> 130 s, the ops' times summed 255 -> 226 s; segment_coo after segment_csr
24 -> 2 s, argsort after radix_sort 18 -> 10 s).
"""
from __future__ import annotations

from . import runner
from .backends import BackendFailure
from .faults import resolve
from .isolate import BackendCrash, BackendTimeout, IsolatedBackend
from .suite import failures_dir, run

__all__ = ["run_jobs"]


def _job(name, op, call_timeout, kw):
    """One op in a --jobs worker process: its own backend (isolated when call_timeout is set)."""
    backend = IsolatedBackend(name, kw["s"], call_timeout=call_timeout) if call_timeout else resolve(name, kw["s"])
    try:
        (rep,) = run(name, [op], backend=backend, progress=False, log=lambda *a: None, clean=False, **kw)
    finally:
        if isinstance(backend, IsolatedBackend):
            backend.close()
    return rep


def _family(op):
    """The kernel family of an op: the module of its fast function (ops outside the registry, the
    golden model's stages, each their own)."""
    from mmvref.registry import REGISTRY

    spec = REGISTRY.get(op)
    ref = spec.fast_ref if spec is not None else None
    return ref.partition(":")[0] if ref else op


def family_parts(ops, jobs):
    """The ops in parts that each run in one worker process, in the order they are handed out:
    each family's ops together (in ``ops`` order), largest family first; while there are fewer
    parts than ``jobs``, the largest is split in two, so that a wide machine still runs ``jobs``
    ops at a time."""
    groups = {}
    for op in ops:
        groups.setdefault(_family(op), []).append(op)
    parts = sorted(groups.values(), key=len, reverse=True)
    while len(parts) < jobs and len(parts[0]) > 1:
        big = parts.pop(0)
        half = (len(big) + 1) // 2
        parts = sorted(parts + [big[:half], big[half:]], key=len, reverse=True)
    return parts


def run_jobs(name, ops, jobs, *, call_timeout, log=print, on_report=None, **kw):
    """``run`` with the ops spread over ``jobs`` worker processes (spawned; one op per task, the
    ops of one part of ``family_parts`` in one worker, the next part to the first worker that is
    free); reports in ``ops`` order, each op's logged as it completes. Each op's result is the one
    a serial run with the same seed gives (every op has its own Hypothesis run)."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    fail_dir = failures_dir(kw.get("report_dir"), kw.get("db"))
    if fail_dir:  # cleaned once here, not by every job
        from pathlib import Path

        for old in Path(fail_dir).glob("*.npz") if kw.get("report_dir") else ():
            old.unlink(missing_ok=True)
    kw.pop("progress", None)
    queue = family_parts(ops, jobs)
    workers = [None] * min(jobs, len(queue))
    load = [0] * len(workers)
    broken = [False] * len(workers)
    pending, done = {}, {}

    def feed(w):
        """Hand worker w the next part (a fresh process where the last one died)."""
        if not queue:
            return
        if workers[w] is None or broken[w]:
            if workers[w] is not None:
                workers[w].shutdown(wait=False)
            workers[w] = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
            broken[w] = False
        for op in queue.pop(0):
            pending[workers[w].submit(_job, name, op, call_timeout, kw)] = (op, w)
            load[w] += 1

    try:
        for w in range(len(workers)):
            feed(w)
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                op, w = pending.pop(f)
                load[w] -= 1
                broken[w] = broken[w] or isinstance(f.exception(), BrokenProcessPool)
                done[op] = r = _report(f, op, name)
                more = "".join(f", {v} {k}" for k, v in (("rejected", r.rejected), ("shrink calls", r.shrink_calls))
                               if v)
                status = {"pass": "ok", "skipped": f"skipped ({r.message})"}.get(r.status, r.status.upper())
                log(f"  {r.op:28s} {r.examples:5d} examples {r.seconds:7.2f} s  {status}{more}")
                if r.status not in ("pass", "skipped"):
                    log(f"      {r.message}")
                    if r.command:
                        log(f"      reproduce: {r.command}")
                if on_report is not None:
                    on_report([done[o] for o in ops if o in done])
                if load[w] == 0:
                    feed(w)
    finally:
        for ex in workers:
            if ex is not None:
                ex.shutdown(wait=True, cancel_futures=True)
    return [done[op] for op in ops]


def _report(future, op, name):
    """The OpReport of a finished job, or the one that says how its process or backend failed."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool as exc:  # a job process died (only without isolation)
        return runner.OpReport(op, name, "crash", failures=1, message=f"the job process died: {exc}")
    except BackendFailure as exc:  # the job's own backend failed while starting
        return runner.OpReport(op, name, "crash" if exc.kind == "crash" else "fail", failures=1,
                               message=exc.line())
    except (BackendCrash, BackendTimeout) as exc:
        return runner.OpReport(op, name, "crash", failures=1, message=f"the job's backend failed to start: {exc}")
