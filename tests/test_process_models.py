"""Every process model (issue 14 §4): fork after a parallel op (os.fork, a
multiprocessing "fork" Process), multiprocessing Pools (fork, spawn), a torch
DataLoader with 2 workers, 4 Python threads calling ops at once, and
NUMBA_NUM_THREADS=1, under mmvref's default threading policy and under a layer
forced with NUMBA_THREADING_LAYER (workqueue, omp, tbb when installed).

Each process model runs in a fresh interpreter (``subprocess.run`` with a
timeout, so a hang fails instead of hanging CI; each scenario inside has its own
timeout too); the child prints one JSON line: per scenario "ok" (every op's
result equal to numpy's), "refused" (a RuntimeError of the guard), or what went
wrong (a wrong result, "killed by signal N", "hang"). Inputs are integers (or
integer valued floats), so every result is exact whatever the summation order,
and are large enough (n = 2**20) for the kernels to run in parallel. The "torch"
run imports torch and starts its OpenMP team first: mmvref's kernels then run
on torch's threads (the omp layer), and a forked child on one thread, even where
the child raises Numba's thread count (``fork_raised_threads``: under omp that
hung the child before the guard held its ops to one thread).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# threading layers and process models do not depend on the compile target (CI's haswell stage skips them)
pytestmark = pytest.mark.native_only

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(r'''
    import json, os, signal, sys, threading, time
    import numpy as np
    if os.environ.get("PM_TORCH_THREADS"):  # torch first, its OpenMP team started before mmvref's layer
        import torch
        torch.set_num_threads(int(os.environ["PM_TORCH_THREADS"]))
        torch.ones(1 << 22).mul(2).sum()
    import numba
    import mmvref
    from mmvref import _threading
    if os.environ.get("PM_TORCH_THREADS"):
        import mmvref.torch_scatter  # a torch-facing module: the layer runs on torch's threads

    N = 1 << 20
    STEP = 64  # spmv: N // STEP rows of STEP entries

    def inputs(seed):
        r = np.random.default_rng(seed)
        x = r.integers(-1000, 1000, N).astype(np.int64)
        f = (r.random(N) < 0.001).astype(np.int8)
        f[0] = 1
        cols = r.integers(0, 4096, N).astype(np.int64)
        data = r.integers(-8, 8, N).astype(np.float64)
        v = r.integers(-8, 8, 4096).astype(np.float64)
        return x, f, cols, data, v

    def run_ops(seed):
        """Every op's result on seed's inputs, as a list of arrays."""
        x, f, cols, data, v = inputs(seed)
        indptr = np.arange(0, N + 1, STEP, dtype=np.int64)
        vals, idx = mmvref.radix_sort(x)
        return [mmvref.scan(x), mmvref.segmented_sum(x, f), vals, idx,
                mmvref.spmv((indptr, cols, data, (N // STEP, 4096)), v),
                mmvref.batched_scan(x[: 1 << 17].reshape(1, -1))]  # one row: calls scan (nested op)

    def expected(seed):
        x, f, cols, data, v = inputs(seed)
        idx = np.argsort(x, kind="stable")
        return [np.cumsum(x), np.add.reduceat(x, np.flatnonzero(f)), x[idx], idx,
                (data * v[cols]).reshape(-1, STEP).sum(axis=1),
                np.cumsum(x[: 1 << 17]).reshape(1, -1)]

    def check(seed):
        """'ok', 'refused: ...' or what differs."""
        try:
            got = run_ops(seed)
        except RuntimeError as e:
            return "refused: " + str(e)
        bad = [i for i, (g, e) in enumerate(zip(got, expected(seed)))
               if np.asarray(g).shape != e.shape or not np.array_equal(np.asarray(g), e)]
        return "ok" if not bad else f"wrong results of ops {bad}"

    TIMEOUT = 60.0

    def status_text(st):
        if os.WIFSIGNALED(st):
            return f"killed by signal {os.WTERMSIG(st)}"
        return f"exit status {os.WEXITSTATUS(st)}"

    def s_os_fork(child=lambda: check(1)):
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            try:
                msg = child()
            except BaseException as e:  # anything: report it, never return into the parent's code
                msg = f"error {type(e).__name__}: {e}"
            os.write(wr, msg.encode())
            os._exit(0)
        os.close(wr)
        deadline = time.time() + TIMEOUT
        while True:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.time() > deadline:
                os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)
                return "hang"
            time.sleep(0.02)
        msg = os.read(rd, 1 << 16).decode()
        os.close(rd)
        return msg or status_text(st)

    def _raised_threads_child():
        """In the child: Numba's thread count raised to its maximum, then the ops. Under omp they run
        on one thread (GNU OpenMP's pool does not survive the fork; two threads hung the child) with
        one warning, and the count set is kept."""
        import warnings
        n = numba.config.NUMBA_NUM_THREADS
        numba.set_num_threads(n)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            msg = check(3)
            if msg == "ok" and "torch" in sys.modules:  # mmvref.pyg's fused product and its backward
                msg = fused_check()
        if msg == "ok" and numba.get_num_threads() != n:
            msg = f"thread count {numba.get_num_threads()} after the ops, {n} set"
        said = [w for w in caught if "runs its ops on one thread" in str(w.message)]
        if msg == "ok" and _threading._child_one_thread and n > 1 and len(said) != 1:
            msg = f"{len(said)} warnings of the one-thread rule"
        return msg

    def fused_check():
        import torch
        torch.set_num_threads(1)  # as in a DataLoader worker: torch's own ops hang on two threads here
        from mmvref.pyg._fused import gspmm
        from mmvref.pyg._graph import Graph
        r = np.random.default_rng(4)
        n, E, F = 1 << 14, 1 << 18, 16
        src, dst = r.integers(0, n, E), r.integers(0, n, E)
        x = torch.from_numpy(r.integers(-8, 8, (n, F)).astype(np.float64)).requires_grad_()
        out = gspmm(Graph.from_edges(dst, src, n, n), x, None, "sum")
        out.backward(torch.ones_like(out))
        want = np.zeros((n, F))
        np.add.at(want, dst, x.detach().numpy()[src])
        if not np.array_equal(out.detach().numpy(), want):
            return "wrong fused sum"
        if not np.array_equal(x.grad.numpy()[:, 0], np.bincount(src, minlength=n).astype(np.float64)):
            return "wrong fused sum's gradient"
        return "ok"

    def s_fork_raised_threads():
        return s_os_fork(_raised_threads_child)

    def _mp_child(q):
        q.put(check(2))

    def s_mp_fork():
        import multiprocessing as mp
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_mp_child, args=(q,))
        p.start()
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill(); p.join()
            return "hang"
        if p.exitcode != 0:
            return f"exit code {p.exitcode}"
        return q.get(timeout=5)

    def _pool_task(seed):
        return check(seed)

    def s_pool(method):
        import multiprocessing as mp
        pool = mp.get_context(method).Pool(2)
        try:
            res = pool.map_async(_pool_task, range(10, 14)).get(TIMEOUT)
        except mp.TimeoutError:
            pool.terminate()
            return "hang"
        except RuntimeError as e:
            pool.terminate()
            return "refused: " + str(e)
        pool.close(); pool.join()
        if all(r.startswith("refused") for r in res):
            return res[0]
        return "ok" if all(r == "ok" for r in res) else "; ".join(res)

    def s_threads(seconds=2.0):
        seeds = [20, 21, 22, 23]
        want = {s: run_ops(s) for s in seeds}  # serial results, one thread
        errors, counts = [], [0] * 4

        def work(k):
            end = time.time() + seconds
            try:
                while time.time() < end:
                    s = seeds[(k + counts[k]) % 4]
                    got = run_ops(s)
                    if not all(np.array_equal(g, w) for g, w in zip(got, want[s])):
                        errors.append(f"thread {k}: results differ from serial ones for seed {s}")
                    counts[k] += 1
            except BaseException as e:
                errors.append(f"thread {k}: {type(e).__name__}: {e}")

        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts: t.start()
        for t in ts: t.join(seconds + TIMEOUT)
        if any(t.is_alive() for t in ts):
            return "hang"
        if errors:
            return "; ".join(errors[:3])
        if min(counts) == 0:
            return f"a thread completed no call: {counts}"
        return "ok" if check(24) == "ok" else "wrong results after the threads"

    def s_fork_in_threads():
        """Forks while two other threads keep calling ops (one may hold the lock at the fork)."""
        stop, errors = threading.Event(), []

        def work(k):
            try:
                while not stop.is_set():
                    run_ops(50 + k)
            except BaseException as e:
                errors.append(f"thread {k}: {type(e).__name__}: {e}")

        ts = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in ts: t.start()
        res = []
        try:
            for _ in range(2):
                time.sleep(0.15)
                res.append(s_os_fork())
        finally:
            stop.set()
            for t in ts: t.join(TIMEOUT)
        if errors:
            return "; ".join(errors)
        if all(r.startswith("refused") for r in res):
            return res[0]
        return "ok" if all(r == "ok" for r in res) else "; ".join(res)

    def s_set_num_threads():
        n = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            if numba.get_num_threads() != 1:
                return "set_num_threads(1) not in force"
            return check(30)
        finally:
            numba.set_num_threads(n)

    def s_dataloader():
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Ds(Dataset):
            def __len__(self):
                return 4
            def __getitem__(self, i):
                x = inputs(40 + i)[0]
                return torch.tensor(bool(np.array_equal(mmvref.scan(torch.from_numpy(x)).numpy(), np.cumsum(x))))

        dl = DataLoader(Ds(), batch_size=None, num_workers=2, timeout=TIMEOUT)
        got = [bool(b) for b in dl]
        return "ok" if got == [True] * 4 else f"wrong results: {got}"

    SCENARIOS = {"os_fork": s_os_fork, "fork_raised_threads": s_fork_raised_threads, "mp_fork": s_mp_fork, "fork_in_threads": s_fork_in_threads, "pool_fork": lambda: s_pool("fork"),
                 "pool_spawn": lambda: s_pool("spawn"), "threads": s_threads,
                 "set_num_threads": s_set_num_threads, "dataloader": s_dataloader}

    if __name__ == "__main__":
        out = {"parent": check(0)}  # launches the layer: every scenario comes after a parallel op
        out["layer"] = numba.threading_layer()
        out["policy"] = _threading.describe()["policy"]
        out["num_threads"] = numba.get_num_threads()
        if "torch" in sys.modules:
            out["torch_threads"] = sys.modules["torch"].get_num_threads()
        out["seconds"] = {}
        for name in sys.argv[1:]:
            t0 = time.time()
            try:
                out[name] = SCENARIOS[name]()
            except BaseException as e:
                out[name] = f"error {type(e).__name__}: {e}"
            out["seconds"][name] = round(time.time() - t0, 2)
        print("RESULT " + json.dumps(out), flush=True)
''')


class _Proc:
    """The process-model script in a fresh interpreter, output to files (no pipe to fill)."""

    def __init__(self, tmp_path, scenarios, env=None):
        script = tmp_path / "process_model.py"
        script.write_text(SCRIPT)
        e = {k: v for k, v in os.environ.items() if k not in ("NUMBA_THREADING_LAYER", "NUMBA_NUM_THREADS",
                                                               "NUMBA_THREADING_LAYER_PRIORITY")}
        e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
        e.update(env or {})
        self.out, self.err = tmp_path / "stdout", tmp_path / "stderr"
        with open(self.out, "w") as o, open(self.err, "w") as r:
            self.p = subprocess.Popen([sys.executable, str(script), *scenarios], env=e, cwd=str(tmp_path),
                                      stdout=o, stderr=r, stdin=subprocess.DEVNULL)
        self.result = None

    def get(self):
        timeout = TIMEOUT_S
        if self.result is None:
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                self.result = {"hang": f"the process-model script ran past {timeout} s; "
                                       f"stderr: {self.err.read_text()[-3000:]}"}
                return self.result
            stdout, stderr = self.out.read_text(), self.err.read_text()
            lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
            if self.p.returncode != 0 or not lines:
                self.result = {"hang": f"exit code {self.p.returncode}\nstdout: {stdout[-3000:]}\n"
                                       f"stderr: {stderr[-3000:]}"}
            else:
                self.result = json.loads(lines[-1][len("RESULT "):])
                self.result["stderr"] = stderr
                self.result["stdout"] = stdout
        if "hang" in self.result:
            pytest.fail(self.result["hang"])
        return self.result

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def _libtbb_ok():
    from mmvref import _threading

    return _threading.find_libtbb() is not None


def _has_torch():
    return importlib.util.find_spec("torch") is not None


TIMEOUT_S = 300
_TBB_SKIP = "the tbb package is not installed here (pip install tbb, or mmvref[tbb])"
FORK_THREADS = ["os_fork", "fork_raised_threads", "mp_fork", "pool_fork", "fork_in_threads", "threads"]
#: name -> (scenarios, environment)
RUNS = {
    "default": (FORK_THREADS + ["pool_spawn", "set_num_threads"] + (["dataloader"] if _has_torch() else []), {}),
    "workqueue": (FORK_THREADS, {"NUMBA_THREADING_LAYER": "workqueue"}),
    "omp": (FORK_THREADS, {"NUMBA_THREADING_LAYER": "omp"}),
    "tbb": (FORK_THREADS, {"NUMBA_THREADING_LAYER": "tbb"}),
    "threads1": (["os_fork", "mp_fork", "pool_fork", "threads"], {"NUMBA_NUM_THREADS": "1"}),
    "torch": (FORK_THREADS + ["pool_spawn", "set_num_threads", "dataloader"], {"PM_TORCH_THREADS": "2"}),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """get(name) -> the script's results for RUNS[name]. The default run goes
    first (on a fresh checkout it fills Numba's cache), the others then run side
    by side (their threads scenarios are time-boxed)."""
    procs = {}

    def start(name):
        if name not in procs:
            scen, env = RUNS[name]
            procs[name] = _Proc(tmp_path_factory.mktemp(name), scen, env)
        return procs[name]

    def runnable(name):
        return (name != "tbb" or _libtbb_ok()) and (name != "torch" or _has_torch())

    def get(name):
        if name == "tbb" and not _libtbb_ok():
            pytest.skip(_TBB_SKIP)
        if name == "torch" and not _has_torch():
            pytest.skip("torch is not installed")
        if name not in procs:
            start("default").get()
            for other in RUNS:
                if runnable(other):
                    start(other)
        return procs[name].get()

    yield get
    for p in procs.values():
        p.kill()


def test_default_policy_layer(runs):
    r = runs("default")
    assert r["parent"] == "ok"
    if _libtbb_ok():
        assert (r["layer"], r["policy"]) == ("tbb", "tbb")
    else:
        assert (r["layer"], r["policy"]) == ("workqueue", "workqueue+lock")


@pytest.mark.parametrize("layer", ["workqueue", "omp", "tbb"])
def test_forced_layer_is_kept(runs, layer):
    r = runs(layer)
    assert r["parent"] == "ok"
    assert r["layer"] == layer
    assert r["policy"].startswith(f"user:{layer}")


def test_torch_imported_first_runs_on_torchs_openmp_threads(runs):
    """torch's OpenMP team started and a torch-facing module of mmvref imported before mmvref's
    layer launches: the layer is omp (torch's runtime), and torch's thread count is the one the
    script set."""
    r = runs("torch")
    assert r["parent"] == "ok"
    assert (r["layer"], r["policy"]) == ("omp", "omp-on-torch-threads+fork-one-thread")
    assert r["torch_threads"] == 2


@pytest.mark.parametrize("layer", ["default", "tbb"])
def test_tbb_shuts_its_pool_down_for_every_fork(runs, layer):
    """Forks made beside threads that call ops (``fork_in_threads``) and after threads that ran
    ops ended (the forks after ``threads``): TBB shut its pool down for each. Where it cannot (a live
    thread still holds TBB's state from a parallel op), Numba prints "Unable to join threads to shut
    down before fork()" and the child inherits a pool without its threads; such a child hung in a
    full test run. Failed before the ops gave that state back (every fork of fork_in_threads)."""
    r = runs(layer)
    if r["layer"] != "tbb":
        pytest.skip("the layer is not tbb here")
    assert "Unable to join threads" not in r["stdout"], r["stdout"][-2000:]


@pytest.mark.parametrize("layer", ["default", "workqueue", "tbb", "omp", "torch"])
@pytest.mark.parametrize("scenario", FORK_THREADS)
def test_fork_and_threads(runs, layer, scenario):
    # under omp a forked child runs its ops on one thread (GNU OpenMP's pool does not survive a
    # fork): right answers, never a killed child ("Terminating", Numba's fork check) or a hang
    r = runs(layer)
    assert r[scenario] == "ok", r[scenario]
    assert "Terminating" not in r["stderr"]


@pytest.mark.parametrize("scenario", ["pool_spawn", "set_num_threads", "dataloader"])
def test_torch_imported_first_other_scenarios(runs, scenario):
    assert runs("torch")[scenario] == "ok"


def test_pool_spawn(runs):
    assert runs("default")["pool_spawn"] == "ok"


def test_set_num_threads(runs):
    assert runs("default")["set_num_threads"] == "ok"


@pytest.mark.parametrize("scenario", RUNS["threads1"][0])
def test_numba_num_threads_1(runs, scenario):
    r = runs("threads1")
    assert r["num_threads"] == 1 and r["parent"] == "ok"
    assert r[scenario] == "ok", r[scenario]


def test_torch_dataloader_workers(runs):
    if not _has_torch():
        pytest.skip("torch is not installed")
    r = runs("default")
    assert r["dataloader"] == "ok", r["dataloader"]


def test_describe_keys():
    from mmvref import _threading

    d = _threading.describe()
    assert {"layer", "policy", "threads", "libtbb"} <= set(d)


def test_layer_launched_before_import_is_kept(tmp_path):
    """A process that launched Numba's default layer before importing mmvref
    keeps it (omp unless libtbb is on the loader path); a forked child gets the
    right answer (under omp on one thread)."""
    code = textwrap.dedent('''
        import os, numba
        numba.get_num_threads()  # launches Numba's default layer before mmvref is imported
        import numpy as np, mmvref
        from mmvref import _threading
        print("POLICY", numba.threading_layer(), _threading.describe()["policy"], flush=True)
        pid = os.fork()
        if pid == 0:
            try:
                mmvref.scan(np.arange(1 << 20))
                print("CHILD ok", flush=True)
            except RuntimeError as e:
                print("CHILD refused", e, flush=True)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        print("STATUS", st, flush=True)
    ''')
    e = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING_LAYER")}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    layer = p.stdout.split("POLICY ")[1].split()[0]
    assert f"POLICY {layer} prelaunched:{layer}" in p.stdout, p.stdout
    assert "CHILD ok" in p.stdout, p.stdout + p.stderr
    assert "STATUS 0" in p.stdout, p.stdout + p.stderr
    assert "Terminating" not in p.stderr


def test_launch_keeps_torchs_thread_count(tmp_path):
    """Numba's omp launch sets the launching thread's OpenMP thread count to its own; torch reads
    that count, so the launch puts torch's back (here 1, where Numba's would be the core count)."""
    if not _has_torch():
        pytest.skip("torch is not installed")
    code = textwrap.dedent('''
        import torch
        torch.set_num_threads(1)
        torch.ones(1 << 20).mul(2).sum()
        import numpy as np, numba, mmvref, mmvref.torch_scatter
        from mmvref import _threading
        assert int(mmvref.scan(np.arange(1 << 20, dtype=np.int64))[-1]) == (1 << 20) * ((1 << 20) - 1) // 2
        print("RESULT", numba.threading_layer(), _threading.describe()["policy"], torch.get_num_threads(), flush=True)
    ''')
    e = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING_LAYER") and k != "NUMBA_NUM_THREADS"}
    e["NUMBA_NUM_THREADS"] = "2"
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "RESULT omp omp-on-torch-threads+fork-one-thread 1" in p.stdout, p.stdout + p.stderr


def test_torch_imported_alone_keeps_mmvrefs_own_pool(tmp_path):
    """torch imported but none of mmvref's torch-facing modules: the layer stays mmvref's own
    (GNU OpenMP's spinning workers would slow numpy's BLAS threads between mmvref's kernels)."""
    if not _has_torch():
        pytest.skip("torch is not installed")
    code = textwrap.dedent('''
        import torch
        torch.ones(1 << 20).mul(2).sum()
        import numpy as np, numba, mmvref
        from mmvref import _threading
        mmvref.scan(np.arange(1 << 20, dtype=np.int64))
        print("RESULT", numba.threading_layer(), _threading.describe()["policy"], flush=True)
    ''')
    e = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING_LAYER")}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    want = "RESULT tbb tbb" if _libtbb_ok() else "RESULT workqueue workqueue+lock"
    assert want in p.stdout, p.stdout + p.stderr
