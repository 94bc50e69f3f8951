"""Hooks for every test folder (tests/, cocotb_tests/)."""

import pytest


def pytest_collection_modifyitems(items):
    # the per-test limit (pyproject.toml, `timeout`) turns a hung test in CI into one failure
    # with its traceback; the benchmarks are long measurements run by hand and have none
    for item in items:
        if item.get_closest_marker("benchmark"):
            item.add_marker(pytest.mark.timeout(0))
