"""pytest entry point of the PRU bench and the PRU -> EMA chained bench. The test command runs
the bundled model's shape on Icarus (about a minute) and the chain on Icarus; the same on
Verilator (whose C++ build alone takes over a minute), Qwen3-30B-A3B's routing (128 experts,
top-8) and every bundled prompt under both backpressure modes are benchmarks (`-m benchmark`)."""

import pytest

from edgexpert.cocotb_tests.pru import CI_RUN, FULL_RUN, bench_tests, run_bench, run_chain
from edgexpert.cocotb_tests.runner import SIMULATORS


def _check(result, case: str, run: dict) -> dict:
    ran = result.report["tests"]
    # every test that should have run reported: none silently skipped
    assert sorted(ran) == bench_tests(case, run["bundled_prompts"], run["modes"])
    for name, row in ran.items():
        assert row["route_beats"] > 0 and row["ema_words"] > 0, name
        if name.startswith("corners"):
            # the six corner prompts, among them a 1-token and a longest (128-token) one
            assert row["prompts"] == 6 and min(row["lengths"]) == 1 and max(row["lengths"]) == 128
        else:
            assert row["prompts"] == run["bundled_prompts"]
    return ran


@pytest.mark.parametrize("simulator", [
    "icarus", pytest.param("verilator", marks=pytest.mark.benchmark)])
def test_pru(simulator: str):
    _check(run_bench("e32", simulator), "e32", CI_RUN)


@pytest.mark.benchmark
@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("case", ["e32", "e128"])
def test_pru_full(simulator: str, case: str):
    _check(run_bench(case, simulator, **FULL_RUN), case, FULL_RUN)


# the chain on Icarus in the test command (about a minute, most of it building the trace, the
# RTL and the simulation); Verilator's C++ build of the EMA system is a benchmark
@pytest.mark.parametrize("simulator", [
    "icarus", pytest.param("verilator", marks=pytest.mark.benchmark)])
def test_pru_feeds_the_ema(simulator: str):
    chained = run_chain(simulator).report["tests"]["chained_ema"]
    # a whole chunk, its experts over several EMA steps, each expert more than one burst; the
    # bench itself checks the bytes against the prefill cost model's count
    assert chained["tokens"] == 16 and chained["steps"] >= 2
    assert chained["bursts"] > chained["experts"] and chained["bytes"] == chained["policy_bytes"]
