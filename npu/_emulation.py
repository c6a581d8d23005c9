"""TorchEmulationBackend: the MM+V algorithms written in torch, on any device.

A second, independent implementation of the registry's ops that cross-checks
the golden model: every scan is a tile product with U_s on the device's matrix
unit (``torch.matmul``), every correction a vector op (cumsum of per-tile
totals, gathers, masked adds). It runs wherever torch runs: CPU, CUDA (a real
matrix unit), or an NPU through torch_npu.

Words: integers compute in int64 (float64 on CUDA, whose matmul has no integer
path; exact while the bound of ``mmvref.bounds`` stays below 2**53, and refused
with OverflowError otherwise), fp16 in fp32, fp32/fp64 as they are. Results
follow the project's dtype and overflow rules (DEVELOPERS.md).
"""
from __future__ import annotations

import functools

import numpy as np

from mmvref import bounds
from mmvref._dtypes import result_dtype
from mmvref._order import order_keys
from mmvref._validate import (
    as_csr_matrix,
    as_flags,
    as_indptr,
    as_values,
    check_bool,
    check_int,
    check_overflow,
    check_s,
)

__all__ = ["TorchEmulationBackend"]


def _torch():
    import torch

    return torch


def _tensor(a):
    """torch.from_numpy at the emulation's boundary: torch takes no negative
    strides (numpy flags a 1-element reversed view contiguous) and must not
    alias read-only memory, so such arrays are copied."""
    a = np.asarray(a)
    if not a.flags.writeable or any(st < 0 for st in a.strides):
        a = a.copy()
    return _torch().from_numpy(a)


class TorchEmulationBackend:
    """Registry ops (numpy in, numpy out) computed by MM+V algorithms in torch.

    ``device``: any torch device ("cpu", "cuda", "npu:0"); ``s``: the tile size
    of the matrix unit (default 128, as the kernels); ``int_words``: "auto"
    (int64 on the CPU, float64 elsewhere), "int64" or "float64"."""

    name = "emulation"

    def __init__(self, device="cpu", s=128, int_words="auto"):
        torch = _torch()
        self.device = torch.device(device)
        self.s = check_s(s)
        # integer matmul exists on the CPU only; elsewhere integers ride in float64
        # ("auto"); "int64" / "float64" force one (float64 on the CPU tests the GPU path)
        if int_words not in ("auto", "int64", "float64"):
            raise ValueError(f"int_words must be 'auto', 'int64' or 'float64', got {int_words!r}")
        if int_words == "auto":
            int_words = "int64" if self.device.type == "cpu" else "float64"
        self._int_word = getattr(torch, int_words)
        self._int_stage = False

    def regimes(self):
        """Where the kernels change regime (``conformance.regimes``): its matmul tile s."""
        return {"tiles": (self.s,)}

    def __repr__(self):
        return f"TorchEmulationBackend(device={str(self.device)!r}, s={self.s})"

    # ------------------------------------------------------------------ words

    @functools.lru_cache(maxsize=None)  # noqa: B019 - a handful of (s, dtype) per backend
    def _upper(self, s, tdtype):
        torch = _torch()
        return torch.triu(torch.ones(s, s, dtype=tdtype, device=self.device))

    def _words(self, x, exact_bound=None):
        """numpy values -> device words; integers checked against the float64 window."""
        torch = _torch()
        if x.dtype.kind == "f":
            w = x.astype(np.float32) if x.dtype == np.float16 else x
            return _tensor(np.ascontiguousarray(w)).to(self.device)
        if self._int_word == torch.float64 and exact_bound is not None and exact_bound >= 2**53:
            raise OverflowError(f"{self.device.type} has no integer matmul; float64 words are exact "
                                f"below 2**53 but this input's bound is {exact_bound}")
        return _tensor(np.ascontiguousarray(x, dtype=np.int64)).to(self.device, self._int_word)

    def _finish(self, z, in_dtype, overflow, op, exact=None):
        """device words -> numpy result of the project's dtype, under ``overflow``.
        int64 words are exact modulo 2**64 only; where the input's bound reaches
        2**63, ``exact()`` (Python ints) decides whether a result overflows."""
        rdt = result_dtype(in_dtype)
        z = z.cpu()
        if rdt.kind == "f":
            return z.numpy().astype(rdt, copy=False)
        z = z.to(_torch().int64).numpy()
        if overflow == "wrap":
            return z.astype(rdt)
        info = np.iinfo(rdt)
        if exact is not None:
            vals = exact()
            if len(vals) and (min(vals) < info.min or max(vals) > info.max):
                raise OverflowError(f"emulation.{op}: a result overflows {rdt}; pass overflow='wrap'")
            return z.astype(rdt)
        if z.size and (z.min() < info.min or z.max() > info.max):
            raise OverflowError(f"emulation.{op}: a result overflows {rdt}; pass overflow='wrap'")
        return z.astype(rdt)

    def _huge(self, x):
        """Can a sum of x leave the int64 words (so they are exact only modulo 2**64)?"""
        return x.dtype.kind == "i" and self._bound(x) >= 2**63

    def _bound(self, x):
        if x.dtype.kind == "f" or x.size == 0:
            return 0
        return bounds.scan(len(x), self.s, max(abs(int(x.min())), abs(int(x.max())))).magnitude

    # ------------------------------------------------------------------ stages

    def _tiles(self, w):
        """Zero-pad to whole s-tiles and view as rows of s."""
        torch = _torch()
        s = self.s
        pad = (-w.shape[0]) % s
        if pad:
            w = torch.cat([w, w.new_zeros(pad)])
        return w.view(-1, s)

    def _row_scan(self, w):
        """MATMUL(x, U_s): every s-tile scanned on the matrix unit; (tiles, s)."""
        return self._tiles(w) @ self._upper(self.s, w.dtype)

    def _scan_words(self, w):
        """ScanU / MCScan: tile scans, then each tile gets the sum of the tiles
        before it (a cumsum of the tile totals on the vector unit)."""
        n = w.shape[0]
        if n == 0:
            return w.clone()
        y = self._row_scan(w)
        carry = _exclusive_cumsum(y[:, -1])  # by a shift: cumsum - value would cancel after a huge tile
        return (y + carry[:, None]).reshape(-1)[:n]

    def _segscan_words(self, w, f):
        """Segmented scan (start flags, f[0] = 1) from tile scans: Xbar = X U_s;
        inside a tile, z = Xbar - Xbar just before the latest start (REVSPEC);
        the carry into a tile's first segment is the segmented scan over tiles
        of the tile tails, restarted after every tile holding a start (App.
        Alg. 1's recursion)."""
        torch = _torch()
        n = w.shape[0]
        if n == 0:
            return w.clone()
        s = self.s
        xbar = self._row_scan(w)
        ft = self._tiles(f.to(torch.int64))
        pos = torch.arange(s, device=w.device).expand_as(ft)
        last = torch.cummax(torch.where(ft != 0, pos, -1), dim=1).values  # latest start in the tile
        before = torch.where(last > 0, xbar.gather(1, (last - 1).clamp(min=0)), torch.zeros_like(xbar))
        z = xbar - before
        z = torch.where(last >= 0, z, xbar)
        has = (ft != 0).any(dim=1)
        tails = z[:, -1]
        if z.shape[0] > 1:
            # carry_k = tail_{k-1} + (carry_{k-1} unless tile k-1 holds a start): a
            # segmented exclusive scan over tiles with starts after every flagged tile
            starts = torch.cat([torch.ones(1, dtype=torch.bool, device=w.device), has[:-1]])
            incl = self._segscan_words(tails[:-1], starts[1:].to(torch.int64) | _first(z.shape[0] - 1, w.device))
            carry = torch.cat([tails.new_zeros(1), incl])
            first_seg = last < 0  # positions before the tile's first start
            z = z + torch.where(first_seg, carry[:, None], torch.zeros_like(z))
        return z.reshape(-1)[:n]

    # ------------------------------------------------------------------ ops

    def _out_words(self, z):
        """Device words -> numpy words (int64 for integers, even when they rode in float64)."""
        torch = _torch()
        z = z.cpu()
        return (z.to(torch.int64) if z.dtype == torch.float64 and self._int_word == torch.float64
                and self._int_stage else z).numpy()

    def row_scan(self, x):
        """Stage: MATMUL(x, U_s) (every s-tile scanned), padding dropped; words out."""
        x = as_values(x, "x")
        self._int_stage = x.dtype.kind == "i"
        return self._out_words(self._row_scan(self._words(x, self._bound(x))).reshape(-1)[:len(x)])

    def block_scan(self, x):
        """Stage (ScanUL1 Eq. 1, the kernel run_block_scan): every s^2-block
        scanned on its own as A U_s + L_s^- (A 1_s); words out."""
        torch = _torch()
        x = as_values(x, "x")
        self._int_stage = x.dtype.kind == "i"
        w = self._words(x, self._bound(x))
        n, s = len(x), self.s
        pad = (-n) % (s * s)
        if pad:
            w = torch.cat([w, w.new_zeros(pad)])
        a = w.view(-1, s, s)
        ones = torch.ones(s, s, dtype=w.dtype, device=w.device)
        lower = torch.tril(ones, -1)
        z = a @ self._upper(s, w.dtype) + lower @ (a @ ones)
        return self._out_words(z.reshape(-1)[:n])

    def revert(self, xhat, fhat, w):
        """Stage (SSCR's REVERT, §4.1): z = xhat - w[fhat - 1] (fhat = 0: nothing
        subtracted); words in, words out."""
        torch = _torch()
        xh = _tensor(np.ascontiguousarray(xhat)).to(self.device)
        fh = _tensor(np.ascontiguousarray(fhat, dtype=np.int64)).to(self.device)
        wv = _tensor(np.ascontiguousarray(w, dtype=np.asarray(xhat).dtype)).to(self.device)
        take = wv[(fh - 1).clamp(min=0)] if len(wv) else torch.zeros_like(xh)
        return (xh - torch.where(fh > 0, take, torch.zeros_like(xh))).cpu().numpy()

    def _block_bounds(self, n, blocks):
        tiles = -(-n // self.s)
        per = -(-tiles // blocks) if tiles else 0
        return [(min(n, i * per * self.s), min(n, (i + 1) * per * self.s)) for i in range(blocks)]

    def reduce_tiles(self, x, blocks):
        """Stage (MCScan phase I): the sum of each of ``blocks`` blocks of whole s-tiles,
        as tile sums from the matrix unit (X 1_s) added up per block; words out."""
        torch = _torch()
        x = as_values(x, "x")
        self._int_stage = x.dtype.kind == "i"
        w = self._words(x, self._bound(x))
        tile_sums = (self._tiles(w) @ torch.ones(self.s, 1, dtype=w.dtype, device=w.device)).reshape(-1)
        r = w.new_zeros(blocks)
        for b, (lo, hi) in enumerate(self._block_bounds(len(x), blocks)):
            if hi > lo:
                r[b] = tile_sums[lo // self.s: -(-hi // self.s)].sum()
        return self._out_words(r)

    def complete_rows(self, y, r, blocks):
        """Stage (MCScan phase II): row scans y completed with block sums r: each
        tile gets the block's partial (sum of the earlier blocks) plus the sum
        of the earlier tiles of its block (a cumsum of tile totals); words out."""
        torch = _torch()
        y = np.asarray(y)
        self._int_stage = y.dtype.kind == "i"
        yw = _tensor(np.ascontiguousarray(y)).to(self.device)
        rw = _tensor(np.ascontiguousarray(r, dtype=y.dtype)).to(self.device)
        out = yw.clone()
        partial = _exclusive_cumsum(rw)
        for b, (lo, hi) in enumerate(self._block_bounds(len(y), blocks)):
            if hi <= lo:
                continue
            t = self._tiles(yw[lo:hi])
            ends = torch.tensor([min(hi - lo, (k + 1) * self.s) - 1 for k in range(t.shape[0])],
                                device=self.device)
            last = yw[lo:hi][ends]
            carry = _exclusive_cumsum(last) + partial[b]
            out[lo:hi] = (t + carry[:, None]).reshape(-1)[: hi - lo]
        return self._out_words(out)

    def gather_spmv(self, yhat, indptr):
        """Stage (App. Alg. 6): the scanned value at every row end; leading empty
        rows 0, other empty rows repeat the previous row end."""
        torch = _torch()
        yhat = np.asarray(yhat)
        ptr = np.asarray(indptr, dtype=np.int64)
        ends = _tensor(ptr[1:] - 1).to(self.device)
        yw = _tensor(np.ascontiguousarray(yhat)).to(self.device)
        vals = yw[ends.clamp(min=0)] if len(yhat) else torch.zeros(len(ends), dtype=yw.dtype)
        return torch.where(ends >= 0, vals, torch.zeros_like(vals)).cpu().numpy()

    def scan(self, x, *, exclusive=False, overflow="raise"):
        x = as_values(x, "x")
        check_overflow(overflow)
        exclusive = check_bool(exclusive, "exclusive")
        z = self._scan_words(self._words(x, self._bound(x)))
        if exclusive:
            z = _shift_right(z)

        def exact():
            c = np.cumsum(x.astype(object)).tolist()
            return ([0] + c[:-1]) if exclusive and c else c
        return self._finish(z, x.dtype, overflow, "scan", exact if self._huge(x) else None)

    def segmented_scan(self, x, flags, *, exclusive=False, overflow="raise"):
        x = as_values(x, "x")
        f = np.array(as_flags(flags, len(x), "flags"), dtype=np.int64)
        check_overflow(overflow)
        exclusive = check_bool(exclusive, "exclusive")
        if len(f):
            f[0] = 1
        w = self._words(x, self._bound(x))
        ft = _tensor(f).to(w.device)
        z = self._segscan_words(w, ft)
        if exclusive:
            z = z - w

        def exact():
            out, acc = [], 0
            for v, b in zip(x.tolist(), f.tolist()):
                acc = v if b else acc + v
                out.append(acc - v if exclusive else acc)
            return out
        return self._finish(z, x.dtype, overflow, "segmented_scan", exact if self._huge(x) else None)

    def segmented_sum(self, x, flags, *, overflow="raise"):
        x = as_values(x, "x")
        f = np.array(as_flags(flags, len(x), "flags"), dtype=np.int64)
        check_overflow(overflow)
        if len(x) == 0:
            return np.zeros(0, result_dtype(x.dtype))
        f[0] = 1
        w = self._words(x, self._bound(x))
        z = self._segscan_words(w, _tensor(f).to(w.device))
        ends = np.flatnonzero(np.append(f[1:], 1))  # the value at each segment's end
        starts = np.flatnonzero(f)
        return self._finish(z[_tensor(ends).to(w.device)], x.dtype, overflow, "segmented_sum",
                            (lambda: np.add.reduceat(x.astype(object), starts).tolist()) if self._huge(x) else None)

    def segment_sum_csr(self, x, indptr, *, overflow="raise"):
        torch = _torch()
        x = as_values(x, "x")
        ptr = as_indptr(indptr, "indptr", nnz=len(x)).astype(np.int64)
        check_overflow(overflow)
        rows = len(ptr) - 1
        out = torch.zeros(rows, dtype=self._words(x[:0]).dtype, device=self.device)
        nonempty = np.flatnonzero(ptr[1:] > ptr[:-1])
        if len(x) and len(nonempty):
            f = np.zeros(len(x), np.int64)
            f[ptr[nonempty]] = 1
            f[0] = 1
            w = self._words(x, self._bound(x))
            z = self._segscan_words(w, _tensor(f).to(w.device))
            ends = _tensor(ptr[nonempty + 1] - 1).to(w.device)
            out[_tensor(nonempty).to(w.device)] = z[ends]
        def exact():
            c = np.concatenate([[0], np.cumsum(x.astype(object))])
            return (c[ptr[1:]] - c[ptr[:-1]]).tolist()
        return self._finish(out, x.dtype, overflow, "segment_sum_csr", exact if self._huge(x) else None)

    def _positions(self, m):
        """Stable split positions: ones to the exclusive scan of m, zeros after all ones."""
        torch = _torch()
        mw = _tensor(np.ascontiguousarray(m, dtype=np.int64)).to(self.device, self._int_word)
        e = self._scan_words(mw) - mw
        t = (e[-1] + mw[-1]) if len(m) else mw.new_zeros(())
        iota = torch.arange(len(m), device=self.device, dtype=mw.dtype)
        pos = torch.where(mw != 0, e, t + iota - e)
        return pos.to(torch.int64), int(t)

    def compress(self, x, mask):
        x = as_values(x, "x")
        m = as_flags(mask, len(x), "mask")
        pos, t = self._positions(m)
        return self._move(x, pos)[:t]

    def compress_ind(self, x, mask):
        """``compress`` of the values and of the positions 0..n-1, by one set of split positions."""
        x = as_values(x, "x")
        m = as_flags(mask, len(x), "mask")
        pos, t = self._positions(m)
        return self._move(x, pos)[:t], self._move(np.arange(len(x), dtype=np.int64), pos)[:t]

    def split_ind(self, x, mask):
        x = as_values(x, "x")
        m = as_flags(mask, len(x), "mask")
        pos, _ = self._positions(m)
        return self._move(x, pos), self._move(np.arange(len(x), dtype=np.int64), pos)

    def split(self, x, mask):
        return self.split_ind(x, mask)[0]

    def _move(self, x, pos):
        """z[pos[i]] = x[i], moving bits (fp16 as uint16-sized int16)."""
        torch = _torch()
        bits = x.view(np.int16) if x.dtype == np.float16 else x
        src = _tensor(np.ascontiguousarray(bits)).to(self.device)
        out = torch.empty_like(src)
        out[pos] = src
        return out.cpu().numpy().view(x.dtype)

    def radix_sort(self, x, *, descending=False):
        """LSB radix sort, one split per key bit (keys: ``mmvref.mmv.orderkey``'s
        order, computed here with numpy bit operations)."""
        x = as_values(x, "x")
        keys = order_keys(x, check_bool(descending, "descending")).astype(np.uint64)
        idx = np.arange(len(x), dtype=np.int64)
        for b in range(8 * x.dtype.itemsize):
            m = ((keys >> np.uint64(b)) & np.uint64(1)) == 0
            pos, _ = self._positions(m.astype(np.uint8))
            keys = self._move(keys.view(np.int64), pos).view(np.uint64)
            idx = self._move(idx, pos)
        return x[idx], idx

    def argsort(self, x, *, descending=False):
        return self.radix_sort(x, descending=descending)[1]

    def topk(self, x, k, *, largest=True):
        x = as_values(x, "x")
        k = check_int(k, "k", 0, len(x), what=" (the length of x)")
        v, i = self.radix_sort(x, descending=check_bool(largest, "largest"))
        return v[:k], i[:k]

    def csr_gather(self, data, indices, x):
        """Stage (App. Alg. 5): z(i) = data(i) * x(indices(i)), in words."""
        x = as_values(x, "x")
        data = as_values(data, "data")
        xw, dw = self._words(x), self._words(data)
        idx = _tensor(np.ascontiguousarray(indices, dtype=np.int64)).to(self.device)
        return (dw * xw[idx]).cpu().numpy()

    def spmv(self, A, x, *, overflow="raise"):
        """y = A x: CsrGather (products), then per-row sums from the tile scans
        (a segmented scan restarted at every row; never prefix differences).
        Result dtype: the project rule on np.result_type(data, x)."""
        indptr, indices, data, (m, n) = as_csr_matrix(A, "A")  # rows and columns from A's shape
        x = as_values(x, "x")
        if len(x) != n:
            raise ValueError(f"x has length {len(x)} but A has {n} columns (shape {(m, n)})")
        check_overflow(overflow)
        dt = np.result_type(data, x)
        rdt = result_dtype(dt)
        if rdt.kind == "f":
            prod = self.csr_gather(data.astype(rdt), indices, x.astype(rdt))
            return self.segment_sum_csr(prod.astype(rdt), indptr)
        ma = max(abs(int(data.min())), abs(int(data.max()))) if len(data) else 0
        mx = max(abs(int(x.min())), abs(int(x.max()))) if len(x) else 0
        if bounds.spmv(len(data), self.s, ma, mx).magnitude >= 2**63:
            raise OverflowError("emulation.spmv: the products' sums may leave the int64 words")
        prod = self.csr_gather(data.astype(np.int64), indices, x.astype(np.int64))
        y = self.segment_sum_csr(prod, indptr)  # int64, exact
        return _cast(y, rdt, overflow, "spmv")

    def spmm(self, A, D, *, overflow="raise"):
        """O = A D (as ``golden.spmm``): CsrGather of every column of D, the k
        columns' products laid end to end (column j's rows start at indptr + j nnz),
        then one segment_sum_csr over all of them: one scan serves every column."""
        indptr, indices, data, (m, n) = as_csr_matrix(A, "A")  # rows and columns from A's shape
        D = as_values(D, "D", ndim=2)
        if D.shape[0] != n:
            raise ValueError(f"D must have {n} rows (A has {n} columns), got shape {D.shape}")
        check_overflow(overflow)
        k, nnz = D.shape[1], len(data)
        rdt = result_dtype(np.result_type(data, D))
        if m == 0 or k == 0:
            return np.zeros((m, k), rdt)
        ptr = np.concatenate([(indptr[:-1][None, :] + nnz * np.arange(k)[:, None]).ravel(), [k * nnz]])
        if rdt.kind == "f":
            prod = np.concatenate([self.csr_gather(data.astype(rdt), indices, D[:, j].astype(rdt)).astype(rdt)
                                   for j in range(k)])
            return self.segment_sum_csr(prod, ptr).reshape(k, m).T.copy()
        ma = max(abs(int(data.min())), abs(int(data.max()))) if nnz else 0
        md = max(abs(int(D.min())), abs(int(D.max()))) if D.size else 0
        if bounds.spmv(k * nnz, self.s, ma, md).magnitude >= 2**63:
            raise OverflowError("emulation.spmm: the products' sums may leave the int64 words")
        prod = np.concatenate([self.csr_gather(data.astype(np.int64), indices, D[:, j].astype(np.int64))
                               for j in range(k)])
        y = self.segment_sum_csr(prod.astype(np.int64), ptr)  # int64, exact
        return _cast(y, rdt, overflow, "spmm").reshape(k, m).T.copy()

    def spgemm(self, A, B, *, overflow="raise"):
        """C = A B by ESC on the emulated ops: the products expanded in product
        order with their (row, column) keys, a stable LSB radix sort of the keys
        (one split per key bit), a segmented sum over equal keys, the nonzero sums
        compressed, and the row counts prefix-summed into indptr. Returns
        (indptr, indices, data, shape), sorted, duplicates summed, zeros dropped."""
        ap, ai, ad, (m, n) = as_csr_matrix(A, "A")
        bp, bi, bd, (n2, p) = as_csr_matrix(B, "B")
        if n != n2:
            raise ValueError(f"shapes {(m, n)} and {(n2, p)} do not multiply")
        check_overflow(overflow)
        rdt = result_dtype(np.result_type(ad.dtype, bd.dtype))
        lens = bp[ai + 1] - bp[ai]  # products of every entry of A
        total = int(lens.sum())
        if total == 0:
            return np.zeros(m + 1, np.int64), np.zeros(0, np.int64), np.zeros(0, rdt), (m, p)
        rows = np.repeat(np.repeat(np.arange(m, dtype=np.int64), np.diff(ap)), lens)
        first = np.repeat(bp[ai] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        bpos = first + np.arange(total, dtype=np.int64)  # B entries of the products, in product order
        wd = rdt if rdt.kind == "f" else np.dtype(np.int64)
        if wd.kind != "f":
            ma = max(abs(int(ad.min())), abs(int(ad.max())))
            mb = max(abs(int(bd.min())), abs(int(bd.max())))
            if bounds.spmv(total, self.s, ma, mb).magnitude >= 2**63:
                raise OverflowError("emulation.spgemm: the products' sums may leave the int64 words")
        a_t = _tensor(np.repeat(ad, lens).astype(wd)).to(self.device)
        b_t = _tensor(bd[bpos].astype(wd)).to(self.device)
        vals = (a_t * b_t).cpu().numpy()
        keys = rows * max(p, 1) + bi[bpos]
        order = self._radix_keys(keys, max(1, int(m * max(p, 1) - 1).bit_length()))
        keys, vals = keys[order], vals[order]
        starts = np.ones(total, np.uint8)
        starts[1:] = keys[1:] != keys[:-1]
        sums = self.segmented_sum(vals, starts, overflow="wrap" if wd.kind != "f" else "raise")
        ukeys = self.compress(keys, starts)
        keep = (np.asarray(sums) != 0).astype(np.uint8)
        sums, ukeys = self.compress(np.asarray(sums, dtype=wd), keep), self.compress(ukeys, keep)
        counts = np.bincount(ukeys // max(p, 1), minlength=m).astype(np.int64)
        indptr = np.concatenate([[0], self.scan(counts)]).astype(np.int64)
        data = sums.astype(rdt) if wd.kind == "f" else _cast(sums, rdt, overflow, "spgemm")
        return indptr, (ukeys % max(p, 1)).astype(np.int64), data, (m, p)

    def _radix_keys(self, keys, bits):
        """The stable order of non-negative int64 keys: one split per bit, low bit first."""
        idx = np.arange(len(keys), dtype=np.int64)
        k = keys.copy()
        for b in range(bits):
            m = ((k >> b) & 1) == 0
            pos, _ = self._positions(m.astype(np.uint8))
            k = self._move(k, pos)
            idx = self._move(idx, pos)
        return idx

    def diff(self, z):
        """Stage (Alg. 2 line 5): z(i) - z(i-1), z(-1) = 0."""
        w = self._words(np.asarray(z))
        return (w - _shift_right(w)).cpu().numpy()


def _cast(y, rdt, overflow, op):
    if overflow == "raise" and y.size:
        info = np.iinfo(rdt)
        if y.min() < info.min or y.max() > info.max:
            raise OverflowError(f"emulation.{op}: a result overflows {rdt}; pass overflow='wrap'")
    return y.astype(rdt)


def _first(n, device):
    torch = _torch()
    f = torch.zeros(n, dtype=torch.int64, device=device)
    if n:
        f[0] = 1
    return f


def _exclusive_cumsum(v):
    """Exclusive cumsum by shifting the inclusive one (never by subtracting v)."""
    return _shift_right(_torch().cumsum(v, 0))


def _shift_right(z):
    torch = _torch()
    return torch.cat([z.new_zeros(1), z[:-1]]) if z.shape[0] else z.clone()
