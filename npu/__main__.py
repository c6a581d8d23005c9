"""python -m npu [--coverage [--check] [--markdown]]

Without options: whether the NPU stack (torch_npu, tcuscan) is importable here,
and what is missing. ``--coverage``: per upstream kernel, what wraps it, its
dtypes, its stand-in twin and the upstream-derived tests that call it
(``npu.coverage``; ``python -m conformance --coverage`` adds whether the
conformance suite checks it); ``--markdown`` prints the table as Markdown;
``--check`` prints only the unexplained gaps and exits 1 if there is any, 0
otherwise.
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m npu", description=__doc__.split("\n\n")[1])
    p.add_argument("--coverage", action="store_true", help="the upstream kernel coverage table")
    p.add_argument("--check", action="store_true", help="with --coverage: list unexplained gaps, exit 1 if any")
    p.add_argument("--markdown", action="store_true", help="with --coverage: the table in Markdown")
    p.add_argument("--tests", metavar="DIR", default="auto",
                   help="the ported upstream tests (default: the repository's tests/upstream)")
    args = p.parse_args(argv)
    if not args.coverage:
        if args.check or args.markdown:
            p.error("--check and --markdown go with --coverage")
        from . import missing

        lack = missing()
        print("NPU stack: available" if not lack else "NPU stack: missing " + "; ".join(lack))
        print("python -m npu --coverage: which upstream kernels are wrapped, stood in for, tested "
              "(python -m conformance --coverage: and checked)")
        return 0
    from . import coverage

    t = coverage.table(args.tests)
    if args.check:
        sys.stdout.write(coverage.render_gaps(t))
        return 1 if t.gaps else 0
    sys.stdout.write(coverage.render_markdown(t) if args.markdown else coverage.render_text(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
