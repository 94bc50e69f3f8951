"""pytest entry point of the DCU bench and the DCU -> EMA chained bench, on both simulators."""

import pytest

from edgexpert.cocotb_tests.dcu import BENCH_CASES, bench_tests, run_bench, run_chain
from edgexpert.cocotb_tests.runner import SIMULATORS


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


# Icarus builds the DCU with an EMA system in about 4 minutes on a busy 2-core machine (the run
# itself: 49 s): there the chained bench is a benchmark; Verilator runs it with the tests
@pytest.mark.parametrize("simulator", [
    pytest.param(s, marks=pytest.mark.benchmark) if s == "icarus" else s for s in SIMULATORS])
def test_dcu_feeds_the_ema(simulator: str):
    chained = run_chain(simulator).report["tests"]["chained_ema"]
    # several steps, and the EMA fetched what the golden policy counts (whole beats of it)
    assert chained["steps"] >= 2 and chained["bursts"] > chained["jobs"]
    assert chained["policy_bytes"] <= chained["bytes"] < chained["policy_bytes"] + 32 * chained["bursts"]
