"""The benchmark driver: ``python -m benchmarks``."""
from __future__ import annotations

import argparse
import platform
import sys
import time

from . import gnn, out_param, prepared, report, scan_family, sparse_products
from .harness import Missing, Result, Skip, _our, copy_bandwidth, free, time_interleaved
from .ops import FULL_N, OPS, QUICK_N, op_names

# the benches built on ops.py's helpers in modules of their own (imported after ops.py is complete)
OPS.update(scan_family.OPS)
OPS.update(sparse_products.OPS)
OPS.update(gnn.OPS)
OPS.update(out_param.OPS)
OPS.update(prepared.OPS)
#: names that --ops expands to several benches
GROUPS = {"gnn": list(gnn.OPS), "out": list(out_param.OPS), "prepared": list(prepared.OPS)}

__all__ = ["main", "run"]


def _versions():
    """The benchmark header's facts: mmvref's configuration report (versions, CPU, the
    target Numba compiles for, kernel paths, threading) plus the peers' versions. torch (a peer)
    is imported first, so that the threading policy reported is the one in force when the layer
    launches (docs/cpus.md, "Threads and processes")."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    from mmvref._config import config_info

    v = config_info()
    v["machine"] = platform.machine()
    for mod in ("torch_scatter",):
        try:
            v["versions"][mod] = __import__(mod).__version__
        except Exception:
            v["versions"][mod] = None
    try:
        import torch

        v["threading"]["torch_threads"] = torch.get_num_threads()
    except Exception:
        pass
    return v


#: rounds at most per case (``time_interleaved``'s max_runs): --quick stops at 15, where the medians
#: of ms-scale cases are as steady as at 51 and a case of three implementations costs a third
QUICK_MAX_ROUNDS, MAX_ROUNDS = 15, 51


def run(names, *, quick, runs, log=print, smoke=False):
    """Run the benchmarks of ``names``; returns (results, copy GB/s, peer names per op). ``smoke``: one
    round per case (after the warm-up call), no minimum of timed work: every case runs, nothing is
    measured."""
    copy_n = QUICK_N if quick else FULL_N
    copy_gbs, copy_ms = copy_bandwidth(copy_n, runs=runs)
    log(f"copy: {copy_n:,} int32 in {copy_ms:.2f} ms = {copy_gbs:.1f} GB/s (parallel Numba, read + write)")
    results = [Result("copy", f"n={copy_n:,}", "numba parallel copy", False, copy_n, 8 * copy_n, ms=copy_ms,
                      runs=runs)]
    peer_order = {}
    for name in names:
        bench = OPS[name]
        peers = bench.peers()
        peer_order[name] = list(peers)
        try:
            fn = _our(getattr(bench, "fast_name", "") or name)
            missing = None
        except Missing as exc:
            fn, missing = None, str(exc)
        for case in bench.cases(quick):
            t0 = time.perf_counter()
            inp = bench.inputs(case)
            nbytes = bench.nbytes(case, inp)
            extra = {"plots": case.plots, **{k: v for k, v in case.params.items() if k != "matrix"}}
            if "label" in case.params:
                extra["matrix"] = case.params["label"]

            def result(impl, ours, _n=name, _c=case, _b=nbytes, _x=extra, **kw):
                return Result(_n, _c.label, impl, ours, _c.n, _b, _c.density, extra=dict(_x), **kw)

            thunks, rows = {}, {}
            if fn is None:
                rows["ours"] = result("ours", True, status="missing", note=missing)
            else:
                thunks["ours"] = bench.ours(fn, inp)
            for pname, make in peers.items():
                try:
                    thunks[pname] = make(inp)
                except Skip as exc:
                    rows[pname] = result(pname, False, status="skipped", note=str(exc))
            if smoke:
                times, outputs = time_interleaved(thunks, runs=1, min_seconds=0.0, max_runs=1, absorb_s=0.0)
            else:
                times, outputs = time_interleaved(thunks, runs=runs,
                                                  max_runs=QUICK_MAX_ROUNDS if quick else MAX_ROUNDS)
            good = {k: v for k, v in outputs.items() if not isinstance(v, Exception)}
            acc = bench.accuracy(inp, good) if hasattr(bench, "accuracy") and "ours" in good else {}
            # float results judged against the exact one and the documented bound
            within = {k: v.get("within_gamma_k", False) for k, v in acc.items()}

            for key in thunks:
                ours = key == "ours"
                out = outputs[key]
                if isinstance(out, (NotImplementedError, Missing)) and ours:
                    rows[key] = result(key, True, status="missing", note=f"{type(out).__name__}: {out}")
                elif isinstance(out, Skip):
                    rows[key] = result(key, ours, status="skipped", note=str(out))
                elif isinstance(out, Exception):
                    rows[key] = result(key, ours, status="error", note=f"{type(out).__name__}: {out}")
                else:
                    ms, k = times[key]
                    rows[key] = result(key, ours, ms=ms, runs=k)
                    # peers that differ from ours only by rounding, both within the documented error
                    # bound (e.g. a float32 row of 65,536 products summed in another order), agree
                    if (not ours and "ours" in times and not bench.same(outputs["ours"], out)
                            and not (within.get("ours") and within.get(key))):
                        rows[key].note = "output differs from ours"
            results.extend(rows[k] for k in ["ours", *peers] if k in rows)
            if acc:
                for r in results:
                    if r.op == name and r.case == case.label and (("ours" if r.ours else r.impl) in acc):
                        r.extra["accuracy"] = acc["ours" if r.ours else r.impl]
            case_rows = [r for r in results if r.op == name and r.case == case.label]
            log(f"{name:16s} {case.label:34s} " + "  ".join(
                f"{'ours' if r.ours else r.impl}={r.ms:.2f}ms" if r.ms else f"{r.impl}={r.status}"
                for r in case_rows) + f"   [{time.perf_counter() - t0:.1f}s]")
            del inp, outputs, good
            free()
    again, again_ms = copy_bandwidth(copy_n, runs=runs)
    log(f"copy again: {again_ms:.2f} ms = {again:.1f} GB/s; the yardstick is the faster of the two")
    results.append(Result("copy", f"n={copy_n:,} (end)", "numba parallel copy", False, copy_n, 8 * copy_n,
                          ms=again_ms, runs=runs))
    return results, max(copy_gbs, again), peer_order


def _reuse_memory():
    """glibc serves blocks above its mmap threshold (at most 32 MiB by default) with fresh
    mmap'ed pages, so every op that returns a new 400 MB array pays ~100k page faults; raising
    the threshold keeps freed blocks in the heap for reuse. Same effect as MALLOC_MMAP_THRESHOLD_."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    if not (libc.mallopt(M_MMAP_THRESHOLD, 1 << 30) and libc.mallopt(M_TRIM_THRESHOLD, 1 << 31)):
        raise SystemExit("--reuse-memory: mallopt failed (not glibc?)")


def _check_targets(cpus):
    """Refuse, before any benchmark runs, a ``--target`` CPU name that Numba cannot compile for
    (LLVM knows no such CPU, e.g. "native"): ``import mmvref`` compiled for it, in a child
    process, as ``_other_target`` runs it (an unknown name aborts inside LLVM after minutes of
    the native build otherwise)."""
    import os
    import subprocess
    import tempfile

    for cpu in cpus:
        with tempfile.TemporaryDirectory(prefix=f"mmvref-bench-check-{cpu}-") as tmp:
            env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES="", NUMBA_CACHE_DIR=tmp)
            proc = subprocess.run([sys.executable, "-c", "import mmvref"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            said = [line for line in proc.stdout.splitlines() if line.strip()]
            why = next((line for line in said if "not a recognized processor" in line), said[-1] if said else "")
            raise SystemExit(f"--target {cpu}: Numba cannot compile for this CPU name (LLVM CPU names such as "
                             f"haswell, skylake-avx512, x86-64; the host's build is always run): "
                             f"{why or f'exit {proc.returncode}'}")


def _other_target(cpu, args, log):
    """Run our rows of the same benchmarks compiled for ``cpu`` in a child process
    (``NUMBA_CPU_NAME=cpu``, ``NUMBA_CPU_FEATURES=""``: the features that CPU has, not
    the host's; a fresh Numba cache); returns (its results, its copy GB/s, its meta)."""
    import json
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix=f"mmvref-bench-{cpu}-") as tmp:
        out = os.path.join(tmp, "results.json")
        env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES="", NUMBA_CACHE_DIR=os.path.join(tmp, "cache"))
        # the peers run in the child too: its ratios compare times taken side by side (this VM's memory
        # bandwidth drifts by up to 1.5x between minutes: the native run's peer times made a build
        # 0.88x that measured 1.16-1.27x against torch.mv in one process)
        cmd = [sys.executable, "-m", "benchmarks", "--child", "--json", out, "--runs", str(args.runs)]
        cmd += (["--quick"] if args.quick else []) + (["--reuse-memory"] if args.reuse_memory else [])
        cmd += ["--smoke"] if args.smoke else []
        cmd += ["--ops", *args.ops] if args.ops else []
        log(f"--- the {cpu} build, in a child process: {' '.join(cmd[1:])}")
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"--target {cpu}: the child benchmark failed (exit {proc.returncode})")
        with open(out) as fh:
            data = json.load(fh)
    fields = set(Result.__dataclass_fields__)
    results = [Result(**{k: v for k, v in d.items() if k in fields}) for d in data["results"]]
    return with_own_peers(results), data["meta"]["copy_gb_per_s"], data["meta"]


def with_own_peers(results):
    """A child run's rows to report beside the native run's: its own rows (and its copy), each
    carrying the times of the peers of its case in that child (``extra["peer_ms"]``, which
    ``report.markdown`` takes for the ratios)."""
    for r in results:
        if r.ours:
            r.extra["peer_ms"] = {q.impl: q.ms for q in results
                                  if not q.ours and q.op == r.op and q.case == r.case and q.ms}
    return [r for r in results if r.ours or r.op == "copy"]


def _target_line(meta):
    t, s = meta["target"], meta["simd"]
    return f"{t['cpu']} ({' '.join(t['features']) or 'baseline'}; kernel level {s['level']})"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="n = 1e7 only, fewer cases and rounds (under 2 minutes)")
    ap.add_argument("--ops", nargs="+", metavar="OP",
                    help=f"ops to run (default: all): {', '.join(op_names())}; groups: "
                         + "; ".join(f"{g} = {' '.join(m)}" for g, m in GROUPS.items())
                         + "; dask: the Dask cluster benchmark (needs the [dask] extra; not part of 'all')"
                         + "; pyg: PyG training steps, stock vs mmvref.pyg (needs torch_geometric; not part of 'all')")
    ap.add_argument("--plot", metavar="DIR", help="write PNG plots to DIR")
    ap.add_argument("--json", metavar="FILE", help="save the results as JSON")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per measurement, at least 5 (default 5)")
    ap.add_argument("--reuse-memory", action="store_true",
                    help="let glibc reuse freed large blocks (mallopt M_MMAP_THRESHOLD/M_TRIM_THRESHOLD = 4 GiB) "
                         "so that results allocated per call do not page-fault fresh memory; applies to every "
                         "implementation in the process alike")
    ap.add_argument("--target", nargs="+", metavar="CPU", default=[],
                    help="also run our ops compiled for these LLVM CPU names (e.g. haswell: AVX2 without "
                         "AVX-512; x86-64: the SSE2 baseline), each in a child process, and report them beside "
                         "the native build (each build's x copy uses the copy measured in its own process); "
                         "each name is checked before anything runs (the native build always runs: 'native' is "
                         "not a name to give)")
    ap.add_argument("--smoke", action="store_true",
                    help="run every case once after its warm-up call, without timing rounds: shows that each "
                         "case compiles and runs (CI runs the quick benchmark so for the x86-64 baseline); the "
                         "times printed are single calls, not measurements")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # the child of --target: no extra reports
    args = ap.parse_args(argv)
    args.runs = max(5, args.runs)
    _check_targets(args.target)
    if args.reuse_memory:
        _reuse_memory()
    names = list(dict.fromkeys(m for n in (args.ops or op_names()) for m in GROUPS.get(n, [n])))
    if "dask" in names:  # a cluster benchmark of its own (benchmarks/dask_scale.py), not in the table below
        names.remove("dask")
        from . import dask_scale

        print("# mmvref on Dask (--ops dask)\n")
        print(dask_scale.main(quick=args.quick, log=lambda s: print(s, file=sys.stderr, flush=True)))
        if not names:
            return 0
    pyg_rows = None
    if "pyg" in names:  # end-to-end training steps (benchmarks/pyg.py), tables of their own
        names.remove("pyg")
        from . import pyg

        print("# mmvref in PyG training steps (--ops pyg)\n")
        text, pyg_rows = pyg.main(quick=args.quick, runs=args.runs,
                                  log=lambda s: print(s, file=sys.stderr, flush=True))
        print(text)
        if not names:
            if args.json:
                meta = _versions()
                meta.update(quick=args.quick, runs=args.runs, argv=sys.argv[1:], pyg=pyg_rows)
                report.write_json(args.json, meta, [])
                print(f"results written to {args.json}")
            return 0
    unknown = [n for n in names if n not in OPS]
    if unknown:
        ap.error(f"unknown op(s) {', '.join(unknown)}; known: {', '.join(op_names())}; groups: {', '.join(GROUPS)}")
    meta = _versions()
    meta.update(quick=args.quick, runs=args.runs, reuse_memory=args.reuse_memory, smoke=args.smoke, argv=sys.argv[1:])
    from mmvref._config import format_config

    print("# mmvref benchmarks (" + ("quick" if args.quick else "full") + (", smoke" if args.smoke else "") + ")\n")
    print("```\n" + format_config(meta) + "\n```\n")
    t0 = time.perf_counter()

    def log(s):
        print(s, file=sys.stderr, flush=True)

    results, copy_gbs, peer_order = run(names, quick=args.quick, runs=args.runs, log=log,
                                        smoke=args.smoke)
    meta["copy_gb_per_s"] = copy_gbs
    builds = [f"**ours**: the native build, {_target_line(meta)}"]
    for cpu in args.target:
        other, other_copy, other_meta = _other_target(cpu, args, log)
        label = f"ours [{cpu} build]"
        for r in other:
            if r.op != "copy" and r.ours:
                r.impl = label
                r.extra["copy_gb_per_s"] = other_copy
                results.append(r)
        builds.append(f"**{label}**: {_target_line(other_meta)}; copy in its process {other_copy:.1f} GB/s")
        meta.setdefault("targets", {})[cpu] = {"meta": other_meta, "copy_gb_per_s": other_copy}
    meta["seconds"] = time.perf_counter() - t0
    if args.smoke:
        print("**Smoke run**: every case ran once after its warm-up call; the times below are single calls, "
              "not measurements, and the ratios mean nothing.\n")
    print(f"Memory-copy yardstick: {copy_gbs:.1f} GB/s (parallel Numba copy, bytes read + written; the "
          f"faster of a copy at the start and at the end). Each case times its implementations in "
          f"interleaved rounds (at least {args.runs} rounds and 0.3 s after one warm-up call, at most "
          f"{QUICK_MAX_ROUNDS if args.quick else MAX_ROUNDS} rounds; in each "
          f"round an implementation runs untimed for 10 ms, so that the previous one's spinning "
          f"thread pool has let go of the cores, then once timed) and reports medians; "
          f"vs <peer> = peer time / our time.\n")
    if args.target:
        print("Builds compared (the other builds ran after the native one, in child processes, which timed "
              "the peers again beside them: their \"vs <peer>\" ratios use the peers' times of their own "
              "process):\n")
        print("\n".join(f"- {b}" for b in builds) + "\n")
    print(report.markdown([r for r in results if r.op != "copy"], copy_gbs, peer_order))
    for name in names:  # benches with a memory section (spgemm workspaces)
        if hasattr(OPS[name], "memory_report") and not args.child:
            print(f"\n## {name}: peak memory\n\n{OPS[name].memory_report(args.quick)}")
    if any(n in gnn.OPS for n in names) and not args.child:
        targets = gnn.targets_report([r for r in results if r.op in gnn.OPS], copy_gbs)
        if targets:
            print(f"\n## gnn: targets\n\n{targets}")
    if args.json:
        if pyg_rows is not None:
            meta["pyg"] = pyg_rows
        report.write_json(args.json, meta, results)
        print(f"results written to {args.json}")
    if args.plot:
        files = report.plot(args.plot, [r for r in results if r.op != "copy"], copy_gbs)
        print(f"plots written to {args.plot}: {', '.join(files)}")
    print(f"\ntotal {meta['seconds']:.0f} s")
    return 0
