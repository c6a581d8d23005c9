"""Beyond one machine (issue 18): ``python -m benchmarks --ops dask [--quick]``.

On a ``distributed.LocalCluster`` of 2 worker processes (one thread each, Numba at one thread per
worker) on this machine:

1. **Throughput.** n = 1e9 int32 values in [-8, 8) (``--quick``: 5e7) and flags of density 1%, generated
   per chunk on the workers from the chunk's index (``lazy_inputs``: never materialised on the client),
   then persisted there, so that every timed run reads the same inputs from worker memory. Timed: the
   op's graph built and computed down to one value per output chunk (the outputs stay on the
   workers: what is timed is the op, not a transfer to the client), median of ``RUNS`` after one
   warm-up: ``mmvref.dask.scan`` and ``mmvref.dask.segmented_sum`` (its counting pass included) against
   ``dask.array.cumsum`` (the peer; numpy's cumsum per chunk, int32 -> int64, sequential carries) and
   against the single-machine ``mmvref.scan`` / ``segmented_sum`` on the same values as numpy arrays,
   2 Numba threads, after the cluster is closed. Stated with each: tasks per chunk and the bytes the
   workers sent each other.
2. **Scaling.** The same two ops on a 1-worker cluster (Numba at one thread), same n.
3. **Beyond a worker's memory.** n = 1e9 values generated lazily, not persisted (``--quick``: 2e8), on 2
   workers whose memory limit (``SPILL_LIMIT``) is below their share of the input: scan completes by
   spilling (the chunks wait for the carry tree between the two passes). The peak resident memory of
   each worker process and the most bytes it held spilled on disk (both sampled every 0.1 s) and the
   time are reported.

Targets (issue 18): scan and segmented_sum >= 3x ``dask.array.cumsum``; >= 0.7x single-machine mmvref
throughput at equal n.
"""
from __future__ import annotations

import os
import statistics
import threading
import time

import numpy as np

__all__ = ["main", "lazy_inputs"]

FULL_N = 1_000_000_000
QUICK_N = 50_000_000
CHUNK = 1 << 25          # elements per chunk (128 MiB of int32): 30 chunks at n = 1e9
QUICK_CHUNK = 1 << 22
DENSITY = 0.01
RUNS = 3
SPILL_N, QUICK_SPILL_N = 1_000_000_000, 200_000_000
SPILL_CHUNK = 1 << 23
SPILL_LIMIT = "1.5GiB"   # per worker; its share of a 1e9-value input is 2 GB (values) + 0.5 GB (flags)
SEED = 20261125


def _gen_values(block_id=None, block_info=None):
    size = block_info[None]["chunk-shape"][0]
    return np.random.default_rng([SEED, block_id[0]]).integers(-8, 8, size, dtype=np.int32)


def _gen_flags(block_id=None, block_info=None):
    size = block_info[None]["chunk-shape"][0]
    k = round(1 / DENSITY)
    return np.random.default_rng([SEED + 1, block_id[0]]).integers(0, k, size, dtype=np.uint8) == 0


def lazy_inputs(n, chunk):
    """(values, flags): dask arrays of n elements whose chunks are generated where they are computed."""
    import dask.array as da

    sizes = (chunk,) * (n // chunk) + ((n % chunk,) if n % chunk else ())
    x = da.map_blocks(_gen_values, chunks=(sizes,), dtype=np.int32, meta=np.empty(0, np.int32))
    f = da.map_blocks(_gen_flags, chunks=(sizes,), dtype=bool, meta=np.empty(0, bool))
    return x, f


def _last(b):
    return np.array([b[-1] if b.size else 0], dtype=np.int64)


def _checksum(r):
    """One value per output chunk: the whole output is computed on the workers, 8 bytes a chunk travel."""
    return r.map_blocks(_last, chunks=((1,) * r.numblocks[0],), dtype=np.int64)


def _moved(client):
    return sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values())


def _ops(x, f):
    import mmvref.dask as md

    return {
        "mmvref.dask.scan": lambda: md.scan(x),
        "mmvref.dask.segmented_sum": lambda: md.segmented_sum(x, f),
        "dask.array.cumsum": lambda: x.cumsum(axis=0),
    }


def _time_cluster(client, x, f, runs, log):
    """{impl: (median s, tasks per chunk, bytes moved per run)} on the persisted inputs."""
    out = {}
    nb = x.numblocks[0]
    for impl, make in _ops(x, f).items():
        r = make()
        inputs = set(x.__dask_graph__()) | set(f.__dask_graph__())
        tasks = len([k for k in r.__dask_graph__() if k not in inputs]) / nb
        _checksum(r).compute()  # warm-up: Numba's cached kernels loaded in both workers
        times, moved = [], []
        for _ in range(runs):
            b0 = _moved(client)
            t0 = time.perf_counter()
            _checksum(make()).compute()
            times.append(time.perf_counter() - t0)
            moved.append(_moved(client) - b0)
        out[impl] = (statistics.median(times), tasks, statistics.median(moved))
        log(f"  {impl:28s} {out[impl][0] * 1e3:9.1f} ms  tasks/chunk {tasks:.2f}  moved {out[impl][2] / 1e6:.1f} MB")
    return out


def _cluster(workers, memory_limit, **kw):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                           dashboard_address=":0", env={"NUMBA_NUM_THREADS": "1"}, silence_logs=40, **kw)
    return cluster, Client(cluster)


def _throughput(n, chunk, workers, runs, log):
    from distributed import wait

    cluster, client = _cluster(workers, "12GiB" if workers == 1 else "8GiB")
    try:
        x, f = lazy_inputs(n, chunk)
        t0 = time.perf_counter()
        x, f = client.persist([x, f])
        wait([x, f])
        log(f"  inputs generated on {workers} worker(s): {time.perf_counter() - t0:.1f} s")
        return _time_cluster(client, x, f, runs, log)
    finally:
        client.close()
        cluster.close()


def _single_machine(n, chunk, runs, log):
    import numba

    import mmvref

    x, f = lazy_inputs(n, chunk)
    xs, fs = x.compute(scheduler="threads"), f.compute(scheduler="threads")
    out = {}
    for impl, fn in (("mmvref.scan", lambda: mmvref.scan(xs)), ("mmvref.segmented_sum",
                                                               lambda: mmvref.segmented_sum(xs, fs))):
        fn()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[impl] = statistics.median(times)
        log(f"  {impl:28s} {out[impl] * 1e3:9.1f} ms  ({numba.get_num_threads()} Numba threads)")
    return out


def _spill(n, log):
    import psutil

    import mmvref.dask as md

    cluster, client = _cluster(2, SPILL_LIMIT)
    peak = {}
    stop = threading.Event()

    disk = {}

    def probe(dask_worker):
        spilled = getattr(dask_worker.data, "spilled_total", None)  # (memory, disk) bytes now spilled
        return psutil.Process(os.getpid()).memory_info().rss, int(getattr(spilled, "disk", 0) or 0)

    def sample():
        while not stop.is_set():
            try:
                for w, (rss, on_disk) in client.run(probe).items():
                    peak[w] = max(peak.get(w, 0), rss)
                    disk[w] = max(disk.get(w, 0), on_disk)
            except Exception:
                pass
            stop.wait(0.1)

    try:
        x, _ = lazy_inputs(n, SPILL_CHUNK)
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        t0 = time.perf_counter()
        last = _checksum(md.scan(x)).compute()
        secs = time.perf_counter() - t0
        stop.set()
        t.join()
        spilled = disk
        log(f"  spill run: {secs:.1f} s, peak RSS per worker {[f'{v / 2**30:.2f} GiB' for v in peak.values()]}, "
            f"at most {[f'{v / 2**30:.2f} GiB' for v in spilled.values()]} on disk at once")
        return {"seconds": secs, "peak": sorted(peak.values()), "spilled": sorted(spilled.values()),
                "last": int(last[-1]), "input_bytes": 4 * n}
    finally:
        stop.set()
        client.close()
        cluster.close()


def main(quick=False, runs=RUNS, log=print):
    """Run the three parts; returns the markdown report."""
    n, chunk = (QUICK_N, QUICK_CHUNK) if quick else (FULL_N, CHUNK)
    log(f"dask: n = {n:,} int32, chunks of {chunk:,}, flag density {DENSITY:.0%}")
    log("2 workers:")
    two = _throughput(n, chunk, 2, runs, log)
    log("1 worker:")
    one = _throughput(n, chunk, 1, runs, log)
    log("single machine (the cluster closed):")
    single = _single_machine(n, chunk, runs, log)
    log("beyond a worker's memory:")
    spill = _spill(QUICK_SPILL_N if quick else SPILL_N, log)
    return report(n, chunk, two, one, single, spill)


def report(n, chunk, two, one, single, spill):
    peer = two["dask.array.cumsum"][0]
    rows = ["| implementation | workers | median ms | Gelem/s | vs dask.array.cumsum | vs single machine | "
            "tasks / chunk | MB moved between workers |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    pairs = {"mmvref.dask.scan": "mmvref.scan", "mmvref.dask.segmented_sum": "mmvref.segmented_sum"}
    for label, res, w in (("2", two, 2), ("1", one, 1)):
        for impl, (s, tasks, moved) in res.items():
            sm = single.get(pairs.get(impl, ""), None)
            rows.append(f"| {impl} | {label} | {s * 1e3:,.0f} | {n / s / 1e9:.2f} | "
                        f"{(peer / s) if w == 2 else res['dask.array.cumsum'][0] / s:.2f}x | "
                        f"{f'{sm / s:.2f}x' if sm else '—'} | {tasks:.2f} | {moved / 1e6:.2f} |")
    for impl, s in single.items():
        rows.append(f"| {impl} (numpy in, 2 Numba threads) | — | {s * 1e3:,.0f} | {n / s / 1e9:.2f} | "
                    f"{peer / s:.2f}x | 1.00x | — | — |")
    scale = "; ".join(f"{impl}: {one[impl][0] / two[impl][0]:.2f}x" for impl in two)
    tgt = []
    for impl, sm in pairs.items():
        s = two[impl][0]
        tgt.append(f"- {impl}: {peer / s:.2f}x dask.array.cumsum (target >= 3x: {'met' if peer / s >= 3 else 'NOT met'}); "
                   f"{single[sm] / s:.2f}x single-machine {sm} (target >= 0.7x: "
                   f"{'met' if single[sm] / s >= 0.7 else 'NOT met'})")
    sp = spill
    spill_line = (f"scan of {sp['input_bytes'] / 1e9:.1f} GB of int32 generated lazily on 2 workers limited to "
                  f"{SPILL_LIMIT} each: completed in {sp['seconds']:.1f} s; peak resident memory per worker "
                  f"{', '.join(f'{v / 2**30:.2f} GiB' for v in sp['peak'])}; the most held on disk at once (spilled) "
                  f"{', '.join(f'{v / 2**30:.2f} GiB' for v in sp['spilled'])}")
    return "\n".join([
        f"n = {n:,} int32 values in [-8, 8), chunks of {chunk:,} ({-(-n // chunk)} chunks), flags 1%; "
        "LocalCluster, processes, 1 thread per worker, inputs persisted on the workers.", "",
        *rows, "",
        f"Scaling 1 -> 2 workers (time on 1 / time on 2): {scale}.", "",
        "Targets:", *tgt, "",
        f"Beyond a worker's memory: {spill_line}.",
    ])
