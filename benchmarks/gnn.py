"""GNN message aggregation (issue 17): ``python -m benchmarks --ops gnn``.

A graph of E edges (1e7; with ``--quick`` 1e6, F = 16 only, sum and max for segment_csr and sum
for the others, no uniform rows, about half a minute) into N = E / 10 nodes whose in-degrees
follow a power law (node weights from a continuous Pareto, alpha = 1.5, edges drawn multinomially: a
discrete, heavy-tailed degree distribution with some zero-degree nodes, i.e. empty segments; the
largest in-degree is in the tens of thousands). Messages ``src`` are float32 of shape (E, F),
F in {1, 16, 64, 256}, reduced per destination node with sum, mean and max:

  gnn_segment_csr  ``mmvref.segment_csr(src, indptr)``            edges sorted by destination
  gnn_segment_coo  ``mmvref.segment_coo(src, index, dim_size=N)`` the same, as a sorted index
  gnn_scatter      ``mmvref.scatter(src, index, dim_size=N)``     the same edges in random order
  gnn_scatter_uniform  the same call, destinations drawn uniformly (every node about E / N edges);
                   forward rows only

Each case is timed forward ("fwd": numpy in/out for ours, torch tensors for the torch peers) and
forward + backward ("fwd+bwd": src a torch tensor requiring grad, the op through mmvref's torch
custom ops, then ``torch.autograd.grad`` with a fixed random upstream gradient).

Peers (timed in the same process, interleaved; a peer that cannot run is a "skipped" row with
the reason): torch_scatter (segment_csr / segment_coo / scatter; not on PyPI as a wheel for this
torch: ``pip install torch-scatter --no-build-isolation`` builds it from source in about 5
minutes), ``torch.segment_reduce`` (with ``lengths``: ``torch.diff(indptr)`` for CSR, a
``bincount`` of the index for COO, computed inside the timed call), ``torch.Tensor.index_add_``
(sum; mean = index_add_ then a division by the bincount; no max) and
``torch.Tensor.scatter_reduce`` (sum / mean / amax, include_self=False) for scatter, and numpy
``np.add.reduceat`` / ``np.maximum.reduceat`` (empty segments fixed to 0; no backward).

Byte model (the "x copy" column, against the harness's parallel copy): fwd = src read + output
written = (E + N) F 4 bytes; fwd+bwd = twice that (the upstream gradient read, src's gradient
written). Gelem/s counts E F message values. Memory: six E x F float32 arrays are budgeted per
case (src, its gradient, a peer's backward temporaries), at most GNN_MEMORY_BYTES in all (16 GB,
or 90% of this machine's memory when that is less); where E = 1e7 would exceed it (F = 256), E is
reduced, printed, and the case label says "reduced".

Targets (printed after the tables, judged on the forward rows; fwd+bwd listed too): segment_csr
sum/mean/max >= 2x torch_scatter and >= 5x torch.segment_reduce at every F; scatter (power-law
and uniform destinations) >= 1.0x torch's faster peer of each reduction (sum, mean: index_add_;
max: scatter_reduce) at every F; every op >= 0.7x copy at F >= 16.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .harness import Skip
from .ops import Case, OpBench, _fmt_n, _rng, _torch

__all__ = ["OPS", "GNN_MEMORY_BYTES"]

FULL_E = 10_000_000
QUICK_E = 1_000_000
FEATURES = (1, 16, 64, 256)
QUICK_FEATURES = (16,)
REDUCES = ("sum", "mean", "max")
QUICK_REDUCES = ("sum", "max")
MODES = ("fwd", "fwd+bwd")


def _memory_budget(cap=16e9, share=0.9):
    """Bytes the cases may take: at most ``cap``, and ``share`` of this machine's memory."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): the cap alone
        return cap
    return min(cap, share * total)


GNN_MEMORY_BYTES = _memory_budget()
#: E x F float32 arrays budgeted per case: src, its gradient, and the temporaries of torch's
#: scatter_reduce("amax") backward (with 4 budgeted, F = 256 and E = 3.9e6, the process held 24 GB,
#: six such arrays, when it was killed for memory on a 24 GB machine)
_ARRAYS_PER_CASE = 6
_ALPHA = 1.5          # Pareto tail of the node weights
_GRAD_ROWS = 4096     # rows of src's gradient kept for the cross-check (not the whole E x F)
_TS_HINT = ("torch_scatter is not installed (no wheel for this torch; `pip install torch-scatter "
            "--no-build-isolation` builds it from source, about 5 minutes)")


def edges_for(F, E=FULL_E):
    """(E used, reduced?) for feature width F under the memory budget."""
    cap = int(GNN_MEMORY_BYTES // (_ARRAYS_PER_CASE * 4 * F))
    if E <= cap:
        return E, False
    digits = 10 ** (len(str(cap)) - 2)  # two significant digits, rounded down
    return cap // digits * digits, True


def _label(E, reduced, F, reduce, mode):
    e = _fmt_n(E) if not reduced else f"{E:,} (reduced)"
    return f"E={e}, F={F}, {reduce}, {mode}"


def _torch_scatter():
    try:
        import torch_scatter
    except ImportError:
        raise Skip(_TS_HINT) from None
    return torch_scatter


NOTES = {}     # notes for the report (E reduced under the memory budget), by text
_GRAPHS = {}   # E -> graph (one kept)
_SRC = {}      # (E, F) -> src (one kept)


def graph(E):
    """The power-law graph of E edges: dict(indptr, index (sorted), perm_index (random order),
    counts, N). Seeded and cached (the last E only)."""
    if E not in _GRAPHS:
        _GRAPHS.clear()
        N = max(1, E // 10)
        rng = _rng(17, E)
        w = (1.0 - rng.random(N)) ** (-1.0 / _ALPHA)   # Pareto(alpha), x_m = 1
        counts = rng.multinomial(E, w / w.sum()).astype(np.int64)
        indptr = np.zeros(N + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        index = np.repeat(np.arange(N, dtype=np.int64), counts)
        perm = rng.permutation(E)
        _GRAPHS[E] = {"indptr": indptr, "index": index, "perm": perm, "perm_index": index[perm],
                      "counts": counts, "N": N}
    return _GRAPHS[E]


def uniform_graph(E):
    """``graph(E)``'s nodes and messages with destinations drawn uniformly at random (seeded)."""
    key = ("uniform", E)
    if key not in _GRAPHS:
        _GRAPHS.clear()
        N = max(1, E // 10)
        index = _rng(20, E).integers(0, N, E)
        _GRAPHS[key] = {"perm_index": index, "counts": np.bincount(index, minlength=N).astype(np.int64), "N": N}
    return _GRAPHS[key]


def messages(E, F):
    if (E, F) not in _SRC:
        _SRC.clear()
        _SRC[(E, F)] = _rng(18, E, F).standard_normal((E, F), dtype=np.float32)
    return _SRC[(E, F)]


def _grad_slice(g):
    return g[:_GRAD_ROWS].detach().clone()


def _backward(torch, forward, src_t, grad_out):
    """A thunk: forward(src requiring grad) then its gradient w.r.t. src (the first rows returned)."""
    def run():
        out = forward(src_t)
        if isinstance(out, tuple):
            out = out[0]
        (g,) = torch.autograd.grad(out, src_t, grad_out)
        return _grad_slice(g)
    return run


class _GnnBench(OpBench):
    """Shared cases, inputs, byte model, sanity check and target report of the three GNN ops."""

    name = ""
    fast_name = ""          # the mmvref function benchmarked (harness._our looks it up)
    scatter_input = False   # edges in random order (scatter) or sorted by destination
    uniform = False         # destinations uniform (scatter only) instead of power-law

    def cases(self, quick):
        Es = QUICK_E if quick else FULL_E
        Fs = QUICK_FEATURES if quick else FEATURES
        reduces = QUICK_REDUCES if quick else REDUCES
        if quick and self.name != "gnn_segment_csr":
            reduces = ("sum",)
        out = []
        for F in Fs:
            E, reduced = edges_for(F, Es)
            if reduced:
                note = (f"F={F}: E reduced from {Es:,} to {E:,} ({_ARRAYS_PER_CASE} arrays of E x F float32 "
                        f"would exceed {GNN_MEMORY_BYTES / 1e9:.0f} GB)")
                if note not in NOTES:
                    print(f"gnn: {note}", file=sys.stderr, flush=True)
                NOTES[note] = True
            for reduce in reduces:
                for mode in MODES:
                    out.append(Case(self.name, _label(E, reduced, F, reduce, mode), E * F, None, (),
                                    {"E": E, "F": F, "reduce": reduce, "mode": mode, "reduced_E": reduced}))
        return out

    def inputs(self, case):
        p = case.params
        g = uniform_graph(p["E"]) if self.uniform else graph(p["E"])
        src = messages(p["E"], p["F"])  # scatter: the same messages, their destinations in random order
        inp = {"src": src, "F": p["F"], "reduce": p["reduce"], "mode": p["mode"], "N": g["N"],
               "indptr": g.get("indptr"), "counts": g["counts"],
               "index": g["perm_index"] if self.scatter_input else g["index"]}
        if p["mode"] == "fwd+bwd":
            inp["grad_out"] = _rng(19, g["N"], p["F"]).standard_normal((g["N"], p["F"]), dtype=np.float32)
        self._nonempty = g["counts"] > 0
        return inp

    def nbytes(self, case, inp):
        p = case.params
        fwd = (p["E"] + inp["N"]) * p["F"] * 4
        return fwd if p["mode"] == "fwd" else 2 * fwd

    # ours --------------------------------------------------------------------------------------

    def _call(self, fn, src, inp):
        raise NotImplementedError

    def ours(self, fn, inp):
        if inp["mode"] == "fwd":
            src = inp["src"]
            return lambda: self._call(fn, src, inp)

        def skip():
            raise Skip(reason)
        try:
            import torch

            import mmvref._fast.segment._torch  # noqa: F401  (the custom ops that carry autograd)
        except Exception as exc:
            reason = f"backward needs mmvref._fast.segment._torch ({type(exc).__name__}: {exc})"
            return skip
        tin = dict(inp, index=torch.from_numpy(inp["index"]),
                   indptr=None if inp["indptr"] is None else torch.from_numpy(inp["indptr"]))
        src_t = torch.from_numpy(inp["src"]).requires_grad_()
        return _backward(torch, lambda s: self._call(fn, s, tin), src_t, torch.from_numpy(inp["grad_out"]))

    # checks and reports --------------------------------------------------------------------------

    def same(self, ours_out, peer_out):
        a = np.asarray(ours_out.detach().numpy() if hasattr(ours_out, "detach") else ours_out, np.float64)
        b = np.asarray(peer_out.detach().numpy() if hasattr(peer_out, "detach") else peer_out, np.float64)
        if a.shape != b.shape:
            return False
        if a.shape[0] == self._nonempty.size:  # forward: empty segments follow each peer's own convention
            a, b = a[self._nonempty], b[self._nonempty]
        return bool(np.allclose(a, b, rtol=1e-4, atol=1e-2, equal_nan=True))


def _fwd_bwd(torch, inp, forward_t):
    """A peer thunk for inp's mode: forward_t(src tensor) timed alone, or with its backward."""
    src_t = torch.from_numpy(inp["src"])
    if inp["mode"] == "fwd":
        def run():
            out = forward_t(src_t)
            return out[0] if isinstance(out, tuple) else out
        return run
    return _backward(torch, forward_t, src_t.requires_grad_(), torch.from_numpy(inp["grad_out"]))


def _ts_peer(kind):
    def make(inp):
        ts = _torch_scatter()
        torch = _torch()
        r = inp["reduce"]
        if kind == "csr":
            ip = torch.from_numpy(inp["indptr"])
            return _fwd_bwd(torch, inp, lambda s: ts.segment_csr(s, ip, reduce=r))
        idx = torch.from_numpy(inp["index"])
        N = inp["N"]
        if kind == "coo":
            return _fwd_bwd(torch, inp, lambda s: ts.segment_coo(s, idx, dim_size=N, reduce=r))
        return _fwd_bwd(torch, inp, lambda s: ts.scatter(s, idx, dim=0, dim_size=N, reduce=r))
    return make


def _segment_reduce_peer(kind):
    def make(inp):
        torch = _torch()
        r = inp["reduce"]
        if kind == "csr":
            ip = torch.from_numpy(inp["indptr"])

            def fwd(s):
                return torch.segment_reduce(s, r, lengths=torch.diff(ip), axis=0, unsafe=True)
        else:
            idx, N = torch.from_numpy(inp["index"]), inp["N"]

            def fwd(s):
                return torch.segment_reduce(s, r, lengths=torch.bincount(idx, minlength=N), axis=0, unsafe=True)
        return _fwd_bwd(torch, inp, fwd)
    return make


def _numpy_reduceat(kind):
    def make(inp):
        if inp["mode"] != "fwd":
            raise Skip("numpy has no autograd")
        src, r, N = inp["src"], inp["reduce"], inp["N"]
        E = src.shape[0]
        ufunc = np.maximum if r == "max" else np.add

        def run():
            if kind == "csr":
                ip = inp["indptr"]
            else:  # COO: the offsets from the sorted index first
                ip = np.searchsorted(inp["index"], np.arange(N + 1))
            starts = ip[:-1]
            out = ufunc.reduceat(src, np.minimum(starts, E - 1), axis=0)
            lens = np.diff(ip)
            out[lens == 0] = 0  # reduceat gives src[start] for an empty segment
            if r == "mean":
                out /= np.maximum(lens, 1)[:, None].astype(np.float32)
            return out
        return run
    return make


def _index_add_peer(inp):
    torch = _torch()
    r = inp["reduce"]
    if r == "max":
        raise Skip("index_add_ only adds (see scatter_reduce amax)")
    idx, N, F = torch.from_numpy(inp["index"]), inp["N"], inp["F"]

    def fwd(s):
        out = torch.zeros(N, F, dtype=s.dtype)
        out = out.index_add_(0, idx, s) if not s.requires_grad else out.index_add(0, idx, s)
        if r == "mean":
            out = out / torch.bincount(idx, minlength=N).clamp_(min=1).to(s.dtype)[:, None]
        return out
    return _fwd_bwd(torch, inp, fwd)


def _scatter_reduce_peer(inp):
    torch = _torch()
    r = {"sum": "sum", "mean": "mean", "max": "amax"}[inp["reduce"]]
    idx, N, F = torch.from_numpy(inp["index"]), inp["N"], inp["F"]
    idx2 = idx[:, None].expand(-1, F)

    def fwd(s):
        return torch.zeros(N, F, dtype=s.dtype).scatter_reduce(0, idx2, s, r, include_self=False)
    return _fwd_bwd(torch, inp, fwd)


class SegmentCsrGnn(_GnnBench):
    name = "gnn_segment_csr"
    fast_name = "segment_csr"

    def _call(self, fn, src, inp):
        return fn(src, inp["indptr"], reduce=inp["reduce"])

    def peers(self):
        return {"torch_scatter.segment_csr": _ts_peer("csr"), "torch.segment_reduce": _segment_reduce_peer("csr"),
                "numpy reduceat": _numpy_reduceat("csr")}


class SegmentCooGnn(_GnnBench):
    name = "gnn_segment_coo"
    fast_name = "segment_coo"

    def _call(self, fn, src, inp):
        return fn(src, inp["index"], dim_size=inp["N"], reduce=inp["reduce"])

    def peers(self):
        return {"torch_scatter.segment_coo": _ts_peer("coo"), "torch.segment_reduce": _segment_reduce_peer("coo"),
                "numpy reduceat": _numpy_reduceat("coo")}


class ScatterGnn(_GnnBench):
    name = "gnn_scatter"
    fast_name = "scatter"
    scatter_input = True

    def _call(self, fn, src, inp):
        return fn(src, inp["index"], dim_size=inp["N"], reduce=inp["reduce"])

    def peers(self):
        return {"torch_scatter.scatter": _ts_peer("scatter"), "index_add_": _index_add_peer,
                "scatter_reduce": _scatter_reduce_peer}


class ScatterUniformGnn(ScatterGnn):
    name = "gnn_scatter_uniform"
    uniform = True

    def cases(self, quick):
        # forward rows only (the targets'; the backward is the same gather as gnn_scatter's), and none
        # with --quick (its power-law rows stand for both)
        return [] if quick else [c for c in super().cases(quick) if c.params["mode"] == "fwd"]


# ----------------------------------------------------------------------------- targets

#: (op, peer, reduces, minimum ratio peer time / our time)
TARGETS = (
    ("gnn_segment_csr", "torch_scatter.segment_csr", ("sum", "mean", "max"), 2.0),
    ("gnn_segment_csr", "torch.segment_reduce", ("sum", "mean", "max"), 5.0),
    ("gnn_scatter", "index_add_", ("sum", "mean"), 1.0),
    ("gnn_scatter", "scatter_reduce", ("max",), 1.0),
    ("gnn_scatter_uniform", "index_add_", ("sum", "mean"), 1.0),
    ("gnn_scatter_uniform", "scatter_reduce", ("max",), 1.0),
)
COPY_TARGET, COPY_TARGET_MIN_F = 0.7, 16


def targets_report(results, copy_gbs):
    """Markdown: each target beside the measured ratio (met / NOT met / not measured)."""
    lines = ["| op | case | target | measured | |", "|---|---|---|---:|---|"]
    ours = [r for r in results if r.ours and r.op.startswith("gnn_") and r.impl == "ours"]

    def verdict(v, t):
        return "met" if v >= t else "**NOT met**"

    for r in ours:
        p = r.extra
        for op, peer, reduces, t in TARGETS:
            if r.op != op or p.get("reduce") not in reduces:
                continue
            pr = next((q for q in results if q.op == r.op and q.case == r.case and q.impl == peer), None)
            if pr is None or not pr.ms or not r.ms:
                why = (pr.note or pr.status) if pr is not None else "not run"
                lines.append(f"| {r.op} | {r.case} | >= {t:g}x {peer} | — | not measured ({why[:60]}) |")
            else:
                v = pr.ms / r.ms
                lines.append(f"| {r.op} | {r.case} | >= {t:g}x {peer} | {v:.2f}x | {verdict(v, t)} |")
        if p.get("F", 0) >= COPY_TARGET_MIN_F and r.ms:
            v = r.gbs / copy_gbs
            lines.append(f"| {r.op} | {r.case} | >= {COPY_TARGET:g}x copy | {v:.2f} | {verdict(v, COPY_TARGET)} |")
    notes = "".join(f"- {n}\n" for n in NOTES)
    if len(lines) == 2:
        return notes
    return ((notes + "\n" if notes else "") + "Targets (forward rows are the targets; fwd+bwd rows for information, judged the same way):\n\n"
            + "\n".join(lines))


OPS = {b.name: b for b in (SegmentCsrGnn(), SegmentCooGnn(), ScatterGnn(), ScatterUniformGnn())}
