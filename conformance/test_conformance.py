"""One test per op: the golden model and the chosen backend agree (see conftest.py)."""
from __future__ import annotations

import pytest

from . import runner
from .session import EXIT_UNAVAILABLE, ConfigError, resolve_or_exit
from .suite import run


def test_op_conforms(conformance_op, request):
    cfg = request.config
    try:  # a backend this machine cannot run is skipped with the reason; a bad name is an error
        resolve_or_exit(cfg.getoption("--backend"), cfg.getoption("--s"))
    except ConfigError as exc:
        if exc.code == EXIT_UNAVAILABLE:
            pytest.skip(str(exc))
        pytest.fail(str(exc), pytrace=False)
    profile = runner.PROFILES[cfg.getoption("--conformance-profile")]
    (rep,) = run(cfg.getoption("--backend"), [conformance_op], s=cfg.getoption("--s"),
                 max_examples=cfg.getoption("--max-examples") or profile["max_examples"],
                 seed=cfg.getoption("--seed"), derandomize=profile["derandomize"],
                 policy=cfg.getoption("--policy"), db=".conformance-db", report_dir=None, progress=False,
                 log=lambda *a: None, tier=profile["tier"])
    if rep.status == "skipped":
        pytest.skip(rep.message)
    assert rep.status == "pass", (f"{rep.message}\nminimal counterexample: {rep.counterexample}\n"
                                  f"reproduce: {rep.command}")
