"""PyG training steps, stock against ``mmvref.pyg.enable()`` (issue 33, point 3):
``python -m benchmarks --ops pyg [--quick]`` (not part of the default run; needs torch_geometric).
The quick run (the 20k graph, sage-sum, sage-max, gcn and gat, 3 timed pairs) takes about 30 s on
2 idle cores; the full run (both graphs, six models, 5 pairs, a compile child per model) about seven
minutes. Memory: stock SAGE-max on the 140k graph's edge_index peaks at 7.5 GB (PyG's scatter
``amax`` over E x 128 messages and its backward); a 200k-node graph of this degree would need ~11 GB.

What is timed: one full-batch training step of a 2-layer model (``zero_grad``, forward,
cross-entropy on the node labels, backward, ``Adam.step``), hidden width 128, ``IN_CHANNELS``
input features, ``CLASSES`` classes:

  sage-sum / sage-mean / sage-max  ``SAGEConv(aggr=...)``
  gcn                              ``GCNConv`` (PyG's defaults: normalisation, self-loops, not cached)
  gin                              ``GINConv(Linear-ReLU-Linear)``
  gat                              ``GATConv(heads=4, 32 channels each)``, then one head to the classes

Graphs (seeded, generated here, FakeDataset-like): N nodes (20k; the full run adds 140k), about
``DEGREE`` edges per node; sources uniform, destinations drawn with Pareto(``ALPHA``) weights (a
heavy-tailed in-degree, some nodes with none), duplicates and self-loops dropped, edges sorted by
source then destination as PyG's ``coalesce`` leaves them (so the target index is unsorted);
features standard normal plus the label, as FakeDataset's.

Each model runs on two representations of the same graph: the plain ``edge_index`` and the
transposed torch sparse CSR adjacency ``adj_t`` (``to_torch_csr_tensor(edge_index.flip(0))``, what
``ToSparseTensor`` gives without torch_sparse), built once. (Stock GATConv takes ``adj_t`` but
aggregates through its index: it has no fused path.)

Stock and enabled steps are timed in the same process on the same model and data, interleaved
(stock, enabled; the next pair enabled, stock), ``enable()`` before and ``disable()`` after each
enabled step (outside the timing; ``disable()`` keeps the prepared graphs, so the timed enabled
steps are those of a training loop that enabled mmvref once: the "routes" column shows the graph
cache's hits and misses in a timed step). Before every step the model's initial weights are copied
back and Adam's state cleared, so every step computes the same thing; the first pair's losses and
gradients are compared (the "check" column). Each row starts with ``mmvref.pyg.clear_cache()`` and
ends with one enabled step after another ``clear_cache()`` (the graph's preparation, kernels warm).

Also: the first enabled step in a child process with an empty ``NUMBA_CACHE_DIR`` (first step minus
a warm step = what a user's first step pays: compilation and the graph's preparation), and the
share of a SAGE-sum step's time per op group (torch.profiler; each op's self time, attributed to
the outermost op or autograd node that names a group).
"""
from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

__all__ = ["main", "make_graph", "MODELS", "TARGETS"]

DEGREE = 15           # edges per node drawn (a few duplicates dropped)
IN_CHANNELS = 64
HIDDEN = 128
CLASSES = 10
ALPHA = 2.0           # Pareto tail of the destination weights
SEED = 33
GRAPHS = (("20k", 20_000), ("140k", 140_000))  # 200k nodes would need ~11 GB (stock SAGE-max)
QUICK_GRAPHS = GRAPHS[:1]
MODELS = ("sage-sum", "sage-mean", "sage-max", "gcn", "gin", "gat")
QUICK_MODELS = ("sage-sum", "sage-max", "gcn", "gat")
REPRS = ("edge_index", "adj_t (CSR)")
WARMUP_PAIRS, QUICK_WARMUP_PAIRS = 1, 1   # untimed pairs first
QUICK_PAIRS = 3
WARM_STEPS = 3        # warm steps after the first in the compile child
PROFILE_MODEL = "sage-sum"

#: (models, minimum ratio: mmvref's faster representation against stock's faster one)
TARGETS = ((("sage-sum", "sage-mean", "gcn", "gin"), 3.0), (("sage-max",), 5.0), (("gat",), 1.5))
SAME_REPR_MIN = 1.0
COMPILE_MAX_S = 3.0

_SKIP_PYG = "torch_geometric is not installed (`pip install torch-geometric`, or the extra `mmvref[pyg]`)"


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _git_rev():
    """The checkout's commit, "+modified" when mmvref/ differs from it; "no git" outside a checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "mmvref"], cwd=root, capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "no git"
    return (f"commit {rev}" + (" + uncommitted changes in mmvref/" if dirty else "")) if rev else "no git"


def _peak_rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


# ----------------------------------------------------------------------------- data and models

def make_graph(n, degree=DEGREE, channels=IN_CHANNELS, classes=CLASSES, seed=SEED):
    """dict(x, y, edge_index, adj_t, N, E, max_in_degree): seeded, see the module docstring."""
    import torch
    from torch_geometric.utils import to_torch_csr_tensor

    rng = np.random.default_rng([seed, n])
    e = n * degree
    w = (1.0 - rng.random(n)) ** (-1.0 / ALPHA)
    counts = rng.multinomial(e, w / w.sum())
    dst = rng.permutation(np.repeat(np.arange(n, dtype=np.int64), counts))
    src = rng.integers(0, n, e, dtype=np.int64)
    key = np.unique(src * n + dst)          # sorted by source, then destination; duplicates dropped
    src, dst = key // n, key % n
    keep = src != dst
    src, dst = src[keep], dst[keep]
    y = rng.integers(0, classes, n)
    x = rng.standard_normal((n, channels), dtype=np.float32) + y[:, None].astype(np.float32)
    edge_index = torch.from_numpy(np.stack([src, dst]))
    with warnings.catch_warnings():  # "sparse CSR tensor support is in beta"
        warnings.simplefilter("ignore")
        adj_t = to_torch_csr_tensor(edge_index.flip(0), size=(n, n))
    return {"x": torch.from_numpy(x), "y": torch.from_numpy(y), "edge_index": edge_index, "adj_t (CSR)": adj_t,
            "N": n, "E": int(src.size), "max_in_degree": int(np.bincount(dst, minlength=n).max())}


def _layer(name, i, o, last):
    from torch import nn
    from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv

    if name.startswith("sage-"):
        return SAGEConv(i, o, aggr=name[5:])
    if name == "gcn":
        return GCNConv(i, o)
    if name == "gin":
        return GINConv(nn.Sequential(nn.Linear(i, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, o)))
    if name == "gat":
        return GATConv(i, o, heads=1) if last else GATConv(i, o // 4, heads=4)
    raise ValueError(name)


def make_model(name, seed=SEED):
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = _layer(name, IN_CHANNELS, HIDDEN, False)
            self.conv2 = _layer(name, HIDDEN, CLASSES, True)

        def forward(self, x, adj):
            return self.conv2(torch.relu(self.conv1(x, adj)), adj)

    torch.manual_seed(seed)
    return Net()


class Trainer:
    """One model, its Adam optimizer and its initial weights; ``step(adj)`` restores the initial
    state (untimed), then times one training step: (seconds, loss)."""

    def __init__(self, name, g):
        import torch

        self.torch = torch
        self.model = make_model(name)
        self.params = list(self.model.parameters())
        self.initial = [p.detach().clone() for p in self.params]
        self.opt = torch.optim.Adam(self.params, lr=0.01)
        self.x, self.y = g["x"], g["y"]

    def step(self, adj):
        torch = self.torch
        with torch.no_grad():
            for p, p0 in zip(self.params, self.initial):
                p.copy_(p0)
        self.opt.state.clear()
        t0 = time.perf_counter()
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(self.x, adj), self.y)
        loss.backward()
        self.opt.step()
        value = loss.item()
        return time.perf_counter() - t0, value

    def grads(self):
        return [p.grad.detach().clone() for p in self.params]


def _check(stock, enabled):
    """'dloss / max relative dgrad' between a stock and an enabled step from the same state."""
    (l0, g0), (l1, g1) = stock, enabled
    scale = max(float(g.abs().max()) for g in g0) or 1.0
    dg = max(float((a - b).abs().max()) for a, b in zip(g0, g1)) / scale
    return abs(l0 - l1), dg


# ----------------------------------------------------------------------------- timing

def _stats_delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in after
            if isinstance(after[k], (int, float)) and not k.startswith("cache_graphs") and k != "cache_bytes"}


def time_row(pyg, trainer, adj, *, pairs, warmup):
    """Interleaved pairs for one model and representation (the prepared graphs cleared first, so
    that the first enabled step prepares them); returns the row's measurements."""
    clear = getattr(pyg, "clear_cache", None)
    if clear is not None:
        clear()
    stock, enabled, routes, check = [], [], {}, {}
    for i in range(warmup + pairs):
        order = ("stock", "mmvref") if i % 2 == 0 else ("mmvref", "stock")
        for mode in order:
            if mode == "stock":
                t, loss = trainer.step(adj)
            else:
                pyg.enable()
                try:
                    before = pyg.stats()
                    t, loss = trainer.step(adj)
                    routes = _stats_delta(before, pyg.stats())
                finally:
                    pyg.disable()
                if pyg.is_enabled():
                    raise RuntimeError("mmvref.pyg.is_enabled() is True after disable()")
            if i == 0:  # the first pair: both from the same state
                check[mode] = (loss, trainer.grads())
            if i >= warmup:
                (stock if mode == "stock" else enabled).append(t)
    prep = None
    if clear is not None:  # a step whose graphs are prepared anew (kernels warm)
        clear()
        with pyg.enable():
            prep, _ = trainer.step(adj)
    return {"stock": stock, "mmvref": enabled, "prep": prep, "routes": routes,
            "check": _check(check["stock"], check["mmvref"])}


def _summary(ts):
    return {"ms": 1e3 * statistics.median(ts), "spread": max(ts) / min(ts), "steps": len(ts),
            "all_ms": [round(1e3 * t, 3) for t in ts]}


# ----------------------------------------------------------------------------- compile cost (child)

_CHILD_SETUP = """
import json, sys, time
import torch
torch.set_num_threads({threads})
from numba.core import event
compiled = []
class Listener(event.Listener):
    def on_start(self, ev):
        d = ev.data["dispatcher"]
        compiled.append(d.py_func.__module__)
    def on_end(self, ev):
        pass
from benchmarks import pyg as B
g = B.make_graph({n})
tr = B.Trainer({model!r}, g)
for rep in B.REPRS:          # torch's and PyG's own first-call costs, before mmvref
    tr.step(g[rep]); tr.step(g[rep])
t0 = time.perf_counter()
import mmvref.pyg
import_s = time.perf_counter() - t0
event.register("numba:compile", Listener())
mmvref.pyg.enable()
out = {{"import_s": import_s, "reprs": {{}}}}
for rep in B.REPRS:
    k = len(compiled)
    first, _ = tr.step(g[rep])
    specs = sum(m.startswith("mmvref") for m in compiled[k:])
    warm = sorted(tr.step(g[rep])[0] for _ in range(B.WARM_STEPS))[B.WARM_STEPS // 2]
    out["reprs"][rep] = {{"first_s": first, "warm_s": warm, "specs": specs}}
print("RESULT " + json.dumps(out))
"""


def compile_child(model, n, threads, log):
    """The first enabled steps of ``model`` on the n-node graph in a child process with an empty
    NUMBA_CACHE_DIR: dict(import_s, reprs: {rep: first_s, warm_s, specs}) or dict(error)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = _CHILD_SETUP.format(threads=threads, n=n, model=model)
    with tempfile.TemporaryDirectory(prefix="mmvref-pyg-cache-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode or not lines:
        err = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        log(f"pyg: compile child for {model} failed: {err}")
        return {"error": err[:200]}
    out = json.loads(lines[-1][7:])
    out["process_s"] = wall
    return out


# ----------------------------------------------------------------------------- profile shares

GROUPS = ("aggregation", "message building", "dense matmul", "other torch ops")
_GROUP_PATTERNS = (  # matched in this order against a name lower-cased, underscores removed
    ("aggregation", ("scatter", "segment", "indexadd", "indexreduce", "mmvref", "sparse", "spmm")),
    ("message building", ("indexselect", "gather", "aten::index", "indexbackward", "embedding")),
    ("dense matmul", ("addmm", "aten::mm", "mmbackward", "matmul", "linear", "bmm")),
)


def _group_of(chain):
    for name in chain:  # outermost first: an autograd node names the op it differentiates
        key = name.lower().replace("_", "")
        for group, pats in _GROUP_PATTERNS:
            if any(p in key for p in pats):
                return group
    return "other torch ops"


def profile_step(trainer, adj, pyg=None):
    """Milliseconds per op group in one profiled step (enabled when ``pyg`` is given), plus the
    step's wall time and the time outside any torch op (Python, PyG's glue, non-torch kernels)."""
    from torch.profiler import ProfilerActivity, profile

    if pyg is not None:
        pyg.enable()
    try:
        trainer.step(adj)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            wall, _ = trainer.step(adj)
    finally:
        if pyg is not None:
            pyg.disable()
    ms = dict.fromkeys(GROUPS, 0.0)
    for ev in prof.events():
        if ev.self_cpu_time_total <= 0:
            continue
        chain, e = [], ev
        while e is not None:
            chain.append(e.name)
            e = e.cpu_parent
        ms[_group_of(chain[::-1])] += ev.self_cpu_time_total / 1e3
    ms["outside torch ops"] = max(0.0, 1e3 * wall - sum(ms.values()))
    ms["step (profiled)"] = 1e3 * wall
    return ms


#: the groups a fused aggregation replaces; the rest of a step (dense matmuls, other torch ops,
#: Python) runs the same torch code with mmvref enabled or not
REPLACEABLE = ("aggregation", "message building")


def ceilings(stock_best_ms, enabled_ms, prof):
    """What the enabled step could reach against stock's faster representation (Amdahl's bound,
    issue 33's 3x / 5x targets): ``free_aggregation``, if the groups in ``REPLACEABLE`` took no
    time; ``dense_only``, if everything but the dense matmuls took none. ``prof`` is one profiled
    enabled step (``profile_step``): its shares scale the timed median ``enabled_ms``, so the
    profiler's own overhead cancels."""
    tot = prof["step (profiled)"]
    rest = tot - sum(prof[g] for g in REPLACEABLE)
    dense = prof["dense matmul"]
    out = {"replaceable_share": 1.0 - rest / tot, "dense_share": dense / tot}
    out["free_aggregation"] = stock_best_ms / (enabled_ms * rest / tot) if rest > 0 else float("inf")
    out["dense_only"] = stock_best_ms / (enabled_ms * dense / tot) if dense > 0 else float("inf")
    return out


# ----------------------------------------------------------------------------- report

def _fmt_ms(v):
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def _routes_text(r):
    keys = (("fused", "f"), ("unfused", "u"), ("fallback", "b"))
    s = " ".join(f"{c}{r[k]}" for k, c in keys if k in r)
    hits = r.get("cache_hits", 0) + r.get("cache_content_hits", 0)
    if "cache_misses" in r:
        s += f" c{hits}/{r['cache_misses']}"
    return s or "—"


def _rows_table(rows):
    head = ("| model | graph | representation | stock ms/step | stock spread | mmvref ms/step | mmvref spread | "
            "vs stock same repr | vs stock's faster repr | mmvref step, graph unprepared, ms | routes per step | "
            "check dloss / dgrad |")
    lines = [head, "|" + "---|" * 3 + "---:|" * 7 + "---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['graph']} | {r['repr']} | — | — | — | — | — | — | — | — | "
                         f"error: {r['error'][:90]} |")
            continue
        s, m = r["stock"], r["mmvref"]
        lines.append(
            f"| {r['model']} | {r['graph']} | {r['repr']} | {_fmt_ms(s['ms'])} | {s['spread']:.2f} | "
            f"{_fmt_ms(m['ms'])} | {m['spread']:.2f} | {r['vs_same']:.2f}x | {r['vs_best']:.2f}x | "
            f"{'—' if r['prep_ms'] is None else _fmt_ms(r['prep_ms'])} | {_routes_text(r['routes'])} | "
            f"{r['check'][0]:.1e} / {r['check'][1]:.1e} |")
    return "\n".join(lines)


def _targets(rows, compiles):
    lines = ["| target | model | graph | measured | |", "|---|---|---|---:|---|"]
    ok = [r for r in rows if "error" not in r]

    def verdict(good):
        return "met" if good else "**NOT met**"

    for models, t in TARGETS:
        for model in models:
            for graph in dict.fromkeys(r["graph"] for r in ok):
                rs = [r for r in ok if r["model"] == model and r["graph"] == graph]
                if not rs:
                    continue
                best = min(rs, key=lambda r: r["mmvref"]["ms"])
                v = best["vs_best"]
                note = ""
                c = best.get("ceiling")
                if c is not None and v < t:
                    bound = ("out of reach: " if c["free_aggregation"] < t else "") + (
                        f"a free aggregation would give {c['free_aggregation']:.2f}x, the dense matmuls alone "
                        f"{c['dense_only']:.2f}x")
                    note = f" ({bound})"
                lines.append(f"| >= {t:g}x stock's faster repr (mmvref's faster repr: {best['repr']}) | {model} | "
                             f"{graph} | {v:.2f}x | {verdict(v >= t)}{note} |")
    def some(rs, text, k=3):
        return "; ".join(text(r) for r in rs[:k]) + (f"; {len(rs) - k} more" if len(rs) > k else "")

    def name(r):
        return f"{r['model']} {r['graph']} {r['repr']}"

    low = sorted((r for r in ok if r["vs_same"] < SAME_REPR_MIN), key=lambda r: r["vs_same"])
    if ok:
        lines.append(f"| no row < {SAME_REPR_MIN:g}x stock same repr | all | all | "
                     f"{len(ok) - len(low)} of {len(ok)} rows | {verdict(not low)}"
                     + (": " + some(low, lambda r: f"{name(r)} {r['vs_same']:.2f}x") if low else "") + " |")
    for model, c in compiles.items():
        if "error" in c:
            lines.append(f"| first step compile <= {COMPILE_MAX_S:g} s | {model} | {c['graph']} | — | "
                         f"not measured ({c['error'][:60]}) |")
            continue
        for i, (rep, m) in enumerate(c["reprs"].items()):
            v = m["first_s"] - m["warm_s"]
            cache = "empty cache" if i == 0 else f"{REPRS[0]}'s kernels cached"
            lines.append(f"| first step compile <= {COMPILE_MAX_S:g} s ({rep}, {cache}) | {model} | {c['graph']} | "
                         f"{v:.2f} s | {verdict(v <= COMPILE_MAX_S)} |")
    wide = sorted((r for r in ok if round(r["mmvref"]["spread"], 2) > round(r["stock"]["spread"], 2)),
                  key=lambda r: r["stock"]["spread"] - r["mmvref"]["spread"])
    if ok:
        lines.append(f"| mmvref spread no wider than stock's (same repr) | all | all | "
                     f"{len(ok) - len(wide)} of {len(ok)} rows | {verdict(not wide)}"
                     + (": widest " + some(wide, lambda r: f"{name(r)} {r['mmvref']['spread']:.2f} vs "
                                                          f"{r['stock']['spread']:.2f}") if wide else "") + " |")
    return "\n".join(lines)


def _ceiling_table(rows):
    """Per model and graph: the enabled step's shares (mmvref's faster representation) and the
    ratios against stock's faster representation that ``ceilings`` allows."""
    lines = ["| model | graph | mmvref's faster repr | vs stock's faster repr | aggregation + message building "
             "share | dense matmul share | ceiling: free aggregation | ceiling: dense matmuls alone | target |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    target = {m: t for models, t in TARGETS for m in models}
    for r in rows:
        c = r.get("ceiling")
        if c is None:
            continue
        lines.append(f"| {r['model']} | {r['graph']} | {r['repr']} | {r['vs_best']:.2f}x | "
                     f"{100 * c['replaceable_share']:.0f}% | {100 * c['dense_share']:.0f}% | "
                     f"{c['free_aggregation']:.2f}x | {c['dense_only']:.2f}x | {target.get(r['model'], 0):g}x |")
    return "\n".join(lines) if len(lines) > 2 else ""


def _compile_table(compiles):
    lines = ["| model | graph | representation (in this order, one process) | first enabled step ms | "
             "warm step ms | first - warm s | Numba specializations compiled |", "|---|---|---|---:|---:|---:|---:|"]
    for model, c in compiles.items():
        if "error" in c:
            lines.append(f"| {model} | {c['graph']} | — | — | — | — | error: {c['error'][:80]} |")
            continue
        for rep, v in c["reprs"].items():
            lines.append(f"| {model} | {c['graph']} | {rep} | {_fmt_ms(1e3 * v['first_s'])} | "
                         f"{_fmt_ms(1e3 * v['warm_s'])} | {v['first_s'] - v['warm_s']:.2f} | {v['specs']} |")
    imports = ", ".join(f"{m} {c['import_s']:.2f} s" for m, c in compiles.items() if "import_s" in c)
    return "\n".join(lines) + (f"\n\n`import mmvref.pyg` in the child (after torch and PyG): {imports}." if imports else "")


def _profile_table(prof):
    cols = list(prof)
    lines = ["| group | " + " | ".join(f"{c} ms (share)" for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for g in (*GROUPS, "outside torch ops"):
        cells = []
        for c in cols:
            tot = prof[c]["step (profiled)"]
            cells.append(f"{_fmt_ms(prof[c][g])} ({100 * prof[c][g] / tot:.0f}%)")
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    lines.append("| step (profiled) | " + " | ".join(_fmt_ms(prof[c]["step (profiled)"]) for c in cols) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main

def main(quick=False, runs=5, log=print):
    """Run the benchmark; returns (markdown, rows for the JSON report)."""
    try:
        import torch
        import torch_geometric
    except ImportError as exc:
        log(f"pyg: skipped: {_SKIP_PYG} ({exc})")
        return f"Skipped: {_SKIP_PYG}.\n", []
    try:
        import mmvref.pyg as pyg
    except Exception as exc:
        msg = f"mmvref.pyg is not importable ({type(exc).__name__}: {exc})"
        log(f"pyg: skipped: {msg}")
        return f"Skipped: {msg}.\n", []

    threads = _cores()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _run(torch, torch_geometric, pyg, quick, runs, threads, log)
    finally:
        torch.set_num_threads(old_threads)
        if pyg.is_enabled():
            pyg.disable()


def _run(torch, torch_geometric, pyg, quick, runs, threads, log):
    import numba

    t_start = time.perf_counter()
    load_start = os.getloadavg()
    graphs = QUICK_GRAPHS if quick else GRAPHS
    models = QUICK_MODELS if quick else MODELS
    pairs = QUICK_PAIRS if quick else max(5, runs)
    warmup = QUICK_WARMUP_PAIRS if quick else WARMUP_PAIRS
    rows, graph_lines = [], []
    warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
    prof_graph = None
    for gname, n in graphs:
        t0 = time.perf_counter()
        g = make_graph(n)
        graph_lines.append(f"- {gname}: {g['N']:,} nodes, {g['E']:,} edges (mean in-degree {g['E'] / g['N']:.1f}, "
                           f"largest {g['max_in_degree']:,}), {IN_CHANNELS} input channels, {CLASSES} classes")
        log(f"pyg: graph {gname}: {g['N']:,} nodes, {g['E']:,} edges [{time.perf_counter() - t0:.1f}s]")
        if prof_graph is None:
            prof_graph = (gname, g)
        for model in models:
            trainer = Trainer(model, g)
            per_repr = {}
            for rep in REPRS:
                t0 = time.perf_counter()
                row = {"model": model, "graph": gname, "repr": rep}
                try:
                    m = time_row(pyg, trainer, g[rep], pairs=pairs, warmup=warmup)
                    row.update(stock=_summary(m["stock"]), mmvref=_summary(m["mmvref"]),
                               prep_ms=None if m["prep"] is None else 1e3 * m["prep"],
                               routes=m["routes"], check=m["check"])
                    per_repr[rep] = row
                    log(f"pyg: {model:9s} {gname:5s} {rep:12s} stock {row['stock']['ms']:8.1f} ms  "
                        f"mmvref {row['mmvref']['ms']:8.1f} ms  ({row['stock']['ms'] / row['mmvref']['ms']:.2f}x)  "
                        f"routes {_routes_text(m['routes'])}  [{time.perf_counter() - t0:.1f}s, "
                        f"peak RSS {_peak_rss_gb():.1f} GB]")
                except Exception as exc:
                    if pyg.is_enabled():
                        pyg.disable()
                    row["error"] = f"{type(exc).__name__}: {exc}"
                    log(f"pyg: {model} {gname} {rep}: {row['error']}")
                rows.append(row)
            if per_repr:
                best_stock = min(r["stock"]["ms"] for r in per_repr.values())
                for r in per_repr.values():
                    r["vs_same"] = r["stock"]["ms"] / r["mmvref"]["ms"]
                    r["vs_best"] = best_stock / r["mmvref"]["ms"]
                fastest = min(per_repr.values(), key=lambda r: r["mmvref"]["ms"])
                try:  # the bound the targets face: the profile of mmvref's faster representation
                    p = profile_step(trainer, g[fastest["repr"]], pyg)
                    fastest["ceiling"] = dict(ceilings(best_stock, fastest["mmvref"]["ms"], p), profile=p)
                except Exception as exc:
                    if pyg.is_enabled():
                        pyg.disable()
                    log(f"pyg: profile {model} {gname}: {type(exc).__name__}: {exc}")
            del trainer
            gc.collect()
        if gname != prof_graph[0]:
            del g
            gc.collect()

    # the profile of one model on the first graph
    gname, g = prof_graph
    prof = {}
    trainer = Trainer(PROFILE_MODEL, g)
    for rep in REPRS:
        try:
            prof[f"stock, {rep}"] = profile_step(trainer, g[rep])
            prof[f"mmvref, {rep}"] = profile_step(trainer, g[rep], pyg)
        except Exception as exc:
            log(f"pyg: profile {rep}: {type(exc).__name__}: {exc}")
    log(f"pyg: profiled {PROFILE_MODEL} on {gname}")
    del trainer, g, prof_graph
    gc.collect()

    # first enabled steps, each model in a child process with an empty Numba cache
    compiles = {}
    child_models = (PROFILE_MODEL,) if quick else models
    cname, cn = graphs[0]
    for model in child_models:
        t0 = time.perf_counter()
        c = compile_child(model, cn, threads, log)
        c["graph"] = cname
        compiles[model] = c
        if "error" not in c:
            log(f"pyg: compile child {model}: " + "; ".join(
                f"{rep} first {1e3 * v['first_s']:.0f} ms, warm {1e3 * v['warm_s']:.0f} ms, {v['specs']} specs"
                for rep, v in c["reprs"].items()) + f" [{time.perf_counter() - t0:.1f}s]")

    import mmvref

    header = (
        f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, mmvref {mmvref.__version__} "
        f"({_git_rev()}), mmvref.pyg from `{os.path.relpath(pyg.__file__)}`; "
        f"`torch.set_num_threads({threads})` (this machine's cores), Numba threads {numba.get_num_threads()}, "
        f"{'quick' if quick else 'full'} run; load average (1 min) {load_start[0]:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end (other processes on this machine share its cores).\n\n"
        "One full-batch training step of a 2-layer model, hidden 128 (zero_grad, forward, cross-entropy, "
        "backward, Adam step), stock PyG and with `mmvref.pyg.enable()`, interleaved in the same process on "
        f"the same model and data: {warmup} warm-up pair(s), then {pairs} timed pairs (stock, mmvref; then "
        "mmvref, stock), the weights and Adam's state "
        "reset before each step. ms/step: median; spread: slowest / fastest timed step; vs = stock time / "
        "mmvref time. \"graph unprepared\": one enabled step after `mmvref.pyg.clear_cache()` (kernels "
        "compiled; the graph and its derived forms prepared again: compare with the warm mmvref step). "
        "routes per step: `mmvref.pyg.stats()` counters over one "
        "timed enabled step (f fused, u unfused, b fallback to PyG's code; c graph-cache hits / misses). "
        "check: |loss difference| / largest gradient difference relative to the largest gradient, stock "
        "and mmvref steps from the same state.\n\n" + "\n".join(graph_lines) + "\n")
    out = [header, "### pyg: training steps\n", _rows_table(rows)]
    if prof:
        out += [f"\n### pyg: where a {PROFILE_MODEL} step's time goes ({gname} graph)\n",
                "torch.profiler, one step after a warm one; each op's self time, grouped by the outermost op or "
                "autograd node that names a group (so the backward of `x[src]` is message building, the "
                "backward of a scatter is aggregation; mmvref's ops and fused products are aggregation); "
                "\"outside torch ops\": the step's wall time less the ops' (Python, PyG's glue, code "
                "that runs outside torch's op dispatch). Profiling adds overhead to every op.\n",
                _profile_table(prof)]
    ceiling = _ceiling_table(rows)
    if ceiling:
        out += ["\n### pyg: how far a faster aggregation can go (Amdahl's bound of each target)\n",
                "One profiled enabled step per model and graph, on mmvref's faster representation (after a warm "
                "one); its group shares scale the timed median. \"free aggregation\": stock's faster "
                "representation's step over the enabled step less its aggregation and message building, "
                "the ratio if those took no time at all; \"dense matmuls alone\": over the enabled step's "
                "dense matmuls only (the same torch ops with mmvref enabled or not). A target above the first "
                "is out of reach for any aggregation kernel on this machine.\n", ceiling]
    out += [f"\n### pyg: first enabled step with an empty Numba cache ({'quick: ' + PROFILE_MODEL + ' only' if quick else 'each model in its own child process'})\n",
            f"A child process (`NUMBA_CACHE_DIR` a new empty directory, torch at {threads} threads) runs two stock "
            "steps per representation (torch's and PyG's own first-call costs), imports `mmvref.pyg`, enables "
            "it, then times the first enabled step and the median of "
            f"{WARM_STEPS} more, per representation in the order shown (the second finds the first's kernels "
            "cached). first - warm: compilation and the graph's preparation.\n",
            _compile_table(compiles)]
    out += ["\n### pyg: targets\n", _targets(rows, compiles)]
    out.append(f"\npeak resident memory of this process: {_peak_rss_gb():.1f} GB; "
               f"pyg total {time.perf_counter() - t_start:.0f} s")
    json_rows = [dict(r, kind="step") for r in rows]
    json_rows += [dict(c, kind="first_step", model=m) for m, c in compiles.items()]
    json_rows += [dict(v, kind="profile", model=PROFILE_MODEL, graph=gname, column=k) for k, v in prof.items()]
    return "\n".join(out) + "\n", json_rows
