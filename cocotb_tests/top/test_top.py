"""pytest entry point of the accelerator top bench: golden trace rows on both simulators."""

import pytest

from edgexpert.cocotb_tests.top import bench_tests, run_bench
from edgexpert.sim.runner import SIMULATORS


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_top(simulator: str):
    result = run_bench("ci", simulator, seed=20261129)
    ran = result.report["tests"]
    # every test that should have run reported its measurements: none silently skipped
    assert sorted(ran) == bench_tests()
    for name, entry in ran.items():
        assert entry["items_checked"]["moe_out"] > 0 and entry["items_checked"]["hidden"] > 0
        assert entry["memory_wait"] + entry["compute"] <= entry["cycles"]
        assert entry["memory_wait"] > 0 and entry["compute"] > 0
    # several groups, one with several candidates, and a token combining several experts
    rows = ran["trace_step/naive_sd/none"]
    assert rows["groups"] > 1 and rows["candidates"] > rows["rows"]
    # EdgeXpert's masks compute fewer products than whole experts
    assert ran["trace_step/edgexpert/none"]["macs"] < rows["macs"]
