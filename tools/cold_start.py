"""Cold first-call cost of every public op: ``import mmvref`` plus one call, in a fresh process with a
fresh, empty ``NUMBA_CACHE_DIR``, per op and input dtype; and the Numba specializations that call
compiled (Numba's compile events for ``mmvref``'s functions: every kernel, closure-made kernels and
nested callees included).

    python tools/cold_start.py [--ops scan,spmv] [--dtypes float32,int32] [--json out.json]

A user's first call on a machine whose cache is empty pays exactly this; ``python -m mmvref
precompile`` pays it ahead of time.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# One first call per op: small inputs, the shapes a user starts with (1-D for the 1-D ops, (n, 8)
# features for the N-d ops). `DT` is the value dtype under test.
CALLS = {
    "scan": "mmvref.scan(x)",
    "segmented_scan": "mmvref.segmented_scan(x, flags)",
    "segmented_sum": "mmvref.segmented_sum(x, flags)",
    "segment_sum_csr": "mmvref.segment_sum_csr(x, indptr)",
    "segment_csr": "mmvref.segment_csr(x2, indptr)",
    "segment_coo": "mmvref.segment_coo(x2, index)",
    "scatter": "mmvref.scatter(x2, index)",
    "gather_csr": "mmvref.gather_csr(x2[:100], indptr)",
    "compress": "mmvref.compress(x, mask)",
    "compress_ind": "mmvref.compress_ind(x, mask)",
    "spmv": "mmvref.spmv(A, x)",
    "batched_scan": "mmvref.batched_scan(x2)",
    "split": "mmvref.split(x, mask)",
    "split_ind": "mmvref.split_ind(x, mask)",
    "radix_sort": "mmvref.radix_sort(x)",
    "argsort": "mmvref.argsort(x)",
    "topk": "mmvref.topk(x, 10)",
    "weighted_sample": "mmvref.weighted_sample(np.abs(x) + 1, 0.5)",
    "top_p_sample": "mmvref.top_p_sample(p2, 0.9, np.full(4, 0.5))",
    "spmm": "mmvref.spmm(A, x2)",
    "spgemm": "mmvref.spgemm(A, A)",
    "prepare": "mmvref.prepare(A) @ x",
}
FLOAT_ONLY = {"weighted_sample", "top_p_sample"}

SETUP = """
import numpy as np, scipy.sparse as sp
rng = np.random.default_rng(0)
n = 1000
x = rng.integers(-5, 6, n).astype(DT)
x2 = rng.integers(-5, 6, (n, 8)).astype(DT)
flags = np.zeros(n, bool); flags[::7] = True
indptr = np.arange(0, n + 1, 10, dtype=np.int64)
index = np.sort(rng.integers(0, 100, n))
mask = x > 0
A = sp.random(n, n, 0.01, format="csr", random_state=0, dtype=np.float64)
A.data = rng.integers(-5, 6, A.nnz).astype(DT)
p2 = rng.random((4, 50)); p2 /= p2.sum(1, keepdims=True)
"""

PROBE = """
import os, sys, time, json
from numba.core import event
compiled = []
class Listener(event.Listener):  # one numba:compile event per specialization compiled, nested callees included
    def on_start(self, ev):
        d = ev.data["dispatcher"]
        compiled.append(f"{{d.py_func.__module__}}.{{d.py_func.__qualname__}}")
    def on_end(self, ev):
        pass
t0 = time.perf_counter()
import mmvref
t1 = time.perf_counter()
event.register("numba:compile", Listener())
DT = {dt!r}
{setup}
t2 = time.perf_counter()
{call}
t3 = time.perf_counter()
mine = [k for k in compiled if k.startswith("mmvref")]
counts = {{k: mine.count(k) for k in mine}}
kernels = sorted(f"{{k.split('.', 1)[1]}}:{{c}}" for k, c in counts.items())
print(json.dumps({{"import_s": t1 - t0, "call_s": t3 - t2, "specs": len(mine), "kernels": kernels}}))
"""


def measure(op: str, dt: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        code = PROBE.format(dt=dt, setup=SETUP, call=CALLS[op])
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
    if r.returncode:
        return {"op": op, "dtype": dt, "error": r.stderr.strip().splitlines()[-1]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out.update(op=op, dtype=dt, process_s=wall, total_s=out["import_s"] + out["call_s"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default=",".join(CALLS))
    ap.add_argument("--dtypes", default="float32,int32")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--kernels", action="store_true", help="list the kernels each call compiled")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'op':<16} {'dtype':<8} {'import s':>8} {'call s':>7} {'total s':>7} {'specs':>5}", flush=True)
    for op in args.ops.split(","):
        for dt in args.dtypes.split(","):
            if op in FLOAT_ONLY and not dt.startswith("float"):
                continue
            row = measure(op, dt)
            rows.append(row)
            if "error" in row:
                print(f"{op:<16} {dt:<8} ERROR {row['error']}", flush=True)
                continue
            print(f"{op:<16} {dt:<8} {row['import_s']:8.2f} {row['call_s']:7.2f} {row['total_s']:7.2f} "
                  f"{row['specs']:5d}", flush=True)
            if args.kernels:
                print("    " + " ".join(row["kernels"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
