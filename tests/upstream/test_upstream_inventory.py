"""Every upstream test file has its port here, and each port states the number of cases upstream's
file collects (``UPSTREAM_PARAMETRISATIONS``) as counted at upstream's commit ddcd5ce."""
from __future__ import annotations

import importlib
import pathlib

import pytest
from _upstream import PYTESTMARK, UPSTREAM_TESTS

pytestmark = PYTESTMARK

HERE = pathlib.Path(__file__).parent


@pytest.mark.parametrize("name", sorted(UPSTREAM_TESTS))
def test_every_upstream_test_file_is_ported(name):
    path = HERE / f"test_upstream_{name}.py"
    assert path.exists(), f"upstream tests/test_{name}.py has no port ({path.name})"
    mod = importlib.import_module(f"test_upstream_{name}")
    assert mod.UPSTREAM_PARAMETRISATIONS == UPSTREAM_TESTS[name]
    assert (mod.__doc__ or "").strip(), "the port's docstring names the upstream file and the scale"


def test_no_port_without_an_upstream_file():
    ports = {p.stem[len("test_upstream_"):] for p in HERE.glob("test_upstream_*.py")} - {"inventory"}
    assert ports <= set(UPSTREAM_TESTS), sorted(ports - set(UPSTREAM_TESTS))
