"""cocotb bench of the A8W4 dot-product lane against `edgexpert.golden.integer.a8w4.dot_a8w4`.

Every result is compared bit for bit with the golden model, in order; the bench fails on a
mismatch, an X/Z, a stream-rule violation, a hang (results missing after a cycle bound) and on
leftover or extra results. Backpressure on both streams is a test dimension.

This module runs inside the simulator; `edgexpert.cocotb_tests.mac_lane.run_bench` starts it.
NUM_SAMPLES (env, default 150) sets the number of dot products per test; the seed is cocotb's
(COCOTB_RANDOM_SEED, logged at start-up, fixed by the caller).
"""

from __future__ import annotations

import os
import random

import cocotb
import torch
from cocotb.triggers import ClockCycles, RisingEdge

from edgexpert.cocotb_tests.mac_lane import WRAP_MAX_BEATS, wrap_beats
from edgexpert.cocotb_tests.streams import BACKPRESSURE_MODES, BenchTB, pauses
from edgexpert.golden.integer.a8w4 import INT4_RANGE, INT8_RANGE, dot_a8w4
from edgexpert.hw.mac_lane import ACC_WIDTH, mac_lane_input_layout
from edgexpert.cocotb_tests.runner import bench_params, write_bench_report

# read at import: the wrap test's skip condition is decided when cocotb collects the tests
PAIRS = bench_params()["pairs_per_beat"]
LAYOUT = mac_lane_input_layout(PAIRS)
_report: dict = {}


def _beats(act: list[int], wgt: list[int], rng: random.Random) -> list[int]:
    """Pack one dot product into input beats; the tail is padded with zero activations (and
    random weights, which must not matter)."""
    pad = -len(act) % PAIRS
    act = act + [0] * pad
    wgt = wgt + [rng.randint(*INT4_RANGE) for _ in range(pad)]
    n_beats = len(act) // PAIRS
    return [LAYOUT.const({"act": act[i * PAIRS:(i + 1) * PAIRS],
                          "wgt": wgt[i * PAIRS:(i + 1) * PAIRS],
                          "last": int(i == n_beats - 1)}).as_bits()
            for i in range(n_beats)]


def _random_vector(rng: random.Random) -> tuple[list[int], list[int]]:
    n = rng.randint(1, 6 * PAIRS)
    # extremes on purpose: -128 x -8 is the largest product, and sign handling lives at the edges
    pick8 = lambda: rng.choice([INT8_RANGE[0], INT8_RANGE[1], rng.randint(*INT8_RANGE)])
    pick4 = lambda: rng.choice([INT4_RANGE[0], INT4_RANGE[1], rng.randint(*INT4_RANGE)])
    return [pick8() for _ in range(n)], [pick4() for _ in range(n)]


def _expected(vectors) -> list[int]:
    return [int(dot_a8w4(torch.tensor(a), torch.tensor(w))) for a, w in vectors]


def _to_signed(value: int) -> int:
    return value - (1 << ACC_WIDTH) if value >> (ACC_WIDTH - 1) else value


class TB(BenchTB):
    """The lane's clock, reset and its two streams (`pairs` in, `dot` out)."""

    async def pulse_reset(self):
        """One cycle of reset while the lane runs, without restarting the streams."""
        self.dut.rst.value = 1
        await RisingEdge(self.clk)
        self.dut.rst.value = 0

    async def check_run(self, vectors, in_mode: str, out_mode: str, name: str):
        """Send `vectors` into the running, reset lane and compare every result with golden."""
        rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
        source = self.add_source("pairs", pauses(in_mode, rng), rng)
        sink = self.add_sink("dot", pauses(out_mode, rng))
        expected = _expected(vectors)
        beats = [beat for a, w in vectors for beat in _beats(a, w, rng)]
        start = sink.cycles
        await source.send_all(beats)
        # each beat costs at most a few cycles even under both backpressures; 20x is a hang
        await sink.wait_for(len(expected), max_cycles=20 * len(beats) + 100)
        cycles = sink.cycles - start
        await ClockCycles(self.clk, 20)
        self.stop_sinks()
        got = [_to_signed(v) for v in sink.items]
        assert len(got) == len(expected), f"{len(got)} results for {len(expected)} dot products"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g == e, f"dot product {i}: RTL {g} != golden {e} (vector {vectors[i]})"
        _report[name] = {"dot_products": len(expected), "beats": len(beats), "cycles": cycles,
                         "beats_per_cycle": round(len(beats) / cycles, 4)}
        write_bench_report({"pairs_per_beat": PAIRS,
                            "seed": int(os.environ["COCOTB_RANDOM_SEED"]), "tests": _report})


@cocotb.test()
@cocotb.parametrize(in_mode=list(BACKPRESSURE_MODES), out_mode=list(BACKPRESSURE_MODES))
async def random_vectors(dut, in_mode: str, out_mode: str):
    """Random dot products of random length under every pair of backpressure modes."""
    rng = random.Random(f"{cocotb.RANDOM_SEED}-{in_mode}-{out_mode}")
    count = int(os.environ.get("NUM_SAMPLES", "150"))
    dut._log.info("seed %d, %d dot products, pairs_per_beat %d", cocotb.RANDOM_SEED, count, PAIRS)
    vectors = [_random_vector(rng) for _ in range(count)]
    tb = TB(dut)
    await tb.reset()
    await tb.check_run(vectors, in_mode, out_mode, f"random_vectors/{in_mode}/{out_mode}")


@cocotb.test(skip=wrap_beats(PAIRS) > WRAP_MAX_BEATS)
async def accumulator_wraps(dut):
    """Largest products until the int32 accumulator passes 2**31: RTL and golden both wrap."""
    n = wrap_beats(PAIRS) * PAIRS
    vectors = [([INT8_RANGE[0]] * n, [INT4_RANGE[0]] * n), ([5], [-3])]
    tb = TB(dut)
    await tb.reset()
    await tb.check_run(vectors, "none", "none", "accumulator_wraps")


@cocotb.test()
async def reset_mid_vector(dut):
    """A reset in the middle of a dot product discards it; the next results are exact."""
    rng = random.Random(cocotb.RANDOM_SEED)
    tb = TB(dut)
    await tb.reset()
    source = tb.add_source("pairs", pauses("none", rng), rng)
    a, w = [INT8_RANGE[1]] * (3 * PAIRS), [INT4_RANGE[1]] * (3 * PAIRS)
    await source.send_all(_beats(a, w, rng)[:-1])  # everything but the closing beat
    await tb.pulse_reset()
    assert not bool(dut.dot__valid.value), "a result appeared from the discarded vector"
    vectors = [_random_vector(rng) for _ in range(20)]
    await tb.check_run(vectors, "random", "random", "reset_mid_vector")
