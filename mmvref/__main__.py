"""``python -m mmvref``: print the configuration a bug report needs (``--info``, the default;
``--json``), or fill Numba's cache ahead of time (``python -m mmvref precompile``)."""
from __future__ import annotations

import argparse
import json


def _parser() -> argparse.ArgumentParser:
    from . import _precompile  # stdlib only at import: no mmvref kernels, no numba

    ap = argparse.ArgumentParser(
        prog="python -m mmvref", description=__doc__,
        epilog="'python -m mmvref precompile --help' describes the precompile command.")
    ap.add_argument("--info", action="store_true", help="print versions, CPU, compile target, kernel paths, "
                                                        "threading and cache directory (the default action)")
    ap.add_argument("--json", action="store_true", help="the same as JSON")
    sub = ap.add_subparsers(dest="command", metavar="{precompile}")
    pre = sub.add_parser(
        "precompile", prog="python -m mmvref precompile", help="fill Numba's cache for this machine ahead of time",
        description="Compile the kernels of mmvref's ops into Numba's on-disk cache ahead of time (Docker "
                    "images, Dask workers, CI): one process per (op, dtype), --jobs at a time, one line per "
                    "finished task. The cache serves only processes with the same Numba version, compile "
                    "target (the host CPU, or NUMBA_CPU_NAME / NUMBA_CPU_FEATURES) and cache directory "
                    "(NUMBA_CACHE_DIR, else __pycache__ next to the sources); the tasks inherit this "
                    "environment. Exit status: 0, 1 when a task failed, 2 for a bad argument.")
    _precompile.add_arguments(pre)
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "precompile":
        from . import _precompile

        return _precompile.main(args)
    from ._config import config_info, format_config

    info = config_info()
    print(json.dumps(info, indent=2) if args.json else format_config(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
