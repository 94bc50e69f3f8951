"""cocotb bench of the A8W4 dot-product lane (bench.py) and the function that runs it."""

from __future__ import annotations

from edgexpert.cocotb_tests.streams import BACKPRESSURE_MODES
from edgexpert.hw.mac_lane import MacLane
from edgexpert.cocotb_tests.runner import SimResult, run_cocotb

__all__ = ["BENCH_MODULE", "WRAP_MAX_BEATS", "wrap_beats", "run_bench", "bench_tests"]

BENCH_MODULE = "edgexpert.cocotb_tests.mac_lane.bench"
#: the wrap test runs only where it is cheap: wide beats reach 2**31 in few cycles
WRAP_MAX_BEATS = 40_000


def wrap_beats(pairs_per_beat: int) -> int:
    """Beats of the largest product (-128 x -8 = 1024 per pair) that carry the int32
    accumulator past 2**31, plus a margin."""
    return 2**31 // (1024 * pairs_per_beat) + 3


def bench_tests(pairs_per_beat: int) -> list[str]:
    """Names of the cocotb tests the bench runs for this lane width (what its report holds)."""
    names = [f"random_vectors/{i}/{o}" for i in BACKPRESSURE_MODES for o in BACKPRESSURE_MODES]
    names.append("reset_mid_vector")
    if wrap_beats(pairs_per_beat) <= WRAP_MAX_BEATS:
        names.append("accumulator_wraps")
    return sorted(names)


def run_bench(pairs_per_beat: int, simulator: str | None = None, seed: int = 20261129,
              waves: bool | None = None) -> SimResult:
    """Run every test of the lane bench; raises SimError on any failure."""
    return run_cocotb(MacLane(pairs_per_beat), toplevel="mac_lane", test_module=BENCH_MODULE,
                      case=f"p{pairs_per_beat}", params={"pairs_per_beat": pairs_per_beat},
                      simulator=simulator, seed=seed, waves=waves)
