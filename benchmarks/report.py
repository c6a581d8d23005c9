"""Markdown tables, JSON and PNG plots of benchmark results."""
from __future__ import annotations

import json
import math
import os

__all__ = ["markdown", "write_json", "plot"]


def _f(v, digits=3):
    if v is None:
        return "—"
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    return f"{v:.{max(0, digits - 1 - mag)}f}" if mag < digits else f"{v:,.0f}"


def _ratio(peer_ms, our_ms):
    return f"{peer_ms / our_ms:.2f}x" if peer_ms and our_ms else "—"


def markdown(results, copy_gbs, peer_order):
    """One table per op: rows (case, implementation); our rows carry "vs <peer>" = peer time / our time."""
    lines = []
    for op in dict.fromkeys(r.op for r in results):
        rows = [r for r in results if r.op == op]
        peers = peer_order.get(op, [])
        head = ["op", "case", "implementation", "median ms", "GB/s", "Gelem/s", "x copy"] + [f"vs {p}" for p in peers]
        lines += [f"### {op}", "", "| " + " | ".join(head) + " |",
                  "|" + "|".join(["---"] * 3 + ["---:"] * (len(head) - 3)) + "|"]
        for case in dict.fromkeys(r.case for r in rows):
            crow = [r for r in rows if r.case == case]
            for r in crow:
                name = ("**ours**" if r.impl == "ours" else f"**{r.impl}**") if r.ours else r.impl
                impl = name + ("" if r.status == "ok" else f" ({r.status})")
                cp = r.extra.get("copy_gb_per_s", copy_gbs)  # another build's own yardstick
                cells = [op, case, impl, _f(r.ms), _f(r.gbs), _f(r.gelems), _f(r.gbs / cp) if r.gbs else "—"]
                own = r.extra.get("peer_ms")  # another build's row: the peers timed in its process
                for p in peers:
                    pr = next((q for q in crow if q.impl == p), None)
                    pms = own.get(p) if own is not None else (pr.ms if pr else None)
                    cells.append(_ratio(pms, r.ms) if r.ours else "")
                lines.append("| " + " | ".join(cells) + " |")
        notes = [f"{r.case} / {r.impl}: {r.note}" for r in rows if r.note]
        if notes:
            lines += [""] + [f"- {n}" for n in dict.fromkeys(notes)]
        acc = [r for r in rows if r.extra.get("accuracy")]
        if acc:
            lines += ["", f"Accuracy ({op}): max over rows of |y - exact| / sum|a x| (normwise) and of "
                      "|y - exact| / |exact|; exact = double-double reference; gamma_k = documented bound.", "",
                      "| case | implementation | max normwise | max relative | within gamma_k |", "|---|---|---:|---:|---|"]
            for r in acc:
                a = r.extra["accuracy"]
                lines.append(f"| {r.case} | {'**ours**' if r.ours else r.impl} | {a['max_normwise']:.2e} | "
                             f"{a['max_rel']:.2e} | {'yes' if a['within_gamma_k'] else 'NO'} |")
        lines.append("")
    return "\n".join(lines)


def write_json(path, meta, results):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as fh:
        json.dump({"meta": meta, "results": [r.as_dict() for r in results]}, fh, indent=1, default=str)


def plot(directory, results, copy_gbs):
    """bandwidth_vs_n.png, bandwidth_vs_density.png and spmv.png (whichever have data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    written = []
    for axis, fname, xlabel in (("n", "bandwidth_vs_n.png", "n (elements)"),
                                ("density", "bandwidth_vs_density.png", "flag / mask density")):
        ops = [op for op in dict.fromkeys(r.op for r in results)
               if any(axis in r.extra.get("plots", ()) and r.ms for r in results if r.op == op)]
        if not ops:
            continue
        cols = min(3, len(ops))
        rows = math.ceil(len(ops) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
        for ax, op in zip(axes.flat, ops):
            pts = [r for r in results if r.op == op and axis in r.extra.get("plots", ()) and r.ms]
            for impl in dict.fromkeys(r.impl for r in pts):
                sel = sorted((r for r in pts if r.impl == impl), key=lambda r: r.n if axis == "n" else r.density)
                xs = [r.n if axis == "n" else r.density for r in sel]
                ax.plot(xs, [r.gbs for r in sel], marker="o", lw=2.2 if sel[0].ours else 1.2,
                        label=("ours" if sel[0].ours else impl))
            ax.axhline(copy_gbs, color="k", ls="--", lw=0.8, label="copy (numba, parallel)")
            ax.set_xscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("GB/s")
            ax.set_title(op)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(ops):]:
            ax.set_visible(False)
        fig.tight_layout()
        fig.savefig(os.path.join(directory, fname), dpi=110)
        plt.close(fig)
        written.append(fname)
    sp = [r for r in results if r.op == "spmv" and r.ms]
    if sp:
        dts = list(dict.fromkeys(r.extra.get("dtype") for r in sp))
        fig, axes = plt.subplots(len(dts), 1, figsize=(12, 3.6 * len(dts)), squeeze=False)
        for ax, dt in zip(axes.flat, dts):
            sel = [r for r in sp if r.extra.get("dtype") == dt]
            mats = list(dict.fromkeys(r.extra.get("matrix") for r in sel))
            impls = list(dict.fromkeys(r.impl for r in sel))
            w = 0.8 / max(1, len(impls))
            for j, impl in enumerate(impls):
                ys = [next((r.ms for r in sel if r.impl == impl and r.extra.get("matrix") == m), 0) for m in mats]
                ax.bar([i + j * w for i in range(len(mats))], ys, w, label=impl)
            ax.set_xticks([i + 0.4 - w / 2 for i in range(len(mats))])
            ax.set_xticklabels(mats, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel("median ms")
            ax.set_title(f"SpMV, {dt}")
            ax.legend(fontsize=8)
            ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(directory, "spmv.png"), dpi=110)
        plt.close(fig)
        written.append("spmv.png")
    return written
