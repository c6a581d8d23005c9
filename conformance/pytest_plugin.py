"""pytest plugin (entry point ``pytest11``): ``pytest --pyargs conformance
[--backend NAME] [--ops ...] [--max-examples N] [--seed S]
[--conformance-profile default|ci|release] [--policy P]`` runs one test per op (and per
stage the backend exposes), the same checks as ``python -m conformance``. The
options exist in every pytest run once the package is installed; they only
matter to ``conformance/test_conformance.py``."""
from __future__ import annotations


def pytest_addoption(parser):
    g = parser.getgroup("conformance")
    g.addoption("--backend", default="mmvref", help="backend name, package.module:attr or faulty:FAULT:BASE")
    g.addoption("--ops", nargs="*", default=None, help="ops (and stage:NAME) to check (default: all)")
    g.addoption("--max-examples", type=int, default=None, help="examples per op (overrides the profile)")
    g.addoption("--seed", type=int, default=None, help="Hypothesis seed")
    g.addoption("--conformance-profile", default="default", choices=["default", "ci", "release"],
                help="example budget and input tier (conformance.runner.PROFILES)")
    g.addoption("--policy", default="derived", help="float comparison policy (conformance.compare)")
    g.addoption("--s", type=int, default=8, help="tile size s (a backend's own .s wins)")


def pytest_generate_tests(metafunc):
    if "conformance_op" in metafunc.fixturenames:
        from .suite import all_op_names

        ops = metafunc.config.getoption("--ops") or all_op_names()
        metafunc.parametrize("conformance_op", ops)
