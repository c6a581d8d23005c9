"""--jobs N: the ops of a conformance run spread over worker processes.

Each job is one op of ``suite.run`` in a spawned worker process, which imports the job
function by name from this module (``python -m conformance`` runs
``conformance/__main__.py`` as ``__main__``, which a spawned process cannot import back).
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


def run_jobs(name, ops, jobs, *, call_timeout, log=print, on_report=None, **kw):
    """``run`` with the ops spread over ``jobs`` worker processes (spawned; one op per task, so
    a slow op does not hold the others back); reports in ``ops`` order. Each op's result is the
    one a serial run with the same seed gives (every op has its own Hypothesis run)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    fail_dir = failures_dir(kw.get("report_dir"), kw.get("db"))
    if fail_dir:  # cleaned once here, not by every job
        from pathlib import Path

        for old in Path(fail_dir).glob("*.npz") if kw.get("report_dir") else ():
            old.unlink(missing_ok=True)
    kw.pop("progress", None)
    done = {}
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as ex:
        futs = {ex.submit(_job, name, op, call_timeout, kw): op for op in ops}
        for f in as_completed(futs):
            op = futs[f]
            try:
                r = f.result()
            except BrokenProcessPool as exc:  # a job process died (only without isolation)
                r = runner.OpReport(op, name, "crash", failures=1, message=f"the job process died: {exc}")
            except BackendFailure as exc:  # the job's own backend failed while starting
                r = runner.OpReport(op, name, "crash" if exc.kind == "crash" else "fail", failures=1,
                                    message=exc.line())
            except (BackendCrash, BackendTimeout) as exc:
                r = runner.OpReport(op, name, "crash", failures=1, message=f"the job's backend failed to start: {exc}")
            done[op] = r
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
    return [done[op] for op in ops]
