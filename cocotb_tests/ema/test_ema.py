"""pytest entry point of the EMA bench: two hardware parameter sets on both simulators."""

import pytest

from edgexpert.cocotb_tests.ema import (BENCH_CASES, ERROR_CASES_CI, ERROR_SEEDS_BENCHMARK,
                                        bench_tests, run_bench)
from edgexpert.cocotb_tests.runner import SIMULATORS


@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("case", sorted(BENCH_CASES))
def test_ema(simulator: str, case: str):
    result = run_bench(case, simulator, seed=20261129 + BENCH_CASES[case]["data_width"])
    ran = result.report["tests"]
    # every test that should have run reported its measurements: none silently skipped
    assert sorted(ran) == bench_tests()
    for name in ("random_masks/none", "random_masks/random", "trace_masks", "dense_bursts"):
        assert ran[name]["weight_bytes_checked"] > 0 and ran[name]["buffer_lines_checked"] > 0
    # repeated matrices in a step were de-duplicated, not fetched again
    assert ran["random_masks/none"]["skipped_channels"] > 0
    # the trace case says where its masks came from: the golden pipeline on a model of the
    # bench's small shape
    assert ran["trace_masks"]["mask_source"].startswith("golden, random weights (depth-group")
    for resp in ("slverr", "decerr"):
        error = ran[f"bus_error/{resp}"]
        assert error["completions"].count("FAILED") == 1
        # the engine stopped issuing: the bursts after the error never went out
        assert error["bursts_issued"] < error["bursts_planned"]
    errors = ran["bus_errors_random"]
    assert errors["cases"] == ERROR_CASES_CI
    # the cases reached what they are for: failures on bus errors, errors in several
    # descriptors, and descriptors completed ABORTED after the failing one
    assert errors["failed_on_bus_error"] >= 1 and errors["errors_in_several_descriptors"] >= 1
    assert errors["aborted"] >= 1 and errors["lines_checked_unchanged"] > 0
    assert ran["reset_mid_burst"]["bursts_in_flight_at_reset"] >= 1
    # whole matrices keep the bus busy: beyond the beats, only the first read's 100-cycle
    # latency and a few cycles per descriptor are spent
    dense = ran["dense_bursts"]
    assert dense["busy_cycles"] <= dense["beats"] + 100 + 10 * dense["descriptors"]


@pytest.mark.benchmark
@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("case", sorted(BENCH_CASES))
def test_ema_error_seeds(simulator: str, case: str):
    """The error-completion contract on ERROR_SEEDS_BENCHMARK seeds (issue 16): only the
    `bus_errors_random` test, seeds 1..100 (`pytest -m benchmark -k error_seeds`)."""
    result = run_bench(case, simulator, error_cases=ERROR_SEEDS_BENCHMARK, error_seed=1,
                       testcase="bus_errors_random")
    ran = result.report["tests"]["bus_errors_random"]
    assert ran["cases"] == ERROR_SEEDS_BENCHMARK
    assert ran["bad_descriptor_first"] >= 1 and ran["errors_in_several_descriptors"] >= 10


#: the bench's tests on the LPDDR4X memory in CI: golden-trace steps, random pauses on every
#: channel, an injected SLVERR and a reset with bursts in flight (cocotb's names)
DRAM_CI_TESTS = ("trace_masks", "random_masks/pauses=random", "bus_error/resp=slverr",
                 "reset_mid_burst")


def test_ema_on_lpddr4x():
    """The EMA bench's exact-data checks with the platform's LPDDR4X behind the AXI port
    (cocotb_tests/axi_memory.py `DramAxiRam`, Verilator): every beat when the DRAM model has
    moved it, at 800 MHz; the steps' data bit for bit, the AXI monitor clean, the cycles and the
    DRAM's counts recorded."""
    from edgexpert.contracts.config import load_config
    from edgexpert.sim.perf.ema_model import bench_memory

    memory = bench_memory("lpddr4x", load_config().platform)
    result = run_bench("w256", "verilator", seed=20261129 + 256, memory=memory,
                       test_filter=r"\.(" + "|".join(DRAM_CI_TESTS) + ")$")
    ran = result.report["tests"]
    assert sorted(ran) == sorted(["trace_masks", "random_masks/random", "bus_error/slverr",
                                  "reset_mid_burst"])
    trace = ran["trace_masks"]
    assert trace["weight_bytes_checked"] > 0 and trace["buffer_lines_checked"] > 0
    dram = trace["memory"]
    assert dram["memory"] == "lpddr4x" and dram["row_hits"] > 0 and dram["row_misses"] > 0
    assert 0 < dram["share_of_peak"] <= 1
    # 16 GB/s at 800 MHz is 20 bytes a cycle: the DRAM, not the 32-byte bus, paces the beats
    assert trace["utilization"] < 20 / 32 + 0.02
    assert ran["bus_error/slverr"]["completions"].count("FAILED") == 1
    assert ran["reset_mid_burst"]["bursts_in_flight_at_reset"] >= 1
