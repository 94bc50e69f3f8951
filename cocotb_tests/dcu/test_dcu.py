"""pytest entry point of the DCU bench: the bundled model's channel counts on both simulators."""

import pytest

from edgexpert.cocotb_tests.dcu import BENCH_CASES, bench_tests, run_bench
from edgexpert.sim.runner import SIMULATORS


@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("case", sorted(BENCH_CASES))
def test_dcu(simulator: str, case: str):
    result = run_bench(case, simulator)
    report = result.report
    # every test that should have run reported: none silently skipped
    assert sorted(report["tests"]) == bench_tests()
    # the golden groups cover every layer and every depth of the draft tree
    assert report["coverage"]["layers"] == [0, 1, 2, 3]
    assert report["coverage"]["depths"] == list(range(7))
    edge = report["tests"]["edge_cases/random"]
    assert 1 in edge["group_sizes"] and BENCH_CASES[case]["max_group"] in edge["group_sizes"]
    for name in bench_tests():
        assert report["tests"][name]["words"] > report["tests"][name]["jobs"] >= 10
