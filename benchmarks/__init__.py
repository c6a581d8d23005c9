"""Benchmarks of mmvref's fast CPU ops against peers measured in the same run.

Run from the repository root::

    python -m benchmarks [--quick] [--ops OP ...] [--plot DIR] [--json FILE] [--runs N]

Each op's cases, inputs, byte model and peers are in ``benchmarks/ops.py``;
matrix generators (seeded, deterministic) in ``benchmarks/matrices.py``;
timing and the memory-copy yardstick in ``benchmarks/harness.py``. Results
are printed as Markdown tables (median ms, GB/s by the byte model, Gelem/s,
ratio to a parallel Numba copy, and "vs <peer>" = peer time / our time).
"""
