"""The DRAM in the RTL's loop (issue 25): the beat schedule the benches' DRAM memory follows
(sim/perf/ema_model.py `DramMemory.beat_cycles`, on sim/perf/dram.py `DramModel.arrivals`), the
cycle conversion at the accelerator's clock, and the memory choice of `bench ema|top --memory`."""

import math

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.sim.perf.dram import LPDDR4X_4266, DramModel
from edgexpert.sim.perf.ema_model import BENCH_MEMORIES, DramMemory, bench_memory

#: EdgeXpert's point (configs/default.yaml): 800 MHz, LPDDR4X 2 x16 at 4000 MT/s = 16 GB/s
CLOCK_HZ = 800e6


def lpddr4x(channels: int = 2) -> DramMemory:
    return DramMemory(DramModel(LPDDR4X_4266, channels, 4000, 64), CLOCK_HZ)


def test_one_beat_on_a_closed_row_by_hand():
    # a closed row: activate, tRCD, the column command, RL, one 4 ns burst (BL16 at 4000 MT/s);
    # at 800 MHz (1.25 ns a cycle) the beat goes at the first edge after its bytes are in
    d = LPDDR4X_4266
    done_ns = d.t_rcd_ns + d.rl_ns + 16 / 4000 * 1e3
    assert lpddr4x().beat_cycles(0, 0, 1, 32) == [math.ceil(done_ns / 1.25)]
    # an AR accepted at cycle 40 reaches the DRAM 40 cycles (50 ns) later
    assert lpddr4x().beat_cycles(40, 0, 1, 32) == [40 + math.ceil(done_ns / 1.25)]
    # the controller's own pipeline, when given, comes on top
    late = DramMemory(DramModel(LPDDR4X_4266, 2, 4000, 64), CLOCK_HZ, extra_latency_cycles=2)
    assert late.beat_cycles(0, 0, 1, 32) == [math.ceil(done_ns / 1.25) + 2]


def test_a_long_burst_streams_at_the_dram_pace_not_the_bus_pace():
    # 2 KB from one open row on each channel: 16 GB/s against the 32-byte bus at 800 MHz is
    # 20 bytes a cycle, 1.6 cycles per beat; every beat in its own cycle, in order
    memory = lpddr4x()
    cycles = memory.beat_cycles(0, 0, 64, 32)
    assert all(b > a for a, b in zip(cycles, cycles[1:]))
    assert (cycles[-1] - cycles[0]) / 63 == pytest.approx(32 / 20, abs=0.02)
    result = memory.dram.result()
    # one activate per channel, every other burst a row hit
    assert (result.row_misses, result.row_hits) == (2, 62)


def test_never_two_beats_in_one_cycle_when_the_dram_outruns_the_bus():
    # four channels (32 GB/s) behind a 32-byte bus at 800 MHz (25.6 GB/s): once every channel
    # delivers (the second beat is the first channel's second burst, 4 ns after its first),
    # the bus paces the beats, one per cycle
    memory = DramMemory(DramModel(LPDDR4X_4266, 4, 4000, 64), CLOCK_HZ)
    cycles = memory.beat_cycles(0, 0, 32, 32)
    assert cycles[1:] == list(range(cycles[1], cycles[1] + 31))


def test_narrow_beats_wait_for_the_device_burst_that_holds_them():
    # a 64-bit bus: four beats per 32-byte device burst, all free when that burst has ended
    model = DramModel(LPDDR4X_4266, 1, 4000, 64)
    ends = [e for _, _, e in DramModel(LPDDR4X_4266, 1, 4000, 64)._read(0.0, 0, 64)]
    arrivals = model.arrivals(0.0, 0, 64, 8)
    assert arrivals == pytest.approx([ends[0] * 1e-9] * 4 + [ends[1] * 1e-9] * 4)
    with pytest.raises(ValueError, match="accepted positive divisors"):
        model.arrivals(0.0, 0, 64, 48)


def test_bursts_in_acceptance_order_share_the_dram():
    # a second burst on the rows the first opened waits for the data bus, not for an activate:
    # back to back, it follows the first at the DRAM's pace
    memory = lpddr4x()
    first = memory.beat_cycles(0, 0, 4, 32)
    second = memory.beat_cycles(1, 128, 4, 32)
    assert second[0] > first[-1] - 2 and second[-1] - first[0] <= math.ceil(8 * 1.6) + 2
    assert memory.dram.result().row_misses == 2


def test_the_bench_memories_and_their_errors():
    platform = load_config().platform
    assert BENCH_MEMORIES == ("latency", "lpddr4x", "lpddr5")
    assert bench_memory("latency", platform) == {"memory": "latency"}
    four = bench_memory("lpddr4x", platform)
    assert four["clock_hz"] == 800_000_000
    assert four["dram"] == {"type": "LPDDR4X", "channels": 2, "data_rate_mtps": 4000,
                            "interleave_bytes": 64}
    # the configured DRAM is LPDDR4X: LPDDR5 at its own top bin on the same channels
    assert bench_memory("lpddr5", platform)["dram"]["data_rate_mtps"] == 6400
    with pytest.raises(ValueError, match="accepted latency, lpddr4x, lpddr5"):
        bench_memory("ddr3", platform)
