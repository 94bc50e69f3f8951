"""Stimuli that exercise a block for its switching activity, and the simulation that records them.

A block's stimulus is an Amaranth testbench coroutine

    async def drive(ctx, dut, rng, cycles, **params) -> int

that runs the elaborated block `dut` for exactly `cycles` clock cycles with data drawn from `rng`
and returns how many operations it performed (MACs for the lane). `simulate` runs it in Amaranth's
simulator and writes a VCD that `edgexpert.synth.activity` turns into switching activity.

Each block names its stimulus in `edgexpert/blocks.py`. A stimulus should be realistic: the kind of data
the golden model produces (or golden traces, once they exist), at the throughput the block
sustains in the accelerator.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import random
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Mapping

from amaranth.sim import Simulator

from ...support.code import code_only
from ...support.tools import ToolError

__all__ = ["Stimulus", "simulate", "drive_mac_lane", "mac_lane_stimulus", "GAUSSIAN_SIGMA"]


@dataclass(frozen=True)
class Stimulus:
    """How a block is exercised: what one operation is, the testbench, and its parameters."""
    operation: str
    drive: Callable[..., Awaitable[int]]
    params: Mapping[str, object] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """Hash of everything that decides the simulated waveform besides design, seed and
        length: the code of the module defining `drive` (so its helpers count; not its comments
        or docstrings) and the parameters. It is part of the synthesis cache key."""
        module = inspect.getmodule(self.drive)
        source = code_only(inspect.getsource(module) if module
                           else textwrap.dedent(inspect.getsource(self.drive)))
        text = json.dumps({"drive": self.drive.__qualname__, "params": dict(self.params),
                           "operation": self.operation}, sort_keys=True)
        return hashlib.sha256((source + "\0" + text).encode()).hexdigest()[:16]


def simulate(component, stimulus: Stimulus, cycles: int, seed: int, clock_period_s: float,
             vcd_path: Path) -> int:
    """Run `stimulus` on `component` for `cycles` cycles; write the VCD; return the operations."""
    rng = random.Random(seed)
    operations: list[int] = []

    async def bench(ctx):
        operations.append(await stimulus.drive(ctx, component, rng, cycles, **stimulus.params))

    sim = Simulator(component)
    sim.add_clock(clock_period_s)
    sim.add_testbench(bench)
    vcd_path.parent.mkdir(parents=True, exist_ok=True)
    with sim.write_vcd(str(vcd_path)):
        sim.run()
    if not operations or not isinstance(operations[0], int) or operations[0] < 0:
        raise ToolError(f"stimulus {stimulus.drive.__qualname__} returned "
                        f"{operations[0] if operations else None!r}: it must return the number "
                        "of operations performed")
    return operations[0]


#: standard deviations, in codes, of "gaussian" operands: symmetric max-abs quantization of
#: normally distributed values puts the largest code near 4 sigma (int8 activations: 127 / 4) and,
#: for weights quantized per output channel, near 3.5 sigma (int4: 7 / 3.5). An assumption, not a
#: measurement: golden traces will replace it.
GAUSSIAN_SIGMA = {"act": 127 / 4, "wgt": 7 / 3.5}


def _operand(rng: random.Random, kind: str, operands: str, lo: int, hi: int) -> int:
    if operands == "uniform":
        return rng.randint(lo, hi)
    return max(lo, min(hi, round(rng.gauss(0.0, GAUSSIAN_SIGMA[kind]))))


async def drive_mac_lane(ctx, dut, rng: random.Random, cycles: int, vector_length: int,
                         operands: str) -> int:
    """The lane at full throughput on dot products of `vector_length` int8 x int4 pairs (the
    golden model's number formats; the config's d_model is the FFN's input width), drawn
    `uniform`ly over the whole ranges or `gaussian` (GAUSSIAN_SIGMA). A vector's tail beat is
    padded with zero activations, as the bench does; MACs counts the vectors' pairs, not the
    padding."""
    from ...golden.integer.a8w4 import INT4_RANGE, INT8_RANGE  # imported here: it brings in torch

    pairs = dut.pairs_per_beat
    beats = -(-vector_length // pairs)
    ctx.set(dut.dot.ready, 1)
    ctx.set(dut.pairs.valid, 1)
    macs = beat = 0
    payload = None
    for _ in range(cycles):
        if payload is None:
            real = min(pairs, vector_length - beat * pairs)
            act = [_operand(rng, "act", operands, *INT8_RANGE) for _ in range(real)]
            payload = {"act": act + [0] * (pairs - real),
                       "wgt": [_operand(rng, "wgt", operands, *INT4_RANGE) for _ in range(pairs)],
                       "last": int(beat == beats - 1)}
            ctx.set(dut.pairs.payload, payload)
        _, _, ready = await ctx.tick().sample(dut.pairs.ready)
        if ready:  # transferred: the next cycle brings a new beat; otherwise hold it
            macs += real
            beat = (beat + 1) % beats
            payload = None
    return macs


def mac_lane_stimulus(config) -> Stimulus:
    return Stimulus("MAC", drive_mac_lane, {"vector_length": config.model.d_model,
                                            "operands": config.synth.activity_operands})
