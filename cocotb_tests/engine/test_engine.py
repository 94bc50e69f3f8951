"""pytest entry point of the expert engine bench: golden trace rows on both simulators."""

from pathlib import Path

import pytest

from edgexpert.cocotb_tests.engine import BENCH_CASES, bench_tests, prepare_vectors, run_bench
from edgexpert.contracts.trace import read_trace
from edgexpert.cocotb_tests.runner import SIMULATORS


@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("case", sorted(BENCH_CASES))
def test_engine(simulator: str, case: str):
    result = run_bench(case, simulator, seed=20261129)
    ran = result.report["tests"]
    # every test that should have run reported its measurements: none silently skipped
    assert sorted(ran) == bench_tests()
    for name in bench_tests():
        checked = ran[name]["items_checked"]
        assert checked["moe_out"] > 0 and checked["hidden"] > 0
    # several groups, one of them with more than one candidate (the draft pass shares an
    # expert), and a token whose MoE sum combines several experts (the verification token)
    rows = ran["trace_rows/none"]
    assert rows["groups"] > 1 and rows["candidates"] > rows["groups"]
    assert rows["candidates"] > rows["rows"]


@pytest.mark.benchmark
def test_engine_whole_step():
    """Every row of the trace's decode step (draft and verification passes, all layers) on
    Verilator: the cycles per group and MACs per cycle of docs/blocks/engine.md."""
    result = run_bench("c4w256", "verilator", seed=20261129, selection="step")
    ran = result.report["tests"]
    assert sorted(ran) == bench_tests()
    trace = read_trace(Path(prepare_vectors()["trace"]))
    rows = len(trace["row_pass"])
    for name in bench_tests():
        assert ran[name]["rows"] == rows
        assert ran[name]["items_checked"]["moe_out"] == rows * trace.model.d_model
