"""Switching-activity stimulus of the EMA controller (`ema`: its memories are outside it).

The controller runs steps the way depth-coalesced decoding gives them: each step fetches a few
experts' GATE_UP and DOWN matrices with their scale blocks, every input channel selected with
probability 1/2 (golden masks are as scattered: their runs average two channels), and a second
depth group asking again for half of them (the residency skips what is on chip). The memory
answers every AR after `latency` cycles with random bytes (int4 weights look like random bits)
and streams one beat per cycle. The residency memory the controller reads back is modelled here
(1-cycle read latency, as in `EmaSystem`); buffer and location writes leave through their ports.
One operation is one byte delivered into the weight buffer: the controller's logic energy per
byte; the buffer's SRAM write energy per byte comes from the SRAM model (docs/synthesis.md).
"""

from __future__ import annotations

import random
from collections import deque

from ...contracts.ema import Descriptor, encode_step
from ...golden.blocks.ema import EmaReference
from ...contracts.weight_layout import Matrix
from .common import Stimulus

__all__ = ["drive_ema", "ema_stimulus"]


def _step(rng: random.Random, controller, experts: int) -> list[Descriptor]:
    """A step that fits the controller's slots and buffer (the reference model decides)."""
    layout = controller.geometry.layout
    g = controller.geometry
    reference = EmaReference(layout, g.beat_bytes, g.buffer_bytes, g.slots)
    while True:
        chosen = rng.sample([(l, e) for l in range(layout.n_layers)
                             for e in range(layout.experts_per_layer)], experts)
        first = [Descriptor(0, l, e, m, [c for c in range(layout.in_channels(m)) if rng.random() < 0.5],
                            True) for l, e in chosen for m in Matrix]
        again = [Descriptor(0, d.layer, d.expert, d.matrix,
                            [c for c in d.channels if rng.random() < 0.5], True) for d in first]
        step = [Descriptor(tag % 256, d.layer, d.expert, d.matrix, d.channels, d.scales)
                for tag, d in enumerate(first + again)]
        try:
            reference.step(step)
            return step
        except ValueError:  # too much for the buffer or the slots: fewer experts
            experts = max(1, experts - 1)


async def drive_ema(ctx, dut, rng: random.Random, cycles: int, experts_per_step: int,
                           latency: int) -> int:
    g = dut.geometry
    commands: deque = deque()
    pending: deque = deque()     # [cycle the first beat is due, beats left]
    residency: dict[int, int] = {}
    delivered = 0
    ctx.set(dut.m_axi.arready, 1)
    ctx.set(dut.done.ready, 1)
    for cycle in range(cycles):
        if not commands:
            commands.extend(encode_step(g.layout, _step(rng, dut, experts_per_step)))
        ctx.set(dut.cmd.valid, 1)
        ctx.set(dut.cmd.payload.as_value(), commands[0])
        beat = bool(pending) and pending[0][0] <= cycle
        ctx.set(dut.m_axi.rvalid, beat)
        if beat:
            ctx.set(dut.m_axi.rdata, rng.getrandbits(g.data_width))
            ctx.set(dut.m_axi.rlast, pending[0][1] == 1)
        if ctx.get(dut.cmd.ready):
            commands.popleft()
        if ctx.get(dut.m_axi.arvalid):
            pending.append([cycle + latency, ctx.get(dut.m_axi.arlen) + 1])
        if beat and ctx.get(dut.m_axi.rready):
            delivered += g.beat_bytes
            pending[0][1] -= 1
            if pending[0][1] == 0:
                pending.popleft()
        # the residency memory: read before write, data one cycle after the address
        word = residency.get(ctx.get(dut.res_rd.addr), 0)
        if ctx.get(dut.res_wr.en):
            residency[ctx.get(dut.res_wr.addr)] = ctx.get(dut.res_wr.data)
        await ctx.tick()
        ctx.set(dut.res_rd.data, word)
    return delivered


def ema_stimulus(config) -> Stimulus:
    return Stimulus("byte fetched", drive_ema, {"experts_per_step": 4, "latency": 20})
