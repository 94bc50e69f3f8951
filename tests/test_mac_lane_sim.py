# amaranth: UnusedElaboratable=no
# (the constructors that raise leave objects that are never elaborated, on purpose)
"""The lane under Amaranth's own simulator: fast, Python-only check of the contract, with seeded
random valid/ready on both streams."""

import random

import pytest
import torch
from amaranth.sim import Simulator

from edgexpert.golden.integer.a8w4 import dot_a8w4
from edgexpert.hw.mac_lane import MacLane


def _vectors(rng: random.Random, count: int, pairs: int):
    out = []
    for _ in range(count):
        n = rng.randint(1, 5 * pairs)
        out.append(([rng.randint(-128, 127) for _ in range(n)], [rng.randint(-8, 7) for _ in range(n)]))
    return out


def _simulate(pairs: int, vectors, rng: random.Random, busy: float) -> list[int]:
    dut = MacLane(pairs)
    got: list[int] = []

    async def producer(ctx):
        for act, wgt in vectors:
            pad = -len(act) % pairs
            act, wgt = act + [0] * pad, wgt + [0] * pad
            for i in range(0, len(act), pairs):
                while rng.random() > busy:
                    await ctx.tick()
                ctx.set(dut.pairs.payload, {"act": act[i:i + pairs], "wgt": wgt[i:i + pairs],
                                               "last": int(i + pairs == len(act))})
                ctx.set(dut.pairs.valid, 1)
                await ctx.tick().until(dut.pairs.ready)
                ctx.set(dut.pairs.valid, 0)

    async def consumer(ctx):
        while len(got) < len(vectors):
            ready = rng.random() <= busy
            ctx.set(dut.dot.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.dot.valid, dut.dot.payload)
            if ready and valid:
                got.append(payload)
        # drained: no result may appear from nowhere
        ctx.set(dut.dot.ready, 1)
        for _ in range(10):
            assert not ctx.get(dut.dot.valid)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run_until(1e-8 * 50 * sum(len(a) for a, _ in vectors) + 1e-6)
    return got


@pytest.mark.parametrize("pairs", [1, 3, 8])
@pytest.mark.parametrize("busy", [1.0, 0.5])
def test_lane_matches_golden(pairs: int, busy: float):
    rng = random.Random(f"lane-{pairs}-{busy}")
    vectors = _vectors(rng, 40, pairs)
    got = _simulate(pairs, vectors, rng, busy)
    expected = [int(dot_a8w4(torch.tensor(a), torch.tensor(w))) for a, w in vectors]
    assert got == expected


@pytest.mark.parametrize("bad", [0, 65, 2.0, True, "4"])
def test_lane_rejects_bad_width(bad):
    with pytest.raises(TypeError, match="pairs_per_beat must be an integer in 1..64"):
        MacLane(bad)
