"""python -m conformance --backend NAME [--ops ...] [--examples N] [--seed S] [--s S]"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from mmvref.registry import REGISTRY

from . import backends, cases, compare


def _golden_call(op, args, s):
    spec = REGISTRY[op]
    if op == "spmv":
        (ptr, ind, data, shape), x = args
        return spec.golden(ptr, ind, data, x, s)
    return spec.golden(*args, s)


def run(backend_name, ops, examples, seed, s):
    backend = backends.resolve(backend_name)
    failures = 0
    for op in ops:
        if not backends.has_op(backend, op):
            print(f"  {op:18s} skipped (backend has no such op)")
            continue
        rng = np.random.default_rng(seed)
        t0, n_run, first = time.perf_counter(), 0, None
        for args, kwargs in cases.cases(op, rng, s, examples):
            expected = _golden_call(op, args, s)
            actual = getattr(backend, op)(*args, **kwargs)
            msg = compare.check(op, args, expected, actual)
            n_run += 1
            if msg and first is None:
                first = msg
        if n_run == 0:
            first = "no cases generated for this op (the runner cannot vouch for it)"
        status = "ok" if first is None else f"FAIL: {first}"
        failures += first is not None
        print(f"  {op:18s} {n_run:4d} examples  {time.perf_counter() - t0:6.2f} s  {status}", flush=True)
    return failures


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__)
    p.add_argument("--backend", default="mmvref", help="mmvref, or package.module:attribute")
    p.add_argument("--ops", nargs="*", default=None, help="registry op names (default: all the backend has)")
    p.add_argument("--examples", type=int, default=40, help="examples per op")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--s", type=int, default=8, help="MMV-RAM parameter s for the golden model")
    a = p.parse_args(argv)
    ops = a.ops or list(REGISTRY)
    print(f"conformance: backend={a.backend} examples={a.examples} seed={a.seed} s={a.s}")
    failures = run(a.backend, ops, a.examples, a.seed, a.s)
    print("conformance:", "PASS" if not failures else f"{failures} op(s) FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
