"""pytest entry point of the expert engine bench: golden trace rows on both simulators."""

import pytest

from edgexpert.cocotb_tests.engine import BENCH_CASES, bench_tests, run_bench
from edgexpert.sim.runner import SIMULATORS


@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("case", ["c4w256"])
def test_engine(simulator: str, case: str):
    result = run_bench(case, simulator, seed=20261129)
    ran = result.report["tests"]
    # every test that should have run reported its measurements: none silently skipped
    assert sorted(ran) == bench_tests()
    for name in bench_tests():
        checked = ran[name]["items_checked"]
        assert checked["moe_out"] > 0 and checked["hidden"] > 0
    # several groups, some with more than one candidate (the draft pass shares experts)
    assert ran["trace_rows/none"]["groups"] < ran["trace_rows/none"]["rows"] + 8


@pytest.mark.benchmark
def test_engine_whole_step():
    """Every row of the trace's decode step (draft and verification passes, all layers) on
    Verilator: the cycles per group and MACs per cycle of docs/blocks/engine.md."""
    result = run_bench("c4w256", "verilator", seed=20261129, selection="step")
    ran = result.report["tests"]
    assert sorted(ran) == bench_tests()
    assert ran["trace_rows/none"]["rows"] == 104 and ran["trace_rows/none"]["groups"] > 100
