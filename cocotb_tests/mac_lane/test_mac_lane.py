"""pytest entry point of the lane bench: every lane width on both simulators."""

import pytest

from edgexpert.cocotb_tests.mac_lane import bench_tests, run_bench
from edgexpert.cocotb_tests.runner import SIMULATORS


@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("pairs_per_beat", [1, 4, 64])  # 64 is the width that reaches the wrap
def test_mac_lane(simulator: str, pairs_per_beat: int):
    result = run_bench(pairs_per_beat, simulator, seed=20261129 + pairs_per_beat)
    ran = result.report["tests"]
    # every test that should have run reported its measurements: none silently skipped
    assert sorted(ran) == bench_tests(pairs_per_beat)
    if pairs_per_beat == 64:
        assert ran["accumulator_wraps"]["dot_products"] == 2
    # with no backpressure the lane takes one beat per cycle
    assert ran["random_vectors/none/none"]["beats_per_cycle"] > 0.95
